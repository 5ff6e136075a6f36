#!/usr/bin/python3
"""No committed result names a path of the machine that made it (issue 56 item 16).

Usage: tests/results/test_no_absolute_paths.py SOURCE_DIR   (ctest `results_paths`; exit 1
listing each file and string, 0 when there is none)

Every JSON file under SOURCE_DIR/results/ and SOURCE_DIR/data/ (run.json, study.json,
manifests) is parsed (json only: nothing executes) and each string value searched for an
absolute path of this kind of machine, /work/, /home/, /tmp/ or /root/ at the start of the
string or after a character that cannot end a relative path's folder name (so
"out/tmp/x" is not one). The writers record paths relative to the working directory
(docs/design.md section 9.3). Hidden entries (a running study's temporaries, locks) are not
committed and are skipped. Before checking the tree the script checks itself on a document
that has such a path and one that has none.
"""
import json
import os
import re
import sys

ABSOLUTE = re.compile(r"(?<![\w.\-])/(?:work|home|tmp|root)/")


def strings(x):
    """Every string value of a parsed JSON document."""
    if isinstance(x, str):
        yield x
    elif isinstance(x, (list, dict)):
        for v in (x.values() if isinstance(x, dict) else x):
            yield from strings(v)


def absolute_paths(doc):
    return [s for s in strings(doc) if ABSOLUTE.search(s)]


def problems(root):
    found = []
    for top in ("results", "data"):
        for folder, dirs, names in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for n in sorted(names):
                if n.endswith(".json") and not n.startswith("."):
                    path = os.path.join(folder, n)
                    with open(path, encoding="utf-8") as f:
                        found += [f"{os.path.relpath(path, root)}: {s!r}" for s in absolute_paths(json.load(f))]
    return found


def self_check():
    bad = {"config": {"inputs": {"q": "/work/main/data/q.npy"}, "variants": [{"weights": "x:/home/me/w.npz"}]}}
    good = {"config": {"inputs": {"q": "data/q.npy"}, "output_dir": "out/tmp/x", "description": "a/root/b"}}
    assert absolute_paths(bad) == ["/work/main/data/q.npy", "x:/home/me/w.npz"], absolute_paths(bad)
    assert absolute_paths(good) == [], absolute_paths(good)


def main(argv):
    if len(argv) != 2:
        print("usage: test_no_absolute_paths.py SOURCE_DIR", file=sys.stderr)
        return 2
    self_check()
    found = problems(argv[1])
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} absolute paths in committed results: record them relative to the repository")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
