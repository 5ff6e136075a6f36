#!/usr/bin/env bash
# Sweep the sequence length: one run per L, then a merge (see sweep.sh). Random inputs for
# each L are the first L rows of one stream.
# Usage: scripts/sweep_L.sh CONFIG.json OUT_DIR "256 1024 4096 16384" [extra favor run flags]
SWEEP_SCRIPT=scripts/sweep_L.sh exec "$(dirname "$0")/sweep.sh" --L "$@"
