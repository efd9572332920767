"""capabilities.topkLogprobs in the Python SDK: the batch's `topk` codec, the server's negotiation (the
three fields refused to a backend not declaring it, before any call; a declared backend's missing answer
refused), and the numpy AR backend's implementation: the engine's top-k of the sampled distribution
(tokens and ℓroll unchanged, ids ℓ-descending with ties to the lower id, only the support under
top-k/top-p), the trainer's ℓ at those ids, and the backward through them (central differences)."""

import json

import numpy as np
import pytest

from numpy_fd import check_topk_backward
from qrl_backend.numpy_ar.backend import NumpyArBackend, _record_topk
from qrl_backend.numpy_ar.model import ArConfig, init_params
from qrl_backend.server import handle_message
from qrl_backend.wire import RolloutBatch, TopkLogprobs, batch_from_json, batch_to_json, decode_tensor, encode_tensor

CFG = ArConfig(vocabSize=13, maxLen=12, C=16, H=2, layers=1, hidden=32)
PROMPTS = [[1, 7, 9, 3], [1, 5, 6, 3], [1, 8, 8, 3]]


def numpy_backend(**sampling):
    params = {k: v * 4 for k, v in init_params(CFG, 5).items()}  # sharper rows: distinct ℓ, a real top-p cut
    s = {"temperature": 0.8, "topK": 0, "topP": 1.0, "logprob": "processed", **sampling}
    return NumpyArBackend(CFG, params, max_new_tokens=6, sampling=s)


def call(be, method, params):
    out = handle_message(be, json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
    return out


class Undeclared(NumpyArBackend):
    """The numpy backend with capabilities.topkLogprobs left out of its info."""

    def info(self):
        d = super().info()
        d["capabilities"] = {k: v for k, v in d["capabilities"].items() if k != "topkLogprobs"}
        return d


def test_codec_round_trips_topk_between_logp_rollout_and_record():
    be = numpy_backend()
    b = be.generate(PROMPTS, "s", None, False, "rollout", topk_logprobs=4)
    j = batch_to_json(b)
    assert list(j) == ["weightVersion", "B", "T", "prompts", "responses", "mask", "logpRollout", "topk", "record"]
    back = batch_from_json(j, "batch")
    assert back.topk.K == 4 and np.array_equal(back.topk.ids, b.topk.ids) and np.array_equal(back.topk.logp, b.topk.logp)
    assert "topk" not in batch_to_json(be.generate(PROMPTS, "s", None, False, "rollout"))
    bad = dict(j, topk=dict(j["topk"], ids=encode_tensor(np.full(b.topk.ids.shape, -2, dtype=np.int32))))
    with pytest.raises(Exception, match=r"batch\.topk\.ids"):
        batch_from_json(bad, "batch")


def test_server_refuses_the_fields_to_a_backend_not_declaring_the_capability():
    be = Undeclared(CFG, init_params(CFG, 5), max_new_tokens=6)
    out = call(be, "generate", {"prompts": PROMPTS, "seed": "s", "topkLogprobs": 4})
    assert out["error"]["data"]["field"] == "topkLogprobs" and "capabilities.topkLogprobs" in out["error"]["message"]
    batch = call(numpy_backend(), "generate", {"prompts": PROMPTS, "seed": "s", "topkLogprobs": 4})["result"]
    out = call(be, "logprobs", {"batch": batch, "rows": [0], "policy": "current", "topk": True})
    assert out["error"]["data"]["field"] == "topk"
    lp = call(be, "logprobs", {"batch": batch, "rows": [0], "policy": "current", "grad": True})["result"]
    out = call(be, "backward", {"handle": lp["handle"], "gradLogp": encode_tensor(np.zeros(6)), "gradTopk": encode_tensor(np.zeros(24))})
    assert out["error"]["data"]["field"] == "gradTopk"
    # without the fields the undeclared backend serves as before
    assert "result" in call(be, "generate", {"prompts": PROMPTS, "seed": "s"})


@pytest.mark.parametrize("sampling,K", [({}, 5), ({"topK": 3}, 5), ({"topP": 0.6}, 4), ({"logprob": "raw", "topK": 4}, 6)])
def test_numpy_engine_topk_is_the_sampled_distributions_most_likely(sampling, K):
    be = numpy_backend(**sampling)
    plain = be.generate(PROMPTS, "s", None, False, "rollout")
    b = be.generate(PROMPTS, "s", None, False, "rollout", topk_logprobs=K)
    assert np.array_equal(b.responses, plain.responses) and np.array_equal(b.logp_rollout, plain.logp_rollout)
    assert b.topk.ids.shape == (3, b.T, K)
    support_smaller = False
    for i in range(b.B):
        for t in range(b.T):
            ids, lp = b.topk.ids[i, t], b.topk.logp[i, t]
            if b.mask[i, t] == 0:
                assert np.all(ids == -1) and np.all(lp == 0)
                continue
            n = int(np.sum(ids >= 0))
            assert np.all(ids[:n] >= 0) and np.all(ids[n:] == -1) and np.all(lp[n:] == 0)
            for j in range(1, n):  # ℓ descending, ties to the lower id
                assert lp[j] < lp[j - 1] or (lp[j] == lp[j - 1] and ids[j] > ids[j - 1])
            y = int(b.responses[i, t])
            if n < K:
                support_smaller = True
                assert y in ids[:n]  # the sampled token is in the support
            if y in ids:
                assert lp[list(ids).index(y)] == b.logp_rollout[i, t]  # bit for bit ℓroll
    assert support_smaller == ("topK" in sampling or "topP" in sampling)
    assert be.generate(PROMPTS, "s", None, True, "rollout", topk_logprobs=K).topk is None  # not for greedy


def test_record_topk_tie_rule_is_the_lower_id_first():
    dist = np.log(np.array([0.1, 0.3, 0.1, 0.3, 0.2]))
    ids, lp = np.full(4, -1, dtype=np.int32), np.zeros(4)
    _record_topk(dist, np.array([1, 1, 1, 1, 0], dtype=bool), 4, ids, lp)
    assert ids.tolist() == [1, 3, 0, 2]


def test_numpy_trainer_topk_and_its_gradient():
    be = numpy_backend()
    b = be.generate(PROMPTS, "s", None, False, "rollout", topk_logprobs=5)
    rows = [0, 2]
    plain = be.logprobs(b, rows, "current", False)
    res = be.logprobs(b, rows, "current", True, topk=True)
    assert np.array_equal(plain.logp, res.logp)
    ids = b.topk.ids[rows]
    for i in range(len(rows)):
        for t in range(b.T):
            y = int(b.responses[rows[i], t])
            if b.mask[rows[i], t] and y in ids[i, t]:
                assert res.topk_logp[i, t, list(ids[i, t]).index(y)] == res.logp[i, t]
    assert np.all(res.topk_logp[ids < 0] == 0)
    g, _, grads = check_topk_backward(be, b, rows, res)
    # the top-k coefficients move the gradient: without them it differs
    r2 = be.logprobs(b, rows, "current", True, topk=True)
    for v in be.grads.values():
        v[...] = 0
    be.backward(r2.handle, g.reshape(-1))
    assert not np.allclose(be.grads["wte"], grads["wte"])


def test_numpy_over_the_server_topk_round_trip_and_refusals():
    be = numpy_backend()
    assert call(be, "info", {"protocols": ["qrl-backend/1"]})["result"]["capabilities"]["topkLogprobs"] is True
    batch = call(be, "generate", {"prompts": PROMPTS, "seed": "s", "topkLogprobs": 3})["result"]
    assert batch["topk"]["K"] == 3
    lp = call(be, "logprobs", {"batch": batch, "rows": [0, 1], "policy": "current", "grad": True, "topk": True})["result"]
    assert decode_tensor(lp["topkLogp"], "topkLogp").shape == (2, batch["T"], 3)
    assert call(be, "backward", {"handle": lp["handle"], "gradLogp": encode_tensor(np.zeros(2 * batch["T"])), "gradTopk": encode_tensor(np.ones(2 * batch["T"] * 3))})["result"] is None
    plain = call(be, "generate", {"prompts": PROMPTS, "seed": "s"})["result"]
    out = call(be, "logprobs", {"batch": plain, "rows": [0], "policy": "current", "topk": True})
    assert out["error"]["data"]["field"] == "topk"
    lp = call(be, "logprobs", {"batch": batch, "rows": [0], "policy": "current", "grad": True})["result"]
    out = call(be, "backward", {"handle": lp["handle"], "gradLogp": encode_tensor(np.zeros(batch["T"])), "gradTopk": encode_tensor(np.zeros(3 * batch["T"]))})
    assert out["error"]["data"]["field"] == "gradTopk"
