#!/usr/bin/env bash
# ctest driver for the Python tests (tests/python/test_*.py): run_pytest.sh FAVOR_BINARY SOURCE_DIR
# Exit 77 (skipped) only when Debian's python3-torch or python3-pytest is missing
# (scripts/setup.sh installs both).
favor=$1; src=$2
if ! /usr/bin/python3 -c "import torch, pytest, numpy" 2>/dev/null; then
  echo "skipped: /usr/bin/python3 lacks torch or pytest (apt-get install python3-torch python3-pytest, or scripts/setup.sh)"
  exit 77
fi
# As a user runs it from the root (pyproject.toml, tests/conftest.py), on this build's CLI.
cd "$src" && FAVOR="$favor" exec /usr/bin/python3 -m pytest -q tests/python
