"""`python3 -m qrl_backend.numpy_ar [--weights F | --config JSON] [--plan fp32|bf16] [--stdio | --port N [--host H] [--token-file F] [--state-root D]]`."""

import sys

from ..server import serve
from .backend import build


def main() -> None:
    serve(build(sys.argv[1:]), sys.argv[1:])


if __name__ == "__main__":
    main()
