"""pytest setup for the Python suites (tests/python, tests/python_module; pyproject.toml's
testpaths): `python3 -m pytest` from the root runs them against the build in build/ unless the
environment names another (ctest's run scripts pass FAVOR and PYTHONPATH; those win)."""
import glob
import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD_PY = os.path.join(ROOT, "build", "python")
MODULE_TESTS = os.path.join(ROOT, "tests", "python_module")


def _needs_module(config):
    """Whether the session collects tests/python_module (only those tests import favor)."""
    for arg in config.args:
        path = os.path.abspath(os.path.join(config.invocation_params.dir, arg.split("::")[0]))
        if os.path.commonpath([path, MODULE_TESTS]) in (path, MODULE_TESTS):
            return True
    return False


def pytest_configure(config):
    # An installed favor (or one on an explicit PYTHONPATH) wins; else build/python, also for
    # the subprocesses the tests start (python3 -m favor, scripts/*.py).
    if importlib.util.find_spec("favor") is None and glob.glob(os.path.join(BUILD_PY, "favor", "_core*.so")):
        sys.path.insert(0, BUILD_PY)
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (BUILD_PY, os.environ.get("PYTHONPATH")) if p)
    os.environ.setdefault("FAVOR", os.path.join(ROOT, "build", "favor"))
    os.environ.setdefault("MPLBACKEND", "Agg")
    missing = []
    if not os.path.isfile(os.environ["FAVOR"]):
        missing.append("the favor CLI (FAVOR=%s)" % os.environ["FAVOR"])
    if _needs_module(config) and importlib.util.find_spec("favor") is None:
        missing.append("the Python module (no installed favor, no build/python/favor/_core*.so)")
    if missing:
        raise pytest.UsageError("favor's Python tests: missing " + " and ".join(missing) +
                                "; build first (scripts/setup.sh, or the README's test command)")
