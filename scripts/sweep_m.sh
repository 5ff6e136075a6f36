#!/usr/bin/env bash
# Sweep the number of random features: one run per m, then a merge (see sweep.sh).
# Usage: scripts/sweep_m.sh CONFIG.json OUT_DIR "16 32 64 128 256" [extra favor run flags]
usage() { echo "usage: scripts/sweep_m.sh CONFIG.json OUT_DIR \"16 32 64 128 256\" [favor run flags...]"; }
case ${1:-} in
  -h|--help) usage; exit 0 ;;
  -*|"") usage >&2; echo "sweep_m.sh: expected CONFIG.json OUT_DIR VALUES first" >&2; exit 2 ;;
esac
[ $# -ge 3 ] || { usage >&2; echo "sweep_m.sh: expected at least 3 arguments, got $#" >&2; exit 2; }
exec "$(dirname "$0")/sweep.sh" --m "$@"
