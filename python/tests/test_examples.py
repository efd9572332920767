"""The runnable examples under python/examples run and pass against the golden directory."""

import os
import subprocess
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


@pytest.mark.parametrize("script", ["torch_fp8_cast.py", "numpy_estimators.py"])
def test_example_runs(script):
    root = os.environ.get("QRL_GOLDEN_DIR")
    if not root:
        pytest.skip("no golden directory")
    args = [root] if script == "torch_fp8_cast.py" else ["--golden", root]
    run = subprocess.run([sys.executable, os.path.join(EXAMPLES, script), *args], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
