"""The grpo-step suite read back: shapes agree, and the AdamW update is re-derived in numpy from
the stored weights and gradients (decoupled weight decay on 2-D weights only)."""

import numpy as np
import pytest


@pytest.mark.qrl_golden("grpo-step")
def test_adamw_update_from_weights_and_grads(golden_case):
    a = golden_case.arrays()
    hp = golden_case.params["adamw"]
    updated = {}
    for name in (k[len("weight:"):] for k in a if k.startswith("weight:")):
        w = a[f"weight:{name}"].astype(np.float64)
        g = a[f"grad:{name}"].astype(np.float64)
        m = (1 - hp["beta1"]) * g / (1 - hp["beta1"])
        v = (1 - hp["beta2"]) * g * g / (1 - hp["beta2"])
        decay = hp["weightDecay"] if w.ndim == 2 else 0.0
        updated[f"updated:{name}"] = (w * (1 - hp["lr"] * decay) - hp["lr"] * m / (np.sqrt(v) + hp["eps"])).astype(np.float32)
    assert updated
    golden_case.assert_matches(updated)


@pytest.mark.qrl_golden("grpo-step")
def test_grpo_advantages_from_rewards(golden_case):
    a = golden_case.arrays()
    r, g, mask = a["rewards"], a["groups"], a["responseMask"]
    adv = np.zeros_like(r)
    for k in np.unique(g):
        idx = g == k
        std = r[idx].std(ddof=1) if idx.sum() > 1 else 0.0
        adv[idx] = (r[idx] - r[idx].mean()) / (std + 1e-6)
    golden_case.assert_matches({"advantages": adv[:, None] * mask})
    assert np.abs(a["grad:lmHead"]).max() > 0
