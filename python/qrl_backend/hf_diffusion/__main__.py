"""`python -m qrl_backend.hf_diffusion [--arch llama|qwen2|mistral] [--model JSON] --plan hf-… [--device cpu|cuda] [--stdio | --port N ...]`."""

import sys

from ..deps import MissingDependency
from ..server import serve
from .cli import build

if __name__ == "__main__":
    try:
        backend = build(sys.argv[1:])
    except ValueError as e:  # a bad option: one line, exit 2
        print(f"qrl_backend.hf_diffusion: {e}", file=sys.stderr)
        sys.exit(2)
    except MissingDependency as e:  # torch or transformers absent: one line, exit 1
        print(f"qrl_backend.hf_diffusion: {e}", file=sys.stderr)
        sys.exit(1)
    serve(backend, sys.argv[1:])
