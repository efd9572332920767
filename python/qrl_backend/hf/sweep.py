"""`python -m qrl_backend.hf.sweep`: a plan × correction × seed sweep of `qrl-sim run --backend` on the
transformers backend, ended by `qrl-sim report` over the run directories (the same table and plots as
`qrl-sim sweep` gives the toy). Runs one after another (each run is one backend process); a run that
fails is reported and the sweep goes on. Not the backend (backend.py)."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from typing import List, Optional

from .backend import PLAN_NAMES, plan_table

# Plans qrl-sim knows by name (src/policies/plans.ts); the others go into the run config as plan data.
QRL_SIM_PRESETS = ("fp32", "bf16", "fp8-rollout", "fp8-kv")


def run_config_plan(plan: str, block: int):
    """The run config's `plan`: the preset name where qrl-sim has one, else the plan as data (qrl-sim's
    sides: the rollout as this backend reports it, the trainer as qrl-sim's bf16)."""
    if plan in QRL_SIM_PRESETS:
        return plan
    rollout, _ = plan_table(block)[plan]["data"]
    return {"name": plan, "description": "transformers backend plan (python -m qrl_backend.hf)", "rollout": rollout, "trainer": {"gemm": {"kind": "rounding", "operands": "bf16"}}}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m qrl_backend.hf.sweep", description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, help="base run config (e.g. sims/hf-reverse.json)")
    ap.add_argument("--plans", default="bf16,fp8-rollout,fp8-kv", help=f"comma-separated, of {', '.join(PLAN_NAMES)}")
    ap.add_argument("--corrections", default="none,tis", help="estimators.correction.name values, comma-separated")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--steps", type=int, help="override the config's steps")
    ap.add_argument("--out", default="runs/hf-sweep")
    ap.add_argument("--qrl-sim", default="node bin/qrl-sim.js", help="how to run qrl-sim")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--backend-args", default="--vocab-size 13 --max-new-tokens 7 --fp8-block 16", help="extra flags of python -m qrl_backend.hf")
    a = ap.parse_args(argv)
    plans = [p for p in a.plans.split(",") if p]
    for p in plans:
        if p not in PLAN_NAMES:
            print(f"qrl_backend.hf.sweep: --plans: unknown plan {p!r} (known: {', '.join(PLAN_NAMES)})", file=sys.stderr)
            return 2
    with open(a.config) as f:
        base = json.load(f)
    block = 16
    extra = shlex.split(a.backend_args)
    if "--fp8-block" in extra:
        block = int(extra[extra.index("--fp8-block") + 1])
    lr = base.get("optim", {}).get("lr", 3e-3)
    os.makedirs(a.out, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(os.getcwd(), "python"), os.environ.get("PYTHONPATH", "")]))
    failed = 0
    for plan in plans:
        for corr in [c for c in a.corrections.split(",") if c]:
            for seed in range(a.seeds):
                name = f"{plan}-{corr}-s{seed}"
                cfg = json.loads(json.dumps(base))
                cfg["seed"] = seed
                cfg["plan"] = run_config_plan(plan, block)
                cfg.setdefault("estimators", {})["correction"] = {"name": corr}
                if a.steps is not None:
                    cfg["steps"] = a.steps
                path = os.path.join(a.out, f"{name}.json")
                with open(path, "w") as f:
                    json.dump(cfg, f, indent=2)
                # The backend's optimizer follows the config's optim.lr; its initial weights are the same
                # for every cell (--init-seed 0), so cells differ by plan, correction and the run's seed.
                backend = " ".join([shlex.quote(a.python), "-m", "qrl_backend.hf", "--plan", plan, "--lr", repr(lr), *map(shlex.quote, extra)])
                cmd = [*shlex.split(a.qrl_sim), "run", "--config", path, "--out", os.path.join(a.out, name), "--backend", backend]
                print(f"[{name}] {' '.join(map(shlex.quote, cmd))}", flush=True)
                r = subprocess.run(cmd, env=env)
                if r.returncode != 0:
                    failed += 1
                    print(f"[{name}] failed with exit code {r.returncode}", flush=True)
    r = subprocess.run([*shlex.split(a.qrl_sim), "report", a.out, "--title", f"transformers backend: {', '.join(plans)} × {a.corrections} × {a.seeds} seeds"], env=env)
    return 1 if failed or r.returncode else 0


if __name__ == "__main__":
    sys.exit(main())
