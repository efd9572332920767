"""The PyTorch backend's self-test: in this interpreter when torch imports, else under Debian's
/usr/bin/python3 when that one has torch and numpy; skipped (with the reason) otherwise."""

import os
import subprocess
import sys

import pytest

HERE = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def test_torch_backend_matches_numpy():
    try:
        import torch  # noqa: F401
    except ImportError:
        system = "/usr/bin/python3"
        if os.path.realpath(system) != os.path.realpath(sys.executable) and os.path.exists(system):
            probe = subprocess.run([system, "-c", "import torch, numpy"], capture_output=True)
            if probe.returncode == 0:
                r = subprocess.run([system, "-m", "qrl_backend.torch_ar.selftest"], cwd=HERE, capture_output=True, text=True, timeout=600, env=dict(os.environ, PYTHONPATH=HERE))
                assert r.returncode == 0, r.stdout + r.stderr
                print(r.stdout.strip())
                return
        pytest.skip("torch is not importable (apt-get install -y python3-torch gives CPU torch for /usr/bin/python3)")
    from qrl_backend.torch_ar.selftest import main

    assert main() == 0
