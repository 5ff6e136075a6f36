#!/usr/bin/env bash
# Sweep the sequence length: one run per L, then a merge (see sweep.sh). Random inputs for
# each L are the first L rows of one stream.
# Usage: scripts/sweep_L.sh CONFIG.json OUT_DIR "256 1024 4096 16384" [extra favor run flags]
usage() { echo "usage: scripts/sweep_L.sh CONFIG.json OUT_DIR \"256 1024 4096 16384\" [favor run flags...]"; }
case ${1:-} in
  -h|--help) usage; exit 0 ;;
  -*|"") usage >&2; echo "sweep_L.sh: expected CONFIG.json OUT_DIR VALUES first" >&2; exit 2 ;;
esac
[ $# -ge 3 ] || { usage >&2; echo "sweep_L.sh: expected at least 3 arguments, got $#" >&2; exit 2; }
exec "$(dirname "$0")/sweep.sh" --L "$@"
