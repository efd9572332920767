"""`python3 -m qrl_backend.torch_ar [--weights F | --config JSON] [--plan fp32|bf16|fp8-tensor-rollout] [--device D] [--stdio | --port N [--host H] [--token-file F] [--state-root D]]`;
without --weights and --config the model, plan and optimizer come from the run the driver sends."""

import sys

from ..deps import MissingDependency, require

if __name__ == "__main__":
    try:
        require(("torch",), "torch")
    except MissingDependency as e:  # one line, not an ImportError traceback
        print(f"qrl_backend.torch_ar: {e}", file=sys.stderr)
        sys.exit(1)
    from ..server import serve
    from .backend import build

    serve(build(sys.argv[1:]), sys.argv[1:])
