"""The transformers diffusion backend's supervised warm start on the pairs the driver sends
(`warmStart.examples`, capabilities.sftExamples): LLaDA's SFT objective as numpy_diffusion/sft.py
states it (LLaDA GUIDELINES.md "SFT"; docs/policies-diffusion.md "Supervised warm start") — each gold
response padded to N with EOS, per row a mask ratio t = ε + (1 − ε)·U, each response slot masked iff
uniform() < t (the prompt never), loss Σ_rows Σ_masked −log p(o_j | view)/t / (B·N) with p the softmax
without MASK — the draws from the stream `<seed>/sft` (numpy_diffusion's Rng), in row order. Step s
trains on rows s·B … (s+1)·B − 1 as qrl_backend.hf.sft does, with its AdamW of its own (lr = sft.lr,
decay 0.01 on ≥2-D tensors, clip 1) and exact fp32 GEMMs, the trainer's side restored afterwards. Not
byte-identical to the toy's warm start (another network). Not the backend (backend.py)."""

from __future__ import annotations

from typing import Dict, List

import numpy as np
import torch

from ..backend import SftExamples
from ..hf.sft import supervised_loop
from ..numpy_diffusion.policy import EOS, MASK
from ..numpy_diffusion.rng import Rng
from ..numpy_diffusion.sft import pad_response
from ..wire import ProtocolError

EPS = 1e-3  # LLaDA's ε: the smallest mask ratio


def diffusion_sft_steps(model: torch.nn.Module, examples: SftExamples, steps: int, batch_size: int, lr: float, gen_length: int,
                        seed: int, trainer_side: Dict, device: torch.device) -> List[float]:
    """Trains `model` in place; returns the loss of every step (before its update)."""
    prompts = np.asarray(examples.prompts, dtype=np.int64)
    try:
        gold = np.asarray([pad_response(list(r[: int(n)]), gen_length, EOS) for r, n in zip(examples.responses, examples.lengths)], dtype=np.int64)
    except ValueError as e:
        raise ProtocolError("examples.responses", str(e)) from None
    if len(prompts) < steps * batch_size:
        raise ProtocolError("examples", f"must hold steps · batchSize = {steps * batch_size} pairs, got {len(prompts)}")
    rng = Rng(f"{seed}").fork("sft")
    P, N = prompts.shape[1], gen_length

    def batch_loss(s: int) -> torch.Tensor:
        rows = range(s * batch_size, (s + 1) * batch_size)
        tokens = np.zeros((batch_size, P + N), dtype=np.int64)
        weight = np.zeros((batch_size, N))
        for i, r in enumerate(rows):
            t = EPS + (1 - EPS) * rng.uniform()
            tokens[i, :P] = prompts[r]
            for j in range(N):
                masked = rng.uniform() < t
                tokens[i, P + j] = MASK if masked else gold[r, j]
                weight[i, j] = 1 / t / (batch_size * N) if masked else 0.0
        logits = model(input_ids=torch.from_numpy(tokens).to(device), use_cache=False).logits[:, P:].to(torch.float64)
        logits = logits.masked_fill(torch.arange(logits.shape[-1], device=device) == MASK, float("-inf"))
        lsm = torch.log_softmax(logits, -1)
        nll = -lsm.gather(-1, torch.from_numpy(gold[list(rows)]).to(device)[..., None])[..., 0]
        return (nll * torch.from_numpy(weight).to(device)).sum()

    return supervised_loop(model, trainer_side, steps, lr, batch_loss)
