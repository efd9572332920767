"""A numpy float32 → bfloat16 cast (round to nearest even by integer bit manipulation), served to
``qrl-sim check --suite casts`` with the format fixed to bf16 under the `ieee` profile.

    echo '{"format": "bf16", "profile": "ieee", "mode": "rne"}' > bf16.json
    qrl-sim check --impl 'python3 python/examples/numpy_cast.py' --suite casts --config bf16.json
    QRL_BUG=truncate ...   # planted bug: drop the low 16 bits (round toward zero)
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import qrl_golden  # noqa: E402

BUG = os.environ.get("QRL_BUG", "")


def bf16_codes(x: np.ndarray) -> np.ndarray:
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    if BUG == "truncate":
        codes = bits >> 16
    else:
        codes = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(x)
    codes = np.where(nan, (bits >> 16) & 0x8000 | 0x7FC0, codes)  # quiet NaN, sign kept
    return codes.astype(np.uint16)


def cast(params: dict) -> dict:
    if (params["format"], params["profile"], params.get("mode", "rne")) != ("bf16", "ieee", "rne"):
        raise NotImplementedError(f"only bf16/ieee/rne, got {params['format']}/{params['profile']}/{params.get('mode')}")
    x = np.array([float(s) for s in params["inputs"]], dtype=np.float32)
    return {"results": [{"code": int(c)} for c in bf16_codes(x)]}


if __name__ == "__main__":
    import argparse

    # --help answers and exits; without arguments it serves JSON-RPC on stdin/stdout for qrl-sim check
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("``", "'"), epilog="Serves `cast` over JSON-RPC on stdin/stdout (run by qrl-sim check --impl).").parse_args()
    qrl_golden.serve(cast=cast)
