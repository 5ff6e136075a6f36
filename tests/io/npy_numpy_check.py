#!/usr/bin/env python3
"""numpy side of the .npy interop test (tests/io/test_npy.cpp runs it; needs numpy).

  npy_numpy_check.py write DIR   numpy writes DIR/<case>.npy in many layouts, DIR/<case>.expected
                                 (the values as raw little-endian float64, C order) and
                                 DIR/manifest.txt ("case dtype dims...")
  npy_numpy_check.py check DIR   loads every DIR/<case>.npy listed in DIR/manifest.txt (written by
                                 favor::write_npy) with numpy.load and compares dtype, shape,
                                 header (version 1.0, C order) and the value bits with
                                 DIR/<case>.expected

Exit status 0 when everything matches; mismatches are printed on stderr.
"""
import os
import sys

try:
    import numpy as np
except ImportError:
    sys.exit("npy_numpy_check.py: numpy is required (install python3-numpy)")

SPECIAL = [0.0, -0.0, 1.0, -1.5, np.inf, -np.inf, np.nan, 5e-324, 2.2250738585072014e-308,
           1.401298464324817e-45, 3.4028234663852886e38, 1e300, -1e-300, 0.1]


def sample(shape, seed):
    """Random normals at several scales, with the special values mixed in."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape, dtype=np.int64))
    x = rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)
    k = min(n, len(SPECIAL))
    x[rng.permutation(n)[:k]] = SPECIAL[:k]
    return x.reshape(shape)


# name, shape, dtype, fortran order, format version
CASES = [
    ("c_f8_Ld", (5, 3), "<f8", False, (1, 0)),
    ("c_f4_HLd", (2, 5, 3), "<f4", False, (1, 0)),
    ("c_f8_BHLd_v2", (2, 3, 4, 5), "<f8", False, (2, 0)),
    ("c_f4_BHLd_v2", (2, 3, 4, 5), "<f4", False, (2, 0)),
    ("c_f8_v3", (7,), "<f8", False, (3, 0)),
    ("f_f8_Ld", (4, 6), "<f8", True, (1, 0)),
    ("f_f4_HLd", (2, 3, 4), "<f4", True, (1, 0)),
    ("f_f8_BHLd_v2", (2, 3, 4, 5), "<f8", True, (2, 0)),
    ("be_f8_Ld", (3, 4), ">f8", False, (1, 0)),
    ("be_f4_HLd", (2, 3, 4), ">f4", False, (1, 0)),
    ("be_f8_fortran", (3, 4), ">f8", True, (1, 0)),
    ("be_f4_fortran_v2", (3, 2, 2), ">f4", True, (2, 0)),
    ("scalar_f8", (), "<f8", False, (1, 0)),
    ("empty_f4", (0, 4), "<f4", False, (1, 0)),
    ("big_f8_fortran", (515, 300), "<f8", True, (1, 0)),    # > 1 MiB: several read chunks
    ("big_be_f4", (701, 401), ">f4", False, (1, 0)),
]


def write(d):
    lines = []
    for i, (name, shape, dtype, fortran, version) in enumerate(CASES):
        with np.errstate(over="ignore"):   # 1e300 and friends become inf in float32
            a = sample(shape, i).astype(dtype)
        if fortran:
            a = np.asfortranarray(a)
        with open(os.path.join(d, name + ".npy"), "wb") as f:
            np.lib.format.write_array(f, a, version=version)
        with open(os.path.join(d, name + ".expected"), "wb") as f:
            f.write(np.ascontiguousarray(a.astype("<f8")).tobytes(order="C"))
        lines.append(" ".join([name, dtype] + [str(n) for n in shape]))
    with open(os.path.join(d, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


def check(d):
    failures = []
    count = 0
    for line in open(os.path.join(d, "manifest.txt")):
        if not line.strip():
            continue
        name, dtype, *dims = line.split()
        shape = tuple(int(n) for n in dims)
        path = os.path.join(d, name + ".npy")
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            _, fortran, _ = np.lib.format.read_array_header_1_0(f) if version == (1, 0) else (0, True, 0)
            header_end = f.tell()
        a = np.load(path)
        want = np.fromfile(os.path.join(d, name + ".expected"), dtype="<f8")
        problems = []
        if version != (1, 0):
            problems.append("version %s" % (version,))
        if fortran:
            problems.append("fortran_order True")
        if header_end % 64:
            problems.append("data offset %d not a multiple of 64" % header_end)
        if a.dtype.str != dtype:
            problems.append("dtype %s" % a.dtype.str)
        if a.shape != shape:
            problems.append("shape %s" % (a.shape,))
        elif not np.array_equal(a.astype("<f8").ravel().view("<u8"), want.view("<u8")):
            problems.append("values differ")
        if problems:
            failures.append("%s: %s" % (name, ", ".join(problems)))
        count += 1
    for msg in failures:
        print("npy_numpy_check.py:", msg, file=sys.stderr)
    print("npy_numpy_check.py: %d files checked, %d failed" % (count, len(failures)))
    return 1 if failures or count == 0 else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "check"):
        sys.exit("usage: npy_numpy_check.py write|check DIR")
    sys.exit(write(sys.argv[2]) if sys.argv[1] == "write" else check(sys.argv[2]))
