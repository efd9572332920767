"""LLaDA's supervised objective for the toy diffusion policy (docs/policies-diffusion.md "Supervised
warm start"; LLaDA GUIDELINES.md "SFT"): per row a mask ratio t = ε + (1 − ε)·U, each response slot
masked iff uniform() < t (the prompt never), loss = Σ_rows Σ_masked −log p(o_j | view)/t / (B·N) with
p the softmax without MASK, and its gradient through the model's backward. The draws come from the
given qrl-sim stream (rng.py) in row order: U, then one uniform per response slot. Not the training
loop: `qrl-sim run --backend` hands the in-process warm start over (docs/adapter.md §7), because the
protocol does not carry the task's gold answers."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np

from .model import DiffusionConfig, Plan, backward, forward
from .policy import MASK, Views, dlogits_for, log_softmax_at
from .rng import Rng


def pad_response(response: Sequence[int], gen_length: int, eos: int = 2) -> List[int]:
    """A gold response padded to N with EOS (the model learns to write EOS after the answer)."""
    if len(response) > gen_length:
        raise ValueError(f"sft: response of {len(response)} tokens does not fit generationLength {gen_length}")
    return list(response) + [eos] * (gen_length - len(response))


def masked_diffusion_loss(cfg: DiffusionConfig, params: Dict[str, np.ndarray], prompts: Sequence[Sequence[int]],
                          responses: Sequence[Sequence[int]], rng: Rng, eps: float = 1e-3, plan: Optional[Plan] = None,
                          grads: Optional[Dict[str, np.ndarray]] = None) -> float:
    """The loss of one batch (float64); with `grads`, its gradient is accumulated into them."""
    if not 0 < eps < 1:
        raise ValueError(f"sft: eps must be in (0, 1), got {eps}")
    plan = plan or Plan("fp32")
    B, P, N = len(prompts), len(prompts[0]), len(responses[0])
    tokens = np.zeros((B, P + N), dtype=np.int64)
    row, pos, target, slot, weight = [], [], [], [], []
    for i in range(B):
        t = eps + (1 - eps) * rng.uniform()
        tokens[i, :P] = prompts[i]
        for j in range(N):
            masked = rng.uniform() < t
            tokens[i, P + j] = MASK if masked else responses[i][j]
            if masked:
                row.append(i); pos.append(P + j); target.append(responses[i][j]); slot.append(i * N + j); weight.append(1 / t / (B * N))
    z, cache = forward(cfg, params, tokens, plan)
    loss = 0.0
    for e in range(len(row)):
        loss -= weight[e] * log_softmax_at(z[row[e], pos[e]], target[e], 1.0)
    if grads is not None:
        views = Views(tokens, row, pos, target, list(range(len(row))), [-w for w in weight])
        dl = dlogits_for(z, views, np.ones(len(row)), 1.0, None, len(row), 1)
        backward(cfg, params, grads, cache, dl, plan)
    return loss
