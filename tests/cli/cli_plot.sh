#!/usr/bin/env bash
# End-to-end: tests/cli/plot_check.py, one Python process, makes tiny result sets with favor (and
# takes the committed timing set), draws them with scripts/plot.py --data in process and checks
# every series drawn against the tables (x, y, bands, ratio to uniform attention, one series
# per head, kernel points at their measured angles, the layout, the default output beside the
# result set), and that bad input exits 2 with one line.
# Usage: tests/cli/cli_plot.sh FAVOR_BINARY SOURCE_DIR   (python: $FAVOR_PYTHON, default /usr/bin/python3)
set -euo pipefail
favor=$1; src=$2
py=${FAVOR_PYTHON:-/usr/bin/python3}
fail() { echo "FAIL: $*" >&2; exit 1; }

"$py" -c 'import numpy, matplotlib' 2>/dev/null \
  || fail "$py lacks numpy/matplotlib (Debian python3-numpy python3-matplotlib; or set FAVOR_PYTHON)"
"$py" "$src/tests/cli/plot_check.py" "$favor" "$src" || fail "plot_check.py"
echo "cli_plot: ok"
