"""The recorded stdio exchange of a short real run (test/fixtures/exchange/run.jsonl, the TypeScript
driver against `qrl-sim serve --stdio`) replayed through the Python SDK: every request and result
validates against docs/qrl-backend-1.schema.json, every batch (generate's result, logprobs' params)
decodes with the SDK's codec and re-encodes to the same JSON, and every request's params pass the
SDK server's own checks up to the backend call."""

import json
import os

import pytest

from qrl_backend import Backend
from qrl_backend.server import handle_message
from qrl_backend.wire import RpcError, batch_from_json, batch_to_json

from schema_subset import errors

HERE = os.path.dirname(__file__)
FIXTURE = os.path.join(HERE, "..", "..", "test", "fixtures", "exchange", "run.jsonl")
SCHEMA = os.path.join(HERE, "..", "..", "docs", "qrl-backend-1.schema.json")


class Refuses(Backend):
    """Reaching a backend method means the params passed the server's checks."""

    def configure(self, run, setup):
        pass

    def __getattribute__(self, name):
        if name in ("info", "sync", "generate", "logprobs", "backward", "step", "set_reference", "warm_start", "save", "load"):
            def reached(*args, **kwargs):
                raise RpcError(-32099, f"reached {name}")
            return reached
        return object.__getattribute__(self, name)


@pytest.fixture(scope="module")
def exchange():
    with open(FIXTURE) as f:
        messages = [json.loads(line) for line in f]
    pairs = list(zip(messages[0::2], messages[1::2]))
    assert len(pairs) >= 10 and all(a["from"] == "driver" and b["from"] == "backend" for a, b in pairs)
    return [(a["message"], b["message"]) for a, b in pairs]


def test_every_message_validates_against_the_schema(exchange):
    with open(SCHEMA) as f:
        schema = json.load(f)
    for request, response in exchange:
        m = schema["methods"][request["method"]]
        assert errors(request["params"], m["params"], m["params"]) == [], request["method"]
        assert errors(response["result"], m["result"], m["result"]) == [], request["method"]


def test_batches_round_trip_through_the_python_codec(exchange):
    seen = 0
    for request, response in exchange:
        if request["method"] == "generate":
            batch = response["result"]
        elif request["method"] == "logprobs":
            batch = request["params"]["batch"]
        else:
            continue
        assert batch_to_json(batch_from_json(batch, "batch")) == batch
        seen += 1
    assert seen >= 6


def test_every_request_passes_the_server_checks(exchange):
    be = Refuses()
    for request, _ in exchange:
        if request["method"] == "shutdown":
            continue
        answer = handle_message(be, json.dumps(request))
        assert answer["error"]["code"] == -32099, (request["method"], answer)
