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
from qrl_backend.numpy_ar.backend import _record_topk, build
from qrl_backend.numpy_ar.model import forward, log_softmax_rows
from qrl_backend.backend import RolloutBatch
from qrl_backend.wire import TopkLogprobs
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


@pytest.mark.parametrize("plan", ["fp32", "bf16"])
@pytest.mark.parametrize("tau", [1, 0.7])
def test_topk_logprobs_agree_with_typescript(fixture_dir, plan, tau):
    """capabilities.topkLogprobs: the trainer's ℓ at the TypeScript engine's top-k ids agrees with the
    TypeScript trainer's (computeLogprobs with topk) within the same 2e-5, 0 at the same empty slots."""
    be = build(["--weights", os.path.join(fixture_dir, "weights.safetensors"), "--plan", plan])
    case, meta = read_safetensors(os.path.join(fixture_dir, "case.safetensors"))
    P = int(meta["promptLength"])
    tokens, mask = case["tokens"], case["mask"]
    ids, logp = case["topk.ids"], case["topk.logp"]
    B, K = tokens.shape[0], ids.shape[-1]
    batch = RolloutBatch(0, tokens[:, :P].tolist(), tokens[:, P:].astype(np.int32), mask, np.zeros_like(mask),
                         {"kind": "ar", "promptLength": P, "temperature": float(tau)}, TopkLogprobs(K, ids, logp))
    res = be.logprobs(batch, list(range(B)), "current", False, topk=True)
    ts = case[f"topkLogp.{plan}.{tau}"]
    assert res.topk_logp.shape == ts.shape == (B, tokens.shape[1] - P, K)
    assert np.array_equal(res.topk_logp == 0, ts == 0)
    diff = np.max(np.abs(res.topk_logp - ts))
    print(f"{plan} τ={tau}: max |ℓ_topk numpy − ℓ_topk ts| = {diff:.3g} over {int((ts != 0).sum())} slots")
    assert diff <= TOLERANCE[plan]


def test_topk_ids_agree_with_typescript_engine(fixture_dir):
    """The numpy engine's top-k of the same prefixes (fp32, τ 1, full support) against the TypeScript
    rollout's: ℓ within 2e-5, and the same ids wherever neighbouring ℓ are more than 2·2e-5 apart (closer
    ones may swap under the different float32 summation order)."""
    be = build(["--weights", os.path.join(fixture_dir, "weights.safetensors"), "--plan", "fp32"])
    case, meta = read_safetensors(os.path.join(fixture_dir, "case.safetensors"))
    P = int(meta["promptLength"])
    tokens, ts_ids, ts_logp = case["tokens"], case["topk.ids"], case["topk.logp"]
    B, L, K = ts_ids.shape
    inner = be.inner
    checked = 0
    for k in range(L):
        logits, _ = forward(inner.cfg, inner.rollout_params, tokens[:, : P + k], inner.rollout_plan)
        for b in range(B):
            z = logits[b, -1, :].astype(np.float64)
            dist = log_softmax_rows(z, 1.0)
            ids, lp = np.full(K, -1, dtype=np.int32), np.zeros(K)
            _record_topk(dist, np.ones(z.shape[0], dtype=bool), K, ids, lp)
            assert np.max(np.abs(lp - ts_logp[b, k])) <= 2e-5
            gaps = -np.diff(ts_logp[b, k])
            for j in range(K):
                apart = (j == 0 or gaps[j - 1] > 4e-5) and (j == K - 1 or gaps[j] > 4e-5)
                if apart:
                    assert ids[j] == ts_ids[b, k, j], (b, k, j, ids, ts_ids[b, k])
                    checked += 1
    assert checked > B * L * K // 2  # most slots are separated: the comparison is not vacuous
