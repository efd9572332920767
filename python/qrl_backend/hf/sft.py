"""The transformers backend's supervised warm start on the pairs the driver sends (`warmStart.examples`,
capabilities.sftExamples). It mirrors qrl-sim's AR warm start (src/policies/ar/supervised.ts,
`sftStep`/`trainSupervised`): step s trains on the examples' rows s·B … (s+1)·B − 1 (the driver's order,
the toy's stream `<seed>/sft`); the loss is the cross-entropy of the response tokens only, each weighted
1/(the batch's response tokens) — the token mean, EOS included; global-norm clip at 1 with the scale
max/(norm + 10⁻⁶) (torch's clip_grad_norm_, the toy's clipGradNorm); AdamW of its own (lr = sft.lr,
β 0.9/0.999, ε 10⁻⁸, decoupled weight decay 0.01 on the ≥2-D tensors only, as the toy's on its 2-D
weights), so the RL optimizer's state stays zero; exact fp32 GEMMs and attention whatever the plan's
trainer side (the toy's warm start is fp32 too), restored afterwards. Differences: the model is the
transformers one, its float64-accumulated fp32 GEMMs are not the toy's fixed-order sums, and torch's AdamW
applies the decay as p·(1 − lr·wd) before the Adam update, the same value as the toy's
p − lr·(m̂/(√v̂+ε) + wd·p) up to rounding. Not the backend (backend.py)."""

from __future__ import annotations

from typing import Callable, Dict, List

import numpy as np
import torch

from ..backend import SftExamples
from ..wire import ProtocolError
from .numerics import adopt_linears, set_attention

WEIGHT_DECAY = 0.01  # the toy's warm start (src/policies/ar/engine.ts: optimizer { lr, weightDecay: 0.01 })
MAX_GRAD_NORM = 1.0  # trainSupervised's default clip


def warm_start_metrics(losses: List[float]) -> Dict[str, float]:
    """qrl-sim's sft/* metrics (warmStartMetrics in src/policies/engine.ts); none without steps."""
    if not losses:
        return {}
    tail = losses[-10:]
    return {"sft/steps": float(len(losses)), "sft/loss_first": losses[0], "sft/loss_last": losses[-1], "sft/loss_last10": sum(tail) / len(tail)}


def supervised_steps(model: torch.nn.Module, examples: SftExamples, steps: int, batch_size: int, lr: float, vocab: int,
                     trainer_side: Dict, device: torch.device) -> List[float]:
    """Trains `model` in place with `steps` supervised steps; returns the loss of every step (before its update)."""
    prompts = np.asarray(examples.prompts, dtype=np.int64)
    responses = np.asarray(examples.responses, dtype=np.int64)
    lengths = np.asarray(examples.lengths, dtype=np.int64)
    for name, a in (("prompts", prompts), ("responses", responses)):
        if a.size and a.max() >= vocab:
            raise ProtocolError(f"examples.{name}", f"token ids must be < the vocabulary size {vocab}")
    P, L = prompts.shape[1], responses.shape[1]
    if P < 1:
        raise ProtocolError("examples.prompts", "prompts must not be empty")
    positions = np.arange(L)[None, :]

    def batch_loss(s: int) -> torch.Tensor:
        rows = slice(s * batch_size, (s + 1) * batch_size)
        weight = torch.from_numpy((positions < lengths[rows, None]).astype(np.float64)).to(device)  # (B, L)
        count = float(weight.sum())
        tokens = torch.from_numpy(np.concatenate([prompts[rows], responses[rows]], axis=1)).to(device)  # (B, P + L)
        logits = model(input_ids=tokens, use_cache=False).logits[:, P - 1 : P + L - 1]  # predicts response k at P−1+k
        lsm = torch.log_softmax(logits.to(torch.float64), -1)
        nll = -lsm.gather(-1, tokens[:, P:, None])[..., 0]
        return (nll * weight).sum() / count

    return supervised_loop(model, trainer_side, steps, lr, batch_loss)


def supervised_loop(model: torch.nn.Module, trainer_side: Dict, steps: int, lr: float,
                    batch_loss: Callable[[int], torch.Tensor]) -> List[float]:
    """The warm start's loop around a loss: `steps` AdamW steps of its own (β 0.9/0.999, ε 10⁻⁸, decay
    WEIGHT_DECAY on the ≥2-D tensors), each on `batch_loss(s)` clipped to MAX_GRAD_NORM, with exact fp32
    GEMMs and attention, the trainer's side and the gradients restored afterwards. Returns every step's loss
    (before its update). Shared with hf_diffusion's warm start."""
    params = list(model.parameters())
    decay = [p for p in params if p.ndim >= 2]
    other = [p for p in params if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": other, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.999), eps=1e-8)
    adopt_linears(model, "fp32")
    set_attention(model, "fp32", None)
    losses: List[float] = []
    try:
        for s in range(steps):
            loss = batch_loss(s)
            opt.zero_grad(set_to_none=False)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, MAX_GRAD_NORM, foreach=False)
            opt.step()
            losses.append(float(loss.detach()))
    finally:
        adopt_linears(model, trainer_side["linear"][1])
        set_attention(model, trainer_side["attention"], None)
        for p in params:
            p.grad = None
    return losses
