"""The PyTorch backend (torch 2.13 from the project's environment, python/requirements.lock): its
self-test against the numpy backend, and its agreement with the TypeScript engine on the same
weights and tokens — trainer log-probs under fp32 and bf16, and the rollout engine's log-probs
under fp8-tensor-rollout, whose linears run in real torch.float8_e4m3fn through torch._scaled_mm.

Measured (CPU, this fixture): fp32 and bf16 within 2e-5 like the numpy backend. fp8-tensor-rollout:
max |Δℓ| = 9e-16 against qrl-sim's plan with a float32 accumulator (the same FP8 codes and scales;
on the CPU _scaled_mm dequantizes the operands and sums in float32), and 0.22 (τ = 1) / 0.31
(τ = 0.7) against the plan itself, whose Hopper FP8 accumulator (hopper-fp8: 13 fractional bits
per chunk, chunks of 16 promoted every chunk: the toy's size) moves these sharpened toy log-probs that
much. On an H200 (QRL_TORCH_DEVICE=cuda, scripts/gpu-check.sh) _scaled_mm is hopper-fp8 at the hardware's
settings, chunks of 32 promoted every 4: max |Δℓ| = 8.9e-16 (τ = 1) and 1.0e-15 (τ = 0.7)."""

import os
import shutil
import subprocess

import numpy as np
import pytest
import torch

from qrl_backend.backend import RolloutBatch
from qrl_backend.torch_ar.backend import build, quantize_e4m3_tensor
from qrl_backend.wire import read_safetensors

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOLERANCE = {"fp32": 2e-5, "bf16": 2e-5, "fp8-tensor-rollout": 1e-12}
#: The device of the agreement tests (scripts/gpu-check.sh sets cuda); the tolerances above are the CPU's.
DEVICE = os.environ.get("QRL_TORCH_DEVICE", "cpu")


def test_torch_is_the_locked_one_with_float8():
    assert tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 13), torch.__version__
    assert hasattr(torch, "float8_e4m3fn") and hasattr(torch, "_scaled_mm")


def test_torch_backend_matches_numpy():
    from qrl_backend.torch_ar.selftest import main

    assert main() == 0


def test_fp8_quantizer_is_te_current_in_real_float8():
    x = torch.tensor([[1.0, -3.5, 0.125], [448.0, 2.0, -0.0]])
    q, s = quantize_e4m3_tensor(x)
    assert q.dtype == torch.float8_e4m3fn
    assert float(s) == float(torch.tensor(1.0) / (torch.tensor(448.0) / torch.tensor(448.0)))
    assert torch.equal(q.float(), x)  # amax 448: scale 1, every value representable
    q, s = quantize_e4m3_tensor(torch.zeros(2, 2))
    assert float(s) == 1.0


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory):
    if os.environ.get("QRL_TS_FIXTURE"):  # written elsewhere by scripts/ar-logprobs-fixture.ts (a machine without tsx)
        return os.environ["QRL_TS_FIXTURE"]
    node = shutil.which("node")
    if node is None or not os.path.exists(os.path.join(ROOT, "node_modules", "tsx")):
        pytest.skip("node and the repository's node_modules (tsx) are needed to write the TypeScript fixture")
    out = str(tmp_path_factory.mktemp("ts-fixture"))
    subprocess.run([node, "--import", "tsx", "scripts/ar-logprobs-fixture.ts", out], cwd=ROOT, check=True, timeout=300)
    return out


@pytest.mark.parametrize("plan", ["fp32", "bf16", "fp8-tensor-rollout"])
@pytest.mark.parametrize("tau", [1, 0.7])
def test_logprobs_agree_with_typescript(fixture_dir, plan, tau):
    be = build(["--weights", os.path.join(fixture_dir, "weights.safetensors"), "--plan", plan, "--device", DEVICE]).inner
    case, meta = read_safetensors(os.path.join(fixture_dir, "case.safetensors"))
    P = int(meta["promptLength"])
    tokens, mask = case["tokens"], case["mask"]
    B = tokens.shape[0]
    if plan == "fp8-tensor-rollout":
        # the rollout engine's processed log-probs of the fixture's tokens
        with torch.no_grad():
            z = be.engine(torch.from_numpy(tokens.astype(np.int64)).to(be.device))[:, P - 1 : -1].double() / tau
        lsm = torch.log_softmax(z, -1)
        lp = (lsm.gather(-1, torch.from_numpy(tokens[:, P:].astype(np.int64)).to(lsm.device).unsqueeze(-1)).squeeze(-1).cpu().numpy()) * mask
        ts_lp = case[f"logp.rollout.{plan}.fp32-accumulator.{tau}"]
        hopper = float(np.max(np.abs(lp - case[f"logp.rollout.{plan}.{tau}"])))
        print(f"torch_ar {plan} τ={tau} on {DEVICE}: max |ℓ_torch − ℓ_ts| = {hopper:.3g} against the plan's Hopper accumulator")
        sm90 = float(np.max(np.abs(lp - case[f"logp.rollout.{plan}.sm90.{tau}"])))
        print(f"torch_ar {plan} τ={tau} on {DEVICE}: max |ℓ_torch − ℓ_ts| = {sm90:.3g} against hopper-fp8 at the H200's settings (chunk 32, promoted every 4)")
        if DEVICE.startswith("cuda") and torch.cuda.get_device_capability(torch.device(DEVICE)) == (9, 0):
            # Hopper's _scaled_mm is hopper-fp8 at chunk 32, promoted every 4 (an H200 measured 8.9e-16 and 1.0e-15)
            assert sm90 <= TOLERANCE[plan], sm90
        # the FP8 plan is really applied: it moves the log-probs far from the BF16 ones
        assert np.max(np.abs(lp - case[f"logp.bf16.{tau}"])) > 0.1
    else:
        batch = RolloutBatch(0, tokens[:, :P].tolist(), tokens[:, P:].astype(np.int32), mask, np.zeros_like(mask), {"kind": "ar", "promptLength": P, "temperature": float(tau)})
        lp = be.logprobs(batch, list(range(B)), "current", False).logp
        ts_lp = case[f"logp.{plan}.{tau}"]
    diff = float(np.max(np.abs(lp - ts_lp)))
    print(f"torch_ar {plan} τ={tau} on {DEVICE}: max |ℓ_torch − ℓ_ts| = {diff:.3g} over {int(mask.sum())} tokens")
    if DEVICE == "cpu" or plan != "fp8-tensor-rollout":
        assert diff <= TOLERANCE[plan]
    # On a GPU the FP8 GEMM is the device's tensor-core accumulator: the plan's toy-sized accumulator and the float32
    # one are printed, not asserted; on Hopper the hardware-sized accumulator is asserted above.


def test_torch_prob_sq_sum_matches_numpy():
    from qrl_backend.numpy_ar import ArConfig, NumpyArBackend, init_params
    from qrl_backend.torch_ar.backend import TorchArBackend

    cfg = ArConfig(vocabSize=11, maxLen=12, C=16, H=2, layers=1, hidden=24)
    params = init_params(cfg, 4)
    ref = NumpyArBackend(cfg, params, max_new_tokens=6)
    tb = TorchArBackend(cfg, params, max_new_tokens=6, device="cpu")
    batch = ref.generate([[1, 5, 6, 3], [1, 7, 8, 3]], "t/0", None, False, "rollout")
    a = ref.logprobs(batch, [0, 1], "current", False, prob_sq_sum=True).prob_sq_sum
    b = tb.logprobs(batch, [0, 1], "current", True, prob_sq_sum=True).prob_sq_sum
    assert b.dtype == np.float64 and float(np.max(np.abs(a - b))) < 1e-5
    assert np.all(b[batch.mask == 0] == 0) and np.all(b[batch.mask == 1] > 0)
    assert tb.info()["capabilities"]["probSqSum"] is True


@pytest.mark.parametrize("sampling", [{}, {"topK": 3}, {"topP": 0.6}])
def test_torch_topk_logprobs_match_numpy(sampling):
    """capabilities.topkLogprobs on the torch backend against the numpy one on the same weights (fp32):
    the same tokens, top-k ids (ℓ descending, ties to the lower id; the support under top-k/top-p) and ℓ
    within 2e-5; the trainer's ℓ at the ids within 2e-5; and the gradient of Σ g·ℓ + Σ g_topk·ℓ_topk
    within 1e-4 relative of numpy's closed form (which python/tests/test_topk.py checks by central differences)."""
    from qrl_backend.numpy_ar.backend import NumpyArBackend
    from qrl_backend.numpy_ar.model import ArConfig, init_params
    from qrl_backend.torch_ar.backend import TorchArBackend

    cfg = ArConfig(vocabSize=13, maxLen=12, C=16, H=2, layers=1, hidden=32)
    params = {k: v * 4 for k, v in init_params(cfg, 5).items()}
    s = {"temperature": 0.8, "topK": 0, "topP": 1.0, "logprob": "processed", **sampling}
    nb = NumpyArBackend(cfg, params, max_new_tokens=6, sampling=s)
    tb = TorchArBackend(cfg, params, max_new_tokens=6, device="cpu")
    prompts = [[1, 7, 9, 3], [1, 5, 6, 3], [1, 8, 8, 3]]
    bn = nb.generate(prompts, "s", s, False, "rollout", topk_logprobs=5)
    bt = tb.generate(prompts, "s", s, False, "rollout", topk_logprobs=5)
    assert np.array_equal(bn.responses, bt.responses)
    assert np.max(np.abs(bn.topk.logp - bt.topk.logp)) <= 2e-5
    lp = np.where(bn.topk.ids >= 0, bn.topk.logp, -np.inf)
    gap = np.abs(np.diff(lp, axis=-1, prepend=np.inf, append=-np.inf))  # to each slot's neighbours
    apart = (np.minimum(gap[..., :-1], gap[..., 1:]) > 4e-5) & (bn.topk.ids >= 0)
    assert np.array_equal(bn.topk.ids[apart], bt.topk.ids[apart]) and apart.sum() > apart.size // 3
    assert np.array_equal(bn.topk.ids == -1, bt.topk.ids == -1)  # the same supports
    rows = [0, 2]
    rn = nb.logprobs(bn, rows, "current", True, topk=True)
    rt = tb.logprobs(bn, rows, "current", True, topk=True)
    assert np.max(np.abs(rn.topk_logp - rt.topk_logp)) <= 2e-5
    assert np.array_equal(rt.topk_logp == 0, rn.topk_logp == 0)
    rng = np.random.default_rng(1)
    g, gk = rng.normal(size=rn.logp.shape), rng.normal(size=rn.topk_logp.shape)
    nb.backward(rn.handle, g.reshape(-1), grad_topk=gk.reshape(-1))
    tb.backward(rt.handle, g.reshape(-1), grad_topk=gk.reshape(-1))
    tgrads = {n: p.grad.detach().numpy() for n, p in zip(tb.model.names, tb.model.parameters())}
    for name in ["wte", "h0.attn.wq", "h0.mlp.down", "lnf.weight"]:
        a, b = nb.grads[name], tgrads[name]
        assert np.max(np.abs(a - b)) <= 1e-4 * max(1.0, float(np.max(np.abs(a)))), name
