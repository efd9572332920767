"""pytest plugin: parametrize a test over the cases of a golden suite.

Enable it with ``pytest_plugins = ["qrl_golden.pytest_plugin"]`` in conftest.py (or ``-p
qrl_golden.pytest_plugin``), point it at a directory with ``--qrl-golden DIR`` or $QRL_GOLDEN_DIR,
and mark a test that takes a ``golden_case`` argument:

    @pytest.mark.qrl_golden("casts", format="e4m3fn", profile="torch-2.13")
    def test_cast(golden_case):
        golden_case.assert_matches({"codes": my_cast(golden_case.inputs["input"])})

Without a directory the marked tests are skipped with a reason.
"""

from __future__ import annotations

import os

import pytest

from .reader import load


def pytest_addoption(parser):
    parser.addoption("--qrl-golden", action="store", default=None, help="qrl-golden/1 directory (default $QRL_GOLDEN_DIR)")


def pytest_configure(config):
    config.addinivalue_line("markers", "qrl_golden(suite, where=None, **params): parametrize golden_case over a suite's cases")


def pytest_generate_tests(metafunc):
    if "golden_case" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("qrl_golden")
    if marker is None:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: golden_case needs @pytest.mark.qrl_golden(suite, ...)")
    root = metafunc.config.getoption("--qrl-golden") or os.environ.get("QRL_GOLDEN_DIR")
    if not root:
        metafunc.parametrize("golden_case", [pytest.param(None, marks=pytest.mark.skip(reason="no golden directory: pass --qrl-golden DIR or set QRL_GOLDEN_DIR"))])
        return
    suite = marker.args[0]
    params = dict(marker.kwargs)
    where = params.pop("where", None)
    cases = list(load(root).cases(suite, where=where, **params))
    if not cases:
        metafunc.parametrize("golden_case", [pytest.param(None, marks=pytest.mark.skip(reason=f"no {suite} case matches {params}"))])
        return
    metafunc.parametrize("golden_case", cases, ids=[c.name for c in cases])
