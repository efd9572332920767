"""`python -m qrl_backend.hf.figures mismatch|curve`: the figures of docs/adapter.md §11, written by the
commands that measure them.

- `mismatch [--inits N] [--markdown FILE]`: per plan, the k3 and mean |δ| of the rollout engine's ℓroll
  against the trainer's ℓ on the same sampled sequences (teacher-forced through the engine's KV-cache
  decode), for N random initialisations of the default Llama (d_model 64, 2 layers).
- `curve RUN_DIR… [--block K] [--markdown FILE]`: `reward/mean` of runs' metrics.jsonl, averaged over
  blocks of K steps.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
from typing import List, Optional

import numpy as np

PROMPTS = [[0, 1, 5, 6, 7, 3]] * 8 + [[1, 8, 9, 10, 11, 3]] * 8 + [[0, 0, 1, 12, 6, 3]] * 8
CELLS = [("hf-bf16", "hf-bf16", 16), ("hf-fp8-w8a8-rollout", "hf-fp8-w8a8-rollout", 16), ("hf-fp8-rollout, B = 16", "hf-fp8-rollout", 16),
         ("hf-fp8-rollout, B = 128", "hf-fp8-rollout", 128), ("hf-fp8-kv, B = 16", "hf-fp8-kv", 16)]


def _write(text: str, path: Optional[str], command: str) -> None:
    print(text)
    if path:
        with open(path, "w") as f:
            f.write(f"<!-- written by {command}; do not edit by hand -->\n{text}")


def mismatch(inits: int, path: Optional[str]) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from .backend import HfBackend
    from .cli import model_config
    from .numerics import ATTENTION_NAME, register_attention

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    register_attention()
    k3 = {c[0]: [] for c in CELLS}
    dmean = {c[0]: [] for c in CELLS}
    for init in range(inits):
        torch.manual_seed(init)
        model = AutoModelForCausalLM.from_config(model_config("llama", 13, {}), attn_implementation=ATTENTION_NAME)
        ref = HfBackend(copy.deepcopy(model), "hf-bf16", max_new_tokens=7)
        batch = ref.generate(PROMPTS, f"figures/{init}", None, False, "rollout")
        lp = ref.logprobs(batch, list(range(batch.B)), "current", False).logp
        on = batch.mask > 0
        for label, plan, block in CELLS:
            be = HfBackend(copy.deepcopy(model), plan, block=block, max_new_tokens=7)
            d = (lp - be.engine_logprobs(batch))[on]
            k3[label].append(float(np.mean(np.exp(d) - 1 - d)))
            dmean[label].append(float(np.abs(d).mean()))
    span = lambda v: "0 exactly" if max(v) == 0 else f"{min(v):.2e} – {max(v):.2e}"
    rows = "".join(f"| `{label.split(',')[0]}`{label[len(label.split(',')[0]):]} | {span(k3[label])} | {span(dmean[label])} |\n" for label, _, _ in CELLS)
    text = (f"| plan | k3 | mean \\|δ\\| |\n|---|---|---|\n{rows}\n"
            f"Range over {inits} initialisations (seeds 0…{inits - 1}) of the default Llama (d_model 64, 4 heads, 2 KV heads, 2 layers, MLP 128, "
            f"vocabulary 13), 24 sequences × up to 7 tokens each, sampled by the bf16 engine and scored by every plan's engine on the same tokens.\n")
    _write(text, path, f"python -m qrl_backend.hf.figures mismatch --inits {inits}")


def curve(runs: List[str], block: int, path: Optional[str]) -> None:
    lines = []
    for run in runs:
        with open(os.path.join(run, "metrics.jsonl")) as f:
            r = [json.loads(x)["reward/mean"] for x in f if x.strip()]
        with open(os.path.join(run, "config.json")) as f:
            cfg = json.load(f)
        blocks = [r[i : i + block] for i in range(0, len(r), block)]
        head = " | ".join(f"{i * block + 1}–{i * block + len(b)}" for i, b in enumerate(blocks))
        vals = " | ".join(f"{sum(b) / len(b):.3f}" for b in blocks)
        served = (cfg.get("backend") or {}).get("plan")  # "plan": "backend" runs name the served plan here
        plan = served if cfg["plan"] == "backend" and served else cfg["plan"] if isinstance(cfg["plan"], str) else cfg["plan"].get("name", "custom")
        lines.append(f"**{cfg['task']['name']}**, plan {plan}, seed {cfg['seed']}, {len(r)} steps (`{os.path.basename(os.path.normpath(run))}`):\n\n"
                     f"| steps | {head} |\n|---|{'---|' * len(blocks)}\n| reward/mean | {vals} |\n")
    _write("\n".join(lines), path, f"python -m qrl_backend.hf.figures curve … --block {block}")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m qrl_backend.hf.figures", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    m = sub.add_parser("mismatch")
    m.add_argument("--inits", type=int, default=3)
    m.add_argument("--markdown")
    c = sub.add_parser("curve")
    c.add_argument("runs", nargs="+")
    c.add_argument("--block", type=int, default=10)
    c.add_argument("--markdown")
    a = ap.parse_args(argv)
    if a.what == "mismatch":
        mismatch(a.inits, a.markdown)
    else:
        curve(a.runs, a.block, a.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
