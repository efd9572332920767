"""The server runner: JSON-RPC framing, params validation naming the field, version negotiation,
stdio and HTTP transports, over the numpy backend."""

import io
import json
import threading
import urllib.error
import urllib.request

import numpy as np

from qrl_backend import handle_message, serve_http, serve_stdio
from qrl_backend.numpy_ar import ArConfig, NumpyArBackend, init_params
from qrl_backend.server import batch_to_json


def backend():
    cfg = ArConfig(vocabSize=9, maxLen=10, C=16, H=2, layers=1, hidden=24)
    return NumpyArBackend(cfg, init_params(cfg, 1), max_new_tokens=4)


def call(be, method, params=None, rid=1):
    msg = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    return handle_message(be, json.dumps(msg))


def test_errors_name_the_field():
    be = backend()
    assert call(be, "nope")["error"]["code"] == -32601
    assert handle_message(be, "{not json")["error"]["code"] == -32700
    assert handle_message(be, '{"id": 1, "method": "sync"}')["error"]["code"] == -32600
    e = call(be, "step", {"maxGradNorm": 0})["error"]
    assert e["code"] == -32602 and e["data"]["field"] == "maxGradNorm"
    e = call(be, "generate", {"prompts": [[1, 2], [1]], "seed": "s"})["error"]
    assert e["data"]["field"] == "prompts.1"
    e = call(be, "generate", {"prompts": [[1, 2]], "seed": "s", "extra": 1})["error"]
    assert e["data"]["field"] == "extra"
    e = call(be, "backward", {"handle": "zz", "gradLogp": {"dtype": "F64", "shape": [1], "data": "AAAAAAAAAAA="}})["error"]
    assert e["code"] == -32000 and e["data"]["field"] == "handle"
    e = call(be, "info", {"protocols": ["qrl-backend/7"]})["error"]
    assert e["code"] == -32000 and "no common protocol version" in e["message"]


def test_logprobs_checks_the_batch_shapes():
    be = backend()
    batch = batch_to_json(be.generate([[1, 5, 3]], "s", None, False, "rollout"))
    batch["mask"] = {"dtype": "F64", "shape": [1, 1], "data": "AAAAAAAA8D8="}
    e = call(be, "logprobs", {"batch": batch, "rows": [0], "policy": "current"})["error"]
    assert e["data"]["field"] == "batch.mask.shape"


def test_stdio_and_http_transports():
    be = backend()
    lines = [json.dumps({"jsonrpc": "2.0", "id": i, "method": m, "params": p}) for i, (m, p) in enumerate([("info", {"protocols": ["qrl-backend/1"]}), ("sync", {}), ("shutdown", {}), ("sync", {})])]
    out = io.StringIO()
    serve_stdio(be, io.StringIO("\n".join(lines) + "\n"), out)
    answers = [json.loads(x) for x in out.getvalue().splitlines()]
    assert len(answers) == 3  # nothing after shutdown
    assert answers[0]["result"]["protocol"] == "qrl-backend/1"
    assert answers[1]["result"] == {"weightVersion": 0}

    ports = []
    ready = threading.Event()
    t = threading.Thread(target=serve_http, args=(backend(), 0), kwargs={"ready": lambda p: (ports.append(p), ready.set())}, daemon=True)
    t.start()
    ready.wait(10)
    url = f"http://127.0.0.1:{ports[0]}/rpc"

    def post(method, params):
        req = urllib.request.Request(url, json.dumps({"jsonrpc": "2.0", "id": 9, "method": method, "params": params}).encode(), {"Content-Type": "application/json"})
        return json.loads(urllib.request.urlopen(req, timeout=10).read())

    g = post("generate", {"prompts": [[1, 5, 3], [1, 6, 3]], "seed": "a"})["result"]
    assert g["B"] == 2 and g["T"] == 4 and g["record"]["kind"] == "ar"
    assert post("shutdown", {})["result"] is None
    t.join(10)
    assert not t.is_alive()


def test_wire_round_trip_and_tensor_references(tmp_path):
    from qrl_backend.wire import ProtocolError, decode_tensor, encode_tensor, write_safetensors

    x = np.array([[-0.0, 1e-300], [np.pi, -2.5]])
    assert decode_tensor(encode_tensor(x), "x").tobytes() == x.tobytes()
    assert encode_tensor(np.array([-0.5]))["data"] == "AAAAAAAA4L8="  # the TypeScript codec's example
    f = str(tmp_path / "p.safetensors")
    write_safetensors(f, {"t": np.arange(6, dtype=np.int32).reshape(2, 3)})
    assert decode_tensor({"safetensors": f, "name": "t"}, "r", ("I32",), (2, 3)).tolist() == [[0, 1, 2], [3, 4, 5]]
    for bad, field in [({"safetensors": f, "name": "u"}, "r.name"), ({"dtype": "F64", "shape": [2], "data": "AAAA"}, "r.data"), ({"dtype": "Q8", "shape": [], "data": ""}, "r.dtype")]:
        try:
            decode_tensor(bad, "r")
        except ProtocolError as e:
            assert e.field == field
        else:
            raise AssertionError(f"accepted {bad}")


def test_logprobs_prob_sq_sum_on_the_wire_and_refused_by_a_backend_without_it():
    be = backend()
    batch = batch_to_json(be.generate([[1, 5, 3]] * 2, "s", None, False, "rollout"))
    r = call(be, "logprobs", {"batch": batch, "rows": [0, 1], "policy": "current", "probSqSum": True})["result"]
    assert r["probSqSum"]["dtype"] == "F64" and r["probSqSum"]["shape"] == r["logp"]["shape"]
    assert "probSqSum" not in call(be, "logprobs", {"batch": batch, "rows": [0, 1], "policy": "current"})["result"]
    e = call(be, "logprobs", {"batch": batch, "rows": [0], "policy": "current", "probSqSum": 1})["error"]
    assert e["data"]["field"] == "probSqSum"

    class Older(NumpyArBackend):
        def logprobs(self, batch, rows, policy, grad):  # written before probSqSum existed
            return super().logprobs(batch, rows, policy, grad)

    old = Older(be.cfg, be.params, max_new_tokens=4)
    e = call(old, "logprobs", {"batch": batch, "rows": [0], "policy": "current", "probSqSum": True})["error"]
    assert e["data"]["field"] == "probSqSum" and "does not take prob_sq_sum" in e["message"]


# --- the HTTP guards (docs/adapter.md, Security): loopback addresses only -----------------------

TOKEN = "tok-py-51d0"


def _serve(be, **kwargs):
    ports = []
    ready = threading.Event()
    t = threading.Thread(target=serve_http, args=(be, 0, "127.0.0.1"), kwargs=dict(kwargs, ready=lambda p: (ports.append(p), ready.set())), daemon=True)
    t.start()
    assert ready.wait(10)
    return t, f"http://127.0.0.1:{ports[0]}/rpc"


def _post(url, method, params, authorization=None):
    headers = {"Content-Type": "application/json"}
    if authorization is not None:
        headers["Authorization"] = authorization
    req = urllib.request.Request(url, json.dumps({"jsonrpc": "2.0", "id": 3, "method": method, "params": params}).encode(), headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_http_token_refuses_missing_and_wrong_tokens_and_runs_nothing(tmp_path, capfd):
    root = tmp_path / "root"
    root.mkdir()
    t, url = _serve(backend(), token=TOKEN, state_root=str(root))
    for authorization, problem in ((None, "missing token"), (f"Basic {TOKEN}", "missing token"), (f"Bearer {TOKEN}x", "wrong token")):
        status, body = _post(url, "save", {"dir": str(root / "ckpt")}, authorization)
        assert status == 401 and body["id"] is None
        assert body["error"]["code"] == -32001 and problem in body["error"]["message"]
        assert TOKEN not in json.dumps(body)
        assert not (root / "ckpt").exists()
        assert capfd.readouterr().err.strip().splitlines() == [f"refused request from 127.0.0.1: {problem}"]
    status, body = _post(url, "save", {"dir": str(root / "ckpt")}, f"Bearer {TOKEN}")
    assert status == 200 and body["result"] is None and (root / "ckpt" / "backend.json").exists()
    assert _post(url, "shutdown", {}, f"Bearer {TOKEN}")[1]["result"] is None
    t.join(10)
    assert not t.is_alive()


def test_http_state_root_refuses_escapes_with_the_dir_field(tmp_path):
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "link").symlink_to(outside)
    t, url = _serve(backend(), state_root=str(root))
    for method, d in (
        ("save", f"{root}/new/../../escaped"),  # .. out of the root
        ("save", str(outside / "abs")),  # an absolute path outside
        ("save", str(root / "link" / "through")),  # a symlink out
        ("save", f"{root}/link/../after-link"),  # .. applied to the symlink's target
        ("load", str(root / "link")),
    ):
        status, body = _post(url, method, {"dir": d})
        assert status == 200 and body["error"]["code"] == -32602, body
        assert body["error"]["data"]["field"] == "dir" and d in body["error"]["message"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outside", "root"]
    assert list(outside.iterdir()) == [] and sorted(p.name for p in root.iterdir()) == ["link"]
    assert _post(url, "save", {"dir": str(root / "new" / "deep")})[1]["result"] is None  # not yet made: allowed
    assert _post(url, "load", {"dir": f"{root}/new/../new/deep"})[1]["result"] is None
    _post(url, "shutdown", {})
    t.join(10)


def test_a_non_loopback_host_without_a_token_is_refused_before_binding():
    import os
    import subprocess
    import sys

    import pytest

    from qrl_backend.server import is_loopback_host

    assert all(map(is_loopback_host, ["127.0.0.1", "127.9.0.1", "::1", "localhost"]))
    assert not any(map(is_loopback_host, ["0.0.0.0", "::", "10.1.2.3", "example.org", ""]))
    with pytest.raises(ValueError, match="host 0.0.0.0 is not loopback: a token is required"):
        serve_http(backend(), 0, "0.0.0.0")
    env = {k: v for k, v in os.environ.items() if k != "QRL_BACKEND_TOKEN"}
    # the child finds the packages where this test found them (python/ of the checkout, or an install)
    python_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in [python_dir, env.get("PYTHONPATH", "")] if p)
    r = subprocess.run([sys.executable, "-m", "qrl_backend.numpy_ar", "--port", "0", "--host", "0.0.0.0"], env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == ["qrl_backend: --host 0.0.0.0: not loopback, so a token is required: pass --token-file FILE or set QRL_BACKEND_TOKEN"]
