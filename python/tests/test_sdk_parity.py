"""SDK parity with the TypeScript side: `routing`/`returnRouting` reach a backend that takes them
(decoded to int32 arrays) and are refused, naming the field, by one that does not; typed results
(LogprobsResult, StepResult) are encoded like the tuple/dict forms, entropy omitted when None; the
codec lives in wire.py; `maxNewTokens` reaches `generate` as `max_new_tokens`."""

import json

import numpy as np

from qrl_backend import Backend, LogprobsResult, RolloutBatch, StepResult
from qrl_backend import wire
from qrl_backend.server import handle_message
from qrl_backend.wire import batch_to_json, decode_tensor, encode_tensor

BATCH = RolloutBatch(0, [[1, 5, 3]], np.array([[6, 2]], dtype=np.int32), np.array([[1.0, 1.0]]), np.array([[-0.5, -0.25]]), {"kind": "ar"})


class MoeLike(Backend):
    def __init__(self):
        self.seen = {}

    def logprobs(self, batch, rows, policy, grad, routing=None, return_routing=False):
        self.seen = {"routing": routing, "return_routing": return_routing}
        out = LogprobsResult(logp=np.array([[-0.5, -0.25]]), entropy=None)
        if return_routing:
            out.routing = [np.array([[[0, 1], [1, 2]]], dtype=np.int32)]
            out.routing_flip_rate = [0.5]
        return out

    def step(self, max_grad_norm):
        return StepResult(grad_norm=0.5, weight_version=3)

    def generate(self, prompts, seed, sampling, greedy, side, max_new_tokens=None):
        self.seen = {"max_new_tokens": max_new_tokens, "sampling": sampling}
        return BATCH


class Dense(Backend):
    def logprobs(self, batch, rows, policy, grad):
        return np.array([[-0.5, -0.25]]), np.array([[0.1, 0.2]]), None


def call(be, method, params):
    return handle_message(be, json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))


def test_routing_replay_reaches_a_backend_that_takes_it():
    be = MoeLike()
    routing = [encode_tensor(np.array([[[3, 4], [-1, -1]]], dtype=np.int32))]
    a = call(be, "logprobs", {"batch": batch_to_json(BATCH), "rows": [0], "policy": "current", "routing": routing, "returnRouting": True})
    assert "result" in a, a
    assert np.array_equal(be.seen["routing"][0], np.array([[[3, 4], [-1, -1]]], dtype=np.int32))
    assert be.seen["return_routing"] is True
    assert "entropy" not in a["result"]
    assert np.array_equal(decode_tensor(a["result"]["routing"][0], "r"), np.array([[[0, 1], [1, 2]]]))
    assert a["result"]["routingFlipRate"] == [0.5]
    assert call(be, "logprobs", {"batch": batch_to_json(BATCH), "rows": [0], "policy": "current", "routing": "rollout"})["result"]
    assert be.seen["routing"] == "rollout"
    ref = call(be, "logprobs", {"batch": batch_to_json(BATCH), "rows": [0], "policy": "reference", "routing": "rollout"})
    assert ref["error"]["code"] == -32602 and ref["error"]["data"]["field"] == "routing"


def test_a_dense_backend_refuses_routing_naming_the_field():
    a = call(Dense(), "logprobs", {"batch": batch_to_json(BATCH), "rows": [0], "policy": "current", "routing": "rollout"})
    assert a["error"]["code"] == -32000 and a["error"]["data"]["field"] == "routing"
    ok = call(Dense(), "logprobs", {"batch": batch_to_json(BATCH), "rows": [0], "policy": "current"})
    assert set(ok["result"]) == {"logp", "entropy"}


def test_typed_step_result_and_max_new_tokens():
    be = MoeLike()
    assert call(be, "step", {"maxGradNorm": 1})["result"] == {"gradNorm": 0.5, "weightVersion": 3}
    call(be, "generate", {"prompts": [[1, 5, 3]], "seed": "s", "maxNewTokens": 2, "sampling": {"temperature": 0.7, "topK": 5, "topP": 1, "logprob": "raw"}})
    assert be.seen == {"max_new_tokens": 2, "sampling": {"temperature": 0.7, "topK": 5, "topP": 1.0, "logprob": "raw"}}
    bad = call(be, "generate", {"prompts": [[1]], "seed": "s", "maxNewTokens": 0})
    assert bad["error"]["data"]["field"] == "maxNewTokens"


def test_the_codec_lives_in_wire():
    assert wire.batch_from_json(wire.batch_to_json(BATCH), "batch").responses.tolist() == [[6, 2]]
    assert wire.RolloutBatch is RolloutBatch


def test_wire_dtypes_are_the_typescript_ones():
    # src/protocol/tensor.ts WIRE_DTYPES: every dtype the TypeScript side can send decodes here
    import pathlib
    import re
    ts = (pathlib.Path(__file__).resolve().parents[2] / "src" / "protocol" / "tensor.ts").read_text()
    block = ts[ts.index("WIRE_DTYPES = Object.freeze({"):]
    block = block[: block.index("}")]
    assert sorted(re.findall(r"^\s*([A-Z0-9]+):", block, re.M)) == sorted(wire.DTYPES)
    u32 = np.array([[0, 4294967295]], dtype=np.uint32)
    assert decode_tensor(encode_tensor(u32), "x").tolist() == [[0, 4294967295]]


# --- the SDK's own seams: wire.py's public names, declared logprobs keywords, LogprobsResult by field -----------


def test_server_imports_no_private_name_of_wire():
    import ast
    import pathlib

    import qrl_backend.server as server

    tree = ast.parse(pathlib.Path(server.__file__).read_text())
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "wire" for a in n.names]
    assert names and not [n for n in names if n.startswith("_")]


def test_declared_logprobs_keywords_win_over_the_signature():
    from qrl_backend import LOGPROBS_KEYWORDS

    class Declared(Backend):
        logprobs_keywords = frozenset({"prob_sq_sum"})

        def logprobs(self, batch, rows, policy, grad, **kwargs):  # would take anything: the declaration decides
            self.kwargs = kwargs
            return LogprobsResult(logp=np.array([[-0.5, -0.25]]), prob_sq_sum=np.array([[0.5, 0.5]]))

    be = Declared()
    ok = call(be, "logprobs", {"batch": batch_to_json(BATCH), "rows": [0], "policy": "current", "probSqSum": True})
    assert "result" in ok and be.kwargs == {"prob_sq_sum": True}
    e = call(be, "logprobs", {"batch": batch_to_json(BATCH), "rows": [0], "policy": "current", "returnRouting": True})["error"]
    assert e["data"]["field"] == "returnRouting" and "does not take return_routing" in e["message"]
    assert set(LOGPROBS_KEYWORDS) == {"routing", "return_routing", "prob_sq_sum", "topk"}

    class Unknown(Backend):
        logprobs_keywords = frozenset({"temperature"})

        def logprobs(self, batch, rows, policy, grad, temperature=1.0):
            return LogprobsResult(logp=np.array([[-0.5, -0.25]]))

    e = call(Unknown(), "logprobs", {"batch": batch_to_json(BATCH), "rows": [0], "policy": "current"})["error"]
    assert "logprobs_keywords: unknown keyword" in e["message"]


def test_generate_keywords_are_declared_and_a_legacy_signature_still_serves():
    import qrl_backend.server as server
    from qrl_backend import GENERATE_KEYWORDS
    from qrl_backend.numpy_ar.backend import NumpyArBackend

    gen = {"prompts": [[1, 5, 3]], "seed": "s", "maxNewTokens": 2}

    class Declared(Backend):
        generate_keywords = frozenset()

        def generate(self, prompts, seed, sampling, greedy, side, **kwargs):  # takes anything: the declaration decides
            return BATCH

    e = call(Declared(), "generate", gen)["error"]
    assert e["data"]["field"] == "maxNewTokens" and "does not take max_new_tokens" in e["message"]

    class Legacy(Backend):  # written before maxNewTokens: no declaration, no keyword in its signature
        def generate(self, prompts, seed, sampling, greedy, side):
            return BATCH

    assert "result" in call(Legacy(), "generate", {k: v for k, v in gen.items() if k != "maxNewTokens"})
    assert call(Legacy(), "generate", gen)["error"]["data"]["field"] == "maxNewTokens"
    assert set(GENERATE_KEYWORDS) == {"max_new_tokens", "topk_logprobs"}
    # The SDK's own backends declare theirs: the server reads no signature for them.
    import inspect

    seen = []
    real = inspect.signature
    try:
        inspect.signature = lambda fn, *a, **k: seen.append(fn) or real(fn, *a, **k)
        for cls in (NumpyArBackend,):
            server._keywords_by_class.pop((cls, "generate"), None)
            server._keywords_by_class.pop((cls, "logprobs"), None)
            be = cls.__new__(cls)
            assert server._declared_keywords(be, "generate", GENERATE_KEYWORDS) == {"max_new_tokens", "topk_logprobs"}
            assert server._declared_keywords(be, "logprobs", server.LOGPROBS_KEYWORDS) == {"prob_sq_sum", "topk"}
    finally:
        inspect.signature = real
    assert seen == []


def test_logprobs_result_is_read_by_field_and_converts_a_legacy_tuple():
    import pytest

    r = LogprobsResult(logp=np.zeros((1, 2)), entropy=None, handle="h")
    with pytest.raises(TypeError):
        iter(r)
    with pytest.raises(TypeError):
        r[0]
    assert LogprobsResult.of(r) is r
    t = LogprobsResult.of((np.ones((1, 2)), None, "h2"))
    assert t.handle == "h2" and t.entropy is None and t.routing is None and t.prob_sq_sum is None
