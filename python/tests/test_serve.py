"""qrl_golden.serve: JSON-RPC answers, non-finite numbers as strings, errors instead of crashes."""

import io
import json

import numpy as np

import qrl_golden


def run(lines, **handlers):
    out = io.StringIO()
    qrl_golden.serve(stdin=io.StringIO("".join(line + "\n" for line in lines)), stdout=out, **handlers)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_results_errors_and_non_finite_numbers():
    req = lambda i, m: json.dumps({"jsonrpc": "2.0", "id": i, "method": m, "params": {"x": 1}})  # noqa: E731
    answers = run(
        [req(1, "estimate"), req(2, "cast"), "garbage", req(3, "estimate")],
        estimate=lambda p: {"loss": float("nan"), "w": np.array([1.0, -np.inf])} if p["x"] else {},
    )
    assert answers[0] == {"jsonrpc": "2.0", "id": 1, "result": {"loss": "NaN", "w": [1.0, "-Infinity"]}}
    assert answers[1]["error"]["code"] == -32601 and "cast" in answers[1]["error"]["message"]
    assert answers[2]["error"]["code"] == -32700
    assert answers[3]["id"] == 3


def test_an_exception_becomes_an_error_answer():
    def boom(params):
        raise NotImplementedError("kl")

    (answer,) = run([json.dumps({"jsonrpc": "2.0", "id": 7, "method": "estimate", "params": {}})], estimate=boom)
    assert answer["id"] == 7 and "NotImplementedError: kl" in answer["error"]["message"]
