#!/usr/bin/python3
"""The rooms of lib/ and their order (docs/design.md section 1), checked against the code.

Usage: tests/check_layers.py SOURCE_DIR   (ctest `layering`; exit 1 with one line per problem)

docs/design.md states the order in one line, `Rooms, lowest first: core < io < ...`. Checked:
  * lib/include/favor/ and lib/src/ hold only room folders (no loose file), the same rooms as
    that line and as CMakeLists.txt's FAVOR_ROOMS, in the same order;
  * every `#include "favor/<room>/<name>.hpp"` (and lib/src's private `"<room>/<name>.hpp"`)
    names a file that exists, in a room at or below the includer's: an include that runs up
    the order is a problem;
  * app/, bench/, python/ and fuzz/ include lib/ only through its public headers;
  * no room folder of lib/src holds more than MAX_FILES files directly.
Before checking the tree the script checks itself on a small tree with an upward include and
a loose file, and fails if it misses either (a check that cannot fail checks nothing).
"""
import os
import re
import sys
import tempfile

MAX_FILES = 20
ORDER_LINE = re.compile(r"^Rooms, lowest first: (.+)$", re.M)
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def stated_order(root):
    text = open(os.path.join(root, "docs", "design.md"), encoding="utf-8").read()
    m = ORDER_LINE.search(text)
    if not m:
        return None
    return [r.strip().strip("`") for r in m.group(1).split("<")]


def cmake_rooms(root):
    text = open(os.path.join(root, "CMakeLists.txt"), encoding="utf-8").read()
    m = re.search(r"set\(FAVOR_ROOMS ([^)]*)\)", text)
    return m.group(1).split() if m else None


def sources(top):
    for d, _, names in os.walk(top):
        for n in sorted(names):
            if n.endswith((".cpp", ".hpp", ".h")):
                yield os.path.join(d, n)


def check(root):
    problems = []
    order = stated_order(root)
    if order is None:
        return ["docs/design.md: no line 'Rooms, lowest first: a < b < ...'"]
    rank = {r: i for i, r in enumerate(order)}
    if cmake_rooms(root) != order:
        problems.append(f"CMakeLists.txt: FAVOR_ROOMS {cmake_rooms(root)} is not design.md's order {order}")
    inc_dir = os.path.join(root, "lib", "include", "favor")
    src_dir = os.path.join(root, "lib", "src")
    for top in (inc_dir, src_dir):
        for n in sorted(os.listdir(top)):
            rel = os.path.relpath(os.path.join(top, n), root)
            if not os.path.isdir(os.path.join(top, n)):
                problems.append(f"{rel}: a loose file; it belongs in one of the rooms {order}")
            elif n not in rank:
                problems.append(f"{rel}: a folder that is not a room of design.md's order {order}")
    for room in order:
        d = os.path.join(src_dir, room)
        if os.path.isdir(d):
            files = [n for n in os.listdir(d) if os.path.isfile(os.path.join(d, n))]
            if len(files) > MAX_FILES:
                problems.append(f"lib/src/{room}: {len(files)} files (at most {MAX_FILES}: split the room)")
    for top in (inc_dir, src_dir):
        for path in sources(top):
            rel = os.path.relpath(path, top)
            own = rel.split(os.sep)[0]
            if own not in rank:
                continue
            text = open(path, encoding="utf-8").read()
            for inc in INCLUDE.findall(text):
                if inc.startswith("favor/"):
                    target = os.path.join(inc_dir, inc[len("favor/"):])
                    room = inc.split("/")[1]
                elif top == src_dir and inc.split("/")[0] in rank:
                    target = os.path.join(src_dir, inc)
                    room = inc.split("/")[0]
                else:
                    continue   # same-folder private header or the generated commit header
                where = os.path.relpath(path, root)
                if not os.path.isfile(target):
                    problems.append(f"{where}: includes {inc}, which does not exist")
                elif room not in rank:
                    problems.append(f"{where}: includes {inc}, outside every room")
                elif rank[room] > rank[own]:
                    problems.append(f"{where}: room {own} includes {inc} of room {room}, above it "
                                    f"(order: {' < '.join(order)})")
    for outside in ("app", "bench", "python", "fuzz"):
        top = os.path.join(root, outside)
        if not os.path.isdir(top):
            continue
        for path in sources(top):
            for inc in INCLUDE.findall(open(path, encoding="utf-8").read()):
                if "lib/src" in inc or inc.startswith("../"):
                    problems.append(f"{os.path.relpath(path, root)}: includes {inc}; outside lib/ only "
                                    "favor/<room>/<name>.hpp")
    return problems


def self_check():
    """A tree with one upward include and one loose file: both must be reported."""
    with tempfile.TemporaryDirectory() as t:
        for d in ("docs", "lib/include/favor/low", "lib/include/favor/high", "lib/src/low", "lib/src/high"):
            os.makedirs(os.path.join(t, d))
        open(os.path.join(t, "docs", "design.md"), "w").write("Rooms, lowest first: low < high\n")
        open(os.path.join(t, "CMakeLists.txt"), "w").write("set(FAVOR_ROOMS low high)\n")
        open(os.path.join(t, "lib/include/favor/high/h.hpp"), "w").write("")
        open(os.path.join(t, "lib/include/favor/low/l.hpp"), "w").write('#include "favor/high/h.hpp"\n')
        open(os.path.join(t, "lib/src/loose.cpp"), "w").write("")
        found = check(t)
        want = ["room low includes favor/high/h.hpp", "lib/src/loose.cpp: a loose file"]
        missed = [w for w in want if not any(w in p for p in found)]
        if missed or len(found) != 2:
            sys.exit(f"check_layers.py: self-check failed: expected {want}, got {found}")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: tests/check_layers.py SOURCE_DIR")
    self_check()
    problems = check(sys.argv[1])
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"check_layers.py: rooms {' < '.join(stated_order(sys.argv[1]))}: no include runs up the order")


if __name__ == "__main__":
    main()
