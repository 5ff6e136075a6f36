#!/usr/bin/python3
"""Regenerates the .npy test corpus (pure Python, no numpy needed):

  tests/data/npy_bad/   malformed or unsupported files; expected.txt maps each file to a
                        fragment its error message must contain
  tests/data/npy_good/  unusual but valid files; manifest.txt gives dtype and shape, and the
                        values are always 0, 1, 2, ... in C order
  tests/data/npy_nan/   valid files holding NaN or inf (the parser accepts them; callers reject)

The files also seed the fuzzer (scripts/fuzz.sh). Usage: scripts/make_npy_corpus.py [repo root]
"""
import math
import os
import shutil
import struct
import sys

MAGIC = b"\x93NUMPY"


def header(descr="'<f8'", fortran="False", shape="(2, 3)"):
    return "{'descr': %s, 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)


def npy(text, data=b"", version=(1, 0), align=64, pad=True, hlen=None, magic=MAGIC):
    """A .npy image: prefix, header text padded as numpy pads it, data."""
    body = text.encode("latin1") if isinstance(text, str) else text
    prefix = 10 if version[0] == 1 else 12
    if pad:
        total = prefix + len(body) + 1
        body += b" " * ((-total) % align) + b"\n"
    n = len(body) if hlen is None else hlen
    size = struct.pack("<H", n) if version[0] == 1 else struct.pack("<I", n)
    return magic + bytes(version) + size + body + data


def values(n, fmt):
    return struct.pack(fmt[0] + fmt[1] * n, *[float(i) for i in range(n)])


def fortran_values(shape, fmt):
    """arange(prod(shape)).reshape(shape) stored in Fortran order."""
    n = math.prod(shape)
    strides = [math.prod(shape[k + 1:]) for k in range(len(shape))]
    out = []
    for f in range(n):   # first index fastest
        idx, rest = [], f
        for d in shape:
            idx.append(rest % d)
            rest //= d
        out.append(float(sum(i * s for i, s in zip(idx, strides))))
    return struct.pack(fmt[0] + fmt[1] * n, *out)


LE8, LE4, BE8, BE4, LE2, BE2 = "<d", "<f", ">d", ">f", "<e", ">e"


def bf16_values(n):
    """0, 1, 2, ... as bfloat16 (the top 16 bits of the float32; exact up to 256), little-endian."""
    return b"".join(struct.pack("<f", float(i))[2:] for i in range(n))
OK = values(6, LE8)   # data matching the default header (2, 3) <f8


def bad_files():
    """(name, bytes, fragment of the expected message)."""
    h = header
    return [
        ("empty.npy", b"", "empty file"),
        ("magic_partial.npy", b"\x93NU", "truncated header"),
        ("magic_wrong.npy", b"\x93NUMPZ" + npy(h(), OK)[6:], "bad magic"),
        ("magic_zip.npy", b"PK\x03\x04" + b"\0" * 60, "bad magic"),
        ("magic_text.npy", b"hello, world\n", "bad magic"),
        ("no_version.npy", MAGIC + b"\x01", "truncated header"),
        ("version_0_0.npy", npy(h(), OK, version=(0, 0)), "version 0.0"),
        ("version_1_1.npy", npy(h(), OK, version=(1, 1)), "version 1.1"),
        ("version_4_0.npy", npy(h(), OK, version=(4, 0)), "version 4.0"),
        ("version_255_0.npy", npy(h(), OK, version=(255, 0)), "version 255.0"),
        ("no_header_len.npy", MAGIC + b"\x01\x00\x46", "truncated header"),
        ("no_header_len_v2.npy", MAGIC + b"\x02\x00\x46\x00\x00", "truncated header"),
        ("header_len_beyond_file.npy", npy(h(), b"", hlen=0xFFFF)[:80], "beyond the end"),
        ("header_len_v2_huge.npy", npy(h(), OK, version=(2, 0), hlen=0xFFFFFFFF), "exceeds the limit"),
        ("header_len_v3_2mib.npy", npy(h(), OK, version=(3, 0), hlen=2 << 20), "exceeds the limit"),
        ("header_truncated.npy", npy(h(), OK)[:40], "beyond the end"),
        ("header_len_zero.npy", npy("", b"", pad=False), "not a valid Python dict"),
        ("header_spaces_only.npy", npy("   ", b""), "not a valid Python dict"),
        ("header_not_dict.npy", npy("[1, 2, 3]", OK), "not a dict"),
        ("header_string.npy", npy("'descr'", OK), "not a dict"),
        ("header_binary.npy", npy(bytes(range(256)), OK, pad=False), "not a valid Python dict"),
        ("header_nul.npy", npy(h().encode() + b"\0\0\0", OK), "not a valid Python dict"),
        ("header_unclosed.npy", npy("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3)", OK), "not a valid Python dict"),
        ("header_unterminated_string.npy", npy("{'descr: '<f8', 'fortran_order': False, 'shape': (2, 3), }", OK), "not a valid Python dict"),
        ("header_trailing_garbage.npy", npy(h() + " xyz", OK), "unexpected text after the dict"),
        ("header_two_dicts.npy", npy(h() + h(), OK), "unexpected text after the dict"),
        ("header_missing_colon.npy", npy("{'descr' '<f8', 'fortran_order': False, 'shape': (2, 3)}", OK), "expected ':'"),
        ("header_missing_comma.npy", npy("{'descr': '<f8' 'fortran_order': False, 'shape': (2, 3)}", OK), "expected ','"),
        ("header_unknown_name.npy", npy(h(fortran="false"), OK), "unexpected name"),
        ("header_deep_nesting.npy", npy("{'descr': " + "(" * 5000 + ")" * 5000 + "}", OK), "nesting too deep"),
        ("header_many_items.npy", npy(h(shape="(" + "1, " * 5000 + ")"), OK), "too many items"),
        ("key_missing_descr.npy", npy("{'fortran_order': False, 'shape': (2, 3), }", OK), "no 'descr' key"),
        ("key_missing_fortran.npy", npy("{'descr': '<f8', 'shape': (2, 3), }", OK), "no 'fortran_order' key"),
        ("key_missing_shape.npy", npy("{'descr': '<f8', 'fortran_order': False, }", OK), "no 'shape' key"),
        ("key_empty_dict.npy", npy("{}", OK), "no 'descr' key"),
        ("key_duplicate_descr.npy", npy("{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (2, 3)}", OK), "duplicate key 'descr'"),
        ("key_duplicate_shape.npy", npy(h() [:-1] + "'shape': (2, 3)}", OK), "duplicate key 'shape'"),
        ("key_extra.npy", npy(h()[:-1] + "'align': 16}", OK), "unexpected key 'align'"),
        ("key_misspelled.npy", npy("{'descr': '<f8', 'fortran_order': False, 'shapes': (2, 3)}", OK), "unexpected key 'shapes'"),
        ("key_not_string.npy", npy("{1: '<f8', 'fortran_order': False, 'shape': (2, 3)}", OK), "header key is an integer"),
        ("dtype_c8.npy", npy(h(descr="'<c8'"), OK), "unsupported dtype '<c8'"),
        ("dtype_c16.npy", npy(h(descr="'<c16'"), OK + OK), "unsupported dtype '<c16'"),
        ("dtype_object.npy", npy(h(descr="'|O'"), OK), "unsupported dtype '|O'"),
        ("dtype_i8.npy", npy(h(descr="'<i8'"), OK), "unsupported dtype '<i8'"),
        ("dtype_i4.npy", npy(h(descr="'<i4'"), OK[:24]), "unsupported dtype '<i4'"),
        ("dtype_be_i4.npy", npy(h(descr="'>i4'"), OK[:24]), "unsupported dtype '>i4'"),
        ("dtype_i2.npy", npy(h(descr="'<i2'"), OK[:12]), "unsupported dtype '<i2'"),
        ("dtype_v4.npy", npy(h(descr="'|V4'"), OK[:24]), "unsupported dtype '|V4'"),
        ("data_f2_as_f4.npy", npy(h(descr="'<f2'"), OK[:24]), "trailing data"),
        ("dtype_f16.npy", npy(h(descr="'<f16'"), OK + OK), "unsupported dtype '<f16'"),
        ("dtype_bool.npy", npy(h(descr="'|b1'"), OK[:6]), "unsupported dtype '|b1'"),
        ("dtype_unicode.npy", npy(h(descr="'<U8'"), OK), "unsupported dtype '<U8'"),
        ("dtype_structured.npy", npy(h(descr="[('a', '<f8')]"), OK), "descr is a list"),
        ("dtype_not_string.npy", npy(h(descr="8"), OK), "descr is an integer"),
        ("dtype_empty.npy", npy(h(descr="''"), OK), "unsupported dtype ''"),
        ("dtype_binary.npy", npy(h(descr="'\x01\xff'"), OK), "unsupported dtype '\\x01\\xff'"),
        ("fortran_not_bool.npy", npy(h(fortran="0"), OK), "fortran_order is an integer"),
        ("fortran_string.npy", npy(h(fortran="'False'"), OK), "fortran_order is a string"),
        ("shape_negative.npy", npy(h(shape="(-2, 3)"), OK), "dimension 0 is negative"),
        ("shape_negative_last.npy", npy(h(shape="(2, -3)"), OK), "dimension 1 is negative"),
        ("shape_float.npy", npy(h(shape="(2.0, 3)"), OK), "dimension 0 is a float"),
        ("shape_exponent.npy", npy(h(shape="(2, 3e0)"), OK), "dimension 1 is a float"),
        ("shape_string_dim.npy", npy(h(shape="('2', 3)"), OK), "dimension 0 is a string"),
        ("shape_bool_dim.npy", npy(h(shape="(True, 6)"), OK), "dimension 0 is a bool"),
        ("shape_none_dim.npy", npy(h(shape="(None, 6)"), OK), "dimension 0 is None"),
        ("shape_nested.npy", npy(h(shape="((2,), 3)"), OK), "dimension 0 is a tuple"),
        ("shape_list.npy", npy(h(shape="[2, 3]"), OK), "shape is a list"),
        ("shape_int.npy", npy(h(shape="6"), OK), "shape is an integer"),
        ("shape_parenthesised_int.npy", npy(h(shape="(6)"), OK), "shape is an integer"),
        ("shape_double_comma.npy", npy(h(shape="(2,, 3)"), OK), "not a valid Python dict"),
        ("shape_missing_comma.npy", npy(h(shape="(2 3)"), OK), "expected ',' or ')'"),
        ("shape_hex.npy", npy(h(shape="(0x2, 3)"), OK), "malformed number"),
        ("shape_too_many_dims.npy", npy(h(shape="(" + "1, " * 65 + ")"), OK[:8]), "65 dimensions"),
        ("shape_dim_over_u64.npy", npy(h(shape="(18446744073709551616,)"), OK), "dimension 0 is too large"),
        ("shape_dim_over_i64.npy", npy(h(shape="(9223372036854775808, 0)"), b""), "dimension 0 is too large"),
        ("shape_dim_huge_digits.npy", npy(h(shape="(" + "9" * 400 + ",)"), OK), "dimension 0 is too large"),
        ("shape_product_overflow.npy", npy(h(shape="(4294967296, 4294967296, 2)"), OK), "elements"),
        ("shape_product_wraps_to_small.npy", npy(h(shape="(4294967296, 4294967296, 6)"), OK), "elements"),
        ("shape_bytes_overflow.npy", npy(h(shape="(2305843009213693952,)"), OK), "elements"),
        ("shape_over_limit.npy", npy(h(shape="(1000000, 1000000, 1000000)"), OK), "elements"),
        ("shape_huge_but_legal.npy", npy(h(shape="(4294967296,)"), OK), "truncated data"),
        ("data_truncated.npy", npy(h(), OK[:40]), "truncated data (expected 48 bytes, found 40)"),
        ("data_missing.npy", npy(h(), b""), "truncated data (expected 48 bytes, found 0)"),
        ("data_trailing.npy", npy(h(), OK + b"\0"), "trailing data after the array (expected 48 bytes, found 49)"),
        ("data_trailing_array.npy", npy(h(), OK + OK), "trailing data"),
        ("data_f4_as_f8.npy", npy(h(descr="'<f4'"), OK), "trailing data"),
        ("data_0d_missing.npy", npy(h(shape="()"), b""), "truncated data (expected 8 bytes, found 0)"),
        ("data_empty_array_trailing.npy", npy(h(shape="(0, 3)"), b"\0" * 4), "trailing data"),
        ("data_fortran_truncated.npy", npy(h(fortran="True", shape="(3, 4)"), OK), "truncated data"),
        ("v2_truncated_data.npy", npy(h(), OK[:47], version=(2, 0)), "truncated data"),
        ("v3_bad_dtype.npy", npy(h(descr="'<c8'"), OK, version=(3, 0)), "unsupported dtype '<c8'"),
    ]


def good_files():
    """(name, bytes, dtype, shape); values are 0, 1, 2, ... in C order."""
    return [
        ("v1_f8_2x3.npy", npy(header(), values(6, LE8)), "<f8", (2, 3)),
        ("v2_f4_3x2.npy", npy(header("'<f4'", shape="(3, 2)"), values(6, LE4), version=(2, 0)), "<f4", (3, 2)),
        ("v3_f8_4.npy", npy(header(shape="(4,)"), values(4, LE8), version=(3, 0)), "<f8", (4,)),
        ("be_f4_2x2x2.npy", npy(header("'>f4'", shape="(2, 2, 2)"), values(8, BE4)), ">f4", (2, 2, 2)),
        ("be_f8_1x2x3x2.npy", npy(header("'>f8'", shape="(1, 2, 3, 2)"), values(12, BE8)), ">f8", (1, 2, 3, 2)),
        ("fortran_f8_2x3x4.npy", npy(header(fortran="True", shape="(2, 3, 4)"), fortran_values((2, 3, 4), LE8)), "<f8", (2, 3, 4)),
        ("fortran_be_f4_3x2.npy", npy(header("'>f4'", "True", "(3, 2)"), fortran_values((3, 2), BE4)), ">f4", (3, 2)),
        ("fortran_f8_5.npy", npy(header(fortran="True", shape="(5,)"), values(5, LE8)), "<f8", (5,)),
        ("align16_f8_5.npy", npy(header(shape="(5,)"), values(5, LE8), align=16), "<f8", (5,)),
        ("dquote_reordered_f8_2x2.npy", npy('{"shape": (2, 2), "fortran_order": False, "descr": "<f8"}', values(4, LE8), pad=False), "<f8", (2, 2)),
        ("whitespace_f4_3.npy", npy("{ 'descr' : '<f4' ,\n 'fortran_order':False,'shape':( 3 , ) }", values(3, LE4)), "<f4", (3,)),
        ("scalar_0d_f8.npy", npy(header(shape="()"), values(1, LE8)), "<f8", ()),
        ("empty_f4_0x3.npy", npy(header("'<f4'", shape="(0, 3)")), "<f4", (0, 3)),
        ("empty_huge_dim_f8.npy", npy(header(shape="(0, 1099511627776)")), "<f8", (0, 1099511627776)),
        ("f2_2x3.npy", npy(header("'<f2'"), values(6, LE2)), "<f2", (2, 3)),
        ("be_f2_fortran_3x2.npy", npy(header("'>f2'", "True", "(3, 2)"), fortran_values((3, 2), BE2)), ">f2", (3, 2)),
        ("bf16_v2_2x2.npy", npy(header("'<V2'", shape="(2, 2)"), bf16_values(4)), "<V2", (2, 2)),
        ("bf16_pipe_v2_5.npy", npy(header("'|V2'", shape="(5,)"), bf16_values(5)), "|V2", (5,)),
        ("bf16_named_3.npy", npy(header("'bfloat16'", shape="(3,)"), bf16_values(3)), "bfloat16", (3,)),
    ]


def nan_files():
    nan, inf = float("nan"), float("inf")
    return [
        ("nan_f8_2x2.npy", npy(header(shape="(2, 2)"), struct.pack("<4d", 1.0, nan, 2.0, 3.0))),
        ("inf_f4_3.npy", npy(header("'<f4'", shape="(3,)"), struct.pack("<3f", 0.5, inf, 1.0))),
        ("neginf_be_f8_2.npy", npy(header("'>f8'", shape="(2,)"), struct.pack(">2d", -inf, 1.0))),
        ("nan_payload_f4_2.npy", npy(header("'<f4'", shape="(2,)"), b"\x01\x00\xc0\x7f" + struct.pack("<f", 1.0))),
        ("nan_fortran_f8_2x2.npy", npy(header(fortran="True", shape="(2, 2)"), struct.pack("<4d", 1.0, 2.0, 3.0, nan))),
    ]


def write_dir(path, files):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    for name, data in files:
        with open(os.path.join(path, name), "wb") as f:
            f.write(data)


def data_dir(script, usage):
    """tests/data of the repository root given as the only argument (default: this script's
    repository); None after printing the usage for -h / --help; exits 2 on other arguments."""
    if sys.argv[1:] in (["-h"], ["--help"]):
        print(usage)
        return None
    if len(sys.argv) > 2 or (len(sys.argv) == 2 and not os.path.isdir(os.path.join(sys.argv[1], "tests", "data"))):
        print(f"{usage}\n{script}: expected a repository root (with tests/data/), "
              f"got {' '.join(sys.argv[1:])}", file=sys.stderr)
        sys.exit(2)
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    return os.path.join(root, "tests", "data")


def main():
    data = data_dir("make_npy_corpus.py",
                    "usage: make_npy_corpus.py [REPO_ROOT]   (rewrites REPO_ROOT/tests/data/npy_{bad,good,nan})")
    if data is None:
        return
    bad = bad_files()
    assert len({n for n, _, _ in bad}) == len(bad)
    write_dir(os.path.join(data, "npy_bad"), [(n, b) for n, b, _ in bad])
    with open(os.path.join(data, "npy_bad", "expected.txt"), "w") as f:
        f.write("# file<TAB>fragment of the error message (written by scripts/make_npy_corpus.py)\n")
        f.writelines("%s\t%s\n" % (n, m) for n, _, m in bad)
    good = good_files()
    write_dir(os.path.join(data, "npy_good"), [(n, b) for n, b, _, _ in good])
    with open(os.path.join(data, "npy_good", "manifest.txt"), "w") as f:
        f.write("# file dtype dims... (values are 0, 1, 2, ... in C order; scripts/make_npy_corpus.py)\n")
        f.writelines(" ".join([n, t] + [str(d) for d in s]) + "\n" for n, _, t, s in good)
    write_dir(os.path.join(data, "npy_nan"), nan_files())
    print("npy corpus: %d bad, %d good, %d nan files" % (len(bad), len(good), len(nan_files())))


if __name__ == "__main__":
    main()
