#!/usr/bin/env bash
# The README's main command: set up (install what is missing, build only build/favor), run a
# config (default: configs/default.json) into out/<config name>/ of the repository (untracked;
# --out DIR chooses another place) and print where it wrote, the cell count and one line of
# headline numbers (scripts/headline.py); the full tables stay in the files (summary.md,
# summary.csv, errors.csv). Progress and errors go to stderr as favor prints them. Paths are
# relative to the current directory, as for favor itself.
# Usage: scripts/run.sh [CONFIG.json] [favor run flags...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
usage() { echo "usage: scripts/run.sh [CONFIG.json] [favor run flags...]   (writes out/<config name>/ unless --out DIR)"; }
case ${1:-} in
  -h|--help) usage; exit 0 ;;
  -*) usage >&2; echo "run.sh: the first argument is the config, got '$1'" >&2; exit 2 ;;
esac
config=${1:-$root/configs/default.json}
shift || true
[ -f "$config" ] || { usage >&2; echo "run.sh: $config: no such config file" >&2; exit 2; }
out="" prev=""
for arg in "$@"; do   # an --out of the user's wins
  case $arg in --out=*) out=${arg#--out=} ;; esac
  [ "$prev" != --out ] || out=$arg
  prev=$arg
done
if [ -z "$out" ]; then
  out=$(realpath -m --relative-to=. "$root/out/$(basename "$config" .json)")
  set -- --out "$out" "$@"
fi
# The set-up's own output (apt, cmake, ~125 lines of compiler progress) goes to a log; one line
# says where, and a failure prints the log's last lines.
mkdir -p "$root/build"
log="$root/build/run-setup.log"
[ -x "$root/build/favor" ] || echo "[run.sh] installing what is missing and building build/favor (a first build takes 10-20 minutes on 2 cores; log: $log)" >&2
if ! "$root/scripts/setup.sh" --target favor > "$log" 2>&1; then
  tail -n 30 "$log" >&2
  echo "run.sh: the set-up failed (the last lines of $log above)" >&2
  exit 1
fi
# favor's stdout (the summary table, "wrote DIR/") is left out: the tables are in the files.
"$root/build/favor" run "$config" "$@" > /dev/null
/usr/bin/python3 "$root/scripts/headline.py" "$(realpath -m "${out%/}")"   # names the directory absolutely
