"""HfBackend: a Hugging Face transformers causal LM behind qrl-backend/1. The trainer is the model
itself (fp32 or bf16 weights, autograd, torch.optim.AdamW); the rollout engine is a second copy,
rebuilt only by `sync` through a refit under the plan's rollout side (bf16, FP8 W8A8 with
`torch._scaled_mm`, block FP8, FP8 KV cache) and decoding over a KV cache; the reference is a third
copy frozen by `setReference`. Token ids in and out: the task's tokenizer is qrl-sim's (PAD 0, BOS 1,
EOS 2, SEP 3, MASK 4) and the model's vocabulary is sized from the task. Not the numerics
(numerics.py) nor the command line (__main__.py)."""

from __future__ import annotations

import copy
import hashlib
import json
import os
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import torch

from ..backend import Backend, RolloutBatch, SftExamples
from ..numpy_ar.backend import _record_topk, _support, ar_record_support, ar_record_temperature
from ..torch_ar.scoring import GradHandles, replayed_log_softmax, score_rows
from ..wire import FAILED_PRECONDITION, ProtocolError, RpcError, TopkLogprobs
from .names import DEFAULT_PLAN, MOE_KEYS, PLAN_NAMES, SETUP_FIELDS, moe_experts  # noqa: F401 (re-exported)
from .numerics import ATTENTION_NAME, adopt_linears, refit_engine, register_attention, set_attention
from .refit_dump import check_fault, dump_engine, plant_after_refit
from .sft import supervised_steps, warm_start_metrics

PAD, BOS, EOS, SEP, MASK = 0, 1, 2, 3, 4
VERSION = "0.1.0"
CONFIG_KEY = "qrl-sim.hf-config"
AR_CONFIG_KEY = "qrl-sim.ar-config"

# The plans this backend runs. `linear`: the GEMM of every nn.Linear but the LM head; `head`: the LM
# head's operand format (kept BF16 under FP8, as vLLM and qrl-sim's presets do); `attention`: operand
# format of QKᵀ and PV; `kv`: the KV-cache format. `rollout`/`trainer` as qrl-sim plan sides (data).
_BF16 = {"linear": ("exact", "bf16"), "head": "bf16", "attention": "bf16", "kv": None}
_BF16_DATA = {"gemm": {"kind": "rounding", "operands": "bf16", "accumulator": "fp64"}}
_FP8_KV_DATA = {"format": "e4m3fn", "calibration": {"mode": "inference"}, "loadFormat": "bf16"}


def plan_table(block: int) -> Dict[str, Dict[str, Any]]:
    """name → {rollout, trainer, data}: the engine/trainer numerics and the sides as qrl-sim plan data."""
    fp32 = {"linear": ("exact", "fp32"), "head": "fp32", "attention": "fp32", "kv": None}
    w8a8 = {"kind": "quantized", "weights": {"preset": "vllm-fp8-token"}, "activations": {"preset": "vllm-fp8-token"}, "accumulator": "fp32"}
    blockwise = {
        "kind": "quantized",
        "weights": {"preset": "deepseek-fp8-block", "params": {"block": block}},
        "activations": {"preset": "vllm-fp8-group", "params": {"block": block}},
        "accumulator": "fp64",
    }
    int8 = {"kind": "quantized", "weights": {"preset": "int8-row"}, "activations": {"preset": "vllm-int8-token"}, "accumulator": "int32"}
    inc = {"decode": "incremental", "logprob": "processed"}
    return {
        "hf-fp32": {"rollout": fp32, "trainer": fp32, "data": ({"gemm": {"kind": "fp32"}, **inc}, {"gemm": {"kind": "fp32"}})},
        "hf-bf16": {"rollout": _BF16, "trainer": _BF16, "data": ({**_BF16_DATA, **inc}, _BF16_DATA)},
        "hf-fp8-w8a8-rollout": {
            "rollout": dict(_BF16, linear=("fp8-w8a8",)),
            "trainer": _BF16,
            "data": ({"gemm": w8a8, **inc}, _BF16_DATA),
        },
        "hf-fp8-rollout": {
            "rollout": dict(_BF16, linear=("fp8-block", block)),
            "trainer": _BF16,
            "data": ({"gemm": blockwise, **inc}, _BF16_DATA),
        },
        "hf-int8-rollout": {
            "rollout": dict(_BF16, linear=("int8-w8a8",)),
            "trainer": _BF16,
            "data": ({"gemm": int8, **inc}, _BF16_DATA),
        },
        "hf-fp8-kv": {
            "rollout": dict(_BF16, linear=("fp8-block", block), kv="fp8"),
            "trainer": _BF16,
            "data": ({"gemm": dict(blockwise, kvCache=_FP8_KV_DATA), **inc}, _BF16_DATA),
        },
    }


def clipped_step(model: Any, opt: Any, max_grad_norm: float) -> float:
    """One optimizer step after clipping the global gradient norm to `max_grad_norm` (a parameter without a
    gradient counts as zeros, so AdamW's moments advance for every parameter); the gradients are zeroed in
    place after. Returns the norm before clipping. Shared by the hf and hf_diffusion backends."""
    params = list(model.parameters())
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    norm = float(torch.nn.utils.clip_grad_norm_(params, max_grad_norm, foreach=False))
    opt.step()
    opt.zero_grad(set_to_none=False)
    return norm


class HfBackend(Backend):
    """A transformers causal LM (any architecture transformers builds, dense) behind qrl-backend/1."""

    def __init__(self, model: torch.nn.Module, plan: str = DEFAULT_PLAN, *, block: int = 128, lr: float = 1e-3,
                 beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8, weight_decay: float = 0.0,
                 max_new_tokens: int = 16, sampling: Optional[Dict[str, Any]] = None, device: str = "cpu",
                 source: str = "config", factory: Optional[Callable[[int], torch.nn.Module]] = None,
                 fixed: Sequence[str] = (), fault: Optional[str] = None):
        """`factory(V)` rebuilds the model at vocabulary V (a config-built model; None for a checkpoint):
        `configure` uses it when the run's vocabulary differs. `fixed`: the SETUP_FIELDS the command line
        set, which the run's setup does not override. `fault`: a refit fault of refit_dump.FAULTS planted
        at every sync (a test and diagnostic hook: the engine then computes wrongly on purpose)."""
        plans = plan_table(block)
        if plan not in plans:
            raise ValueError(f"plan: must be one of {', '.join(PLAN_NAMES)}, got {plan!r}")
        check_fault(fault, plans[plan]["rollout"])
        self.fault = fault
        register_attention()
        self.plan_name, self.plan, self.block = plan, plans[plan], block
        self.device = torch.device(device)
        self.max_new_tokens = max_new_tokens
        self.sampling = sampling or {"temperature": 1.0, "topK": 0, "topP": 1.0, "logprob": "processed"}
        #: sampling-support replay (run.policy.sampler.supportReplay, set by `configure`), as numpy_ar: a
        #: sampled batch's record keeps each position's kept set and `logprobs` renormalises over it
        self.support_replay = False
        self.source = source
        self.timing_path: Optional[str] = None
        self.factory = factory
        self.fixed = frozenset(fixed)
        self.setup: Optional[Dict[str, Any]] = None
        self.opt_config = {"lr": lr, "betas": (beta1, beta2), "eps": eps}
        self.weight_decay = weight_decay
        self._install(model)

    def _install(self, model: torch.nn.Module) -> None:
        """Takes `model` as the trainer, builds the engine and reference copies and a fresh AdamW."""
        experts = moe_experts(model.config)
        if experts:
            raise ValueError(
                f"model: {type(model).__name__} is a mixture of experts ({experts} experts); this backend does not "
                "record or replay MoE routing (docs/moe.md), so it refuses MoE models: use a dense config")
        model.config._attn_implementation = ATTENTION_NAME
        self.model = model.to(self.device)
        self.model.train(False)  # no dropout: the forward is a deterministic function of the weights
        adopt_linears(self.model, self.plan["trainer"]["linear"][1])
        set_attention(self.model, self.plan["trainer"]["attention"], None)
        self.engine = copy.deepcopy(self.model).requires_grad_(False)
        self.ref = copy.deepcopy(self.model).requires_grad_(False)
        self.vocab = int(self.model.config.vocab_size)
        if self.vocab <= MASK:
            raise ValueError(f"model: vocab_size must exceed the special tokens (≥ {MASK + 1}), got {self.vocab}")
        self._new_optimizer()
        self.version = 0
        self.served = 0
        self.grads = GradHandles(self.device)
        self._stale_source = None
        self._refit()

    def _new_optimizer(self) -> None:
        decay = [p for p in self.model.parameters() if p.ndim >= 2]
        other = [p for p in self.model.parameters() if p.ndim < 2]
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": self.weight_decay}, {"params": other, "weight_decay": 0.0}], **self.opt_config)

    # --- configuration from the run ------------------------------------------------------------

    def configure(self, run: Optional[Dict[str, Any]], setup: Optional[Dict[str, Any]]) -> None:
        """Takes from the run's setup (qrl-sim run --backend sends it with `info`) what the command line
        did not fix: the vocabulary size (a config-built model is rebuilt at the task's vocabulary,
        same --init-seed), AdamW's lr, betas, eps and weight decay (setup.optim), maxNewTokens and the
        sampler defaults. Precedence: command-line flag > setup > the flag's default. The special
        tokens must be qrl-sim's (PAD 0 … MASK 4); the plan is always --plan (the run config says
        `"plan": "backend"`). Before the first step only; a second call must repeat the first setup."""
        if setup is None:
            return
        if self.setup is not None:
            if setup != self.setup:
                raise RpcError(FAILED_PRECONDITION, "info: this backend was already configured by another run's setup", "setup")
            return
        if self.version != 0:
            raise RpcError(FAILED_PRECONDITION, "info: setup arrived after training began", "setup")
        if setup.get("policy") != "ar":
            raise ProtocolError("setup.policy", f"this backend serves policy 'ar', the run asks for {setup.get('policy')!r}")
        voc = setup.get("vocabulary")
        if not isinstance(voc, dict):
            raise ProtocolError("setup.vocabulary", f"expected an object, got {voc!r}")
        for key, want in (("pad", PAD), ("bos", BOS), ("eos", EOS), ("sep", SEP), ("mask", MASK)):
            if voc.get(key) != want:
                raise ProtocolError(f"setup.vocabulary.{key}", f"this backend's special tokens are PAD 0, BOS 1, EOS 2, SEP 3, MASK 4; the run has {key} {voc.get(key)!r}")
        size = voc.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size <= MASK:
            raise ProtocolError("setup.vocabulary.size", f"expected an integer > {MASK}, got {size!r}")
        if "vocab_size" not in self.fixed and self.factory is not None and size != self.vocab:
            self._install(self.factory(size))
        optim = setup.get("optim") or {}
        lr, (b1, b2), eps = self.opt_config["lr"], self.opt_config["betas"], self.opt_config["eps"]
        take = lambda field, key, cur: cur if field in self.fixed or key not in optim else float(optim[key])  # noqa: E731
        self.opt_config = {"lr": take("lr", "lr", lr), "betas": (take("beta1", "beta1", b1), take("beta2", "beta2", b2)), "eps": take("eps", "eps", eps)}
        self.weight_decay = take("weight_decay", "weightDecay", self.weight_decay)
        self._new_optimizer()
        if "max_new_tokens" not in self.fixed and isinstance(setup.get("maxNewTokens"), int):
            self.max_new_tokens = int(setup["maxNewTokens"])
        sampling = setup.get("sampling") or {}
        s = dict(self.sampling)
        for field, key in (("temperature", "temperature"), ("top_k", "topK"), ("top_p", "topP"), ("logprob", "logprob")):
            if field not in self.fixed and key in sampling:
                s[key] = sampling[key]
        self.sampling = s
        self.support_replay = bool((((run or {}).get("policy") or {}).get("sampler") or {}).get("supportReplay", False))
        self.setup = setup

    # --- description ---------------------------------------------------------------------------

    def info(self) -> Dict[str, Any]:
        import transformers

        rollout, trainer = self.plan["data"]
        return {
            "backend": {"name": "qrl_backend.hf", "version": f"{VERSION} ({type(self.model).__name__}, transformers {transformers.__version__}, torch {torch.__version__}, {self.device.type})"},
            "policy": "ar",
            "vocabulary": {"size": self.vocab, "pad": PAD, "bos": BOS, "eos": EOS, "sep": SEP, "mask": MASK},
            "plan": {"name": self.plan_name, "rollout": rollout, "trainer": trainer},
            "capabilities": {"logprobs": ["processed", "raw"], "entropy": True, "warmStart": True, "sftExamples": True, "probSqSum": True, "dumpEngine": True,
                             "topkLogprobs": True, "supportReplay": True},
            "parameters": int(sum(p.numel() for p in self.model.parameters())),
        }

    # --- rollout -------------------------------------------------------------------------------

    def _refit(self) -> None:
        source = self.model
        if self.fault == "stale-sync":
            # refit from the trainer as it was at the previous sync (the first refit is right)
            previous = getattr(self, "_stale_source", None)
            self._stale_source = copy.deepcopy(self.model).requires_grad_(False)
            source = previous if previous is not None else self.model
        refit_engine(self.engine, source, self.plan["rollout"])
        plant_after_refit(self.engine, self.fault, self.plan["rollout"], self.block)

    def dump_engine(self, directory: str) -> Dict[str, Any]:
        """Writes what the engine computes with since the last sync, and the trainer's state dict, in
        refit-check's format under `directory` (refit_dump.dump_engine); returns the files and the
        refit-check arguments of this plan (recipe, block, ignore list, match rule)."""
        return dump_engine(self.engine, self.model, self.plan["rollout"], self.block, directory)

    def sync(self) -> int:
        self._refit()
        self.served = self.version
        return self.served

    def engine_logprobs(self, batch: RolloutBatch) -> np.ndarray:
        """The rollout engine's ℓ of a batch's own tokens, teacher-forced through the same KV-cache decode
        that `generate` runs (temperature of the record, processed = full softmax): the engine side of a
        mismatch measured on fixed tokens (not a protocol method)."""
        s = dict(self.sampling, temperature=float(batch.record.get("temperature", 1.0)), topK=0, topP=1.0, logprob="processed")
        out = self.generate(batch.prompts, "teacher-forced", s, False, "rollout", max_new_tokens=batch.T, forced=(batch.responses, batch.mask))
        return out.logp_rollout

    generate_keywords = frozenset({"max_new_tokens", "topk_logprobs"})  # Backend.generate_keywords

    def generate(self, prompts: List[List[int]], seed: str, sampling: Optional[Dict[str, Any]], greedy: bool, side: str,
                 max_new_tokens: Optional[int] = None, forced=None, topk_logprobs: int = 0) -> RolloutBatch:
        P = len(prompts[0])
        if P < 1:
            raise ProtocolError("prompts.0", "must not be empty")
        for b, p in enumerate(prompts):
            if len(p) != P:
                raise ProtocolError(f"prompts.{b}", f"every prompt must have length {P} (left-pad them), got {len(p)}")
            for j, t in enumerate(p):
                if t >= self.vocab:
                    raise ProtocolError(f"prompts.{b}.{j}", f"token {t} is outside the vocabulary (size {self.vocab})")
        L = self.max_new_tokens if max_new_tokens is None else max_new_tokens
        if L < 1:
            raise ProtocolError("maxNewTokens", f"must be ≥ 1, got {L}")
        s = sampling or self.sampling
        model = self.engine if side == "rollout" else self.model
        digest = hashlib.sha256(seed.encode("utf8")).digest()
        rng = np.random.Generator(np.random.PCG64(int.from_bytes(digest[:16], "little")))
        B = len(prompts)
        responses = np.full((B, L), PAD, dtype=np.int32)
        mask, logp = np.zeros((B, L)), np.zeros((B, L))
        active = np.ones(B, dtype=bool)
        tau = float(s["temperature"])
        if forced is not None:
            forced, mask_in = forced
        filtered = (0 < s["topK"] < self.vocab) or s["topP"] < 1
        K = 0 if greedy or forced is not None else topk_logprobs
        if K > self.vocab:
            raise ProtocolError("topkLogprobs", f"must be ≤ the vocabulary size {self.vocab}, got {K}")
        topk = TopkLogprobs(K, np.full((B, L, K), -1, dtype=np.int32), np.zeros((B, L, K))) if K else None
        # the kept set of every sampled position (all ones without top-k/top-p), as numpy_ar records it
        support = np.zeros((B, L, self.vocab), dtype=np.uint8) if self.support_replay and not greedy and forced is None else None
        with torch.no_grad():
            ids = torch.tensor(prompts, dtype=torch.long, device=self.device)
            out = model(input_ids=ids, use_cache=True)
            cache = out.past_key_values
            for k in range(L):
                z = out.logits[:, -1].to(torch.float64)  # (B, V)
                raw = torch.log_softmax(z, -1)
                if greedy:
                    choice = torch.argmax(z, -1).cpu().numpy()  # ties: the lowest id
                    proc = None
                else:
                    proc = torch.log_softmax(z / tau, -1)
                zn = z.cpu().numpy()
                nxt = np.full(B, PAD, dtype=np.int64)
                for b in np.nonzero(active)[0]:
                    if forced is not None:
                        y = int(forced[b, k])
                        lp = float(proc[b, y])
                    elif greedy:
                        y, lp = int(choice[b]), 0.0
                    else:
                        row = proc[b]
                        if filtered:
                            keep = _support(zn[b], tau, s["topK"], s["topP"])
                            row = torch.log_softmax(torch.where(torch.from_numpy(keep).to(z.device), z[b] / tau, -torch.inf), -1)
                        else:
                            keep = None
                        pr = row.cpu().numpy()
                        probs = np.exp(pr) if keep is None else np.where(keep, np.exp(pr), 0.0)
                        u = rng.random()
                        idx = np.nonzero(u < np.cumsum(probs))[0]
                        if keep is not None:
                            idx = idx[keep[idx]]
                        y = int(idx[0]) if idx.size else int(np.nonzero(probs > 0)[0][-1])
                        lp = float(pr[y])
                        if support is not None:
                            support[b, k] = 1 if keep is None else keep
                    responses[b, k], mask[b, k], nxt[b] = y, 1.0, y
                    logp[b, k] = lp if s["logprob"] == "processed" else float(raw[b, y])
                    if topk is not None:  # the ℓroll row itself (numpy_ar's rule): the sampled id's slot is ℓroll bit for bit
                        dist = pr if s["logprob"] == "processed" else raw[b].cpu().numpy()
                        _record_topk(dist, np.ones(self.vocab, dtype=bool) if keep is None else keep, K, topk.ids[b, k], topk.logp[b, k])
                    active[b] = y != EOS and (forced is None or k + 1 < L and mask_in[b, k + 1] > 0)
                if not active.any() or k == L - 1:
                    break
                out = model(input_ids=torch.from_numpy(nxt[:, None]).to(self.device), past_key_values=cache, use_cache=True)
                cache = out.past_key_values
        record = {"kind": "ar", "promptLength": P, "temperature": 1.0 if greedy else tau}
        if support is not None:
            record["support"] = support
        version = self.served if side == "rollout" else self.version
        return RolloutBatch(version, [list(p) for p in prompts], responses, mask, logp, record, topk)

    # --- trainer -------------------------------------------------------------------------------

    logprobs_keywords = frozenset({"prob_sq_sum", "topk"})  # Backend.logprobs_keywords

    def logprobs(self, batch: RolloutBatch, rows: Sequence[int], policy: str, grad: bool, prob_sq_sum: bool = False,
                 topk: bool = False):
        tau = ar_record_temperature(batch)
        rows = list(rows)
        resp = np.asarray(batch.responses[rows], dtype=np.int64)
        if resp.size and (resp.min() < 0 or resp.max() >= self.vocab):
            raise ProtocolError("batch.responses", f"token ids must be in [0, {self.vocab})")
        prompts = np.asarray([batch.prompts[r] for r in rows], dtype=np.int64)
        P, T = prompts.shape[1], resp.shape[1]
        tokens = torch.from_numpy(np.concatenate([prompts, resp], axis=1)).to(self.device)
        mask = torch.from_numpy(np.asarray(batch.mask[rows], dtype=np.float64)).to(self.device)
        model = self.model if policy == "current" else self.ref
        with torch.set_grad_enabled(grad):
            logits = model(input_ids=tokens, use_cache=False).logits[:, P - 1 : P + T - 1]
            keep = ar_record_support(batch, rows, self.vocab)
            lsm, shifted = replayed_log_softmax(logits.to(torch.float64) / tau, keep)
            lp, ent, sq, tk = score_rows(lsm, tokens[:, P:], mask, batch, rows, prob_sq_sum, topk, shifted)
        return self.grads.result(lp, ent, sq, tk, grad)

    backward_keywords = frozenset({"grad_topk"})  # Backend.backward_keywords

    def backward(self, handle: str, grad_logp: np.ndarray, grad_topk: Optional[np.ndarray] = None) -> None:
        self.grads.backward(handle, grad_logp, grad_topk)

    def step(self, max_grad_norm: float) -> Dict[str, Any]:
        norm = clipped_step(self.model, self.opt, max_grad_norm)
        self.grads.clear()
        self.version += 1
        return {"gradNorm": norm, "weightVersion": self.version}

    def set_reference(self) -> None:
        with torch.no_grad():
            self.ref.load_state_dict(self.model.state_dict())

    warm_start_keywords = frozenset({"examples"})  # Backend.warm_start_keywords

    def warm_start(self, task: Dict[str, Any], steps: int, batch_size: int, lr: float, seed: int,
                   examples: Optional[SftExamples] = None) -> Dict[str, float]:
        """`steps` supervised steps on the pairs the driver sent (capabilities.sftExamples; sft.py mirrors the
        toy's warm start): the trainer only, the RL optimizer's state untouched, the version +1. Without
        examples only `steps: 0` is served: this backend does not know qrl-sim's tasks."""
        if examples is None:
            if steps == 0:
                return {}
            raise RpcError(
                FAILED_PRECONDITION,
                f"warmStart: {steps} supervised steps on {task.get('name')!r} need the task's examples, which this request does not "
                "carry (a driver of capabilities.sftExamples sends them); set sft.steps to 0 or start from a checkpoint (--checkpoint DIR)",
                "examples")
        losses = supervised_steps(self.model, examples, steps, batch_size, lr, self.vocab, self.plan["trainer"], self.device)
        self.grads.clear()
        self.version += 1
        return warm_start_metrics(losses)

    # --- checkpoints ---------------------------------------------------------------------------

    def _state(self, model: torch.nn.Module) -> Dict[str, torch.Tensor]:
        return {k: v.detach().cpu().contiguous().clone() for k, v in model.state_dict().items()}

    def save(self, directory: str) -> None:
        from safetensors.torch import save_file

        os.makedirs(directory, exist_ok=True)
        meta = {CONFIG_KEY: self.model.config.to_json_string(use_diff=False)}
        for name, model in (("weights", self.model), ("reference", self.ref)):
            tmp = os.path.join(directory, f"{name}.safetensors.tmp")
            save_file(self._state(model), tmp, metadata=meta)
            os.replace(tmp, os.path.join(directory, f"{name}.safetensors"))
        tmp = os.path.join(directory, "optimizer.pt.tmp")
        torch.save(self.opt.state_dict(), tmp)
        os.replace(tmp, os.path.join(directory, "optimizer.pt"))
        state = {"weightVersion": self.version, "servedVersion": self.served, "plan": self.plan_name}
        tmp = os.path.join(directory, "backend.json.tmp")
        with open(tmp, "w") as f:
            json.dump(state, f)
        os.replace(tmp, os.path.join(directory, "backend.json"))

    def _read(self, path: str) -> Dict[str, torch.Tensor]:
        from safetensors import safe_open
        from safetensors.torch import load_file

        with safe_open(path, "pt") as f:
            meta = f.metadata() or {}
        if AR_CONFIG_KEY in meta:
            raise RpcError(FAILED_PRECONDITION, f"load: {path} holds qrl-sim's toy AR weights (a warm start handed over); this backend serves a transformers model: set sft.steps to 0", "dir")
        tensors = load_file(path)
        own = self.model.state_dict()
        if set(tensors) != set(own) or any(tuple(tensors[k].shape) != tuple(own[k].shape) for k in own):
            raise RpcError(FAILED_PRECONDITION, f"load: {path} does not hold this model's parameters ({type(self.model).__name__}, {len(own)} tensors)", "dir")
        return tensors

    def load(self, directory: str) -> None:
        path = os.path.join(directory, "weights.safetensors")
        if not os.path.exists(path):
            raise RpcError(FAILED_PRECONDITION, f"load: no weights.safetensors in {directory}", "dir")
        weights = self._read(path)
        ref_path = os.path.join(directory, "reference.safetensors")
        ref = self._read(ref_path) if os.path.exists(ref_path) else weights
        opt = os.path.join(directory, "optimizer.pt")
        with torch.no_grad():
            self.model.load_state_dict(weights)
            self.ref.load_state_dict(ref)
        self._new_optimizer()
        if os.path.exists(opt):
            self.opt.load_state_dict(torch.load(opt, map_location=self.device, weights_only=True))
        for p in self.model.parameters():
            p.grad = None
        st = os.path.join(directory, "backend.json")
        state = json.load(open(st)) if os.path.exists(st) else {}
        self.version = int(state.get("weightVersion", self.version))
        self.grads.clear()
        self.sync()
        self.served = int(state.get("servedVersion", self.served))
