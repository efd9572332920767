"""capabilities.topkLogprobs on qrl_backend.hf: the engine's top-k of the sampled distribution (tokens and
ℓroll unchanged, ℓ descending with ties to the lower id, only the support under top-k/top-p, the sampled
id's slot ℓroll bit for bit), the trainer's ℓ at those ids (equal to the engine's under hf-fp32, whose two
sides are identical), and backward with grad_topk equal to the sum of plain backwards, one per (position,
slot), each scoring the slot's id as the response token at that position."""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from hf_tiny import SMALLER, tiny_llama  # noqa: E402
from qrl_backend.hf.backend import HfBackend  # noqa: E402
from qrl_backend.wire import RolloutBatch  # noqa: E402

PROMPTS = [[0, 1, 5, 6, 7, 3], [1, 8, 9, 10, 11, 3], [0, 0, 1, 12, 6, 3]]


@pytest.fixture(scope="module")
def base_model():
    model = tiny_llama(13, SMALLER)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(8)  # sharper rows: distinct ℓ and a real top-p cut
    return model


def backend(model, plan="hf-fp32") -> HfBackend:
    return HfBackend(copy.deepcopy(model), plan, lr=3e-3, max_new_tokens=5)


@pytest.mark.parametrize("sampling,K", [({}, 4), ({"topK": 3}, 4), ({"topP": 0.6}, 4), ({"logprob": "raw"}, 3)])
def test_hf_engine_topk(base_model, sampling, K):
    be = backend(base_model)
    s = {"temperature": 0.8, "topK": 0, "topP": 1.0, "logprob": "processed", **sampling}
    plain = be.generate(PROMPTS, "s", s, False, "rollout")
    b = be.generate(PROMPTS, "s", s, False, "rollout", topk_logprobs=K)
    assert np.array_equal(b.responses, plain.responses) and np.array_equal(b.logp_rollout, plain.logp_rollout)
    smaller = False
    for i in range(b.B):
        for t in range(b.T):
            ids, lp = b.topk.ids[i, t], b.topk.logp[i, t]
            if b.mask[i, t] == 0:
                assert np.all(ids == -1)
                continue
            n = int(np.sum(ids >= 0))
            assert np.all(ids[n:] == -1) and np.all(lp[n:] == 0)
            assert all(lp[j] < lp[j - 1] or (lp[j] == lp[j - 1] and ids[j] > ids[j - 1]) for j in range(1, n))
            y = int(b.responses[i, t])
            smaller |= n < K
            assert n == K or y in ids[:n]
            if y in ids:
                assert lp[list(ids).index(y)] == b.logp_rollout[i, t]
    assert smaller == ("topK" in sampling or "topP" in sampling)
    if not smaller and s["logprob"] == "processed":  # identical sides: the trainer's ℓ at the ids is the engine's
        r = be.logprobs(b, list(range(b.B)), "current", False, topk=True)
        assert np.max(np.abs(r.topk_logp - b.topk.logp)) <= 1e-12


def test_hf_backward_through_the_topk_is_the_sum_of_plain_backwards(base_model):
    be = backend(base_model)
    b = be.generate(PROMPTS, "s", None, False, "rollout", topk_logprobs=3)
    rows = list(range(b.B))
    rng = np.random.default_rng(2)
    gk = rng.normal(size=b.topk.ids.shape) * (b.topk.ids >= 0)
    r = be.logprobs(b, rows, "current", True, topk=True)
    be.backward(r.handle, np.zeros(b.B * b.T), grad_topk=gk.reshape(-1))
    got = [p.grad.detach().clone() for p in be.model.parameters()]
    for p in be.model.parameters():
        p.grad.zero_()
    for t in range(b.T):
        for j in range(3):
            resp = b.responses.copy()
            resp[:, t] = np.maximum(b.topk.ids[:, t, j], 0)  # the slot's id as the token at t; the context before t unchanged
            bj = RolloutBatch(b.weight_version, b.prompts, resp, b.mask, b.logp_rollout, b.record)
            g = np.zeros((b.B, b.T))
            g[:, t] = gk[:, t, j]
            rj = be.logprobs(bj, rows, "current", True)
            be.backward(rj.handle, g.reshape(-1))
    want = [p.grad.detach() for p in be.model.parameters()]
    scale = max(float(w.abs().max()) for w in want)
    assert scale > 0
    for a, w in zip(got, want):
        assert float((a - w).abs().max()) <= 1e-6 * scale
