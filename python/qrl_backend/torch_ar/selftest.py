"""Checks the PyTorch backend against the numpy one (same weights ⇒ log-probs within 1e-5 under fp32,
gradients within 1e-4 relative, same sampled tokens), runnable without pytest:
`python3 -m qrl_backend.torch_ar.selftest` (exit 0 = pass)."""

import sys

import numpy as np


def main() -> int:
    from ..numpy_ar import ArConfig, NumpyArBackend, init_params
    from .backend import TorchArBackend

    cfg = ArConfig(vocabSize=11, maxLen=12, C=16, H=2, layers=2, hidden=24)
    params = {k: v * 4 if v.ndim == 2 else v for k, v in init_params(cfg, 9).items()}
    ref = NumpyArBackend(cfg, params, max_new_tokens=6)
    tb = TorchArBackend(cfg, params, max_new_tokens=6, device="cpu")
    prompts = [[1, 5, 6, 3], [1, 7, 8, 3], [1, 9, 5, 3]]
    a = ref.generate(prompts, "t/0", None, False, "rollout")
    b = tb.generate(prompts, "t/0", None, False, "rollout")
    assert np.array_equal(a.responses, b.responses), "sampled tokens differ"
    _res = ref.logprobs(a, [0, 1, 2], "current", True)
    lp_n, ent_n, hn = _res.logp, _res.entropy, _res.handle
    _res = tb.logprobs(a, [0, 1, 2], "current", True)
    lp_t, ent_t, ht = _res.logp, _res.entropy, _res.handle
    d = float(np.max(np.abs(lp_n - lp_t)))
    assert d < 1e-5, f"log-probs differ by {d}"
    assert float(np.max(np.abs(ent_n - ent_t))) < 1e-5
    g = np.linspace(-1, 1, lp_n.size)
    ref.backward(hn, g)
    tb.backward(ht, g)
    for name in ref.grads:
        gt = tb.model.p(name).grad.cpu().numpy()
        scale = max(float(np.max(np.abs(ref.grads[name]))), 1e-6)
        assert float(np.max(np.abs(gt - ref.grads[name]))) / scale < 1e-4, f"gradient of {name} differs"
    ra, rb = ref.step(1.0), tb.step(1.0)
    assert abs(ra["gradNorm"] - rb["gradNorm"]) / ra["gradNorm"] < 1e-5 and ra["weightVersion"] == rb["weightVersion"] == 1
    after = ref.logprobs(a, [0, 1, 2], "current", False).logp
    assert float(np.max(np.abs(after - tb.logprobs(a, [0, 1, 2], "current", False).logp))) < 1e-4, "AdamW steps differ"
    print(f"torch_ar selftest: ok (max |Δℓ| = {d:.2g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
