"""Central differences of the numpy AR backend's backward with top-k coefficients, shared by the top-k and
the support-replay tests: Σ g·ℓ + Σ g_topk·ℓ_topk at random coefficients, four parameters, each at its
largest-gradient entry."""

import numpy as np
import pytest


def check_topk_backward(be, batch, rows, res, seed: int = 1):
    """Runs `be.backward` on `res` (a logprobs result taken with grad and topk) and checks its gradient
    against central differences; returns (g, gk, grads) for the caller's further checks."""
    rng = np.random.default_rng(seed)
    g, gk = rng.normal(size=res.logp.shape), rng.normal(size=res.topk_logp.shape)
    be.backward(res.handle, g.reshape(-1), grad_topk=gk.reshape(-1))
    grads = {k: v.astype(np.float64).copy() for k, v in be.grads.items()}

    def loss():
        r = be.logprobs(batch, rows, "current", False, topk=True)
        return float(np.sum(g * r.logp) + np.sum(gk * r.topk_logp))

    for name in ["wte", "h0.attn.wq", "h0.mlp.down", "lnf.weight"]:
        w = be.params[name]
        idx = np.unravel_index(np.argmax(np.abs(grads[name])), w.shape)
        old = w[idx]
        w[idx] = old + np.float32(1e-2)
        up = loss()
        w[idx] = old - np.float32(1e-2)
        down = loss()
        w[idx] = old
        assert grads[name][idx] == pytest.approx((up - down) / 2e-2, rel=2e-2), name
    return g, gk, grads
