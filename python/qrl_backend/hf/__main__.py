"""`python -m qrl_backend.hf [--arch llama|qwen2|mistral … | --checkpoint DIR] --vocab-size V --plan P [--stdio | --port N]`:
serves a transformers causal LM over qrl-backend/1 (docs/adapter.md, "A transformers model behind qrl-sim")."""

import sys

from ..server import serve
from .cli import build

if __name__ == "__main__":
    try:
        backend = build(sys.argv[1:])
    except ValueError as e:  # a bad option or a refused model: one line, exit 2
        print(f"qrl_backend.hf: {e}", file=sys.stderr)
        sys.exit(2)
    serve(backend, sys.argv[1:])
