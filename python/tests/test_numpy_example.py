"""The numpy TIS + PPO example against the `estimators` suite; its planted bugs must be caught."""

import importlib
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import numpy_estimators as ex  # noqa: E402

import qrl_golden  # noqa: E402


@pytest.mark.qrl_golden("estimators", where=ex.supported)
def test_numpy_example_matches(golden_case):
    golden_case.assert_matches(ex.outputs(ex.estimate(ex.case_input(golden_case))))


@pytest.mark.parametrize("bug", ["no-cap", "wrong-mask"])
def test_planted_bugs_are_caught(bug, monkeypatch):
    if not os.environ.get("QRL_GOLDEN_DIR"):
        pytest.skip("no golden directory")
    monkeypatch.setattr(ex, "BUG", bug)
    cases = list(qrl_golden.load().cases("estimators", where=ex.supported))
    caught = [c for c in cases if c.compare(ex.outputs(ex.estimate(ex.case_input(c))))]
    assert caught, f"bug {bug} passed every case"
    m = caught[0].compare(ex.outputs(ex.estimate(ex.case_input(caught[0]))))[0]
    assert "expected" in str(m) and "0x" in str(m)
