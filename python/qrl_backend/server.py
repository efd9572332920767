"""The server runner of qrl-backend/1: validates each JSON-RPC request's params (errors name the
field), calls the Backend, encodes the result; over stdio (one JSON message per line) or HTTP (POST
one message to /rpc, guarded by a bearer token and a state root for save/load/dumpEngine: docs/adapter.md,
Security). Not a backend (backend.py) and not the codec (wire.py)."""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import sys
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Lock
from typing import Any, Callable, Dict, FrozenSet, NoReturn, Optional, Tuple

import numpy as np

from .backend import BACKWARD_KEYWORDS, GENERATE_KEYWORDS, LOGPROBS_KEYWORDS, TOPK_KEYWORDS, WARM_START_KEYWORDS, Backend, LogprobsResult, SftExamples, StepResult
from .wire import (
    FAILED_PRECONDITION,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    UNAUTHORIZED,
    ProtocolError,
    RpcError,
    decode_tensor,
    encode_tensor,
    RolloutBatch,
    batch_from_json,
    batch_to_json,
    check_params,
    int_field,
    number_field,
    prompts_field,
    record_from_json,
    record_to_json,
    string_field,
)


def _sampling(v: Any) -> Optional[Dict[str, Any]]:
    if v is None:
        return None
    s = check_params(v, {"temperature": True, "topK": True, "topP": True, "logprob": True})
    t = number_field(s["temperature"], "sampling.temperature")
    if t <= 0:
        raise ProtocolError("sampling.temperature", f"must be > 0, got {t}")
    p = number_field(s["topP"], "sampling.topP")
    if not 0 < p <= 1:
        raise ProtocolError("sampling.topP", f"must be in (0, 1], got {p}")
    if s["logprob"] not in ("processed", "raw"):
        raise ProtocolError("sampling.logprob", f"must be processed or raw, got {s['logprob']!r}")
    return {"temperature": t, "topK": int_field(s["topK"], "sampling.topK"), "topP": p, "logprob": s["logprob"]}


# --- the methods ------------------------------------------------------------------------------


def _refuse_keyword(method: str, keyword: str) -> NoReturn:
    field = {**GENERATE_KEYWORDS, **LOGPROBS_KEYWORDS, **BACKWARD_KEYWORDS, **WARM_START_KEYWORDS}.get(keyword, keyword)
    raise RpcError(FAILED_PRECONDITION, f"{method}.{field}: this backend's {method} does not take {keyword}", field)


_keywords_by_class: Dict[Tuple[type, str], FrozenSet[str]] = {}


def _declared_keywords(be: Backend, method: str, known_keywords: Dict[str, str]) -> FrozenSet[str]:
    """The optional keyword arguments `be.<method>` takes: the `<method>_keywords` declared by the class that
    defines the `<method>` in use (a subclass overriding it does not inherit its parent's declaration); for a
    class written before that declaration, the ones its signature names (all, with **kwargs). Once per class."""
    cls = type(be)
    known = _keywords_by_class.get((cls, method))
    if known is not None:
        return known
    owner = next(c for c in cls.__mro__ if method in c.__dict__)
    declared = owner.__dict__.get(f"{method}_keywords")
    if declared is not None:
        known = frozenset(declared)
        unknown = sorted(known - known_keywords.keys())
        if unknown:
            raise TypeError(f"{owner.__name__}.{method}_keywords: unknown keyword(s) {unknown} (known: {sorted(known_keywords)})")
    else:
        import inspect

        params = inspect.signature(getattr(be, method)).parameters
        takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        known = frozenset(k for k in known_keywords if takes_all or k in params)
    _keywords_by_class[(cls, method)] = known
    return known


def _taken(be: Backend, method: str, known_keywords: Dict[str, str], extra: Dict[str, Any], wire: Optional[str] = None) -> Dict[str, Any]:
    """`extra` when `be.<method>` takes each of its keywords; a request using one it does not take is refused,
    naming the field (under the wire method name `wire`, default `method`). A backend written before a field
    existed keeps working as long as requests do not use it. The top-k fields are refused, before any call, to a
    backend whose info does not declare capabilities.topkLogprobs (as the TypeScript client refuses them)."""
    owner = getattr(be, "keywords_owner", None)
    target = owner() if callable(owner) else be
    takes = _declared_keywords(target, method, known_keywords)
    for k in extra:
        if k in TOPK_KEYWORDS and (be.info().get("capabilities") or {}).get("topkLogprobs") is not True:
            field = {**GENERATE_KEYWORDS, **LOGPROBS_KEYWORDS, **BACKWARD_KEYWORDS}[k]
            raise RpcError(FAILED_PRECONDITION, f"{wire or method}.{field}: needs capabilities.topkLogprobs, which this backend does not declare", field)
        if k not in takes:
            _refuse_keyword(wire or method, k)
    return extra


def _info(be: Backend, params: Any) -> Any:
    """`run` (revision 2) and `setup` (revision 3) are taken: this SDK serves the newest params, and a
    driver offers them to every backend, falling back for one that refuses them (docs/adapter.md §12).
    A field added later arrives only when the backend declares it in its capabilities."""
    p = check_params(params, {"protocols": True, "run": False, "setup": False})
    if not isinstance(p["protocols"], list) or not p["protocols"]:
        raise ProtocolError("protocols", "expected a non-empty list of version strings")
    if be.protocol not in p["protocols"]:
        raise RpcError(FAILED_PRECONDITION, f"no common protocol version: the client speaks {', '.join(map(str, p['protocols']))}, this backend {be.protocol}", "protocols")
    for k in ("run", "setup"):
        if k in p and p[k] is not None and not isinstance(p[k], dict):
            raise ProtocolError(k, "expected an object")
    if p.get("run") is not None or p.get("setup") is not None:
        be.configure(p.get("run"), p.get("setup"))
    return dict(be.info(), protocol=be.protocol)


def _sync(be: Backend, params: Any) -> Any:
    check_params(params, {})
    return {"weightVersion": int(be.sync())}


def _generate(be: Backend, params: Any) -> Any:
    p = check_params(params, {"prompts": True, "seed": True, "sampling": False, "maxNewTokens": False, "greedy": False, "side": False, "topkLogprobs": False})
    prompts = prompts_field(p["prompts"], "prompts")
    if not prompts:
        raise ProtocolError("prompts", "must hold at least one prompt")
    greedy = p.get("greedy", False)
    if not isinstance(greedy, bool):
        raise ProtocolError("greedy", f"expected a boolean, got {greedy!r}")
    side = p.get("side", "rollout")
    if side not in ("rollout", "trainer"):
        raise ProtocolError("side", f"must be rollout or trainer, got {side!r}")
    extra = {}
    if "maxNewTokens" in p:
        extra["max_new_tokens"] = int_field(p["maxNewTokens"], "maxNewTokens", 1)
    K = int_field(p["topkLogprobs"], "topkLogprobs", 1) if "topkLogprobs" in p else 0
    if K:
        extra["topk_logprobs"] = K
    batch = be.generate(prompts, string_field(p["seed"], "seed"), _sampling(p.get("sampling")), greedy, side, **_taken(be, "generate", GENERATE_KEYWORDS, extra))
    if K and not greedy and (batch.topk is None or batch.topk.K != K):
        raise RpcError(FAILED_PRECONDITION, f"generate.topkLogprobs: asked for K = {K}, but this backend's generate returned {'no topk' if batch.topk is None else f'K = {batch.topk.K}'}", "topkLogprobs")
    return batch_to_json(batch)


def _logprobs(be: Backend, params: Any) -> Any:
    p = check_params(params, {"batch": True, "rows": True, "policy": True, "grad": False, "routing": False, "returnRouting": False, "probSqSum": False, "topk": False})
    batch = batch_from_json(p["batch"], "batch")
    if not isinstance(p["rows"], list) or not p["rows"]:
        raise ProtocolError("rows", "expected a non-empty list of row indices")
    rows = [int_field(r, f"rows.{i}") for i, r in enumerate(p["rows"])]
    for i, r in enumerate(rows):
        if r >= batch.B:
            raise ProtocolError(f"rows.{i}", f"{r} is outside the batch (B={batch.B})")
    if p["policy"] not in ("current", "reference"):
        raise ProtocolError("policy", f"must be current or reference, got {p['policy']!r}")
    grad = p.get("grad", False)
    if not isinstance(grad, bool):
        raise ProtocolError("grad", f"expected a boolean, got {grad!r}")
    if grad and p["policy"] != "current":
        raise ProtocolError("grad", "only the current policy has gradients")
    extra: Dict[str, Any] = {}
    if "routing" in p:
        r = p["routing"]
        if p["policy"] != "current":
            raise ProtocolError("routing", "only the current policy replays a routing (the reference routes by its own top-k)")
        if r == "rollout":
            extra["routing"] = "rollout"
        elif isinstance(r, list) and r:
            extra["routing"] = [decode_tensor(t, f"routing.{i}", ("I32",)) for i, t in enumerate(r)]
        else:
            raise ProtocolError("routing", f"expected 'rollout' or a non-empty list of I32 tensors, got {r!r}"[:200])
    if "returnRouting" in p:
        if not isinstance(p["returnRouting"], bool):
            raise ProtocolError("returnRouting", f"expected a boolean, got {p['returnRouting']!r}")
        if p["returnRouting"]:
            extra["return_routing"] = True
    if "probSqSum" in p:
        if not isinstance(p["probSqSum"], bool):
            raise ProtocolError("probSqSum", f"expected a boolean, got {p['probSqSum']!r}")
        if p["probSqSum"]:
            extra["prob_sq_sum"] = True
    if "topk" in p:
        if not isinstance(p["topk"], bool):
            raise ProtocolError("topk", f"expected a boolean, got {p['topk']!r}")
        if p["topk"]:
            extra["topk"] = True
    taken = _taken(be, "logprobs", LOGPROBS_KEYWORDS, extra)
    if extra.get("topk") and batch.topk is None:
        raise ProtocolError("topk", "needs a batch generated with topkLogprobs (batch.topk is absent)")
    res = LogprobsResult.of(be.logprobs(batch, rows, p["policy"], grad, **taken))
    answer: Dict[str, Any] = {"logp": encode_tensor(np.asarray(res.logp, dtype=np.float64))}
    if res.entropy is not None:
        answer["entropy"] = encode_tensor(np.asarray(res.entropy, dtype=np.float64))
    if res.handle is not None:
        answer["handle"] = res.handle
    if res.routing is not None:
        answer["routing"] = [encode_tensor(np.asarray(x, dtype=np.int32)) for x in res.routing]
    if res.routing_flip_rate is not None:
        answer["routingFlipRate"] = [float(x) for x in res.routing_flip_rate]
    if res.prob_sq_sum is not None:
        answer["probSqSum"] = encode_tensor(np.asarray(res.prob_sq_sum, dtype=np.float64))
    elif extra.get("prob_sq_sum"):
        raise RpcError(FAILED_PRECONDITION, "logprobs.probSqSum: asked for, but this backend's logprobs returned no prob_sq_sum", "probSqSum")
    if extra.get("topk"):
        shape = (len(rows), batch.T, batch.topk.K)
        if res.topk_logp is None or np.shape(res.topk_logp) != shape:
            raise RpcError(FAILED_PRECONDITION, f"logprobs.topk: asked for, but this backend's logprobs returned {'no topk_logp' if res.topk_logp is None else f'topk_logp of shape {np.shape(res.topk_logp)}'} (expected {shape})", "topk")
        answer["topkLogp"] = encode_tensor(np.asarray(res.topk_logp, dtype=np.float64))
    return answer


def _backward(be: Backend, params: Any) -> Any:
    p = check_params(params, {"handle": True, "gradLogp": True, "gradTopk": False})
    g = decode_tensor(p["gradLogp"], "gradLogp", ("F64",))
    extra = {"grad_topk": decode_tensor(p["gradTopk"], "gradTopk", ("F64",)).reshape(-1)} if "gradTopk" in p else {}
    be.backward(string_field(p["handle"], "handle"), g.reshape(-1), **_taken(be, "backward", BACKWARD_KEYWORDS, extra))
    return None


def _step(be: Backend, params: Any) -> Any:
    p = check_params(params, {"maxGradNorm": True})
    m = number_field(p["maxGradNorm"], "maxGradNorm")
    if m <= 0:
        raise ProtocolError("maxGradNorm", f"must be > 0, got {m}")
    r = be.step(m)
    if isinstance(r, StepResult):
        return {"gradNorm": float(r.grad_norm), "weightVersion": int(r.weight_version)}
    return {"gradNorm": float(r["gradNorm"]), "weightVersion": int(r["weightVersion"])}


def _set_reference(be: Backend, params: Any) -> Any:
    check_params(params, {})
    be.set_reference()
    return None


def _sft_examples(value: Any, steps: int, batch_size: int) -> SftExamples:
    """`warmStart.examples`: three I32 tensors, steps · batchSize rows, lengths in [1, L]."""
    e = check_params(value, {"prompts": True, "responses": True, "lengths": True})
    prompts = decode_tensor(e["prompts"], "examples.prompts", ("I32",))
    responses = decode_tensor(e["responses"], "examples.responses", ("I32",))
    n = steps * batch_size
    if prompts.ndim != 2 or prompts.shape[0] != n:
        raise ProtocolError("examples.prompts", f"expected shape (steps·batchSize = {n}, P), got {list(prompts.shape)}")
    if responses.ndim != 2 or responses.shape[0] != n:
        raise ProtocolError("examples.responses", f"expected shape ({n}, L), got {list(responses.shape)}")
    lengths = decode_tensor(e["lengths"], "examples.lengths", ("I32",), (n,))
    if n and (lengths.min() < 1 or lengths.max() > responses.shape[1]):
        raise ProtocolError("examples.lengths", f"every length must be in [1, {responses.shape[1]}]")
    for name, a in (("prompts", prompts), ("responses", responses)):
        if a.size and a.min() < 0:
            raise ProtocolError(f"examples.{name}", "token ids must be ≥ 0")
    return SftExamples(prompts, responses, lengths)


def _warm_start(be: Backend, params: Any) -> Any:
    """`examples` (capabilities.sftExamples) is passed as the keyword `examples` only when sent, and refused
    naming the field when the backend's warm_start does not take it."""
    p = check_params(params, {"task": True, "steps": True, "batchSize": True, "lr": True, "seed": True, "examples": False})
    t = check_params(p["task"], {"name": True, "options": True})
    steps, batch_size = int_field(p["steps"], "steps"), int_field(p["batchSize"], "batchSize", 1)
    extra = {}
    if "examples" in p:
        _taken(be, "warm_start", WARM_START_KEYWORDS, {"examples": None}, wire="warmStart")
        extra["examples"] = _sft_examples(p["examples"], steps, batch_size)
    out = be.warm_start(t, steps, batch_size, number_field(p["lr"], "lr"), int_field(p["seed"], "seed", -(2**53)), **extra)
    return {k: float(v) for k, v in out.items()}


def _dir(params: Any) -> str:
    return string_field(check_params(params, {"dir": True})["dir"], "dir")


METHODS: Dict[str, Callable[[Backend, Any], Any]] = {
    "info": _info,
    "sync": _sync,
    "generate": _generate,
    "logprobs": _logprobs,
    "backward": _backward,
    "step": _step,
    "setReference": _set_reference,
    "warmStart": _warm_start,
    "save": lambda be, p: be.save(_dir(p)),
    "load": lambda be, p: be.load(_dir(p)),
    "dumpEngine": lambda be, p: be.dump_engine(_dir(p)),
    "shutdown": lambda be, p: (check_params(p, {}), None)[1],
}


# --- the HTTP guards: token and state root ---------------------------------------------------

TOKEN_ENV = "QRL_BACKEND_TOKEN"


def is_loopback_host(host: str) -> bool:
    """Whether binding to `host` keeps the server on this machine: localhost, 127.0.0.0/8 or ::1."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name, or "" (every interface)
        return False


def token_problem(authorization: Optional[str], token: str) -> Optional[str]:
    """Why an Authorization header does not carry `token` ("missing token", "wrong token"), or None.
    Compared with hmac.compare_digest (constant time)."""
    scheme, _, given = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        return "missing token"
    return None if hmac.compare_digest(given.strip().encode("utf8"), token.encode("utf8")) else "wrong token"


def refuse_outside_root(root: str, method: str, params: Any) -> None:
    """Refuses a save/load/dumpEngine `dir` that is not `root` (a real path) or below it once its symlinks are
    followed and `..` applied where they stand (os.path.realpath; parts not made yet are kept):
    ProtocolError naming `dir` and the path (answered -32602)."""
    d = _dir(params)
    real = os.path.realpath(d if os.path.isabs(d) else os.path.join(os.getcwd(), d))
    if os.path.commonpath([root, real]) != root:
        where = "outside" if real == d else f"{real}, outside"
        raise ProtocolError("dir", f"{method}: dir {d!r} is {where} the state root {root} (--state-root)")


def handle_message(be: Backend, line: str, debug: bool = False, state_root: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """The JSON-RPC answer to one request (None for a notification). With `state_root` (the HTTP
    server's), save, load and dumpEngine are refused for a dir outside it."""
    try:
        m = json.loads(line)
    except ValueError:
        return {"jsonrpc": "2.0", "id": None, "error": {"code": PARSE_ERROR, "message": "parse error: the message is not JSON"}}
    if not isinstance(m, dict) or m.get("jsonrpc") != "2.0" or not isinstance(m.get("method"), str) or not (("id" not in m) or isinstance(m["id"], (int, str))):
        rid = m.get("id") if isinstance(m, dict) and isinstance(m.get("id"), (int, str)) else None
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": INVALID_REQUEST, "message": 'invalid request: expected {"jsonrpc":"2.0","id","method","params"}'}}
    rid = m.get("id")
    method = m["method"]
    fn = METHODS.get(method)
    try:
        if fn is None:
            raise RpcError(METHOD_NOT_FOUND, f"method not found: {method}")
        if state_root is not None and method in ("save", "load", "dumpEngine"):
            refuse_outside_root(state_root, method, m.get("params"))
        result = fn(be, m.get("params"))
    except RpcError as e:
        if rid is None:
            return None
        return {"jsonrpc": "2.0", "id": rid, "error": e.to_json()}
    except Exception as e:  # a backend bug: answered, never a dead server
        if debug:
            traceback.print_exc(file=sys.stderr)
        if rid is None:
            return None
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": INTERNAL_ERROR, "message": f"{method}: {type(e).__name__}: {e}"}}
    if rid is None:
        return None
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def watch_driver() -> None:
    """Ends this backend's whole process group when the driver that spawned it goes, even in the
    middle of a long call (a driver killed with SIGKILL runs no clean-up of its own).

    The driver passes its pid as ``QRL_DRIVER_PID`` to every backend it spawns, in a process group of
    the backend's own (the shell, this process and its children). A daemon thread checks twice a
    second that the driver is alive; once it is gone, it sends SIGTERM to our process group and
    exits 143. Without the variable (a backend started by hand, HTTP) it does nothing."""
    import os
    import signal
    import threading
    import time

    try:
        driver = int(os.environ.get("QRL_DRIVER_PID", ""))
    except ValueError:
        return
    if driver <= 1 or not hasattr(os, "killpg"):
        return

    def alive() -> bool:
        try:
            os.kill(driver, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # a process of another user holds the pid: not ours to judge
        return True

    def watch() -> None:
        while alive():
            time.sleep(0.5)
        try:
            os.killpg(os.getpgrp(), signal.SIGTERM)
        finally:
            os._exit(143)

    threading.Thread(target=watch, name="qrl-driver-watch", daemon=True).start()


def serve_stdio(be: Backend, stdin=None, stdout=None) -> None:
    """Answers one request per line of stdin on stdout until end of input or `shutdown`; the
    process (and its group) ends when the driver that spawned it goes (``watch_driver``)."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    if stdin is sys.stdin:
        watch_driver()
    try:
        for line in stdin:
            if not line.strip():
                continue
            answer = handle_message(be, line, debug=True)
            if answer is not None:
                stdout.write(json.dumps(answer, separators=(",", ":")) + "\n")
                stdout.flush()
            if _is_shutdown(line):
                break
    finally:
        be.close()


def _is_shutdown(line: str) -> bool:
    try:
        m = json.loads(line)
    except ValueError:
        return False
    return isinstance(m, dict) and m.get("method") == "shutdown"


def serve_http(
    be: Backend,
    port: int,
    host: str = "127.0.0.1",
    ready: Optional[Callable[[int], None]] = None,
    token: Optional[str] = None,
    state_root: Optional[str] = None,
) -> None:
    """Serves POST /rpc (one JSON-RPC message per request) until `shutdown`. Requests run one at a time.
    With `token`, a request without `Authorization: Bearer <token>` gets 401 and runs nothing; a host
    other than loopback needs one (ValueError before binding). save/load/dumpEngine are confined to `state_root`
    (default: the working directory)."""
    if token is None and not is_loopback_host(host):
        raise ValueError(f"host {host} is not loopback: a token is required")
    root = os.path.realpath(state_root if state_root is not None else os.getcwd())
    lock = Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _send_json(self, status: int, answer: Dict[str, Any], headers: Dict[str, str]) -> None:
            data = json.dumps(answer, separators=(",", ":")).encode("utf8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            if self.path != "/rpc":
                self.send_error(404, "qrl-backend/1: POST one JSON-RPC message to /rpc")
                return
            body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode("utf8")
            problem = None if token is None else token_problem(self.headers.get("Authorization"), token)
            if problem is not None:
                # Refused before the body is parsed: nothing of it runs (id null: it was not read).
                print(f"refused request from {self.client_address[0]}: {problem}", file=sys.stderr, flush=True)
                error = {"code": UNAUTHORIZED, "message": f"unauthorized: {problem} (send Authorization: Bearer <the server's token>)"}
                self._send_json(401, {"jsonrpc": "2.0", "id": None, "error": error}, {"WWW-Authenticate": "Bearer"})
                return
            with lock:
                answer = handle_message(be, body, debug=True, state_root=root)
            if answer is None:
                self.send_response(204)
                self.end_headers()
            else:
                self._send_json(200, answer, {})
            if _is_shutdown(body):
                import threading

                threading.Thread(target=server.shutdown, daemon=True).start()

    server = ThreadingHTTPServer((host, port), Handler)
    if ready is not None:
        ready(server.server_address[1])
    try:
        server.serve_forever()
    finally:
        server.server_close()
        be.close()


def add_server_arguments(ap: Any) -> None:
    """The transport flags every backend's command line takes (argparse), the same as `qrl-sim serve`'s."""
    ap.add_argument("--stdio", action="store_true", help="serve over stdin/stdout (the default)")
    ap.add_argument("--port", type=int, help="serve HTTP POST /rpc on this port instead (0 picks one)")
    ap.add_argument("--host", help="HTTP address (default 127.0.0.1); any but loopback (127.0.0.0/8, ::1, localhost) needs a token")
    ap.add_argument("--token-file", help=f"HTTP: the shared token every request must carry as Authorization: Bearer (default: ${TOKEN_ENV}; enforced whenever set)")
    ap.add_argument("--state-root", help="HTTP: save and load only below this directory, symlinks followed (default: the working directory)")


def _refuse(message: str) -> NoReturn:
    """One line on stderr and exit 2: the CLI's rule for bad input."""
    print(f"qrl_backend: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def serve(be: Backend, argv: Optional[list] = None) -> None:
    """Command-line runner: `--stdio` (default) or `--port N [--host H] [--token-file F] [--state-root D]`
    (prints the bound port on stderr). The token comes from --token-file or QRL_BACKEND_TOKEN; a host
    other than loopback without one is refused with exit 2 before binding."""
    import argparse

    ap = argparse.ArgumentParser(add_help=False)
    add_server_arguments(ap)
    a, _ = ap.parse_known_args(argv)
    if a.port is None:
        for flag, v in (("--host", a.host), ("--token-file", a.token_file), ("--state-root", a.state_root)):
            if v is not None:
                _refuse(f"{flag}: not used without --port (it guards the HTTP server)")
        serve_stdio(be)
        return
    host = a.host or "127.0.0.1"
    if a.token_file is not None:
        try:
            with open(a.token_file, encoding="utf8") as f:
                token: Optional[str] = f.read().strip()
        except OSError as e:
            _refuse(f"--token-file: cannot read {a.token_file!r} ({e.strerror})")
        if not token:
            _refuse(f"--token-file: {a.token_file!r} is empty")
    else:
        token = os.environ.get(TOKEN_ENV, "").strip() or None
    if token is None and not is_loopback_host(host):
        _refuse(f"--host {host}: not loopback, so a token is required: pass --token-file FILE or set {TOKEN_ENV}")
    root = os.path.realpath(a.state_root or ".")
    if not os.path.isdir(root):
        _refuse(f"--state-root: {root!r} is not a directory")
    state = f"state root {root}; {'token required' if token else 'no token'}"
    serve_http(be, a.port, host, token=token, state_root=root, ready=lambda p: print(f"qrl-backend/1 listening on http://{host}:{p} ({state})", file=sys.stderr, flush=True))
