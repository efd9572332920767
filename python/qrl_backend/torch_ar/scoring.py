"""The trainer side of an AR batch in torch, shared by torch_ar and hf: from one float64 log-softmax row per
position, ℓ at the sampled token, the entropy, Σ_v π(v)² and ℓ at the engine's top-k ids; and the graphs
kept by handle until `backward`. Not a forward pass (each backend runs its own model first) and not
numpy_ar's scoring, which differentiates by hand."""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import numpy as np
import torch

from ..backend import LogprobsResult, RolloutBatch
from ..wire import FAILED_PRECONDITION, ProtocolError, RpcError


def replayed_log_softmax(z: torch.Tensor, keep: Optional[np.ndarray]) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """(lsm, shifted) of `z` (R, T, V) float64 logits already divided by τ: log softmax over the vocabulary
    and None without a replayed support (`keep` None, numpy_ar's ar_record_support); with one, log softmax
    renormalised over each position's kept set, −inf outside it, and the same row finite everywhere (z/τ −
    the kept set's log-sum-exp) for `score_rows`."""
    if keep is None:
        return torch.log_softmax(z, -1), None
    kept = torch.from_numpy(keep).to(z.device)
    shifted = z - torch.logsumexp(z.masked_fill(~kept, -torch.inf), -1, keepdim=True)
    return shifted.masked_fill(~kept, -torch.inf), shifted


def score_rows(lsm: torch.Tensor, resp: torch.Tensor, mask: torch.Tensor, batch: RolloutBatch, rows: Sequence[int],
               prob_sq_sum: bool, topk: bool, shifted: Optional[torch.Tensor] = None,
               ) -> Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor], Optional[torch.Tensor]]:
    """(ℓ, entropy, Σπ² or None, ℓ at the top-k ids or None) of `lsm` (R, T, V) float64 log-probs at
    temperature, `resp` (R, T) the scored ids, `mask` (R, T) float64; every output 0 off the mask.
    Under a replayed support `lsm` is −inf outside the kept set and `shifted` the same row finite
    everywhere (z/τ − the kept set's log-sum-exp): the entropy and the top-k ℓ read it, as the
    TypeScript trainer scores a top-k id from the sampled token's normaliser."""
    shifted = lsm if shifted is None else shifted
    lp = lsm.gather(-1, resp.unsqueeze(-1)).squeeze(-1) * mask
    ent = -(lsm.exp() * shifted).sum(-1) * mask
    # Σ_v π(v)² of the same float64 softmax row (veRL sum_pi_squared)
    sq = (lsm.detach().exp() ** 2).sum(-1) * mask if prob_sq_sum else None
    tk = None
    if topk:
        if batch.topk is None:
            raise ProtocolError("topk", "needs a batch generated with topkLogprobs (batch.topk is absent)")
        ids = torch.from_numpy(np.asarray(batch.topk.ids[list(rows)], dtype=np.int64)).to(lsm.device)  # (R, T, K)
        valid = (ids >= 0) & (mask.unsqueeze(-1) == 1)
        # the trainer's ℓ at the engine's ids, from the row of ℓ; 0 at an empty slot and off the mask
        tk = torch.where(valid, shifted.gather(-1, ids.clamp(min=0)), torch.zeros((), dtype=lsm.dtype, device=lsm.device))
    return lp, ent, sq, tk


class GradHandles:
    """The graphs of `logprobs(grad=True)` calls, each kept under a handle until its one `backward` or the
    next `step` (`clear`)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.kept: Dict[str, Tuple[torch.Tensor, Optional[torch.Tensor]]] = {}
        self.next = 1

    def result(self, lp: torch.Tensor, ent: torch.Tensor, sq: Optional[torch.Tensor], tk: Optional[torch.Tensor],
               grad: bool) -> LogprobsResult:
        """The wire result of one scoring, its graph kept under a new handle when `grad`."""
        handle = None
        if grad:
            handle = f"lp{self.next}"
            self.next += 1
            self.kept[handle] = (lp, tk)
        return LogprobsResult(lp.detach().cpu().numpy(), ent.detach().cpu().numpy(), handle,
                              prob_sq_sum=None if sq is None else sq.cpu().numpy(),
                              topk_logp=None if tk is None else tk.detach().cpu().numpy())

    def backward(self, handle: str, grad_logp: np.ndarray, grad_topk: Optional[np.ndarray]) -> None:
        """Accumulate d(Σ g·ℓ + Σ g_topk·ℓ_topk)/dθ through the graph of `handle`, then forget it."""
        if handle not in self.kept:
            raise RpcError(FAILED_PRECONDITION, f"backward: unknown or spent handle {handle!r}", "handle")
        lp, tk = self.kept[handle]
        if grad_logp.size != lp.numel():
            raise ProtocolError("gradLogp", f"must hold rows·T = {lp.numel()} values, got {grad_logp.size}")
        if grad_topk is not None and tk is None:
            raise ProtocolError("gradTopk", f"handle {handle!r} was taken without topk")
        if grad_topk is not None and grad_topk.size != tk.numel():
            raise ProtocolError("gradTopk", f"must hold rows·T·K = {tk.numel()} values, got {grad_topk.size}")
        del self.kept[handle]
        g = torch.from_numpy(np.ascontiguousarray(grad_logp, dtype=np.float64).reshape(lp.shape)).to(self.device)
        if grad_topk is None:
            lp.backward(g)
        else:  # one pass through the shared graph
            gk = torch.from_numpy(np.ascontiguousarray(grad_topk, dtype=np.float64).reshape(tk.shape)).to(self.device)
            torch.autograd.backward([lp, tk], [g, gk])

    def clear(self) -> None:
        self.kept.clear()
