"""`python3 -m qrl_backend.numpy_diffusion [--config JSON] [--plan fp32|bf16] [--stdio | --port N ...]`."""

import sys

from ..server import serve
from .backend import build


def main() -> None:
    serve(build(sys.argv[1:]), sys.argv[1:])


if __name__ == "__main__":
    main()
