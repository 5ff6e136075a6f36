#!/usr/bin/env bash
# Sweep the number of random features: one run per m, then a merge (see sweep.sh).
# Usage: scripts/sweep_m.sh CONFIG.json OUT_DIR "16 32 64 128 256" [extra favor run flags]
SWEEP_SCRIPT=scripts/sweep_m.sh exec "$(dirname "$0")/sweep.sh" --m "$@"
