"""`python3 -m qrl_backend.torch_ar [--weights F | --config JSON] [--plan fp32|bf16|fp8-tensor-rollout] [--device D] [--stdio | --port N [--host H] [--token-file F] [--state-root D]]`."""

import sys

from ..server import serve
from .backend import build

if __name__ == "__main__":
    serve(build(sys.argv[1:]), sys.argv[1:])
