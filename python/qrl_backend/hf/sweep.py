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

from .backend import PLAN_NAMES


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m qrl_backend.hf.sweep", description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, help="base run config (e.g. sims/hf-reverse.json)")
    ap.add_argument("--plans", default="hf-bf16,hf-fp8-rollout,hf-fp8-kv", help=f"comma-separated, of {', '.join(PLAN_NAMES)}")
    ap.add_argument("--corrections", default="none,tis", help="estimators.correction.name values, comma-separated")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--steps", type=int, help="override the config's steps")
    ap.add_argument("--out", default="runs/hf-sweep")
    ap.add_argument("--qrl-sim", default="node bin/qrl-sim.js", help="how to run qrl-sim")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--backend-args", default="--fp8-block 16", help="extra flags of python -m qrl_backend.hf (vocabulary, optim and maxNewTokens come from the run's setup)")
    a = ap.parse_args(argv)
    plans = [p for p in a.plans.split(",") if p]
    for p in plans:
        if p not in PLAN_NAMES:
            print(f"qrl_backend.hf.sweep: --plans: unknown plan {p!r} (known: {', '.join(PLAN_NAMES)})", file=sys.stderr)
            return 2
    with open(a.config) as f:
        base = json.load(f)
    extra = shlex.split(a.backend_args)
    os.makedirs(a.out, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(os.getcwd(), "python"), os.environ.get("PYTHONPATH", "")]))
    failed = 0
    for plan in plans:
        for corr in [c for c in a.corrections.split(",") if c]:
            for seed in range(a.seeds):
                name = f"{plan}-{corr}-s{seed}"
                cfg = json.loads(json.dumps(base))
                cfg["seed"] = seed
                cfg["plan"] = "backend"  # the backend's --plan, named in the run's reports
                cfg.setdefault("estimators", {})["correction"] = {"name": corr}
                if a.steps is not None:
                    cfg["steps"] = a.steps
                path = os.path.join(a.out, f"{name}.json")
                with open(path, "w") as f:
                    json.dump(cfg, f, indent=2)
                # The backend's optimizer follows the config's optim.* (the run's setup); its initial weights
                # are the same for every cell (--init-seed 0), so cells differ by plan, correction and seed.
                backend = " ".join([shlex.quote(a.python), "-m", "qrl_backend.hf", "--plan", plan, *map(shlex.quote, extra)])
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
