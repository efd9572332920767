"""DPPO top-k and the EMA-PG top-k KL, an independent numpy implementation for ``qrl-sim check``.

    python3 numpy_topk_estimators.py --serve                   # as an implementation for `qrl-sim check`
    QRL_BUG=no-slot python3 numpy_topk_estimators.py --serve   # planted bug: y outside the top-k not in the set
    QRL_BUG=no-tail python3 numpy_topk_estimators.py --serve   # planted bug: the top-k KL without its tail term
    QRL_BUG=no-iw-clip python3 numpy_topk_estimators.py --serve  # planted bug: iwClip ignored

Two configs (aggregation token-mean): loss ``dppo-topk-tv`` / ``dppo-topk-kl`` with correction none
(TRL trl/experimental/dppo/dppo_trainer.py @23eedc6 ``_compute_divergence_mask`` topk_tv / topk_kl and
``_compute_loss``: the set A' = the engine's top-k with y in the K-th slot when outside it, rest buckets
clamped at 1e-12, mask by the sign of A and of p(y) − μ(y), L = −A·sg[min(r, c)]·mask·ℓθ); or any
numpy_estimators config plus ``topkKl`` (ema-pg core_algos.py @f9b9776 ``compute_memory_efficient_kl``
between πθ and the engine μ: head over the top-k, tail at y outside it, times sg exp(ℓθ − ℓold) with iw, clipped to iwClip as
dp_actor.py clamps it with kl_iw_clip_lower / kl_iw_clip_upper).
Formulas in docs/estimators.md.
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
CLAMP = 20.0


def _arrays(params: dict):
    topk = params["topk"]
    ids = np.asarray(topk["ids"])
    lq = np.asarray(topk["logpRollout"], dtype=np.float64)
    lp = np.asarray(topk["logpTheta"], dtype=np.float64)
    y = np.asarray(topk["tokens"])
    return ids, lq, lp, y


def _token_mean(mask: np.ndarray) -> np.ndarray:
    return mask / mask.sum() if mask.sum() > 0 else mask


def dppo_topk(params: dict, cfg: dict) -> dict:
    spec = cfg["loss"]
    stages = cfg.get("correction", {"name": "none"})
    if stages not in ({"name": "none"}, [{"name": "none"}]) or cfg.get("aggregation", "token-mean") != "token-mean":
        raise NotImplementedError("dppo-topk with correction none and aggregation token-mean only")
    el, eh, cap = spec.get("epsLow", 0.15), spec.get("epsHigh", 0.15), spec.get("c", 20.0)
    base = numpy_estimators.estimate(
        {k: v for k, v in params.items() if k != "topk"} | {"config": cfg | {"loss": {"name": "ppo-clip"}}}
    )
    mask = np.asarray(params["mask"], dtype=np.float64)
    adv = np.asarray(base["advantages"], dtype=np.float64)
    lt = np.asarray(params["logpTheta"], dtype=np.float64)
    lr = np.asarray(params["logpRollout"], dtype=np.float64)
    ids, lq, lp, y = _arrays(params)
    valid = ids >= 0
    in_set = (ids == y[..., None]).any(-1)
    lp_s, lq_s, valid_s = lp.copy(), lq.copy(), valid.copy()
    if BUG != "no-slot":
        out = ~in_set
        lp_s[..., -1] = np.where(out, lt, lp_s[..., -1])
        lq_s[..., -1] = np.where(out, lr, lq_s[..., -1])
        valid_s[..., -1] = valid_s[..., -1] | out
    p = np.where(valid_s, np.exp(lp_s), 0.0)
    q = np.where(valid_s, np.exp(lq_s), 0.0)
    rest_p = np.maximum(1 - p.sum(-1), 1e-12)
    rest_q = np.maximum(1 - q.sum(-1), 1e-12)
    if spec["name"] == "dppo-topk-tv":
        div = (np.abs(p - q).sum(-1) + np.abs(rest_p - rest_q)) / 2
    else:
        div = np.where(valid_s, q * (lq_s - lp_s), 0.0).sum(-1) + rest_q * (np.log(rest_q) - np.log(rest_p))
    py, qy = np.exp(lt), np.exp(lr)
    invalid = np.where(adv > 0, (div > eh) & (py > qy), (div > el) & (py < qy))
    keep = mask * (~invalid)
    ratio = np.exp(np.minimum(lt - lr, np.log(cap)))
    c = _token_mean(mask)
    token_loss = keep * (-adv * ratio * lt)
    return {
        "advantages": adv.tolist(),
        "weights": mask.tolist(),
        "mask": mask.tolist(),
        "tokenLoss": token_loss.tolist(),
        "loss": float((c * token_loss).sum()),
        "gradLogpTheta": (c * keep * (-adv * ratio)).tolist(),
        "gradTopkLogpTheta": np.zeros_like(lp).tolist(),
    }


def topk_kl(params: dict, cfg: dict, spec: dict) -> dict:
    if cfg.get("aggregation", "token-mean") != "token-mean":
        raise NotImplementedError("topkKl with aggregation token-mean only")
    out = numpy_estimators.estimate({k: v for k, v in params.items() if k != "topk"} | {"config": cfg})
    kind, coef = spec.get("type", "full_reverse"), spec.get("coef", 0.001)
    tail_on, use_iw = spec.get("tailSampling", True), spec.get("iw", False)
    mask = np.asarray(params["mask"], dtype=np.float64)
    lt, lo, lr = (np.asarray(params[k], dtype=np.float64) for k in ("logpTheta", "logpOld", "logpRollout"))
    ids, lq, lp, y = _arrays(params)
    valid = ids >= 0
    if kind == "full_reverse":
        p = np.exp(lp)
        head = np.where(valid, p * (lp - lq), 0.0).sum(-1)
        g_head = np.where(valid, p * (lp - lq + 1), 0.0)
    else:
        q = np.exp(lq)
        head = np.where(valid, q * (lq - lp), 0.0).sum(-1)
        g_head = np.where(valid, -q, 0.0)
    outside = ~(valid & (ids == y[..., None])).any(-1) if tail_on and BUG != "no-tail" else np.zeros(y.shape, bool)
    iw = np.exp(np.clip(lt - lo, -CLAMP, CLAMP)) if use_iw else np.ones_like(lt)
    bounds = spec.get("iwClip") or {}
    if use_iw and BUG != "no-iw-clip":
        iw = np.minimum(np.maximum(iw, bounds.get("lower", -np.inf)), bounds.get("upper", np.inf))
    if kind == "full_reverse":
        tail, g_tail = lt - lr, lt - lr
    else:
        raw = lr - lt
        lw = np.clip(raw, -CLAMP, CLAMP)
        e = np.exp(lw)
        tail, g_tail = e * lw, np.where(lw == raw, -e, 0.0) + 1
    tail = np.where(outside, iw * tail, 0.0)
    g_tail = np.where(outside, iw * g_tail, 0.0)
    kl = mask * (head + tail)
    c = _token_mean(mask)
    out["tokenLoss"] = (np.asarray(out["tokenLoss"]) + coef * kl).tolist()
    out["loss"] = out["loss"] + coef * float((c * kl).sum())
    out["gradLogpTheta"] = (np.asarray(out["gradLogpTheta"]) + c * coef * mask * g_tail).tolist()
    out["gradTopkLogpTheta"] = ((c * coef * mask)[..., None] * g_head).tolist()
    return out


def estimate(params: dict) -> dict:
    cfg = dict(params.get("config") or {})
    spec = cfg.pop("topkKl", None)
    if spec is not None:
        return topk_kl(params, cfg, spec)
    if (cfg.get("loss") or {}).get("name") in ("dppo-topk-tv", "dppo-topk-kl"):
        return dppo_topk(params, cfg)
    raise NotImplementedError("loss dppo-topk-tv / dppo-topk-kl or config.topkKl only")


if __name__ == "__main__":
    if "--serve" not in sys.argv:
        print("numpy_topk_estimators.py: pass --serve (an implementation for qrl-sim check)", file=sys.stderr)
        sys.exit(2)
    qrl_golden.serve(estimate=estimate)
