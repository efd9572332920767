"""NumpyArBackend: a qrl-backend/1 backend around the numpy toy AR policy — sampling with the rollout
plan, trainer log-probs and their backward with the trainer plan, global-norm clipping and AdamW,
a frozen reference, checkpoints as safetensors. Not the model itself (model.py)."""

from __future__ import annotations

import hashlib
import json
import sys
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ..backend import Backend, ConfiguredFromRun, LogprobsResult, RolloutBatch
from ..numpy_checkpoint import load_moments, load_state, load_weights, save_checkpoint
from ..server import add_server_arguments
from ..wire import FAILED_PRECONDITION, ProtocolError, RpcError, TopkLogprobs, read_safetensors
from .model import CONFIG_KEY, ArConfig, Plan, backward, check_params, forward, init_params, log_softmax_rows, param_specs

PAD, BOS, EOS, SEP, MASK = 0, 1, 2, 3, 4
VERSION = "0.1.0"


class NumpyArBackend(Backend):
    """The toy AR policy in numpy behind qrl-backend/1.

    Weights: a dict of float32 arrays named as the TypeScript ParamStore names them. The rollout
    engine holds a copy made at `sync` (its weight version is what `generate` reports).
    """

    def __init__(self, cfg: ArConfig, params: Dict[str, np.ndarray], plan: str = "fp32", lr: float = 1e-3,
                 weight_decay: float = 0.0, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
                 max_new_tokens: Optional[int] = None, sampling: Optional[Dict[str, Any]] = None,
                 support_replay: bool = False):
        check_params(cfg, params)
        self.cfg = cfg
        self.plan_name = plan
        self.rollout_plan = Plan(plan)
        self.trainer_plan = Plan(plan)
        self.params = {k: np.asarray(v, dtype=np.float32).copy() for k, v in params.items()}
        self.rollout_params = {k: v.copy() for k, v in self.params.items()}
        self.reference = {k: v.copy() for k, v in self.params.items()}
        self.grads = {k: np.zeros_like(v) for k, v in self.params.items()}
        self.m = {k: np.zeros_like(v) for k, v in self.params.items()}
        self.v = {k: np.zeros_like(v) for k, v in self.params.items()}
        self.t = 0
        self.version = 0
        self.served = 0
        self.lr, self.wd, self.beta1, self.beta2, self.eps = lr, weight_decay, beta1, beta2, eps
        self.max_new_tokens = max_new_tokens
        self.sampling = sampling or {"temperature": 1.0, "topK": 0, "topP": 1.0, "logprob": "processed"}
        #: sampling-support replay (run.policy.sampler.supportReplay): a sampled batch's record keeps the kept
        #: set of every position (`support`, uint8 (B, T, V)), and `logprobs` renormalises over a record's support
        self.support_replay = support_replay
        self.handles: Dict[str, Any] = {}
        self.next_handle = 1

    # --- description ---------------------------------------------------------------------------

    def info(self) -> Dict[str, Any]:
        side = Plan.PLANS[self.plan_name]
        return {
            "backend": {"name": "qrl_backend.numpy_ar", "version": VERSION},
            "policy": "ar",
            "vocabulary": {"size": self.cfg.vocabSize, "pad": PAD, "bos": BOS, "eos": EOS, "sep": SEP, "mask": MASK},
            "plan": {"name": self.plan_name, "rollout": dict(side, decode="recompute", logprob="processed"), "trainer": side},
            "capabilities": {"logprobs": ["processed", "raw"], "entropy": True, "warmStart": False, "probSqSum": True,
                             "topkLogprobs": True, "supportReplay": True},
            "parameters": int(sum(v.size for v in self.params.values())),
        }

    # --- rollout -------------------------------------------------------------------------------

    def sync(self) -> int:
        self.rollout_params = {k: v.copy() for k, v in self.params.items()}
        self.served = self.version
        return self.served

    def _stream(self, seed: str) -> np.random.Generator:
        digest = hashlib.sha256(seed.encode("utf8")).digest()
        return np.random.Generator(np.random.PCG64(int.from_bytes(digest[:16], "little")))

    generate_keywords = frozenset({"max_new_tokens", "topk_logprobs"})  # Backend.generate_keywords

    def generate(self, prompts: List[List[int]], seed: str, sampling: Optional[Dict[str, Any]], greedy: bool, side: str,
                 max_new_tokens: Optional[int] = None, topk_logprobs: int = 0) -> RolloutBatch:
        P = len(prompts[0])
        if P < 1:
            raise ProtocolError("prompts.0", "must not be empty")
        for b, p in enumerate(prompts):
            if len(p) != P:
                raise ProtocolError(f"prompts.{b}", f"every prompt must have length {P} (left-pad them), got {len(p)}")
            for j, t in enumerate(p):
                if t >= self.cfg.vocabSize:
                    raise ProtocolError(f"prompts.{b}.{j}", f"token {t} is outside the vocabulary (size {self.cfg.vocabSize})")
        L = max_new_tokens if max_new_tokens is not None else self.max_new_tokens if self.max_new_tokens is not None else self.cfg.maxLen - P
        if L < 1 or P + L > self.cfg.maxLen:
            field = "maxNewTokens" if max_new_tokens is not None else "prompts"
            raise ProtocolError(field, f"prompt length {P} + {L} response tokens must be ≤ maxLen {self.cfg.maxLen}")
        K = 0 if greedy else topk_logprobs
        if K > self.cfg.vocabSize:
            raise ProtocolError("topkLogprobs", f"must be ≤ the vocabulary size {self.cfg.vocabSize}, got {K}")
        s = sampling or self.sampling
        tau, top_k, top_p, report = s["temperature"], s["topK"], s["topP"], s["logprob"]
        weights, plan = (self.rollout_params, self.rollout_plan) if side == "rollout" else (self.params, self.trainer_plan)
        rng = self._stream(seed)
        B, V = len(prompts), self.cfg.vocabSize
        tokens = np.full((B, P + L), PAD, dtype=np.int32)
        tokens[:, :P] = np.asarray(prompts, dtype=np.int32)
        mask = np.zeros((B, L))
        logp = np.zeros((B, L))
        active = np.ones(B, dtype=bool)
        topk = TopkLogprobs(K, np.full((B, L, K), -1, dtype=np.int32), np.zeros((B, L, K))) if K else None
        support = np.zeros((B, L, V), dtype=np.uint8) if self.support_replay and not greedy else None
        for k in range(L):
            logits, _ = forward(self.cfg, weights, tokens[:, : P + k], plan)
            z = logits[:, -1, :].astype(np.float64)  # (B, V)
            for b in range(B):
                if not active[b]:
                    continue
                raw = log_softmax_rows(z[b], 1.0)
                if greedy:
                    y = int(np.argmax(z[b]))  # ties: lowest id
                    lp_proc = 0.0
                else:
                    keep = _support(z[b], tau, top_k, top_p)
                    proc = log_softmax_rows(z[b], tau, keep)
                    u = rng.random()
                    cum = np.cumsum(np.where(keep, np.exp(proc), 0.0))
                    idx = np.nonzero(keep & (u < cum))[0]
                    y = int(idx[0]) if idx.size else int(np.nonzero(keep)[0][-1])
                    lp_proc = float(proc[y])
                    if support is not None:
                        support[b, k] = keep
                tokens[b, P + k] = y
                mask[b, k] = 1.0
                logp[b, k] = lp_proc if report == "processed" else float(raw[y])
                if topk is not None:
                    # the ℓroll array itself, so that the sampled id's slot holds ℓroll bit for bit
                    _record_topk(proc if report == "processed" else raw, keep, K, topk.ids[b, k], topk.logp[b, k])
                if y == EOS:
                    active[b] = False
            if not active.any():
                break
        version = self.served if side == "rollout" else self.version
        record = {"kind": "ar", "promptLength": P, "temperature": 1.0 if greedy else float(tau)}
        if support is not None:
            record["support"] = support
        return RolloutBatch(version, [list(p) for p in prompts], tokens[:, P:].copy(), mask, logp, record, topk)

    # --- trainer -------------------------------------------------------------------------------

    logprobs_keywords = frozenset({"prob_sq_sum", "topk"})  # Backend.logprobs_keywords

    def logprobs(self, batch: RolloutBatch, rows: Sequence[int], policy: str, grad: bool, prob_sq_sum: bool = False,
                 topk: bool = False):
        tau = ar_record_temperature(batch)
        rows = list(rows)
        prompts = np.asarray([batch.prompts[r] for r in rows], dtype=np.int32)
        resp = np.asarray(batch.responses[rows], dtype=np.int32)
        mask = np.asarray(batch.mask[rows])
        P, T = prompts.shape[1], resp.shape[1]
        if P + T > self.cfg.maxLen:
            raise ProtocolError("batch.T", f"prompt {P} + response {T} exceeds maxLen {self.cfg.maxLen}")
        if resp.size and (resp.min() < 0 or resp.max() >= self.cfg.vocabSize):
            raise ProtocolError("batch.responses", f"token ids must be in [0, {self.cfg.vocabSize})")
        tokens = np.concatenate([prompts, resp], axis=1)
        weights = self.params if policy == "current" else self.reference
        logits, cache = forward(self.cfg, weights, tokens, self.trainer_plan)
        z = logits[:, P - 1 : P + T - 1, :]  # (R, T, V): row t predicts response token t
        lsm, shifted = _replayed_log_softmax(z, tau, ar_record_support(batch, rows, self.cfg.vocabSize))
        lp = np.take_along_axis(lsm, resp[..., None], axis=-1)[..., 0] * mask
        ent = -np.sum(np.exp(lsm) * shifted, axis=-1) * mask  # shifted: lsm, finite outside a kept set (p = 0 there)
        # Σ_v π(v)² of the same softmax row (veRL sum_pi_squared), float64
        sq = np.sum(np.exp(lsm.astype(np.float64)) ** 2, axis=-1) * mask if prob_sq_sum else None
        ids = None
        topk_logp = None
        if topk:
            if batch.topk is None:
                raise ProtocolError("topk", "needs a batch generated with topkLogprobs (batch.topk is absent)")
            ids = np.asarray(batch.topk.ids[rows], dtype=np.int32)  # (R, T, K)
            topk_logp = _trainer_topk(shifted, ids, mask)
        handle = None
        if grad:
            handle = f"lp{self.next_handle}"
            self.next_handle += 1
            self.handles[handle] = (cache, lsm, resp, mask, tau, P, logits.shape, ids)
        return LogprobsResult(lp, ent, handle, prob_sq_sum=sq, topk_logp=topk_logp)

    backward_keywords = frozenset({"grad_topk"})  # Backend.backward_keywords

    def backward(self, handle: str, grad_logp: np.ndarray, grad_topk: Optional[np.ndarray] = None) -> None:
        if handle not in self.handles:
            raise RpcError(FAILED_PRECONDITION, f"backward: unknown or spent handle {handle!r}", "handle")
        cache, lsm, resp, mask, tau, P, shape, ids = self.handles[handle]
        R, T = resp.shape
        if grad_logp.size != R * T:
            raise ProtocolError("gradLogp", f"must hold rows·T = {R * T} values, got {grad_logp.size}")
        if grad_topk is not None and ids is None:
            raise ProtocolError("gradTopk", f"handle {handle!r} was taken without topk")
        if grad_topk is not None and grad_topk.size != ids.size:
            raise ProtocolError("gradTopk", f"must hold rows·T·K = {ids.size} values, got {grad_topk.size}")
        del self.handles[handle]
        g = grad_logp.reshape(R, T) * mask  # (R, T)
        onehot = np.zeros(lsm.shape)
        np.put_along_axis(onehot, resp[..., None], 1.0, axis=-1)
        if grad_topk is not None:
            onehot, g = _with_topk(onehot * g[..., None], g, ids, grad_topk.reshape(ids.shape), mask)
            dz = (onehot - g[..., None] * np.exp(lsm)) / tau  # (R, T, V)
        else:
            dz = g[..., None] * (onehot - np.exp(lsm)) / tau  # (R, T, V)
        dlogits = np.zeros(shape)
        dlogits[:, P - 1 : P + T - 1, :] = dz
        G = backward(self.cfg, self.params, cache, dlogits.astype(np.float32), self.trainer_plan)
        for k in self.grads:
            self.grads[k] += G[k]

    def step(self, max_grad_norm: float) -> Dict[str, Any]:
        norm = float(np.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in self.grads.values())))
        coef = max_grad_norm / (norm + 1e-6)
        self.t += 1
        bc1, bc2 = 1 - self.beta1**self.t, 1 - self.beta2**self.t
        for k, w in self.params.items():
            g = self.grads[k].astype(np.float64) * (coef if coef < 1 else 1.0)
            m = self.beta1 * self.m[k].astype(np.float64) + (1 - self.beta1) * g
            v = self.beta2 * self.v[k].astype(np.float64) + (1 - self.beta2) * g * g
            self.m[k], self.v[k] = m.astype(np.float32), v.astype(np.float32)
            wd = self.wd if w.ndim == 2 else 0.0
            upd = self.m[k].astype(np.float64) / bc1 / (np.sqrt(self.v[k].astype(np.float64) / bc2) + self.eps) + wd * w.astype(np.float64)
            self.params[k] = (w.astype(np.float64) - self.lr * upd).astype(np.float32)
            self.grads[k][...] = 0
        self.handles.clear()
        self.version += 1
        return {"gradNorm": norm, "weightVersion": self.version}

    def set_reference(self) -> None:
        self.reference = {k: v.copy() for k, v in self.params.items()}

    # --- checkpoints ---------------------------------------------------------------------------

    def save(self, directory: str) -> None:
        order = [n for n, _, _ in param_specs(self.cfg)]
        state = {"weightVersion": self.version, "servedVersion": self.served, "plan": self.plan_name}
        save_checkpoint(directory, CONFIG_KEY, self.cfg.to_json(), order, self.params, self.reference, (self.m, self.v, self.t), state)

    def load(self, directory: str) -> None:
        self.params, self.reference = load_weights(directory, CONFIG_KEY, lambda j: ArConfig.from_json(j) == self.cfg,
                                                   self.cfg.to_json(), lambda p: check_params(self.cfg, p))
        moments = load_moments(directory, list(self.params))
        if moments is not None:
            self.m, self.v, self.t = moments
        else:
            self.m = {k: np.zeros_like(v) for k, v in self.params.items()}
            self.v = {k: np.zeros_like(v) for k, v in self.params.items()}
            self.t = 0
        state = load_state(directory)
        self.version = int(state.get("weightVersion", self.version))
        self.grads = {k: np.zeros_like(v) for k, v in self.params.items()}
        self.handles.clear()
        self.sync()
        self.served = int(state.get("servedVersion", self.served))

def ar_record_temperature(batch: RolloutBatch) -> float:
    """The temperature τ an AR batch is scored at (`record.temperature`, 1 when absent), refusing a record of
    another kind or τ ≤ 0 with the field named. Shared by every AR backend's `logprobs`."""
    rec = batch.record
    if rec.get("kind") != "ar":
        raise ProtocolError("batch.record.kind", f"this backend scores records of kind 'ar', got {rec.get('kind')!r}")
    tau = float(rec.get("temperature", 1.0))
    if not tau > 0:
        raise ProtocolError("batch.record.temperature", f"must be > 0, got {tau}")
    return tau


def ar_record_support(batch: RolloutBatch, rows: Sequence[int], V: int) -> Optional[np.ndarray]:
    """The kept set (R, T, V) bool of the batch's rows from `record.support` (uint8 0/1, B·T·V values as sent;
    the engine's (B, T, V) array in process), the whole vocabulary at an unscored position (no empty row), or
    None when the record has none. Refuses a support of another size, values other than 0 and 1, or a sampled
    token outside its position's set, naming the field."""
    sup = batch.record.get("support")
    if sup is None:
        return None
    sup = np.asarray(sup)
    rows = list(rows)
    B, T = batch.responses.shape
    if sup.size != B * T * V:
        raise ProtocolError("batch.record.support", f"must hold B·T·V = {B}·{T}·{V} = {B * T * V} values, got {sup.size}")
    if sup.size and not np.isin(sup, (0, 1)).all():
        raise ProtocolError("batch.record.support", "must hold 0 or 1")
    keep = sup.reshape(B, T, V)[rows] == 1
    resp = np.asarray(batch.responses[rows], dtype=np.int64)
    scored = np.asarray(batch.mask[rows]) == 1
    drawn = np.take_along_axis(keep, np.clip(resp, 0, V - 1)[..., None], axis=-1)[..., 0]
    bad = np.argwhere(scored & ~drawn)
    if bad.size:
        r, t = (int(x) for x in bad[0])
        raise ProtocolError("batch.record.support", f"row {rows[r]} position {t}: the sampled token {int(resp[r, t])} is outside its kept set")
    return keep | ~scored[..., None]


def _replayed_log_softmax(z: np.ndarray, tau: float, keep: Optional[np.ndarray]):
    """(lsm, shifted) of the trainer's logits `z` (R, T, V): log softmax(z/τ) twice without a replayed support
    (`keep` None); with one, log softmax renormalised over the kept set, −inf outside it (ℓ is then the
    sampler's processed ℓroll), and the same row finite everywhere (z/τ − the kept set's log-sum-exp), which
    the entropy and the top-k ℓ read, as the TypeScript trainer scores a top-k id from that normaliser.
    torch_ar/scoring.py's replayed_log_softmax is the same in torch."""
    if keep is None:
        lsm = log_softmax_rows(z, tau)
        return lsm, lsm
    s = z.astype(np.float64) / tau
    kept = np.where(keep, s, -np.inf)
    m = kept.max(axis=-1, keepdims=True)
    shifted = s - (m + np.log(np.sum(np.exp(kept - m), axis=-1, keepdims=True)))  # log_softmax_rows' steps
    return np.where(keep, shifted, -np.inf), shifted


def _record_topk(dist: np.ndarray, keep: np.ndarray, K: int, ids: np.ndarray, logp: np.ndarray) -> None:
    """The K most likely kept ids of one position's log-prob row `dist` into `ids`/`logp` (K slots, −1 and 0
    past the kept set): ℓ descending, ties to the lower id (the TypeScript engine's recordTopk in
    src/policies/ar/topk.ts orders by logit, then id; the same order but where float64 rounding makes two
    different logits' ℓ equal)."""
    kept = np.nonzero(keep)[0]
    order = kept[np.lexsort((kept, -dist[kept]))][:K]
    ids[: order.size] = order
    logp[: order.size] = dist[order]


def _trainer_topk(lsm: np.ndarray, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The trainer's ℓ at the engine's top-k ids: lsm (R, T, V) at ids (R, T, K), 0 at an empty slot and off the mask."""
    valid = (ids >= 0) & (mask[..., None] == 1)
    at = np.take_along_axis(lsm, np.where(valid, ids, 0), axis=-1)
    return np.where(valid, at, 0.0)


def _with_topk(onehot: np.ndarray, g: np.ndarray, ids: np.ndarray, gk: np.ndarray, mask: np.ndarray):
    """The log-softmax gradient's two parts with top-k coefficients: Σ_j g_j·1[v = id_j] added to g·1[v = y]
    (R, T, V), and the total coefficient g + Σ_j g_j (R, T) that multiplies −softmax (src/policies/ar/logprobs.ts
    backwardTopkRow). Empty slots and masked positions contribute nothing."""
    valid = (ids >= 0) & (mask[..., None] == 1)
    gk = np.where(valid, gk, 0.0)
    R, T, K = ids.shape
    r, t, _ = np.meshgrid(np.arange(R), np.arange(T), np.arange(K), indexing="ij")
    np.add.at(onehot, (r, t, np.where(valid, ids, 0)), gk)
    return onehot, g + gk.sum(axis=-1)


def _support(z: np.ndarray, tau: float, top_k: int, top_p: float) -> np.ndarray:
    """The processed distribution's support (temperature, then top-k with ties to the lower id, then
    the smallest most-likely prefix whose mass reaches top-p), as qrl-sim's sampler defines it."""
    V = z.shape[0]
    k_on, p_on = 0 < top_k < V, top_p < 1
    if not k_on and not p_on:
        return np.ones(V, dtype=bool)
    order = np.lexsort((np.arange(V), -z))
    k = top_k if k_on else V
    keep = np.zeros(V, dtype=bool)
    keep[order[:k]] = True
    if not p_on:
        return keep
    lsm = log_softmax_rows(z, tau, keep)
    before = 0.0
    for i in range(k):
        v = order[i]
        if i > 0 and not before < top_p:
            keep[v] = False
        before += float(np.exp(lsm[v]))
    return keep


class ConfiguredNumpyAr(ConfiguredFromRun):
    """The numpy backend built from what the driver sends (`configure`), command-line flags overriding:
    `python3 -m qrl_backend.numpy_ar` alone serves `qrl-sim run --backend` (the model from
    setup.model, the plan from setup.plan.name, AdamW from setup.optim, the sampler from
    setup.sampling). Until configured it answers `info` with a failed precondition naming `setup`."""

    def configure(self, run: Optional[Dict[str, Any]], setup: Optional[Dict[str, Any]]) -> None:
        if not self.needs_build(setup):
            return
        a = self.flags
        if a.config or a.weights:
            try:
                cfg, params = _model_from_flags(a)
            except _FlagError as e:
                raise ProtocolError("setup.model", str(e)) from None
        else:
            model = setup.get("model")
            if not isinstance(model, dict):
                raise ProtocolError("setup.model", "expected the ArConfig object (or start the backend with --config/--weights)")
            try:
                cfg = ArConfig.from_json(json.dumps(model))
            except (TypeError, ValueError) as e:
                raise ProtocolError("setup.model", str(e)) from None
            params = init_params(cfg, a.init_seed)
        plan = a.plan
        if plan is None:
            name = (setup.get("plan") or {}).get("name") if isinstance(setup.get("plan"), dict) else None
            plan = name or "fp32"
            if plan not in Plan.PLANS:
                raise ProtocolError("setup.plan.name", f"this backend runs plans {', '.join(sorted(Plan.PLANS))}, the run asks for {plan!r}")
        optim = setup.get("optim") or {}
        sampling = dict(setup.get("sampling") or {"temperature": 1.0, "topK": 0, "topP": 1.0, "logprob": "processed"})
        for flag, key in (("temperature", "temperature"), ("top_k", "topK"), ("top_p", "topP")):
            if getattr(a, flag) is not None:
                sampling[key] = getattr(a, flag)
        self.inner = NumpyArBackend(
            cfg, params, plan=plan,
            lr=a.lr if a.lr is not None else float(optim.get("lr", 1e-3)),
            weight_decay=a.weight_decay if a.weight_decay is not None else float(optim.get("weightDecay", 0.0)),
            beta1=float(optim.get("beta1", 0.9)), beta2=float(optim.get("beta2", 0.999)), eps=float(optim.get("eps", 1e-8)),
            max_new_tokens=a.max_new_tokens if a.max_new_tokens is not None else setup.get("maxNewTokens"),
            sampling=sampling,
            support_replay=_support_replay(run, a),
        )
        self.setup = setup


def _support_replay(run: Optional[Dict[str, Any]], a: Any) -> bool:
    """run.policy.sampler.supportReplay of the run the driver sent, else the --support-replay flag."""
    sampler = ((run or {}).get("policy") or {}).get("sampler") or {}
    return bool(sampler.get("supportReplay", False)) or bool(getattr(a, "support_replay", False))


class _FlagError(Exception):
    """A --weights/--config value that does not build a model; the message names the flag and value."""


def _model_from_flags(a: Any):
    meta: Dict[str, str] = {}
    params = None
    if a.weights:
        try:
            params, meta = read_safetensors(a.weights)
        except OSError as e:
            raise _FlagError(f"--weights {a.weights}: {e.strerror or e}") from None
        except (ValueError, TypeError, KeyError) as e:
            raise _FlagError(f"--weights {a.weights}: not a safetensors file ({e})") from None
        if CONFIG_KEY not in meta and not a.config:
            raise _FlagError(f"--weights {a.weights}: no {CONFIG_KEY} metadata; pass --config")
    source = f"--config {a.config}" if a.config else f"--weights {a.weights}: metadata {CONFIG_KEY}"
    try:
        cfg = ArConfig.from_json(a.config or meta[CONFIG_KEY])
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise _FlagError(f"{source}: {e}") from None
    return cfg, (params if params is not None else init_params(cfg, a.init_seed))


def build(argv: Optional[List[str]] = None) -> Backend:
    """The backend from command-line options (see `python3 -m qrl_backend.numpy_ar --help`). With
    --config or --weights the model is built now; without, from the run the driver sends (`configure`).
    Flags given override what the run sends."""
    import argparse

    ap = argparse.ArgumentParser(prog="python3 -m qrl_backend.numpy_ar", description="qrl-backend/1 server: the toy AR policy in numpy.")
    ap.add_argument("--weights", help="safetensors file of initial weights (ParamStore names; its metadata holds the config)")
    ap.add_argument("--config", help="ArConfig as JSON, e.g. '{\"vocabSize\":13,\"maxLen\":15}' (default: setup.model of the run)")
    ap.add_argument("--init-seed", type=int, default=0, help="seed of numpy's GPT-2 initialization (when --weights is absent)")
    ap.add_argument("--plan", choices=sorted(Plan.PLANS), help="default: setup.plan.name of the run, else fp32")
    ap.add_argument("--lr", type=float, help="default: setup.optim.lr of the run, else 1e-3")
    ap.add_argument("--weight-decay", type=float)
    ap.add_argument("--max-new-tokens", type=int)
    ap.add_argument("--temperature", type=float)
    ap.add_argument("--top-k", type=int)
    ap.add_argument("--top-p", type=float)
    ap.add_argument("--support-replay", action="store_true",
                    help="record each sampled position's kept set and score over it (default: the run's policy.sampler.supportReplay)")
    add_server_arguments(ap)
    a = ap.parse_args(argv)
    a.fixed = False
    if not (a.weights or a.config):
        return ConfiguredNumpyAr(a)
    try:
        cfg, params = _model_from_flags(a)
    except _FlagError as e:
        # One line and exit 2 (the CLI's rule for bad input), not argparse's usage block or a traceback.
        sys.stderr.write(f"{ap.prog}: {e}\n")
        sys.exit(2)
    sampling = {"temperature": 1.0 if a.temperature is None else a.temperature, "topK": a.top_k or 0, "topP": 1.0 if a.top_p is None else a.top_p, "logprob": "processed"}
    inner = NumpyArBackend(cfg, params, plan=a.plan or "fp32", lr=1e-3 if a.lr is None else a.lr, weight_decay=a.weight_decay or 0.0,
                           max_new_tokens=a.max_new_tokens, sampling=sampling, support_replay=a.support_replay)
    return ConfiguredNumpyAr(a, inner)
