"""`python -m qrl_backend.hf.speed`: the transformers backend's speed against qrl-sim's in-process toy of a
comparable size, on the same GRPO run (reverse, 8 prompts × 8 samples): rollout tokens per second,
GRPO step time, and where a backend step's time goes — the backend's own compute (its methods), the
SDK's message handling (params decoded, results encoded: base64 tensors), and the rest (JSON text,
pipes, and the driver's own work: rewards, estimators). Prints a markdown table (and writes it with
--markdown FILE). Timings are wall-clock on the machine it runs on; nothing here is asserted."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional

# The toy at the transformers defaults' size: d_model 64, 4 heads, 2 layers, MLP 128.
TOY_MODEL = {"C": 64, "H": 4, "layers": 2, "hidden": 128}
BASE = {
    "seed": 0,
    "task": {"name": "reverse", "options": {}},
    "policy": {"kind": "ar"},
    "sft": {"steps": 0, "cache": False},
    "rollout": {"prompts": 8, "groupSize": 8},
    "estimators": {"advantage": {"name": "grpo"}, "correction": {"name": "tis"}, "loss": {"name": "ppo-clip"}},
    "eval": {"every": 0, "problems": 8},
    "checkpoint": {"every": 0},
}


def _jsonl(path: str) -> List[Dict[str, Any]]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def measure(name: str, cfg: Dict[str, Any], out: str, qrl_sim: List[str], backend: Optional[str], env: Dict[str, str]) -> Dict[str, Any]:
    path = os.path.join(out, f"{name}.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    run_dir = os.path.join(out, name)
    cmd = [*qrl_sim, "run", "--config", path, "--out", run_dir] + (["--backend", backend] if backend else [])
    print(f"[{name}] {' '.join(map(shlex.quote, cmd))}", file=sys.stderr, flush=True)
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    timings = _jsonl(os.path.join(run_dir, "timings.jsonl"))[1:]  # step 1 warms caches up
    metrics = _jsonl(os.path.join(run_dir, "metrics.jsonl"))[1:]
    steps = len(timings)
    total = sum(t["total"] for t in timings)
    rollout = sum(t["rollout"] for t in timings)
    tokens = sum(m["batch/sequences"] * m["response_length/mean"] for m in metrics)
    row = {"name": name, "steps": steps, "step_s": total / steps, "rollout_tok_s": tokens / rollout, "rollout_share": rollout / total}
    return row


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m qrl_backend.hf.speed", description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--plans", default="bf16,fp8-rollout")
    ap.add_argument("--qrl-sim", default="node bin/qrl-sim.js")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--markdown", help="also write the table to this file")
    a = ap.parse_args(argv)
    qrl_sim = shlex.split(a.qrl_sim)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(os.getcwd(), "python"), os.environ.get("PYTHONPATH", "")]))
    rows = []
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="qrl-hf-speed-") as out:
        for plan in a.plans.split(","):
            toy = dict(BASE, steps=a.steps, plan=plan, policy={"kind": "ar", "model": TOY_MODEL})
            rows.append(dict(measure(f"toy-{plan}", toy, out, qrl_sim, None, env), backend="in-process toy", plan=plan))
            timing = os.path.join(out, f"hf-{plan}-timing.json")
            # the backend's own plan of the same numerics family (hf-<plan>), taken by the run as "backend"
            backend = f"{shlex.quote(a.python)} -m qrl_backend.hf --plan hf-{plan} --fp8-block 16 --timing {shlex.quote(timing)}"
            row = measure(f"hf-{plan}", dict(BASE, steps=a.steps, plan="backend"), out, qrl_sim, backend, env)
            with open(timing) as f:
                log = json.load(f)["messages"]
            # Steps 2…N: the messages after step 1's `step` up to the last `step` (each GRPO step is
            # sync, generate, logprobs…, backward…, step); the final evaluation and save come after.
            at = [i for i, m in enumerate(log) if m[0] == "step"]
            window = log[at[0] + 1 : at[-1] + 1]
            steps_total = row["step_s"] * row["steps"]
            handled = sum(m[1] for m in window)
            compute = sum(m[2] for m in window)
            row.update(backend="transformers (qrl_backend.hf)", plan=f"hf-{plan}", compute_share=compute / steps_total, codec_share=(handled - compute) / steps_total,
                       rest_share=(steps_total - handled) / steps_total)
            rows.append(row)
    head = "| backend | plan | GRPO step (s) | rollout tokens/s | rollout share of a step | backend compute | SDK codec | JSON text, pipes and driver |\n|---|---|---|---|---|---|---|---|\n"
    pct = lambda r, k: f"{100 * r[k]:.1f} %" if k in r else "—"
    body = "".join(f"| {r['backend']} | {r['plan']} | {r['step_s']:.3f} | {r['rollout_tok_s']:.0f} | {pct(r, 'rollout_share')} | {pct(r, 'compute_share')} | {pct(r, 'codec_share')} | {pct(r, 'rest_share')} |\n" for r in rows)
    note = (f"\nreverse, 8 prompts × 8 samples, {a.steps} steps (the first left out of the means), `python -m qrl_backend.hf.speed --steps {a.steps} --plans {a.plans}`; "
            f"{os.cpu_count()} CPUs, load average {load_before:.1f} before and {os.getloadavg()[0]:.1f} after (other work on the machine slows both sides alike only when the load is steady).\n")
    print(head + body + note)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write("<!-- written by python -m qrl_backend.hf.speed --markdown; do not edit by hand -->\n" + head + body + note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
