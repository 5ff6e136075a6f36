#!/usr/bin/env bash
# ctest driver for the Python module's tests (tests/python_module/test_*.py, pytest):
#   run_module_tests.sh FAVOR_BINARY SOURCE_DIR BUILD_DIR
# Exit 77 (skipped) when the module was not built (FAVOR_PYTHON off, pybind11 missing, or a
# sanitizer build: CMakeLists.txt) or Debian's python3-pytest / numpy is missing.
favor=$1; src=$2; build=$3
if ! ls "$build"/python/favor/_core*.so >/dev/null 2>&1; then
  echo "skipped: the Python module was not built in $build (FAVOR_PYTHON off, no pybind11, or FAVOR_SANITIZE)"
  exit 77
fi
if ! /usr/bin/python3 -c "import pytest, numpy" 2>/dev/null; then
  echo "skipped: /usr/bin/python3 lacks pytest or numpy (apt-get install python3-pytest python3-numpy)"
  exit 77
fi
# As a user runs it from the root (pyproject.toml, tests/conftest.py), on this build.
cd "$src" && FAVOR="$favor" PYTHONPATH="$build/python" MPLBACKEND=Agg exec /usr/bin/python3 -m pytest -q tests/python_module
