"""The SDK's messages against the contract as data (docs/qrl-backend-1.schema.json, generated from the
TypeScript zod schemas by `npx tsx scripts/protocol-schema.ts`): every request a driver sends and
every result the numpy backend answers, through the SDK's server, validates; the validator rejects a
result with a field missing (so it is not vacuous)."""

import json
import os

import numpy as np
import pytest

from qrl_backend.numpy_ar.backend import build
from qrl_backend.server import handle_message
from qrl_backend.wire import encode_tensor

from schema_subset import errors

SCHEMA_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "qrl-backend-1.schema.json")


@pytest.fixture(scope="module")
def schema():
    with open(SCHEMA_PATH) as f:
        return json.load(f)


def _check(schema, method, which, value):
    s = schema["methods"][method][which]
    problems = errors(value, s, s)
    assert problems == [], f"{method} {which}: {problems}"


def test_every_message_of_a_session_validates(schema, tmp_path):
    be = build(["--config", json.dumps({"vocabSize": 13, "maxLen": 12, "C": 16, "H": 2, "layers": 1, "hidden": 32})])
    next_id = [0]

    def call(method, params):
        _check(schema, method, "params", params)
        next_id[0] += 1
        answer = handle_message(be, json.dumps({"jsonrpc": "2.0", "id": next_id[0], "method": method, "params": params}))
        assert "result" in answer, answer
        _check(schema, method, "result", answer["result"])
        return answer["result"]

    call("info", {"protocols": ["qrl-backend/1"]})
    call("sync", {})
    prompts = [[1, 5, 6, 3], [1, 7, 8, 3]]
    batch = call("generate", {"prompts": prompts, "seed": "0/step/1/rollout", "sampling": {"temperature": 0.7, "topK": 5, "topP": 1, "logprob": "raw"}, "maxNewTokens": 6})
    lp = call("logprobs", {"batch": batch, "rows": [0, 1], "policy": "current", "grad": True})
    T = batch["T"]
    call("backward", {"handle": lp["handle"], "gradLogp": encode_tensor(np.full(2 * T, -0.1))})
    call("step", {"maxGradNorm": 1})
    call("setReference", {})
    call("save", {"dir": str(tmp_path / "ckpt")})
    call("load", {"dir": str(tmp_path / "ckpt")})
    call("shutdown", {})


def test_a_top_k_session_validates(schema):
    """capabilities.topkLogprobs: generate with topkLogprobs, logprobs with topk, backward with gradTopk —
    each params and result valid under the schema (the batch's topk, the result's topkLogp)."""
    be = build(["--config", json.dumps({"vocabSize": 13, "maxLen": 12, "C": 16, "H": 2, "layers": 1, "hidden": 32})])

    def call(method, params):
        _check(schema, method, "params", params)
        answer = handle_message(be, json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        assert "result" in answer, answer
        _check(schema, method, "result", answer["result"])
        return answer["result"]

    assert call("info", {"protocols": ["qrl-backend/1"]})["capabilities"]["topkLogprobs"] is True
    sampling = {"temperature": 0.7, "topK": 5, "topP": 1, "logprob": "processed"}
    batch = call("generate", {"prompts": [[1, 5, 6, 3], [1, 7, 8, 3]], "seed": "0/step/1/rollout", "sampling": sampling, "maxNewTokens": 6, "topkLogprobs": 6})
    assert batch["topk"]["K"] == 6
    lp = call("logprobs", {"batch": batch, "rows": [0, 1], "policy": "current", "grad": True, "topk": True})
    assert "topkLogp" in lp
    T = batch["T"]
    call("backward", {"handle": lp["handle"], "gradLogp": encode_tensor(np.full(2 * T, -0.1)), "gradTopk": encode_tensor(np.full(2 * T * 6, 0.01))})


def test_the_validator_rejects_a_result_with_a_field_missing(schema):
    s = schema["methods"]["step"]["result"]
    assert errors({"gradNorm": 1.0}, s, s) == ["(root): missing required 'weightVersion'"]
    s = schema["methods"]["generate"]["params"]
    assert any("maxNewTokens" in e for e in errors({"prompts": [[1]], "seed": "s", "maxNewTokens": 0}, s, s))
    assert any("bogus" in e for e in errors({"prompts": [[1]], "seed": "s", "bogus": 1}, s, s))
