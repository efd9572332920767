"""The numpy AR model and backend: gradient check in float64, bf16 rounding, sampling determinism,
clipping/AdamW bookkeeping and the save/load round trip."""

import numpy as np
import pytest

from qrl_backend.numpy_ar import ArConfig, NumpyArBackend, Plan, backward, forward, init_params, round_bf16
from qrl_backend.numpy_ar.model import log_softmax_rows


@pytest.mark.parametrize("norm,mlp,tied", [("rmsnorm", "swiglu", False), ("layernorm", "gelu", True)])
def test_backward_matches_finite_differences(norm, mlp, tied):
    cfg = ArConfig(vocabSize=7, maxLen=6, C=8, H=2, layers=2, hidden=12, norm=norm, mlp=mlp, tiedEmbeddings=tied)
    P = {k: v.astype(np.float64) * 20 for k, v in init_params(cfg, 3).items()}  # larger weights: nontrivial gradients
    P = {k: (np.ones_like(v) + 0.1 * v if k.endswith("weight") else v) for k, v in P.items()}
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 7, size=(2, 5))
    W = rng.standard_normal((2, 5, 7))
    plan = Plan("fp32")
    loss = lambda: float(np.sum(W * log_softmax_rows(forward(cfg, P, tokens, plan)[0], 1.0)))
    logits, cache = forward(cfg, P, tokens, plan)
    lsm = log_softmax_rows(logits, 1.0)
    dlogits = W - np.exp(lsm) * W.sum(-1, keepdims=True)
    G = backward(cfg, P, cache, dlogits, plan)
    for name in ["wte", "wpe", "h0.attn.wq", "h1.attn.wk", "h0.attn.wv", "h1.attn.wo", "h0.ln1.weight", "h1.ln2.weight", "h0.mlp.up", "h1.mlp.down", "lnf.weight"] + ([] if tied else ["lmHead"]) + (["h0.mlp.gate"] if mlp == "swiglu" else []):
        idx = tuple(rng.integers(0, s) for s in P[name].shape)
        if name == "wpe":
            idx = (2,) + idx[1:]
        old = P[name][idx]
        P[name][idx] = old + 1e-6
        up = loss()
        P[name][idx] = old - 1e-6
        down = loss()
        P[name][idx] = old
        fd = (up - down) / 2e-6
        assert G[name][idx] == pytest.approx(fd, rel=1e-5, abs=1e-8), name


def test_bf16_rounding_is_round_to_nearest_even():
    x = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-9, -(1 + 2**-8 + 2**-20), 3.4028235e38, 3.3895314e38], dtype=np.float32)
    got = round_bf16(x)
    assert got[0] == 1.0
    assert got[1] == 1.0  # tie → even
    assert got[2] == np.float32(1 + 4 * 2**-8)  # tie → even (up)
    assert got[3] == 1.0
    assert got[4] == np.float32(-(1 + 2**-7))
    assert np.isinf(got[5])
    assert got[6] == np.float32(3.3895314e38)  # the largest bf16 stays


def small_backend(plan="fp32"):
    cfg = ArConfig(vocabSize=9, maxLen=10, C=16, H=2, layers=1, hidden=24)
    return NumpyArBackend(cfg, init_params(cfg, 5), plan=plan, lr=1e-2, max_new_tokens=5)


def test_same_seed_same_tokens_and_generate_logprobs_match_trainer():
    be = small_backend()
    prompts = [[1, 5, 6, 3]] * 4
    a = be.generate(prompts, "0/step/0/rollout", None, False, "rollout")
    b = be.generate(prompts, "0/step/0/rollout", None, False, "rollout")
    c = be.generate(prompts, "0/step/1/rollout", None, False, "rollout")
    assert np.array_equal(a.responses, b.responses)
    assert not np.array_equal(a.responses, c.responses)
    _res = be.logprobs(a, range(4), "current", False)
    lp, ent = _res.logp, _res.entropy
    assert np.max(np.abs(lp - a.logp_rollout)) < 1e-5
    assert np.all(ent[a.mask == 1] > 0) and np.all(ent[a.mask == 0] == 0)


def test_step_advances_version_reference_stays_and_checkpoint_round_trips(tmp_path):
    be = small_backend("bf16")
    be.set_reference()
    batch = be.generate([[1, 5, 6, 3]] * 3, "s", None, False, "rollout")
    _res = be.logprobs(batch, [0, 1, 2], "current", True)
    lp0, h = _res.logp, _res.handle
    be.backward(h, -np.ones(lp0.size))  # ascend log-likelihood of the samples
    r = be.step(1.0)
    assert r["weightVersion"] == 1 and r["gradNorm"] > 0
    lp1 = be.logprobs(batch, [0, 1, 2], "current", False).logp
    ref = be.logprobs(batch, [0, 1, 2], "reference", False).logp
    assert np.array_equal(ref, lp0)
    assert np.sum(lp1) != np.sum(lp0)
    be.save(str(tmp_path / "ck"))
    other = small_backend("bf16")
    other.load(str(tmp_path / "ck"))
    assert other.version == 1
    assert np.array_equal(other.logprobs(batch, [0, 1, 2], "current", False).logp, lp1)
    assert np.array_equal(other.logprobs(batch, [0, 1, 2], "reference", False).logp, ref)
    assert other.step(1.0)["weightVersion"] == 2


def test_prob_sq_sum_is_verls_formula_on_the_trainer_logits_and_leaves_logp_unchanged():
    # veRL calculate_sum_pi_squared_from_logits: exp(logsumexp(2z) − 2·logsumexp(z)), here at τ = 0.7
    be = small_backend()
    batch = be.generate([[1, 5, 6, 3]] * 3, "0/step/0/rollout", {"temperature": 0.7, "topK": 0, "topP": 1.0, "logprob": "processed"}, False, "rollout")
    _res = be.logprobs(batch, [0, 1, 2], "current", False)
    lp0, ent0 = _res.logp, _res.entropy
    res = be.logprobs(batch, [0, 1, 2], "current", False, prob_sq_sum=True)
    assert np.array_equal(res.logp, lp0) and np.array_equal(res.entropy, ent0)
    assert be.logprobs(batch, [0], "current", False).prob_sq_sum is None
    P = len(batch.prompts[0])
    tokens = np.concatenate([np.asarray(batch.prompts, dtype=np.int32), batch.responses.astype(np.int32)], axis=1)
    logits, _ = forward(be.cfg, be.params, tokens, be.trainer_plan)
    z = logits[:, P - 1 : P + batch.responses.shape[1] - 1, :].astype(np.float64) / 0.7

    def lse(a):
        m = a.max(-1, keepdims=True)
        return (m + np.log(np.exp(a - m).sum(-1, keepdims=True)))[..., 0]

    want = np.exp(lse(2 * z) - 2 * lse(z)) * batch.mask
    assert np.max(np.abs(res.prob_sq_sum - want)) < 1e-12
    assert np.all(res.prob_sq_sum[batch.mask == 1] > 0) and np.all(res.prob_sq_sum[batch.mask == 0] == 0)
