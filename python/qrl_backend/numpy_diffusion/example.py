"""Prints the example exchange of docs/adapter.md §8 ("A diffusion exchange"): a driver's info (with its
run and setup), sync, generate, logprobs with grad, backward, step and shutdown against
numpy_diffusion, one `→ request` / `← answer` line each, as JSON on one line.
`python3 -m qrl_backend.numpy_diffusion.example`; python/tests/test_diffusion_record.py checks that
the document holds exactly this output."""

from __future__ import annotations

import base64
import json
from typing import List

import numpy as np

from ..server import handle_message
from .backend import build

RUN = {"seed": 0, "task": {"name": "reverse", "options": {}}, "plan": "bf16",
       "policy": {"kind": "diffusion", "model": {"C": 8, "H": 2, "layers": 1, "hidden": 16},
                  "diffusion": {"generationLength": 4, "blockLength": 4, "steps": 2, "estimator": "trajectory"}}}
SETUP = {"policy": "diffusion", "vocabulary": {"size": 13, "pad": 0, "bos": 1, "eos": 2, "sep": 3, "mask": 4},
         "plan": {"name": "bf16", "rollout": {"gemm": {"kind": "rounding", "operands": "bf16"}}, "trainer": {"gemm": {"kind": "rounding", "operands": "bf16"}}},
         "promptLength": 4, "maxNewTokens": 4, "sampling": {"temperature": 1, "topK": 0, "topP": 1, "logprob": "processed"},
         "optim": {"lr": 0.001, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weightDecay": 0}}


def exchange() -> List[str]:
    be = build([])
    lines: List[str] = []
    n = [0]

    def call(method, params):
        n[0] += 1
        req = {"jsonrpc": "2.0", "id": n[0], "method": method, "params": params}
        ans = handle_message(be, json.dumps(req))
        lines.append("→ " + json.dumps(req, separators=(",", ":"), ensure_ascii=False))
        lines.append("← " + json.dumps(ans, separators=(",", ":"), ensure_ascii=False))
        return ans["result"]

    call("info", {"protocols": ["qrl-backend/1"], "run": RUN, "setup": SETUP})
    call("sync", {})
    batch = call("generate", {"prompts": [[1, 7, 9, 3]], "seed": "0/step-1/rollout", "sampling": SETUP["sampling"], "maxNewTokens": 4})
    lp = call("logprobs", {"batch": batch, "rows": [0], "policy": "current", "grad": True})
    g = base64.b64encode(np.full(4, -0.25).astype("<f8").tobytes()).decode()
    call("backward", {"handle": lp["handle"], "gradLogp": {"dtype": "F64", "shape": [4], "data": g}})
    call("step", {"maxGradNorm": 1})
    call("shutdown", {})
    return lines


if __name__ == "__main__":
    print("\n".join(exchange()))
