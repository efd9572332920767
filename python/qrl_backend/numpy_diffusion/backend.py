"""NumpyDiffusionBackend: the toy masked-diffusion policy in numpy behind qrl-backend/1 — the sampler
with the rollout plan, the record's estimator on the trainer side with its backward, global-norm
clipping and AdamW as qrl-sim's, a frozen reference, safetensors checkpoints; and the run-configured
wrapper `python3 -m qrl_backend.numpy_diffusion` serves (model, sampler and estimator from the run the
driver sends). Not the network (model.py) nor the sampler and estimators (policy.py)."""

from __future__ import annotations

import json
import math
import sys
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ..backend import Backend, ConfiguredFromRun, LogprobsResult, RolloutBatch
from ..diffusion_record import DiffusionEngineRecord, completion_mask, diffusion_record
from ..numpy_checkpoint import load_moments, load_state, load_weights, save_checkpoint
from ..server import add_server_arguments
from ..wire import FAILED_PRECONDITION, ProtocolError, RpcError
from .model import CONFIG_KEY, DiffusionConfig, Plan, backward, check_params, config_from_run, init_params, param_specs
from .policy import EOS, MASK, PAD, SamplerConfig, dlogits_for, sample, score, views_for

VERSION = "0.1.0"


class NumpyDiffusionBackend(Backend):
    """The toy diffusion policy in numpy. Weights: float32 arrays named as the TypeScript ParamStore
    names them; the rollout engine holds the copy made at `sync`."""

    def __init__(self, cfg: DiffusionConfig, params: Dict[str, np.ndarray], sampler: SamplerConfig, estimator: str = "d1",
                 plan: str = "fp32", lr: float = 1e-3, weight_decay: float = 0.0, beta1: float = 0.9, beta2: float = 0.999,
                 eps: float = 1e-8, support_replay: bool = False, p_mask_prompt: float = 0.15, elbo_samples: int = 8):
        check_params(cfg, params)
        sampler.schedule()
        if estimator not in ("trajectory", "d1", "elbo"):
            raise ValueError(f"policy.diffusion.estimator: must be trajectory, d1 or elbo, got {estimator!r}")
        self.cfg, self.sampler, self.estimator = cfg, sampler, estimator
        self.plan_name = plan
        self.rollout_plan, self.trainer_plan = Plan(plan), Plan(plan)
        self.params = {k: np.asarray(v, dtype=np.float32).copy() for k, v in params.items()}
        self.rollout_params = {k: v.copy() for k, v in self.params.items()}
        self.reference = {k: v.copy() for k, v in self.params.items()}
        self.order = [n for n, _, _ in param_specs(cfg)]
        self._zero_state()
        self.version = self.served = 0
        self.lr, self.wd, self.beta1, self.beta2, self.eps = lr, weight_decay, beta1, beta2, eps
        self.support_replay, self.p_mask_prompt, self.elbo_samples = support_replay, p_mask_prompt, elbo_samples
        self.handles: Dict[str, Any] = {}
        self.next_handle = 1

    def _zero_state(self) -> None:
        self.grads = {k: np.zeros_like(v) for k, v in self.params.items()}
        self.m = {k: np.zeros_like(v) for k, v in self.params.items()}
        self.v = {k: np.zeros_like(v) for k, v in self.params.items()}
        self.t = 0

    def info(self) -> Dict[str, Any]:
        side = Plan.PLANS[self.plan_name]
        return {
            "backend": {"name": "qrl_backend.numpy_diffusion", "version": VERSION},
            "policy": "diffusion",
            "vocabulary": {"size": self.cfg.vocabSize, "pad": PAD, "bos": 1, "eos": EOS, "sep": 3, "mask": MASK},
            "plan": {"name": self.plan_name, "rollout": dict(side, decode="recompute", logprob="processed"), "trainer": side},
            "capabilities": {"logprobs": ["processed"], "entropy": True, "warmStart": False, "probSqSum": False},
            "parameters": int(sum(v.size for v in self.params.values())),
        }

    def sync(self) -> int:
        self.rollout_params = {k: v.copy() for k, v in self.params.items()}
        self.served = self.version
        return self.served

    # --- the model seam (another network overrides these two; qrl_backend.hf_diffusion) --------

    def _seam(self, weights: Any, plan: Any) -> Dict[str, Any]:
        """Extra keywords of `sample` and `score` for these weights: none, the numpy network."""
        return {}

    def _backprop(self, cache: Any, dlogits: np.ndarray) -> None:
        """Accumulates the gradient of Σ dlogits·logits of the trainer's forward `cache` into the weights'."""
        backward(self.cfg, self.params, self.grads, cache, dlogits, self.trainer_plan)

    # --- rollout -------------------------------------------------------------------------------

    def generate(self, prompts: List[List[int]], seed: str, sampling: Optional[Dict[str, Any]], greedy: bool, side: str,
                 max_new_tokens: Optional[int] = None) -> RolloutBatch:
        N = self.sampler.genLength
        if max_new_tokens is not None and max_new_tokens != N:
            raise ProtocolError("maxNewTokens", f"this backend generates generationLength = {N} response tokens, got {max_new_tokens}")
        P = len(prompts[0])
        for b, p in enumerate(prompts):
            if len(p) != P:
                raise ProtocolError(f"prompts.{b}", f"every prompt must have length {P} (left-pad them), got {len(p)}")
            for j, t in enumerate(p):
                if t >= self.cfg.vocabSize or t == MASK:
                    raise ProtocolError(f"prompts.{b}.{j}", f"token {t} is MASK or outside the vocabulary (size {self.cfg.vocabSize})")
        if P + N > self.cfg.maxLen:
            raise ProtocolError("prompts", f"prompt length {P} + {N} response tokens must be ≤ maxLen {self.cfg.maxLen}")
        sc = self.sampler
        if sampling is not None:
            if sampling.get("logprob", "processed") != "processed":
                raise ProtocolError("sampling.logprob", "the diffusion policy reports processed log-probs only")
            sc = SamplerConfig(sc.genLength, sc.blockLength, sc.steps, float(sampling["temperature"]), sc.remasking, int(sampling["topK"]), float(sampling["topP"]))
        if greedy:
            sc = SamplerConfig(sc.genLength, sc.blockLength, sc.steps, 0.0, sc.remasking, sc.topK, sc.topP)
        weights, plan = (self.rollout_params, self.rollout_plan) if side == "rollout" else (self.params, self.trainer_plan)
        seqs, inline, tau, support = sample(self.cfg, weights, prompts, sc, plan, seed, **self._seam(weights, plan))
        B = len(prompts)
        mask = completion_mask([s.response for s in seqs], EOS)
        sup = support if self.support_replay else None
        if self.estimator == "trajectory":
            logp = inline
        else:
            views = views_for(self.estimator, seqs, seed, self.p_mask_prompt, self.elbo_samples)
            logp = score(self.cfg, weights, plan, views, B, N, tau, support, **self._seam(weights, plan))[0].reshape(B, N)
        responses = np.where(mask == 1, np.asarray([s.response for s in seqs]), PAD).astype(np.int32)
        logp = np.where(mask == 1, logp, 0.0)
        record = DiffusionEngineRecord(seqs, self.estimator, seed, tau, sup)
        version = self.served if side == "rollout" else self.version
        return RolloutBatch(version, [list(p) for p in prompts], responses, mask, logp, record)

    # --- trainer -------------------------------------------------------------------------------

    logprobs_keywords = frozenset()

    def logprobs(self, batch: RolloutBatch, rows: Sequence[int], policy: str, grad: bool):
        rec = diffusion_record(batch.record, "batch.record", self.cfg.vocabSize)
        if rec.B != batch.B or rec.N != batch.T:
            raise ProtocolError("batch.record.sequences", f"must hold B = {batch.B} sequences of N = {batch.T} slots")
        rows = list(rows)
        seqs = [rec.sequences[r] for r in rows]
        sup = None if rec.support is None else rec.support[rows]
        views = views_for(rec.estimator, seqs, rec.estimator_seed, self.p_mask_prompt, self.elbo_samples)
        weights = self.params if policy == "current" else self.reference
        R, N = len(rows), rec.N
        lp, ent, z, cache = score(self.cfg, weights, self.trainer_plan, views, R, N, rec.temperature, sup, **self._seam(weights, self.trainer_plan))
        mask = np.asarray(batch.mask[rows])
        lp = lp.reshape(R, N) * mask
        ent = ent.reshape(R, N) * mask
        handle = None
        if grad:
            handle = f"lp{self.next_handle}"
            self.next_handle += 1
            self.handles[handle] = (views, z, cache, mask, rec.temperature, sup, R, N)
        return LogprobsResult(lp, ent, handle)

    def backward(self, handle: str, grad_logp: np.ndarray) -> None:
        if handle not in self.handles:
            raise RpcError(FAILED_PRECONDITION, f"backward: unknown or spent handle {handle!r}", "handle")
        views, z, cache, mask, tau, sup, R, N = self.handles[handle]
        if grad_logp.size != R * N:
            raise ProtocolError("gradLogp", f"must hold rows·T = {R * N} values, got {grad_logp.size}")
        del self.handles[handle]
        g = np.where(mask.reshape(-1) == 1, np.asarray(grad_logp, dtype=np.float64).reshape(-1), 0.0)
        dl = dlogits_for(z, views, g, tau, sup, R, N)
        self._backprop(cache, dl)

    def step(self, max_grad_norm: float) -> Dict[str, Any]:
        s = 0.0
        for k in self.order:
            gd = self.grads[k].astype(np.float64).reshape(-1)
            for x in gd:  # sequential, in buffer order
                s += x * x
        norm = math.sqrt(s)
        coef = max_grad_norm / (norm + 1e-6)
        self.t += 1
        bc1, bc2 = 1 - self.beta1**self.t, 1 - self.beta2**self.t
        for k in self.order:
            g = self.grads[k].astype(np.float64)
            if coef < 1:
                g = (g * coef).astype(np.float32).astype(np.float64)
            m = (self.beta1 * self.m[k].astype(np.float64) + (1 - self.beta1) * g).astype(np.float32)
            v = (self.beta2 * self.v[k].astype(np.float64) + (1 - self.beta2) * g * g).astype(np.float32)
            self.m[k], self.v[k] = m, v
            w = self.params[k].astype(np.float64)
            wd = self.wd if self.params[k].ndim == 2 else 0.0  # decay on 2-D tensors only (embeddings included)
            upd = m.astype(np.float64) / bc1 / (np.sqrt(v.astype(np.float64) / bc2) + self.eps) + wd * w
            self.params[k] = (w - self.lr * upd).astype(np.float32)
            self.grads[k][...] = 0
        self.handles.clear()
        self.version += 1
        return {"gradNorm": norm, "weightVersion": self.version}

    def set_reference(self) -> None:
        self.reference = {k: v.copy() for k, v in self.params.items()}

    # --- checkpoints ---------------------------------------------------------------------------

    def save(self, directory: str) -> None:
        state = {"weightVersion": self.version, "servedVersion": self.served, "plan": self.plan_name}
        save_checkpoint(directory, CONFIG_KEY, self.cfg.to_json(), self.order, self.params, self.reference, (self.m, self.v, self.t), state)

    def load(self, directory: str) -> None:
        self.params, self.reference = load_weights(directory, CONFIG_KEY, lambda j: DiffusionConfig.from_json(j) == self.cfg,
                                                   self.cfg.to_json(), lambda p: check_params(self.cfg, p))
        version = self.version
        self._zero_state()
        moments = load_moments(directory, list(self.params))
        if moments is not None:
            self.m, self.v, self.t = moments
        state = load_state(directory)
        self.version = int(state.get("weightVersion", version))
        self.handles.clear()
        self.sync()
        self.served = int(state.get("servedVersion", self.served))

def _sampler_from_run(run: Dict[str, Any]) -> SamplerConfig:
    pol = run.get("policy") or {}
    d = pol.get("diffusion") or {}
    s = pol.get("sampler") or {}
    rem = str(d.get("remasking", "low-confidence")).replace("-", "_")
    return SamplerConfig(int(d.get("generationLength", 24)), int(d.get("blockLength", 8)), int(d.get("steps", 12)),
                         float(s.get("temperature", 1.0)), rem, int(s.get("topK", 0)), float(s.get("topP", 1.0)))


class ConfiguredNumpyDiffusion(ConfiguredFromRun):
    """The numpy diffusion backend built from the run the driver sends: the model from
    `run.policy.model` (toy defaults and presets), the sampler from `run.policy.diffusion` and
    `run.policy.sampler`, the estimator from `run.policy.diffusion.estimator`, the initial weights from
    the stream `<run.seed>/diffusion-policy` (qrl-sim's), the plan from `setup.plan.name` and AdamW from
    `setup.optim`; flags override."""

    policy = "diffusion"

    def configure(self, run: Optional[Dict[str, Any]], setup: Optional[Dict[str, Any]]) -> None:
        if not self.needs_build(setup):
            return
        if not isinstance(run, dict):
            raise ProtocolError("run", "the diffusion backend builds its model and sampler from the run config (qrl-sim run --backend sends it)")
        a = self.flags
        vocab = int(setup["vocabulary"]["size"])
        try:
            cfg = config_from_run((run.get("policy") or {}).get("model") or {}, vocab)
            sampler = _sampler_from_run(run)
            sampler.schedule()
        except (ValueError, TypeError) as e:
            raise ProtocolError("run.policy", str(e)) from None
        plan = a.plan
        if plan is None:
            p = setup.get("plan")
            plan = (p.get("name") if isinstance(p, dict) else None) or "fp32"
            if plan not in Plan.PLANS:
                raise ProtocolError("setup.plan.name", f"this backend runs plans {', '.join(sorted(Plan.PLANS))}, the run asks for {plan!r}")
        optim = setup.get("optim") or {}
        pol = run.get("policy") or {}
        seed = run.get("seed", 0)
        params = init_params(cfg, f"{seed}/diffusion-policy")
        self.inner = NumpyDiffusionBackend(
            cfg, params, sampler, str((pol.get("diffusion") or {}).get("estimator", "d1")), plan=plan,
            lr=a.lr if a.lr is not None else float(optim.get("lr", 1e-3)), weight_decay=float(optim.get("weightDecay", 0.0)),
            beta1=float(optim.get("beta1", 0.9)), beta2=float(optim.get("beta2", 0.999)), eps=float(optim.get("eps", 1e-8)),
            support_replay=bool((pol.get("sampler") or {}).get("supportReplay", False)),
        )
        self.setup = setup

    def info(self) -> Dict[str, Any]:
        if self.inner is None:
            # a client without a run (backend-check without --config): the reverse task's defaults, as qrl-sim serve
            self.inner = _default_backend(self.flags)
        return self.inner.info()

    def logprobs(self, batch, rows, policy, grad):  # noqa: ANN001, ANN201
        return self._be().logprobs(batch, rows, policy, grad)

    logprobs_keywords = frozenset()


def _default_backend(a: Any) -> NumpyDiffusionBackend:
    """The backend of a run config that sets nothing: the reverse task's vocabulary (13), the toy model,
    the default sampler (N 24, blocks of 8, 12 steps) and estimator (d1), seed 0, --plan or fp32."""
    cfg = config_from_run({}, a.vocab_size)
    return NumpyDiffusionBackend(cfg, init_params(cfg, "0/diffusion-policy"), SamplerConfig(), "d1", plan=a.plan or "fp32",
                                 lr=1e-3 if a.lr is None else a.lr)


def build(argv: Optional[List[str]] = None) -> Backend:
    """The backend from command-line options (`python3 -m qrl_backend.numpy_diffusion --help`). Without
    --config the model is built from the run the driver sends; with --config JSON (a run config's
    fields: {"seed", "policy": {...}}, vocabulary size from --vocab-size) it is built now."""
    import argparse

    ap = argparse.ArgumentParser(prog="python3 -m qrl_backend.numpy_diffusion", description="qrl-backend/1 server: the toy masked-diffusion policy in numpy.")
    ap.add_argument("--config", help="a run config as JSON ({seed, policy: {model, diffusion, sampler}}) to build the model at start (default: the run the driver sends)")
    ap.add_argument("--vocab-size", type=int, default=13, help="the vocabulary size of a backend built without the run (default 13, the reverse task's)")
    ap.add_argument("--plan", choices=sorted(Plan.PLANS), help="default: setup.plan.name of the run, else fp32")
    ap.add_argument("--lr", type=float, help="default: setup.optim.lr of the run, else 1e-3")
    add_server_arguments(ap)
    a = ap.parse_args(argv)
    a.fixed = False
    if not a.config:
        return ConfiguredNumpyDiffusion(a)
    try:
        run = json.loads(a.config)
        if not isinstance(run, dict):
            raise ValueError("expected a JSON object")
        pol = run.get("policy") or {}
        cfg = config_from_run(pol.get("model") or {}, a.vocab_size)
        sampler = _sampler_from_run(run)
        sampler.schedule()
        inner = NumpyDiffusionBackend(cfg, init_params(cfg, f"{run.get('seed', 0)}/diffusion-policy"), sampler,
                                      str((pol.get("diffusion") or {}).get("estimator", "d1")), plan=a.plan or "fp32",
                                      lr=1e-3 if a.lr is None else a.lr)
    except (ValueError, TypeError, AttributeError) as e:
        sys.stderr.write(f"{ap.prog}: --config {a.config}: {e}\n")
        sys.exit(2)
    return ConfiguredNumpyDiffusion(a, inner)
