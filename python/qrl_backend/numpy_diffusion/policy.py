"""LLaDA's semi-autoregressive low-confidence remasking sampler and the three per-token log-prob
estimators (trajectory, d1, elbo) of docs/policies-diffusion.md, over the numpy model, with the
random streams qrl-sim names (rng.py). Scoring is in doubles: log softmax_{v≠MASK}(z/τ)[y] (over the
slot's kept set when one is given), low confidence softmax_{v≠MASK}(z)[x0] at τ = 1, Gumbel-max
candidates argmax z/τ − log(−log U) with V uniforms per slot. Not the backend (backend.py)."""

from __future__ import annotations

import math

from .fdlibm import exp as _exp, log as _log
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..diffusion_record import DiffusionSequence
from .model import DiffusionConfig, Plan, forward
from .rng import Rng

PAD, BOS, EOS, SEP, MASK = 0, 1, 2, 3, 4

#: The model seam: tokens (R, T) int → (logits (R, T, V) float32 numpy, the cache its backward takes).
#: Default: the numpy network of model.py; another model (qrl_backend.hf_diffusion) passes its own.
Forward = Callable[[np.ndarray], Tuple[np.ndarray, Any]]


@dataclass(frozen=True)
class SamplerConfig:
    """genLength N, blockLength L, steps S, temperature τ ≥ 0, remasking, topK, topP (docs "Defaults")."""

    genLength: int = 24
    blockLength: int = 8
    steps: int = 12
    temperature: float = 1.0
    remasking: str = "low_confidence"
    topK: int = 0
    topP: float = 1.0

    def schedule(self) -> Tuple[int, int, List[int]]:
        """(number of blocks, steps per block s, k[i] tokens committed at step i of a block); the
        divisibility rules are validated (each error names the field)."""
        N, L, S = self.genLength, self.blockLength, self.steps
        if N % L:
            raise ValueError(f"policy.diffusion.blockLength: must divide generationLength {N}, got {L}")
        nb = N // L
        if S % nb:
            raise ValueError(f"policy.diffusion.steps: must be a multiple of the {nb} blocks, got {S}")
        s = S // nb
        if s > L:
            raise ValueError(f"policy.diffusion.steps: at most blockLength = {L} steps per block, got {s}")
        if self.remasking not in ("low_confidence", "random"):
            raise ValueError(f"policy.diffusion.remasking: must be low_confidence or random, got {self.remasking!r}")
        return nb, s, [L // s + (1 if i < L % s else 0) for i in range(s)]


def log_softmax_at(z: np.ndarray, y: int, tau: float, keep: Optional[np.ndarray] = None) -> float:
    """log softmax_{v≠MASK, v kept}(z/τ)[y] in doubles: max, then a sequential sum of exponentials."""
    V = z.shape[0]
    ok = [v for v in range(V) if v != MASK and (keep is None or keep[v])]
    s = [float(z[v]) / tau for v in ok]
    m = max(s)
    acc = 0.0
    for x in s:
        acc += _exp(x - m)
    return float(z[y]) / tau - (m + _log(acc))


def entropy_at(z: np.ndarray, tau: float, keep: Optional[np.ndarray] = None) -> float:
    V = z.shape[0]
    ok = [v for v in range(V) if v != MASK and (keep is None or keep[v])]
    s = [float(z[v]) / tau for v in ok]
    m = max(s)
    acc = 0.0
    for x in s:
        acc += _exp(x - m)
    lse = m + _log(acc)
    h = 0.0
    for x in s:
        lp = x - lse
        h -= _exp(lp) * lp
    return h


def kept_set(z: np.ndarray, tau: float, top_k: int, top_p: float) -> Optional[np.ndarray]:
    """The draw's kept set over ids ≠ MASK: τ, then top-k (ties to the lower id), then the smallest
    most likely prefix reaching top-p; None when neither truncates."""
    V = z.shape[0]
    k_on, p_on = 0 < top_k < V - 1, top_p < 1
    if not k_on and not p_on:
        return None
    ids = [v for v in range(V) if v != MASK]
    order = sorted(ids, key=lambda v: (-float(z[v]), v))
    k = top_k if k_on else len(order)
    keep = np.zeros(V, dtype=np.uint8)
    for v in order[:k]:
        keep[v] = 1
    if p_on:
        before = 0.0
        for i, v in enumerate(order[:k]):
            if i > 0 and not before < top_p:
                keep[v] = 0
            before += _exp(log_softmax_at(z, v, tau, order_keep(keep, order[:k])))
    return keep


def order_keep(keep: np.ndarray, top: List[int]) -> np.ndarray:
    out = np.zeros_like(keep)
    out[top] = 1
    return out


def sample(cfg: DiffusionConfig, params: Dict[str, np.ndarray], prompts: List[List[int]], sc: SamplerConfig, plan: Plan, seed: str,
           fwd: Optional[Forward] = None):
    """The sampler of docs/policies-diffusion.md "Sampler" → (sequences, logp_rollout (B, N), τ', support or None).
    `fwd` replaces the numpy network (then `params` and `plan` are not read; `cfg` gives V)."""
    nb, s, ks = sc.schedule()
    B, P, N, L = len(prompts), len(prompts[0]), sc.genLength, sc.blockLength
    tau = float(sc.temperature)
    tau_l = tau if tau > 0 else 1.0
    root = Rng(seed)
    rngs = [root.fork(f"row-{r}") for r in range(B)]
    x = np.full((B, P + N), MASK, dtype=np.int64)
    x[:, :P] = np.asarray(prompts)
    commit = np.full((B, N), -1, dtype=np.int32)
    logp = np.zeros((B, N))
    V = cfg.vocabSize
    support = np.ones((B, N, V), dtype=np.uint8)
    truncated = False
    for b in range(nb):
        lo, hi = P + b * L, P + (b + 1) * L
        for i in range(s):
            step = b * s + i
            z, _ = forward(cfg, params, x, plan) if fwd is None else fwd(x)  # (B, T, V) float32
            for r in range(B):
                cands = []
                for j in range(lo, hi):
                    if x[r, j] != MASK:
                        continue
                    zj = z[r, j]
                    keep = None
                    if tau == 0:
                        x0 = _argmax(zj)
                    else:
                        keep = kept_set(zj, tau, sc.topK, sc.topP)
                        x0 = _gumbel(zj, tau, rngs[r], keep)
                    if sc.remasking == "low_confidence":
                        conf = _exp(float(zj[x0]) - _lse(zj, 1.0))
                    else:
                        conf = rngs[r].uniform_open()
                    cands.append((conf, j, x0, keep))
                chosen = sorted(cands, key=lambda c: (-c[0], c[1]))[: ks[i]]
                for conf, j, x0, keep in chosen:
                    x[r, j] = x0
                    commit[r, j - P] = step
                    if keep is not None:
                        support[r, j - P] = keep
                        truncated = True
                    logp[r, j - P] = log_softmax_at(z[r, j], x0, tau_l, keep)
    seqs = [DiffusionSequence(f"{seed}/row-{r}", [int(t) for t in prompts[r]], [int(t) for t in x[r, P:]], commit[r].copy()) for r in range(B)]
    return seqs, logp, tau_l, (support if truncated else None)


def _argmax(z: np.ndarray) -> int:
    best, bv = -1, -math.inf
    for v in range(z.shape[0]):
        if v == MASK:
            continue
        if best < 0 or float(z[v]) > bv:
            best, bv = v, float(z[v])
    return best


def _gumbel(z: np.ndarray, tau: float, rng: Rng, keep: Optional[np.ndarray]) -> int:
    best, bs = -1, -math.inf
    for v in range(z.shape[0]):
        g = -_log(-_log(rng.uniform_open()))
        if v == MASK or (keep is not None and not keep[v]):
            continue
        score = float(z[v]) / tau + g
        if best < 0 or score > bs:
            best, bs = v, score
    return best


def _lse(z: np.ndarray, tau: float) -> float:
    s = [float(z[v]) / tau for v in range(z.shape[0]) if v != MASK]
    m = max(s)
    acc = 0.0
    for x in s:
        acc += _exp(x - m)
    return m + _log(acc)


# --- estimators ----------------------------------------------------------------------------


@dataclass
class Views:
    """The masked views one estimator scores: tokens (R, T), and per scored pair its view row, position,
    target token, slot index into (B·N) and weight."""

    tokens: np.ndarray
    row: List[int]
    pos: List[int]
    target: List[int]
    slot: List[int]
    weight: List[float]


def views_for(estimator: str, seqs: Sequence[DiffusionSequence], seed: str, p_mask_prompt: float = 0.15, elbo_samples: int = 8) -> Views:
    B, P, N = len(seqs), len(seqs[0].prompt), len(seqs[0].response)
    T = P + N
    row, pos, target, slot, weight = [], [], [], [], []
    if estimator == "trajectory":
        S = 0
        for i, s in enumerate(seqs):
            if s.commit_step is None:
                raise ValueError(f"batch.record.sequences.{i}.commitStep: trajectory needs the commit steps of a sampled sequence")
            S = max(S, int(np.max(s.commit_step)) + 1)
        tokens = np.zeros((B * S, T), dtype=np.int64)
        for i, s in enumerate(seqs):
            resp = np.asarray(s.response)
            for k in range(S):
                tokens[i * S + k, :P] = s.prompt
                tokens[i * S + k, P:] = np.where(np.asarray(s.commit_step) < k, resp, MASK)
            for j in range(N):
                row.append(i * S + int(s.commit_step[j])); pos.append(P + j); target.append(s.response[j]); slot.append(i * N + j); weight.append(1.0)
    elif estimator == "d1":
        tokens = np.zeros((B, T), dtype=np.int64)
        for i, s in enumerate(seqs):
            rng = Rng(seed).fork("d1").fork(s.id)
            for j in range(P):
                tokens[i, j] = MASK if rng.uniform() < p_mask_prompt else s.prompt[j]
            tokens[i, P:] = MASK
            for j in range(N):
                row.append(i); pos.append(P + j); target.append(s.response[j]); slot.append(i * N + j); weight.append(1.0)
    elif estimator == "elbo":
        M = elbo_samples
        tokens = np.zeros((B * M, T), dtype=np.int64)
        root = Rng(seed).fork("elbo")
        for i, s in enumerate(seqs):
            rng = root.fork(s.id)
            for m in range(M):
                r = i * M + m
                tokens[r, :P] = s.prompt
                tokens[r, P:] = s.response
                l = 1 + rng.int(N)
                masked = sorted(rng.shuffle(list(range(N)))[:l])
                for j in masked:
                    tokens[r, P + j] = MASK
                    row.append(r); pos.append(P + j); target.append(s.response[j]); slot.append(i * N + j); weight.append(N / l / M)
    else:
        raise ValueError(f"batch.record.estimator: unknown estimator {estimator!r}")
    return Views(tokens, row, pos, target, slot, weight)


def score(cfg: DiffusionConfig, params, plan: Plan, views: Views, B: int, N: int, tau: float, support: Optional[np.ndarray],
          fwd: Optional[Forward] = None):
    """One batched forward over the views → (logp (B·N), entropy (B·N), the forward's logits and cache);
    `fwd` as in `sample`."""
    z, cache = forward(cfg, params, views.tokens, plan) if fwd is None else fwd(views.tokens)
    logp = np.zeros(B * N)
    ent = np.zeros(B * N)
    count = np.zeros(B * N)
    sup = None if support is None else support.reshape(B * N, -1)
    for e in range(len(views.row)):
        zr = z[views.row[e], views.pos[e]]
        sl = views.slot[e]
        keep = None if sup is None else sup[sl]
        logp[sl] = logp[sl] + views.weight[e] * log_softmax_at(zr, views.target[e], tau, keep)
        ent[sl] = ent[sl] + entropy_at(zr, tau, keep)
        count[sl] += 1
    ent = np.where(count > 1, ent / np.maximum(count, 1), ent)
    return logp, ent, z, cache


def dlogits_for(z: np.ndarray, views: Views, dlogp: np.ndarray, tau: float, support: Optional[np.ndarray], B: int, N: int) -> np.ndarray:
    """dL/dlogits (R, T, V) float32 of Σ dlogp·ℓ: per scored pair g·(onehot − p)/τ over ids ≠ MASK, p = 0 off the kept set."""
    out = np.zeros(z.shape, dtype=np.float32)
    V = z.shape[-1]
    sup = None if support is None else support.reshape(B * N, -1)
    for e in range(len(views.row)):
        g = float(dlogp[views.slot[e]]) * views.weight[e]
        if g == 0:
            continue
        zr = z[views.row[e], views.pos[e]]
        keep = None if sup is None else sup[views.slot[e]]
        ok = [v for v in range(V) if v != MASK and (keep is None or keep[v])]
        s = [float(zr[v]) / tau for v in ok]
        m = max(s)
        acc = 0.0
        for x in s:
            acc += _exp(x - m)
        lse = m + _log(acc)
        d = out[views.row[e], views.pos[e]]
        y = views.target[e]
        for v in range(V):
            if v == MASK:
                continue
            p = 0.0 if (keep is not None and not keep[v]) else _exp(float(zr[v]) / tau - lse)
            d[v] = np.float32(float(d[v]) + (g * ((1.0 if v == y else 0.0) - p)) / tau)
    return out
