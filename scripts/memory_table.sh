#!/usr/bin/env bash
# The cost estimate against the measurement: for each config (default: configs/*.json), the
# peak memory and time `favor validate` estimates, then a run's peak RSS and wall time from
# /usr/bin/time -v. Prints a Markdown table (docs/limits.md). Usage:
#   scripts/memory_table.sh [CONFIG.json ...]     (FAVOR=build/favor, THREADS=all cores)
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: scripts/memory_table.sh [CONFIG.json ...]   (default configs/*.json)"; }
for arg in "$@"; do
  case $arg in
    -h|--help) usage; exit 0 ;;
    -*) usage >&2; echo "memory_table.sh: unknown option '$arg'" >&2; exit 2 ;;
    *) [ -f "$arg" ] || { usage >&2; echo "memory_table.sh: $arg: no such config file" >&2; exit 2; } ;;
  esac
done
favor=${FAVOR:-build/favor}
threads=${THREADS:-0}
[ -x /usr/bin/time ] || { echo "memory_table: needs /usr/bin/time (Debian package 'time')" >&2; exit 2; }
configs=("$@"); [ ${#configs[@]} -gt 0 ] || configs=(configs/*.json)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "| config | estimated peak | measured peak RSS | measured / estimated | estimated time | measured wall |"
echo "|---|---|---|---|---|---|"
for c in "${configs[@]}"; do
  n=$(basename "$c" .json)
  line=$("$favor" validate "$c" --threads "$threads" | grep '^estimate:')
  est=$(sed 's/^estimate: peak memory \([0-9.]* [KMGT]*i*B\).*/\1/' <<<"$line")
  etime=$(sed 's/.*), \(.*\) on [0-9]* thread.*/\1/; s/^about //' <<<"$line")
  /usr/bin/time -v "$favor" run "$c" --threads "$threads" --quiet --out "$tmp/$n" 2> "$tmp/$n.time" >/dev/null
  kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tmp/$n.time")
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$tmp/$n.time")
  ratio=$(/usr/bin/python3 -c "
import sys
v, u = sys.argv[1].split()
f = {'B': 1, 'KiB': 2**10, 'MiB': 2**20, 'GiB': 2**30, 'TiB': 2**40}[u]
print(f'{int(sys.argv[2]) * 1024 / (float(v) * f):.2f}')" "$est" "$kb")
  echo "| $n | $est | $((kb / 1024)) MiB | $ratio | $etime | $wall |"
done
