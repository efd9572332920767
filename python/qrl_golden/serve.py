"""Serve Python functions to ``qrl-sim check`` over newline-delimited JSON-RPC 2.0 on stdin/stdout.

    from qrl_golden import serve
    serve(estimate=my_estimate)   # my_estimate(params: dict) -> dict with at least "loss"

Methods: ``estimate`` (params = the JSON of ``qrl-sim estimate --input``, result = a subset of its
output), ``cast`` and ``quantize`` (see docs/golden.md). An exception becomes a JSON-RPC error.
Not the qrl-backend/1 SDK (that is python/qrl_backend).
"""

from __future__ import annotations

import json
import math
import sys
import traceback
from typing import Any, Callable, Dict, Optional, TextIO


def _error(id_: Any, code: int, message: str) -> Dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}


def _default(o: Any) -> Any:
    if hasattr(o, "tolist"):
        return _finite(o.tolist())
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _finite(o: Any) -> Any:
    """JSON has no NaN or ±Infinity: send them as the strings qrl-sim uses ("NaN", "Infinity", "-Infinity")."""
    if isinstance(o, float) and not math.isfinite(o):
        return "NaN" if math.isnan(o) else ("Infinity" if o > 0 else "-Infinity")
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    if hasattr(o, "tolist") and not isinstance(o, (str, bytes)):
        return _finite(o.tolist())
    return o


def serve(
    estimate: Optional[Callable[[dict], dict]] = None,
    cast: Optional[Callable[[dict], dict]] = None,
    quantize: Optional[Callable[[dict], dict]] = None,
    stdin: Optional[TextIO] = None,
    stdout: Optional[TextIO] = None,
) -> None:
    """Answers requests until stdin closes. numpy arrays in results are converted with ``tolist()``."""
    handlers = {k: v for k, v in {"estimate": estimate, "cast": cast, "quantize": quantize}.items() if v is not None}
    inp = stdin or sys.stdin
    out = stdout or sys.stdout
    for line in inp:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
        except json.JSONDecodeError as e:
            reply = _error(None, -32700, f"parse error: {e}")
        else:
            id_ = req.get("id") if isinstance(req, dict) else None
            method = req.get("method") if isinstance(req, dict) else None
            if method not in handlers:
                reply = _error(id_, -32601, f"method not found: {method!r} (serving: {', '.join(handlers)})")
            else:
                try:
                    reply = {"jsonrpc": "2.0", "id": id_, "result": _finite(handlers[method](req.get("params")))}
                except Exception as e:  # noqa: BLE001 - every failure is reported to the caller
                    reply = _error(id_, -32603, f"{type(e).__name__}: {e} | {traceback.format_exc(limit=3).splitlines()[-2].strip()}")
        if "id" in (req if isinstance(req, dict) else {}) or "error" in reply:
            try:
                text = json.dumps(reply, default=_default, allow_nan=False)
            except (TypeError, ValueError) as e:
                text = json.dumps(_error(reply.get("id"), -32603, f"result not JSON serialisable: {e}"))
            out.write(text + "\n")
            out.flush()
