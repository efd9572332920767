"""`python -m qrl_backend.hf [--arch llama|qwen2|mistral … | --checkpoint DIR] [--vocab-size V] --plan hf-… [--stdio | --port N [--host H] [--token-file F] [--state-root D]]`:
serves a transformers causal LM over qrl-backend/1 (docs/adapter.md, "A transformers model behind qrl-sim");
vocabulary, optimizer and sampler come from the run's setup unless a flag sets them.
`--timing FILE` writes, at shutdown, one [method, seconds in the SDK's message handling (params decoded,
call, result encoded), seconds in the backend method] per message, for the speed script (speed.py)."""

import json
import re
import sys
import time

from .. import server
from ..deps import MissingDependency
from .cli import build


def _install_timing(backend, path):
    """Logs every message as [method, seconds in handle_message, seconds in the backend method]."""
    log = []
    inner = [0.0]

    def timed_method(fn):
        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                inner[0] += time.perf_counter() - t

        return wrapper

    for name in ("info", "sync", "generate", "logprobs", "backward", "step", "set_reference", "warm_start", "save", "load"):
        setattr(backend, name, timed_method(getattr(backend, name)))
    handle = server.handle_message

    def timed_handle(be, line, debug=False):
        inner[0] = 0.0
        t = time.perf_counter()
        try:
            return handle(be, line, debug)
        finally:
            m = re.search(r'"method"\s*:\s*"([^"]+)"', line)
            log.append([m.group(1) if m else None, time.perf_counter() - t, inner[0]])

    server.handle_message = timed_handle
    close = backend.close

    def write_and_close():
        with open(path, "w") as f:
            json.dump({"messages": log}, f)
        close()

    backend.close = write_and_close


if __name__ == "__main__":
    try:
        backend = build(sys.argv[1:])
    except ValueError as e:  # a bad option or a refused model: one line, exit 2
        print(f"qrl_backend.hf: {e}", file=sys.stderr)
        sys.exit(2)
    except MissingDependency as e:  # torch or transformers absent: one line, exit 1
        print(f"qrl_backend.hf: {e}", file=sys.stderr)
        sys.exit(1)
    if backend.timing_path:
        _install_timing(backend, backend.timing_path)
    server.serve(backend, sys.argv[1:])
