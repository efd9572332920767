"""`python3 -m qrl_backend.numpy_ar [--weights F | --config JSON] [--plan fp32|bf16] [--stdio | --port N]`."""

import sys

from ..server import serve_http, serve_stdio
from .backend import build


def main() -> None:
    import argparse

    be = build(sys.argv[1:])
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--port", type=int)
    ap.add_argument("--host", default="127.0.0.1")
    a, _ = ap.parse_known_args(sys.argv[1:])
    if a.port is None:
        serve_stdio(be)
    else:
        serve_http(be, a.port, a.host, ready=lambda p: print(f"qrl-backend/1 listening on http://{a.host}:{p}", file=sys.stderr, flush=True))


if __name__ == "__main__":
    main()
