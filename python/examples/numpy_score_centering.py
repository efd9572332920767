"""Score centering on top of the numpy TIS + PPO example, an independent implementation for ``qrl-sim check``.

    python3 numpy_score_centering.py --serve                  # as an implementation for `qrl-sim check`
    QRL_BUG=no-tail python3 numpy_score_centering.py --serve  # planted bug: the tail ratio ρ taken as 1

Adds the proportional-tail score-centering term of prime-rl score_centering.py @349283d
(``score_correction``, ipo_eps None) to numpy_estimators.estimate, for ``config.scoreCentering``
``{}`` with aggregation token-mean: per token, p = e^ℓθ, q = e^ℓμ at the top-k ids,
ρ = max(1 − Σq, 1e-6) / max(1 − Σp, 1e-6), coef = q − ρ·p, term = A·Σ coef·ℓθ (coef detached);
returns ``gradTopkLogpTheta`` = c·A·coef with the token-mean coefficients c (docs/estimators.md).
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import numpy_estimators  # noqa: E402
import qrl_golden  # noqa: E402

BUG = os.environ.get("QRL_BUG", "")


def estimate(params: dict) -> dict:
    cfg = dict(params.get("config") or {})
    sc = cfg.pop("scoreCentering", None)
    if sc not in ({}, {"form": "proportional-tail"}) or cfg.get("aggregation", "token-mean") != "token-mean":
        raise NotImplementedError("scoreCentering {} with aggregation token-mean only")
    out = numpy_estimators.estimate({k: v for k, v in params.items() if k != "topk"} | {"config": cfg})
    topk = params["topk"]
    ids = np.asarray(topk["ids"])
    lq = np.asarray(topk["logpRollout"], dtype=np.float64)
    lp = np.asarray(topk["logpTheta"], dtype=np.float64)
    valid = ids >= 0
    mask = np.asarray(params["mask"], dtype=np.float64)
    adv = np.asarray(out["advantages"], dtype=np.float64)
    q = np.where(valid, np.exp(lq), 0.0)
    p = np.where(valid, np.exp(lp), 0.0)
    rho = np.maximum(1 - q.sum(-1), 1e-6) / np.maximum(1 - p.sum(-1), 1e-6)
    if BUG == "no-tail":
        rho = np.ones_like(rho)
    coef = np.where(valid, q - rho[..., None] * p, 0.0)
    term = mask * adv * (coef * lp).sum(-1)
    c = mask / mask.sum() if mask.sum() > 0 else mask
    out["tokenLoss"] = (np.asarray(out["tokenLoss"]) + term).tolist()
    out["loss"] = out["loss"] + float((c * term).sum())
    out["gradTopkLogpTheta"] = ((c * adv)[..., None] * coef).tolist()
    return out


if __name__ == "__main__":
    if "--serve" not in sys.argv:
        print("numpy_score_centering.py: pass --serve (an implementation for qrl-sim check)", file=sys.stderr)
        sys.exit(2)
    qrl_golden.serve(estimate=estimate)
