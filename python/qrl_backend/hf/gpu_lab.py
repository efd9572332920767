"""`python -m qrl_backend.hf.gpu_lab`: the transformers-policy experiments of issue 45 in one command sized
for a GPU machine (`--device cuda --size large`, within `--budget-s`, default 600 s), printing their tables:

1. `warm`: a warm-started `reverse` run on `qrl_backend.hf` per plan (the toy's SFT settings that solve
   the task: 300 × 32 pairs, lr 3·10⁻³; then GRPO): held-out greedy accuracy at step 0 and at the end,
   mean rollout–trainer k3, seconds per GRPO step.
2. `length`: `qrl-sim lab run length --backend …` (the grid of sims/lab/length.json, its plans mapped by
   backendPlans; `--smoke` at the tiny size), its summary table.

Each step gets what is left of the budget as its timeout; a step cut by it is reported, and the steps
after it are skipped (exit 1 then, or when a step fails). `--dry-run` prints the commands only; `--size tiny --device cpu` is the seconds-long
version that checks the script on a CPU. Run from the repository root after `npm run build`."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

STEPS = ("warm", "length")
# Model overrides (transformers config) and run sizes per --size.
SIZES: Dict[str, Dict[str, Any]] = {
    "tiny": {"model": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1},
             "sft": 2, "steps": 1, "lab": ["--smoke", "--seeds", "1"]},
    "large": {"model": {"hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8,
                        "num_key_value_heads": 4, "max_position_embeddings": 256},
              "sft": 300, "steps": 40, "lab": ["--seeds", "1"]},
}
PLANS = ("hf-bf16", "hf-fp8-rollout", "hf-fp8-w8a8-rollout")


def parse(argv: Optional[List[str]]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m qrl_backend.hf.gpu_lab", description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    ap.add_argument("--size", default="large", choices=sorted(SIZES), help="large (GPU) or tiny (a CPU check)")
    ap.add_argument("--budget-s", type=float, default=600.0, help="wall-clock budget of all steps (default 600)")
    ap.add_argument("--only", default=",".join(STEPS), help=f"comma-separated steps of {', '.join(STEPS)} (default all)")
    ap.add_argument("--plans", default=",".join(PLANS), help=f"plans of the warm step (default {','.join(PLANS)})")
    ap.add_argument("--out", help="directory for the runs (default a new temporary one, kept)")
    ap.add_argument("--qrl-sim", default="node bin/qrl-sim.js", help="how to run qrl-sim (default node bin/qrl-sim.js)")
    ap.add_argument("--python", default=sys.executable, help="the Python that serves the backend")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    a = ap.parse_args(argv)
    if not (a.device == "cpu" or a.device.startswith("cuda")):
        ap.error(f"--device: expected cpu or cuda[:N], got {a.device!r}")
    if not a.budget_s > 0:
        ap.error(f"--budget-s: must be > 0, got {a.budget_s}")
    a.steps = [s for s in a.only.split(",") if s]
    bad = [s for s in a.steps if s not in STEPS]
    if bad or not a.steps:
        ap.error(f"--only: expected steps of {', '.join(STEPS)}, got {a.only!r}")
    a.plan_list = [p for p in a.plans.split(",") if p]
    bad = [p for p in a.plan_list if p not in PLANS + ("hf-fp32", "hf-fp8-kv", "hf-int8-rollout")]
    if bad or not a.plan_list:
        ap.error(f"--plans: expected plans of qrl_backend.hf, got {a.plans!r}")
    return a


def backend_command(a: argparse.Namespace, plan: Optional[str]) -> str:
    """The backend command line (plan left out for the lab, which appends each run's)."""
    model = json.dumps(SIZES[a.size]["model"], separators=(",", ":"))
    # torch.use_deterministic_algorithms (the backend's) needs a fixed cuBLAS workspace on CUDA
    env = "CUBLAS_WORKSPACE_CONFIG=:4096:8 " if a.device.startswith("cuda") else ""
    cmd = f"{env}PYTHONPATH=python {shlex.quote(a.python)} -m qrl_backend.hf --device {a.device} --model {shlex.quote(model)} --fp8-block 16"
    return cmd if plan is None else f"{cmd} --plan {plan}"


def commands(a: argparse.Namespace, out: str) -> List[Dict[str, Any]]:
    """Every command of the selected steps: {step, name, argv, dir}."""
    size = SIZES[a.size]
    qrl = shlex.split(a.qrl_sim)
    cmds: List[Dict[str, Any]] = []
    if "warm" in a.steps:
        for plan in a.plan_list:
            d = os.path.join(out, f"warm-{plan}")
            cmds.append({"step": "warm", "name": plan, "dir": d, "argv": [
                *qrl, "run", "--config", "sims/hf-reverse.json", "--set", "plan=backend", "--set", f"sft.steps={size['sft']}",
                "--set", "sft.cache=false", "--steps", str(size["steps"]), "--set", f"eval.every={size['steps']}", "--out", d,
                "--no-report", "--backend", backend_command(a, plan)]})
    if "length" in a.steps:
        d = os.path.join(out, "lab-length")
        cmds.append({"step": "length", "name": "length", "dir": d,
                     "argv": [*qrl, "lab", "run", "length", *size["lab"], "--out", d, "--backend", backend_command(a, None)]})
    return cmds


def _jsonl(path: str) -> List[Dict[str, Any]]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def warm_row(plan: str, d: str) -> str:
    """| plan | accuracy at step 0 | at the end | k3 | s/step | of a finished warm run."""
    ev = _jsonl(os.path.join(d, "eval.jsonl"))
    metrics = _jsonl(os.path.join(d, "metrics.jsonl"))
    timings = _jsonl(os.path.join(d, "timings.jsonl"))
    k3 = [m["rollout_corr/k3_kl"] for m in metrics if isinstance(m.get("rollout_corr/k3_kl"), (int, float))]
    acc = lambda e: f"{e['eval/rollout/greedy_accuracy']:.3f}"  # noqa: E731
    per_step = sum(t["total"] for t in timings) / max(1, len(timings))
    return f"| {plan} | {acc(ev[0])} | {acc(ev[-1])} | {sum(k3) / max(1, len(k3)):.2e} | {per_step:.3f} |"


def main(argv: Optional[List[str]] = None) -> int:
    a = parse(argv)
    out = a.out or tempfile.mkdtemp(prefix="qrl-gpu-lab-")
    cmds = commands(a, out)
    if a.dry_run:
        for c in cmds:
            print(f"[{c['step']}] {shlex.join(c['argv'])}")
        return 0
    if a.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            print(f"qrl_backend.hf.gpu_lab: --device {a.device}: torch sees no CUDA device", file=sys.stderr)
            return 2
    os.makedirs(out, exist_ok=True)
    t0 = time.monotonic()
    warm: List[str] = []
    failed = skipped = False
    for c in cmds:
        left = a.budget_s - (time.monotonic() - t0)
        if left <= 1 or failed:
            print(f"[{c['step']} {c['name']}] skipped: {'a step before failed' if failed else 'the budget is spent'}")
            skipped = True
            continue
        start = time.monotonic()
        print(f"[{c['step']} {c['name']}] {shlex.join(c['argv'])}", flush=True)
        try:
            r = subprocess.run(c["argv"], capture_output=True, text=True, timeout=left)
        except subprocess.TimeoutExpired:
            print(f"[{c['step']} {c['name']}] cut by the budget after {time.monotonic() - start:.0f} s")
            failed = True
            continue
        took = time.monotonic() - start
        if r.returncode != 0:
            print(f"[{c['step']} {c['name']}] exit {r.returncode} after {took:.0f} s: {(r.stderr or r.stdout).strip()[-1500:]}")
            failed = True
            continue
        print(f"[{c['step']} {c['name']}] done in {took:.1f} s")
        if c["step"] == "warm":
            warm.append(warm_row(c["name"], c["dir"]))
        else:
            with open(os.path.join(c["dir"], "summary.md")) as f:
                print(f"\n### lab length on qrl_backend.hf ({a.device}, {a.size})\n\n{f.read()}")
    if warm:
        size = SIZES[a.size]
        print(f"\n### warm-started reverse on qrl_backend.hf ({a.device}, {a.size}: model {json.dumps(size['model'])}, "
              f"sft {size['sft']} × 32, {size['steps']} GRPO steps)\n")
        print("| plan | greedy accuracy, step 0 | greedy accuracy, last step | mean k3 | s per GRPO step |\n|---|---:|---:|---:|---:|")
        print("\n".join(warm))
    print(f"\nruns under {out}; {time.monotonic() - t0:.0f} s of the {a.budget_s:.0f} s budget")
    return 1 if failed or skipped else 0


if __name__ == "__main__":
    sys.exit(main())
