"""The numpy AR backend against the TypeScript reference: same weights file, same tokens ⇒ trainer
log-probs and entropies agree within 2e-5 absolute under the fp32 and bf16 plans. The only difference
is the order of float32 accumulation (BLAS vs qrl-sim's sequential GEMM); measured: ≈ 6e-6 under fp32,
≈ 2e-15 under bf16 (products of bf16 operands are exact in float32, and these sums round alike)."""

import os
import shutil
import subprocess

import numpy as np
import pytest

from qrl_backend.numpy_ar import NumpyArBackend
from qrl_backend.numpy_ar.backend import build
from qrl_backend.backend import RolloutBatch
from qrl_backend.wire import read_safetensors

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOLERANCE = {"fp32": 2e-5, "bf16": 2e-5}


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory):
    node = shutil.which("node")
    if node is None or not os.path.exists(os.path.join(ROOT, "node_modules", "tsx")):
        pytest.skip("node and the repository's node_modules (tsx) are needed to write the TypeScript fixture")
    out = str(tmp_path_factory.mktemp("ts-fixture"))
    subprocess.run([node, "--import", "tsx", "scripts/ar-logprobs-fixture.ts", out], cwd=ROOT, check=True, timeout=300)
    return out


@pytest.mark.parametrize("plan", ["fp32", "bf16"])
@pytest.mark.parametrize("tau", [1, 0.7])
def test_logprobs_agree_with_typescript(fixture_dir, plan, tau):
    be = build(["--weights", os.path.join(fixture_dir, "weights.safetensors"), "--plan", plan])
    case, meta = read_safetensors(os.path.join(fixture_dir, "case.safetensors"))
    P = int(meta["promptLength"])
    tokens, mask = case["tokens"], case["mask"]
    B = tokens.shape[0]
    batch = RolloutBatch(0, tokens[:, :P].tolist(), tokens[:, P:].astype(np.int32), mask, np.zeros_like(mask), {"kind": "ar", "promptLength": P, "temperature": float(tau)})
    _res = be.logprobs(batch, list(range(B)), "current", False)
    lp, ent = _res.logp, _res.entropy
    ts_lp, ts_ent = case[f"logp.{plan}.{tau}"], case[f"entropy.{plan}.{tau}"]
    assert np.mean(ts_lp[mask == 1]) < -0.3  # the fixture is not degenerate
    diff = np.max(np.abs(lp - ts_lp))
    print(f"{plan} τ={tau}: max |ℓ_numpy − ℓ_ts| = {diff:.3g} over {int(mask.sum())} tokens")
    assert diff <= TOLERANCE[plan]
    assert np.max(np.abs(ent - ts_ent)) <= TOLERANCE[plan]
    if plan == "bf16":
        fp32 = build(["--weights", os.path.join(fixture_dir, "weights.safetensors"), "--plan", "fp32"])
        # bf16 moves the log-probs by much more than the agreement tolerance: the plan is really applied
        assert np.max(np.abs(fp32.logprobs(batch, list(range(B)), "current", False).logp - lp)) > 10 * TOLERANCE["fp32"]
