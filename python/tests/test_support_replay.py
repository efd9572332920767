"""Sampling-support replay in the numpy AR backend (capabilities.supportReplay): a sampled batch's record
keeps every position's kept set, `logprobs` renormalises ℓ, the entropy, Σπ² and the top-k ℓ over it,
its backward is the gradient of that ℓ, and a malformed support is refused naming the field."""

import dataclasses

import numpy as np
import pytest

from numpy_fd import check_topk_backward
from qrl_backend.numpy_ar import ArConfig, NumpyArBackend, init_params
from qrl_backend.wire import ProtocolError, batch_from_json, batch_to_json

CFG = ArConfig(vocabSize=13, maxLen=12, C=16, H=2, layers=1, hidden=24)
PROMPTS = [[1, 7, 9, 3], [1, 5, 6, 3], [1, 8, 8, 3]]


def backend(replay: bool, **sampling):
    params = {k: v * 4 for k, v in init_params(CFG, 5).items()}  # sharper rows: a real top-p cut
    s = {"temperature": 0.8, "topK": 4, "topP": 1.0, "logprob": "processed", **sampling}
    return NumpyArBackend(CFG, params, max_new_tokens=6, sampling=s, support_replay=replay)


@pytest.mark.parametrize("sampling", [{"topK": 4}, {"topK": 0, "topP": 0.7}, {"topK": 5, "topP": 0.9}])
def test_replayed_logprobs_are_the_processed_rollout_logprobs(sampling):
    be = backend(True, **sampling)
    b = be.generate(PROMPTS, "s", None, False, "rollout")
    sup = b.record["support"]
    assert sup.dtype == np.uint8 and sup.shape == (3, b.T, CFG.vocabSize)
    on = b.mask == 1
    assert np.all(sup[on].sum(-1) < CFG.vocabSize)  # every sampled position was cut
    assert np.all(sup[~on] == 0)
    # the same sides (weights just synced, one plan): ℓ over the kept set is ℓroll; over the vocabulary it is not
    wire = batch_from_json(batch_to_json(b), "batch")  # as the driver sends it back: a 1-D U8 tensor
    r = be.logprobs(wire, range(3), "current", False, prob_sq_sum=True)
    assert np.max(np.abs(r.logp - b.logp_rollout)) < 1e-5
    full = be.logprobs(dataclasses.replace(b, record={k: v for k, v in b.record.items() if k != "support"}), range(3), "current", False)
    assert np.max(np.abs(full.logp - b.logp_rollout)) > 1e-3
    # the entropy and Σπ² are of the renormalised row: at most log|kept|, at least 1/|kept|
    n = sup.sum(-1)
    assert np.all(r.entropy[on] <= np.log(n[on]) + 1e-9) and np.all(r.entropy[on] > 0)
    assert np.all(r.prob_sq_sum[on] >= 1 / n[on] - 1e-12) and np.all(r.prob_sq_sum[~on] == 0)
    assert np.all(np.isfinite(r.entropy)) and np.all(r.entropy[~on] == 0)


def test_no_support_without_replay_or_when_greedy():
    assert "support" not in backend(False).generate(PROMPTS, "s", None, False, "rollout").record
    assert "support" not in backend(True).generate(PROMPTS, "s", None, True, "rollout").record


def test_replayed_gradient_matches_finite_differences_and_topk_shares_the_normaliser():
    be = backend(True, topK=5)
    b = be.generate(PROMPTS, "s", None, False, "rollout", topk_logprobs=5)
    rows = [0, 2]
    res = be.logprobs(b, rows, "current", True, topk=True)
    ids = b.topk.ids[rows]
    for i in range(len(rows)):
        for t in range(b.T):
            y = int(b.responses[rows[i], t])
            if b.mask[rows[i], t]:
                assert res.topk_logp[i, t, list(ids[i, t]).index(y)] == res.logp[i, t]  # K = topK: y is listed
    check_topk_backward(be, b, rows, res)  # the renormalised row's gradient, top-k coefficients included


def test_a_malformed_support_is_refused_naming_the_field():
    be = backend(True)
    b = be.generate(PROMPTS, "s", None, False, "rollout")
    sup = b.record["support"]
    cases = {
        "values": sup * 2,
        "size": sup.reshape(-1)[:-1],
        "sampled token outside": np.zeros_like(sup),
    }
    for what, bad in cases.items():
        with pytest.raises(ProtocolError) as e:
            be.logprobs(dataclasses.replace(b, record={**b.record, "support": bad}), range(3), "current", False)
        assert e.value.field == "batch.record.support", what
    assert "outside its kept set" in str(e.value)


def test_info_declares_it_and_the_run_config_switches_it_on():
    from qrl_backend.numpy_ar.backend import build

    assert backend(False).info()["capabilities"]["supportReplay"] is True
    outer = build([])
    setup = {"policy": "ar", "model": {"vocabSize": 13, "maxLen": 12, "C": 16, "H": 2, "layers": 1, "hidden": 24},
             "sampling": {"temperature": 1.0, "topK": 4, "topP": 1.0, "logprob": "processed"}}
    outer.configure({"policy": {"sampler": {"supportReplay": True}}}, setup)
    assert outer.inner.support_replay is True
    other = build([])
    other.configure({"policy": {"sampler": {}}}, setup)
    assert other.inner.support_replay is False


def test_torch_ar_replays_the_support_as_numpy_ar_does():
    """torch_ar (autograd) against numpy_ar (by hand) on the same weights and batch, fp32: the replayed ℓ,
    entropy, Σπ², top-k ℓ and gradient agree; its own generate records the support and its ℓ is ℓroll."""
    torch = pytest.importorskip("torch")
    from qrl_backend.torch_ar.backend import TorchArBackend

    nb = backend(True, topK=5)
    tb = TorchArBackend(CFG, {k: v.copy() for k, v in nb.params.items()}, plan="fp32", max_new_tokens=6, device="cpu",
                        support_replay=True)
    assert tb.info()["capabilities"]["supportReplay"] is True
    b = nb.generate(PROMPTS, "s", None, False, "rollout", topk_logprobs=5)
    rows = [2, 0]
    rn = nb.logprobs(b, rows, "current", True, prob_sq_sum=True, topk=True)
    rt = tb.logprobs(b, rows, "current", True, prob_sq_sum=True, topk=True)
    for name in ("logp", "entropy", "prob_sq_sum", "topk_logp"):
        assert np.max(np.abs(getattr(rt, name) - getattr(rn, name))) < 2e-5, name
    g = np.random.default_rng(2).normal(size=rn.logp.shape)
    nb.backward(rn.handle, g.reshape(-1))
    tb.backward(rt.handle, g.reshape(-1))
    for name, p in zip(tb.model.names, tb.model.parameters()):
        assert np.allclose(p.grad.numpy(), nb.grads[name], rtol=1e-3, atol=1e-6), name
    tb.sync()
    own = tb.generate(PROMPTS, "s", {"temperature": 0.8, "topK": 4, "topP": 1.0, "logprob": "processed"}, False, "rollout")
    assert own.record["support"].shape == (3, own.T, CFG.vocabSize)
    assert np.max(np.abs(tb.logprobs(own, range(3), "current", False).logp - own.logp_rollout)) < 1e-5
    del torch


def test_hf_replays_the_support_from_the_run_config():
    """qrl_backend.hf (a tiny Llama, hf-fp32: identical sides): `configure` takes supportReplay from the run,
    its record then carries the kept set of each sampled position, and the replayed ℓ is ℓroll; the
    gradient through the renormalised row matches central differences of Σ g·ℓ."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import copy

    import torch
    from hf_tiny import SMALLER, tiny_llama
    from qrl_backend.hf.backend import HfBackend

    model = tiny_llama(13, SMALLER)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(8)  # sharper rows: a real cut
    be = HfBackend(copy.deepcopy(model), "hf-fp32", lr=3e-3, max_new_tokens=5)
    assert be.info()["capabilities"]["supportReplay"] is True
    prompts = [[0, 1, 5, 6, 7, 3], [1, 8, 9, 10, 11, 3]]
    s = {"temperature": 0.8, "topK": 3, "topP": 1.0, "logprob": "processed"}
    assert "support" not in be.generate(prompts, "s", s, False, "rollout").record
    be.configure({"policy": {"sampler": {"supportReplay": True}}}, {
        "policy": "ar", "vocabulary": {"size": 13, "pad": 0, "bos": 1, "eos": 2, "sep": 3, "mask": 4}})
    b = be.generate(prompts, "s", s, False, "rollout")
    sup = b.record["support"]
    assert sup.shape == (2, b.T, 13) and np.all(sup[b.mask == 1].sum(-1) == 3)
    r = be.logprobs(b, [1, 0], "current", True)
    assert np.max(np.abs(r.logp - b.logp_rollout[[1, 0]])) < 1e-6
    full = be.logprobs(dataclasses.replace(b, record={k: v for k, v in b.record.items() if k != "support"}), [1, 0], "current", False)
    assert np.max(np.abs(full.logp - b.logp_rollout[[1, 0]])) > 1e-3
    g = np.random.default_rng(3).normal(size=r.logp.shape)
    be.backward(r.handle, g.reshape(-1))
    name, p = next((n, p) for n, p in be.model.named_parameters() if p.ndim == 2 and p.grad is not None and p.grad.abs().max() > 0)
    idx = np.unravel_index(int(p.grad.abs().argmax()), p.shape)

    def loss():
        return float(np.sum(g * be.logprobs(b, [1, 0], "current", False).logp))

    with torch.no_grad():
        old = float(p[idx])
        p[idx] = old + 1e-4
        up = loss()
        p[idx] = old - 1e-4
        down = loss()
        p[idx] = old
    assert float(p.grad[idx]) == pytest.approx((up - down) / 2e-4, rel=1e-2), name
