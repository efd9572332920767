"""A numpy TIS + PPO implementation of the ``qrl-sim estimate`` contract, checked two ways.

    python3 numpy_estimators.py --golden DIR      # against the `estimators` golden suite
    python3 numpy_estimators.py --serve           # as an implementation for `qrl-sim check`
    QRL_BUG=no-cap python3 numpy_estimators.py --serve      # planted bug: TIS without the cap
    QRL_BUG=wrong-mask python3 numpy_estimators.py --serve  # planted bug: token-mean over every position

Supports advantages grpo/drgrpo, corrections none/token-is/tis, loss ppo-clip (with dual clip),
every aggregation, no KL; anything else raises NotImplementedError (a JSON-RPC error for check).
Formulas: docs/estimators.md (GRPO advantage with unbiased group std; TIS w = min(exp(ℓold − ℓroll), C);
PPO L = max(−A·r, −A·clip(r, 1 − ε_low, 1 + ε_high)), r = exp(ℓθ − ℓold)).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import qrl_golden  # noqa: E402

BUG = os.environ.get("QRL_BUG", "")
CLAMP = 20.0


def advantages(rewards, groups, spec):
    rewards = np.asarray(rewards, dtype=np.float64)
    groups = np.asarray(groups)
    out = np.zeros_like(rewards)
    for g in np.unique(groups):
        idx = groups == g
        r = rewards[idx]
        mean = r.mean()
        if spec["name"] == "drgrpo":
            out[idx] = r - mean
        elif spec["name"] == "grpo":
            std = r.std(ddof=1) if r.size > 1 else 0.0
            out[idx] = (r - mean) / (std + spec.get("eps", 1e-6))
        else:
            raise NotImplementedError(f"advantage {spec['name']}")
    return out


def estimate(params: dict) -> dict:
    cfg = params.get("config") or {}
    mask = np.asarray(params["mask"], dtype=np.float64)
    B, T = mask.shape
    lt, lo, lr = (np.asarray(params[k], dtype=np.float64) for k in ("logpTheta", "logpOld", "logpRollout"))
    groups = params.get("groups", [0] * B)
    if cfg.get("kl"):
        raise NotImplementedError("kl")
    adv_spec = cfg.get("advantage", {"name": "grpo"})
    if "advantages" in params:
        a = np.asarray(params["advantages"], dtype=np.float64)
        adv = a if a.ndim == 2 else np.repeat(a[:, None], T, axis=1)
    else:
        adv = np.repeat(advantages(params["rewards"], groups, adv_spec)[:, None], T, axis=1)
    adv = adv * mask
    # correction: one stage of none / token-is / tis
    stages = cfg.get("correction", [{"name": "none"}])
    stages = stages if isinstance(stages, list) else [stages]
    if len(stages) != 1:
        raise NotImplementedError("more than one correction stage")
    stage = stages[0]
    rho = np.exp(np.clip(lo - lr, -CLAMP, CLAMP))
    if stage["name"] == "none":
        w = np.ones_like(rho)
    elif stage["name"] == "token-is":
        w = rho
    elif stage["name"] == "tis":
        w = rho if BUG == "no-cap" else np.minimum(rho, stage.get("C", 2.0))
    else:
        raise NotImplementedError(f"correction {stage['name']}")
    w = w * mask
    # loss: ppo-clip
    loss_spec = cfg.get("loss", {"name": "ppo-clip"})
    if loss_spec["name"] != "ppo-clip":
        raise NotImplementedError(f"loss {loss_spec['name']}")
    el, eh, dual = loss_spec.get("epsLow", 0.2), loss_spec.get("epsHigh", 0.2), loss_spec.get("dualClip")
    raw = lt - lo
    d = np.clip(raw, -CLAMP, CLAMP)
    r = np.exp(d)
    l1 = -adv * r
    l2 = -adv * np.clip(r, 1 - el, 1 + eh)
    L = np.maximum(l1, l2)
    dL = np.where((l1 >= l2) & (d == raw), -adv * r, 0.0)
    if dual is not None:
        lower = (adv < 0) & (L > -dual * adv)
        L = np.where(lower, -dual * adv, L)
        dL = np.where(lower, 0.0, dL)
    # aggregation coefficients c with loss = Σ c·w·L
    agg = cfg.get("aggregation", "token-mean")
    agg = agg if isinstance(agg, dict) else {"name": agg}
    n = mask.sum(axis=1)
    seqs = max(int((n > 0).sum()), 1)
    if agg["name"] == "token-mean":
        denom = mask.size if BUG == "wrong-mask" else mask.sum()
        c = np.full_like(mask, 1.0 / denom if denom > 0 else 0.0)
    elif agg["name"] == "seq-mean-token-sum":
        c = np.full_like(mask, 1.0 / seqs)
    elif agg["name"] == "seq-mean-token-mean":
        c = np.repeat((1.0 / (seqs * np.maximum(n, 1)))[:, None], T, axis=1)
    elif agg["name"] == "seq-mean-token-sum-norm":
        c = np.full_like(mask, 1.0 / (seqs * agg.get("normalizer", T)))
    elif agg["name"] == "slime-per-token":
        # slime --calculate-per-token-loss: Σ L·m / Σ_i max(n_i, 1) (an empty sample counts one)
        c = np.full_like(mask, 1.0 / np.maximum(n, 1).sum())
    else:
        raise NotImplementedError(f"aggregation {agg['name']}")
    c = c * mask
    token_loss = mask * w * L
    return {
        "advantages": adv.tolist(),
        "weights": w.tolist(),
        "mask": mask.tolist(),
        "tokenLoss": token_loss.tolist(),
        "loss": float((c * token_loss).sum()),
        "gradLogpTheta": (c * w * mask * dL).tolist(),
    }


SUPPORTED = dict(
    advantage=("grpo", "drgrpo"), correction=("none", "token-is", "tis"), loss=("ppo-clip",), kl=(None,),
)


def supported(params: dict) -> bool:
    return all(params[k] in v for k, v in SUPPORTED.items())


def case_input(case) -> dict:
    """The `estimate` JSON input of a golden case (its input tensors plus its config)."""
    x = case.inputs
    return {
        "logpTheta": x["logpTheta"], "logpOld": x["logpOld"], "logpRollout": x["logpRollout"], "mask": x["mask"],
        "rewards": x["rewards"], "groups": x["groups"].tolist(), "config": case.params["config"],
    }


def outputs(result: dict) -> dict:
    """The estimate result under the golden tensor names (`mask` is stored as `effectiveMask`)."""
    return {
        "advantages": np.asarray(result["advantages"]), "weights": np.asarray(result["weights"]),
        "effectiveMask": np.asarray(result["mask"]), "tokenLoss": np.asarray(result["tokenLoss"]),
        "loss": np.asarray(result["loss"]), "gradLogpTheta": np.asarray(result["gradLogpTheta"]),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--golden", help="golden directory with the estimators suite")
    ap.add_argument("--serve", action="store_true", help="serve `estimate` over JSON-RPC for qrl-sim check")
    args = ap.parse_args()
    if args.serve:
        qrl_golden.serve(estimate=estimate)
        return 0
    if args.golden is None:
        print("numpy_estimators.py: pass --golden DIR (a directory written by qrl-sim golden --suite estimators) or --serve", file=sys.stderr)
        return 2
    golden = qrl_golden.load(args.golden)
    if "estimators" not in golden.suites:
        print(f"--golden: '{args.golden}' has no estimators suite (suites: {', '.join(golden.suites) or 'none'}); add it with qrl-sim golden --suite estimators --out {args.golden}", file=sys.stderr)
        return 2
    failed = checked = 0
    for case in golden.cases("estimators", where=supported):
        checked += 1
        try:
            case.assert_matches(outputs(estimate(case_input(case))))
        except qrl_golden.GoldenMismatch as e:
            failed += 1
            print(e)
    print(f"estimators: {checked - failed} of {checked} supported cases match")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
