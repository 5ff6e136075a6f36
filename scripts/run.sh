#!/usr/bin/env bash
# The README's main command: set up (install + build), then run a config (default:
# configs/default.json) and write its tables under results/.
# Usage: scripts/run.sh [CONFIG.json] [favor run flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
config=${1:-configs/default.json}
shift || true
exec build/favor run "$config" "$@"
