#!/usr/bin/python3
"""Writes tests/data/half_rounding.txt: float32 -> float16 -> float32 and float32 -> bfloat16
-> float32 round trips, as float32 bit patterns, for tests/core/test_half.cpp.

Where the values come from:
  * float16: numpy's own conversion (np.float32 array .astype(np.float16).astype(np.float32)),
    checked here against an exact rational rule (round to nearest, ties to even, float16's
    subnormals, overflow to Inf) for every value that is not NaN.
  * bfloat16: the exact rational rule with 7 fraction bits and float32's exponent range
    (bfloat16 has float32's subnormals), written without bit tricks; NaN: the sign and the
    upper 16 bits kept, made quiet (bit 22 set). Checked against the usual bit formula
    (w + 0x7FFF + lsb) >> 16 for every value that is not NaN.
The inputs: the edge cases of both formats (zeros, ties, subnormals, the smallest normal,
the largest finite value, just below and at the overflow tie, Inf, NaNs with payloads), then
per sign and biased exponent 0..255 mantissas at and around both formats' ties plus random
ones, then uniformly random 32-bit patterns (seeded: numpy.random.default_rng(16)).

Usage (from the repository root): /usr/bin/python3 scripts/half_values.py [--check]
--check compares with the committed file instead of writing it (exit 1 on a difference).
"""
import argparse
import os
import sys
from fractions import Fraction

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "half_rounding.txt")


def bits_to_float(w):
    return float(np.array([w], dtype=np.uint32).view(np.float32)[0])


def float_to_bits(x):
    return int(np.array([x], dtype=np.float32).view(np.uint32)[0])


def round_exact(w, frac_bits, emin, emax):
    """float32 bits w rounded to a binary format with `frac_bits` fraction bits and normal
    exponents emin..emax (subnormals below 2^emin), ties to even, overflow to Inf; the
    result as float32 bits. Not for NaN."""
    sign = w & 0x80000000
    x = bits_to_float(w)
    if np.isinf(x):
        return w
    a = abs(Fraction(x))
    if a == 0:
        return sign
    e = a.numerator.bit_length() - a.denominator.bit_length()   # 2^e <= a < 2^(e+1) after the fix
    if Fraction(2) ** e > a:
        e -= 1
    quantum = Fraction(2) ** (max(e, emin) - frac_bits)
    n = a / quantum
    fl = n.numerator // n.denominator
    rem = n - fl
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl % 2 == 1):
        fl += 1
    r = fl * quantum
    if r > (2 - Fraction(2) ** -frac_bits) * Fraction(2) ** emax:
        return sign | 0x7F800000
    out = float_to_bits(float(r))
    assert Fraction(bits_to_float(out)) == r, "not representable in float32"
    return sign | out


def fp16_numpy(words):
    a = np.array(words, dtype=np.uint32).view(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        return a.astype(np.float16).astype(np.float32).view(np.uint32).tolist()


def is_nan(w):
    return (w & 0x7FFFFFFF) > 0x7F800000


def bf16_reference(w):
    if is_nan(w):
        return (w | 0x00400000) & 0xFFFF0000
    return round_exact(w, 7, -126, 127)


def bf16_bit_formula(w):
    return ((w + 0x7FFF + ((w >> 16) & 1)) & 0xFFFF0000) & 0xFFFFFFFF


def inputs():
    f = float_to_bits
    edge = [
        0x00000000, 0x80000000,                                  # +-0
        f(2.0 ** -24), f(2.0 ** -25), f(2.0 ** -25 * (1 + 2 ** -20)),   # fp16 min subnormal, tie to 0, just above
        f(1.5 * 2 ** -24), f(2.5 * 2 ** -24), f(1023 * 2.0 ** -24),     # subnormal ties, max subnormal
        f(1023.5 * 2.0 ** -24), f(2.0 ** -14), f(2.0 ** -14 * (1 - 2 ** -12)),  # tie to min normal, min normal
        f(1 + 2 ** -11), f(1 + 3 * 2 ** -11), f(1 + 2 ** -11 + 2 ** -20),        # ties at 1, just above
        f(65504.0), f(65519.0), f(65519.99), f(65520.0), f(65536.0), f(1e5),     # max finite, overflow tie
        f(-65520.0), f(-65504.0), f(2.0 ** -26), f(-(2.0 ** -25)),
        f(1 + 2 ** -8), f(1 + 3 * 2 ** -8), f(1 + 2 ** -8 + 2 ** -20),           # bf16 ties at 1
        0x7F7F0000, 0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF, 0xFF7FFFFF,             # bf16 max, overflow tie, float max
        0x00000001, 0x00008000, 0x00018000, 0x007FFFFF, 0x00800000, 0x807FFFFF, # float32 subnormals
        0x7F800000, 0xFF800000,                                                  # +-Inf
        0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FA00000, 0x7FC00001, 0x7F801FFF, 0xFFA01234,   # NaNs
    ]
    rng = np.random.default_rng(16)
    strat = []
    specials = [0x000000, 0x7FFFFF, 0x001000, 0x003000, 0x000FFF, 0x001001, 0x008000, 0x018000, 0x007FFF, 0x008001]
    for sign in (0, 1):
        for e in range(256):
            for m in specials + rng.integers(0, 1 << 23, size=4).tolist():
                strat.append((sign << 31) | (e << 23) | int(m))
    uniform = rng.integers(0, 1 << 32, size=4096, dtype=np.uint64).tolist()
    return edge + strat + [int(u) for u in uniform]


def table():
    words = inputs()
    fp16 = fp16_numpy(words)
    rows = []
    for w, h in zip(words, fp16):
        if not is_nan(w):
            ref = round_exact(w, 10, -14, 15)
            assert h == ref, f"numpy float16 differs from the exact rule at {w:08x}: {h:08x} vs {ref:08x}"
        else:
            assert is_nan(h) and (h >> 31) == (w >> 31), f"NaN lost at {w:08x}"
        b = bf16_reference(w)
        if not is_nan(w):
            assert b == bf16_bit_formula(w), f"bfloat16 rules differ at {w:08x}"
        rows.append(f"{w:08x} {h:08x} {b:08x}")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    text = ("# favor half rounding table: input, float16 round trip (numpy), bfloat16 round trip;\n"
            "# float32 bit patterns in hex. Written by scripts/half_values.py (numpy "
            + np.__version__ + ").\n" + "\n".join(table()) + "\n")
    if args.check:
        with open(OUT) as fh:
            old = fh.read()
        strip = lambda t: [l for l in t.splitlines() if not l.startswith("#")]
        if strip(old) != strip(text):
            print("half_values.py: tests/data/half_rounding.txt differs from what numpy gives", file=sys.stderr)
            return 1
        print("half_values.py: tests/data/half_rounding.txt matches")
        return 0
    with open(OUT, "w") as fh:
        fh.write(text)
    print(f"wrote {OUT} ({text.count(chr(10)) - 2} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
