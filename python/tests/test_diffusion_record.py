"""The diffusion record in the SDK (qrl_backend.diffusion_record): the typed objects round-trip through
their JSON form and validate against `records.diffusion` of docs/qrl-backend-1.schema.json; the
decoder names the field of every bad value; the state at step k replays from the record alone; a
whole diffusion session through the SDK's server validates message by message against the schema."""

import json
import os

import numpy as np
import pytest

from qrl_backend import DiffusionEngineRecord, DiffusionSequence, diffusion_record
from qrl_backend.numpy_diffusion.backend import build
from qrl_backend.server import handle_message
from qrl_backend.wire import ProtocolError, batch_from_json, batch_to_json, encode_tensor

from schema_subset import errors

SCHEMA_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "qrl-backend-1.schema.json")
RUN = {"seed": 3, "policy": {"kind": "diffusion", "model": {"C": 16, "H": 2, "layers": 1, "hidden": 32},
                            "diffusion": {"generationLength": 8, "blockLength": 4, "steps": 4, "estimator": "elbo"}}}


@pytest.fixture(scope="module")
def schema():
    with open(SCHEMA_PATH) as f:
        return json.load(f)


def _record(**kw):
    seqs = [DiffusionSequence("s/row-0", [1, 5, 3], [6, 2, 0, 0], np.array([1, 0, 3, 2], dtype=np.int32)),
            DiffusionSequence("s/row-1", [1, 7, 3], [8, 9, 2, 0], np.array([0, 1, 2, 3], dtype=np.int32))]
    return DiffusionEngineRecord(seqs, kw.get("estimator", "trajectory"), "s", 0.7, kw.get("support"))


def test_round_trip_and_schema(schema):
    sup = np.zeros((2, 4, 13), dtype=np.uint8)
    sup[..., 5:] = 1
    rec = _record(support=sup)
    j = rec.to_json()
    assert errors(j, schema["records"]["diffusion"], schema["records"]["diffusion"]) == []
    back = DiffusionEngineRecord.from_json(json.loads(json.dumps(j)), vocab_size=13)
    assert back.estimator == "trajectory" and back.estimator_seed == "s" and back.temperature == 0.7
    assert [s.response for s in back.sequences] == [s.response for s in rec.sequences]
    assert np.array_equal(back.sequences[0].commit_step, rec.sequences[0].commit_step)
    assert np.array_equal(back.support, sup)
    assert back.to_json() == j


def test_the_schema_refuses_a_record_with_a_field_missing_or_wrong(schema):
    s = schema["records"]["diffusion"]
    j = _record().to_json()
    del j["estimatorSeed"]
    assert errors(j, s, s) == ["(root): missing required 'estimatorSeed'"]
    j = _record().to_json()
    j["estimator"] = "mean-field"
    assert errors(j, s, s) != []
    j = _record().to_json()
    j["sequences"][0]["commitStep"]["dtype"] = "F64"
    assert errors(j, s, s) != []


@pytest.mark.parametrize("edit,field", [
    (lambda j: j.pop("estimator"), "batch.record.estimator"),
    (lambda j: j.update(estimator="mean-field"), "batch.record.estimator"),
    (lambda j: j.update(temperature=0), "batch.record.temperature"),
    (lambda j: j.update(bogus=1), "batch.record.bogus"),
    (lambda j: j["sequences"][1].update(response=[1, 2], commitStep=None), "batch.record.sequences.1.response"),
    (lambda j: j["sequences"][0].update(commitStep=encode_tensor(np.array([0, 1], dtype=np.int32))), "batch.record.sequences.0.commitStep"),
    (lambda j: j["sequences"][0].update(commitStep=encode_tensor(np.array([0, 1, 2, 3.0]))), "batch.record.sequences.0.commitStep.dtype"),
    (lambda j: j["sequences"][0].pop("id"), "batch.record.sequences.0.id"),
    (lambda j: j.update(support=encode_tensor(np.ones(7, dtype=np.uint8))), "batch.record.support"),
])
def test_the_decoder_names_the_field(edit, field):
    j = _record().to_json()
    edit(j)
    with pytest.raises(ProtocolError) as e:
        DiffusionEngineRecord.from_json(j, vocab_size=13)
    assert e.value.field == field


def test_state_at_replays_the_canvas_from_the_record():
    rec = _record()
    assert rec.state_at(0, 0, 4).tolist() == [1, 5, 3, 4, 4, 4, 4]
    assert rec.state_at(0, 1, 4).tolist() == [1, 5, 3, 4, 2, 4, 4]
    assert rec.state_at(0, 3, 4).tolist() == [1, 5, 3, 6, 2, 4, 0]
    assert rec.state_at(1, 4, 4).tolist() == [1, 7, 3, 8, 9, 2, 0]


def test_a_batch_with_a_typed_record_crosses_the_codec():
    rec = _record()
    from qrl_backend.wire import RolloutBatch
    b = RolloutBatch(0, [[1, 5, 3], [1, 7, 3]], np.zeros((2, 4), np.int32), np.ones((2, 4)), np.zeros((2, 4)), rec)
    j = batch_to_json(b)
    back = batch_from_json(json.loads(json.dumps(j)), "batch")
    assert diffusion_record(back.record).to_json() == rec.to_json()


def test_every_message_of_a_diffusion_session_validates(schema, tmp_path):
    be = build([])
    next_id = [0]

    def call(method, params):
        s = schema["methods"][method]["params"]
        assert errors(params, s, s) == [], method
        next_id[0] += 1
        answer = handle_message(be, json.dumps({"jsonrpc": "2.0", "id": next_id[0], "method": method, "params": params}))
        assert "result" in answer, answer
        s = schema["methods"][method]["result"]
        assert errors(answer["result"], s, s) == [], method
        return answer["result"]

    setup = {"policy": "diffusion", "vocabulary": {"size": 13, "pad": 0, "bos": 1, "eos": 2, "sep": 3, "mask": 4},
             "promptLength": 4, "maxNewTokens": 8, "sampling": {"temperature": 1, "topK": 0, "topP": 1, "logprob": "processed"},
             "optim": {"lr": 0.01, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weightDecay": 0}}
    info = call("info", {"protocols": ["qrl-backend/1"], "run": RUN, "setup": setup})
    assert info["policy"] == "diffusion"
    call("sync", {})
    batch = call("generate", {"prompts": [[1, 5, 6, 3], [1, 7, 8, 3]], "seed": "3/step-1/rollout", "sampling": setup["sampling"], "maxNewTokens": 8})
    r = schema["records"]["diffusion"]
    assert errors(batch["record"], r, r) == []
    assert batch["record"]["estimator"] == "elbo" and batch["record"]["estimatorSeed"] == "3/step-1/rollout"
    assert [s["id"] for s in batch["record"]["sequences"]] == ["3/step-1/rollout/row-0", "3/step-1/rollout/row-1"]
    lp = call("logprobs", {"batch": batch, "rows": [1, 0], "policy": "current", "grad": True})
    call("backward", {"handle": lp["handle"], "gradLogp": encode_tensor(np.full(16, -0.1))})
    call("step", {"maxGradNorm": 1})
    call("setReference", {})
    call("save", {"dir": str(tmp_path / "ckpt")})
    call("load", {"dir": str(tmp_path / "ckpt")})
    call("shutdown", {})


def test_the_documented_diffusion_exchange_is_the_examples_output():
    from qrl_backend.numpy_diffusion.example import exchange
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "adapter.md")) as f:
        doc = f.read()
    block = doc.split("<!-- diffusion-example:start -->\n```text\n", 1)[1].split("\n```\n<!-- diffusion-example:end -->", 1)[0]
    assert block.split("\n") == exchange()
