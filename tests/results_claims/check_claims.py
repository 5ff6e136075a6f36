#!/usr/bin/python3
"""The numbers of docs/results.md and the results READMEs, checked against the committed tables.

Usage: tests/results_claims/check_claims.py SOURCE_DIR   (ctest `results_claims`; exit 1 with
one block per problem, 0 when every claim holds)

claims.py beside this file lists the claims: each names a Markdown file, a verbatim snippet of
its text (compared with runs of whitespace collapsed, so line breaks do not matter) and the
numbers quoted in that snippet, each with a function of the tables that recomputes it. A quoted
number holds when the recomputed value, rounded as the text writes it (its decimals, or its
significant digits in e-notation), equals it; a range "a-b" summarises a set: its min must round
to a and its max to b; a single number quoted for a set must be what each of its values rounds
to. A trailing "x" or "%" is text only: the function returns the number in the unit written. A
quoted text may start with words that place it in the snippet ("layer 0 1.11x") and its number
may be wrapped in brackets or followed by punctuation ("(0.97", "0.93;"): its last word, so
stripped, is the number ("±" or "x" before it is text too). A claim fails when its snippet is missing or any of its numbers does not hold.
Before checking the tree the script checks itself: on a copy of one claim's table with a value
changed and a copy of its Markdown with a number changed, each must fail (a check that cannot
fail checks nothing).
"""
import json
import os
import re
import shutil
import sys
import tempfile

import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import claims as claim_list  # noqa: E402

NUM = r"[+\-\u2212]?\d+(?:\.\d+)?(?:e[+\-]?\d+)?"
QUOTED = re.compile(rf"^({NUM})(?:-({NUM}))?[x%]?$")


class Tables:
    """The committed tables under SOURCE_DIR, read once each (csv and json only: nothing executes)."""

    def __init__(self, root):
        self.root, self.cache = root, {}

    def _read(self, rel, reader):
        if rel not in self.cache:
            with open(os.path.join(self.root, rel), encoding="utf-8") as f:
                self.cache[rel] = reader(f)
        return self.cache[rel]

    def csv(self, rel):
        return self._read(rel, pd.read_csv)

    def json(self, rel):
        return self._read(rel, json.load)


def number(text):
    return float(text.replace("\u2212", "-"))


def rounded_as(value, text):
    """value rounded the way text writes its number, as a float."""
    t = text.replace("\u2212", "-")
    if "e" in t:
        mantissa = t.lstrip("+-").split("e")[0]
        digits = len(mantissa.split(".")[1]) if "." in mantissa else 0
        return float(f"{value:.{digits}e}")
    digits = len(t.split(".")[1]) if "." in t else 0
    return float(f"{value:.{digits}f}")


def check_number(quoted, value):
    """None when value supports the quoted text, else the recomputed text."""
    m = QUOTED.match(quoted.split()[-1].lstrip("([±x").rstrip(")];,:"))
    if not m:
        return f"cannot parse the quoted number {quoted!r}"
    lo_text, hi_text = m.group(1), m.group(2)
    values = [float(v) for v in (value if hasattr(value, "__iter__") else [value])]
    if not values:
        return "no values recomputed"
    if hi_text is None:
        ok = all(rounded_as(v, lo_text) == number(lo_text) for v in values)
        return None if ok else f"recomputed {values[0]!r}" if len(values) == 1 else \
            f"recomputed {len(values)} values from {min(values)!r} to {max(values)!r}"
    lo, hi = min(values), max(values)
    ok = rounded_as(lo, lo_text) == number(lo_text) and rounded_as(hi, hi_text) == number(hi_text)
    return None if ok else f"recomputed range {lo!r} to {hi!r} over {len(values)} values"


def squash(text):
    return " ".join(text.split())


def problems(root, claims):
    """One message per failing claim number (or missing snippet)."""
    tables, texts, out = Tables(root), {}, []
    for c in claims:
        if c.file not in texts:
            with open(os.path.join(root, c.file), encoding="utf-8") as f:
                texts[c.file] = squash(f.read())
        snippet = squash(c.snippet)
        if snippet not in texts[c.file]:
            out.append(f"{c.file}: snippet not found: \"{snippet}\"")
            continue
        for quoted, fn in c.numbers:
            if quoted not in snippet:
                out.append(f"{c.file}: \"{snippet}\": quoted number {quoted!r} is not in the snippet")
                continue
            try:
                why = check_number(quoted, fn(tables))
            except (OSError, KeyError, ValueError, IndexError, pd.errors.ParserError) as e:
                why = f"cannot recompute: {type(e).__name__}: {e}"
            if why:
                out.append(f"{c.file}: \"{snippet}\": quoted {quoted}, {why}")
    return out


def self_test(root):
    """Each mutation of a copy must make the checker fail; returns the problems of the self-test."""
    c = claim_list.SELF_TEST_CLAIM
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for rel in [c.file] + claim_list.SELF_TEST_TABLES:
            os.makedirs(os.path.join(tmp, os.path.dirname(rel)), exist_ok=True)
            shutil.copy(os.path.join(root, rel), os.path.join(tmp, rel))
        if problems(tmp, [c]):
            return [f"self-test: the unchanged copy fails: {problems(tmp, [c])}"]
        # a number of the text changed: the snippet is no longer there
        path = os.path.join(tmp, c.file)
        text, snippet, quoted = squash(open(path, encoding="utf-8").read()), squash(c.snippet), c.numbers[0][0]
        with open(path, "w", encoding="utf-8") as f:
            f.write(text.replace(snippet, snippet.replace(quoted, "9" + quoted, 1)))
        if not problems(tmp, [c]):
            failures.append(f"self-test: {c.file} with {quoted} changed passes")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        # a value of the table changed under the sentence
        claim_list.mutate_self_test_table(tmp)
        if not problems(tmp, [c]):
            failures.append(f"self-test: {claim_list.SELF_TEST_TABLES} with a value changed passes")
    return failures


def main():
    if len(sys.argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    root = sys.argv[1]
    out = self_test(root) + problems(root, claim_list.CLAIMS)
    for line in out:
        print(line)
    n = sum(len(c.numbers) for c in claim_list.CLAIMS)
    print(f"check_claims: {len(claim_list.CLAIMS)} claims, {n} numbers, {len(out)} problems",
          file=sys.stderr)
    return 1 if out else 0


if __name__ == "__main__":
    sys.exit(main())
