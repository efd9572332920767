"""HfDiffusionBackend: a transformers model run bidirectionally with qrl-sim's MASK token (id 4) as the
masked-diffusion policy behind qrl-backend/1. Everything that is the policy — LLaDA's low-confidence
remasking sampler, the trajectory / d1 / elbo estimators, the record, the protocol checks — is
numpy_diffusion's (this class is its subclass and passes the transformers forward through the model
seam `_seam`/`_backprop`); what is this backend's: the network (a Llama/Qwen2/Mistral config whose
attention is full, not causal), the trainer (autograd, torch.optim.AdamW, global-norm clipping), the
rollout engine refitted at `sync` under the plan's rollout side with qrl_backend.hf.numerics (bf16,
FP8 W8A8 through `torch._scaled_mm`, block FP8) and the frozen reference. Not the command line (cli.py).

The exactness rule: under `hf-bf16` both sides compute every GEMM from bf16 operands with float64
accumulation (hf/numerics.py), so a row's logits do not depend on how many rows the forward had; the
trajectory estimator rescoring the sampler's states on the trainer therefore gives ℓ = ℓroll bit for bit."""

from __future__ import annotations

import copy
import json
import os
from typing import Any, Dict, Optional

import numpy as np
import torch

from ..hf.backend import clipped_step, plan_table
from ..hf.numerics import adopt_linears, cast, refit_engine, set_attention
from ..numpy_diffusion.backend import NumpyDiffusionBackend
from ..numpy_diffusion.model import CONFIG_KEY as TOY_CONFIG_KEY, DiffusionConfig
from ..numpy_diffusion.policy import EOS, MASK, PAD, SamplerConfig
from ..backend import SftExamples
from ..hf.sft import warm_start_metrics
from ..wire import FAILED_PRECONDITION, RpcError
from .sft import diffusion_sft_steps

VERSION = "0.1.0"
CONFIG_KEY = "qrl-sim.hf-diffusion-config"
ATTENTION_NAME = "qrl_exact_bidirectional"
#: The hf backend's plans that apply to a sampler which recomputes the whole sequence at every step
#: (no KV cache, so not hf-fp8-kv).
PLANS = ("hf-fp32", "hf-bf16", "hf-fp8-w8a8-rollout", "hf-fp8-rollout")


def plans(block: int) -> Dict[str, Dict[str, Any]]:
    """name → {rollout, trainer, data}: the hf backend's sides, the rollout's decode `recompute`."""
    table = plan_table(block)
    out = {}
    for name in PLANS:
        t = table[name]
        rollout, trainer = t["data"]
        out[name] = {"rollout": t["rollout"], "trainer": t["trainer"], "data": (dict(rollout, decode="recompute"), trainer)}
    return out


def bidirectional_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Full attention in float64 with operands in the module's format (hf/numerics.py `cast`): every
    query against every key of its row, softmax, the probabilities rounded like the operands, times
    the values. The mask transformers built (causal) is not used: the diffusion policy attends both
    ways, MASK slots included, as the toy's model does (docs/policies-diffusion.md "Model")."""
    fmt = getattr(module, "_qrl_fmt", "fp32")
    groups = query.shape[1] // key.shape[1]
    q = cast(query, fmt)
    k = cast(key.repeat_interleave(groups, dim=1) if groups > 1 else key, fmt)
    v = cast(value.repeat_interleave(groups, dim=1) if groups > 1 else value, fmt)
    scale = module.scaling if scaling is None else scaling
    p = torch.softmax((q @ k.transpose(-1, -2)) * scale, dim=-1)
    if fmt == "bf16":
        p = p.to(torch.bfloat16).to(torch.float64)
    return (p @ v).to(query.dtype).transpose(1, 2).contiguous(), None


def register_attention() -> None:
    """Registers `bidirectional_attention` with transformers under ATTENTION_NAME (with an sdpa-style
    mask function, which the model builds and the attention ignores)."""
    from transformers import AttentionInterface

    AttentionInterface.register(ATTENTION_NAME, bidirectional_attention)
    try:
        from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

        ALL_MASK_ATTENTION_FUNCTIONS.register(ATTENTION_NAME, sdpa_mask)
    except ImportError:  # older transformers: no mask interface
        pass


class HfDiffusionBackend(NumpyDiffusionBackend):
    """A transformers model as the masked-diffusion policy. `model`: built with attn_implementation
    ATTENTION_NAME (cli.py); its vocabulary is the task's, MASK = 4 an ordinary input id."""

    def __init__(self, model: torch.nn.Module, sampler: SamplerConfig, estimator: str = "d1", plan: str = "hf-bf16", *,
                 block: int = 128, lr: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
                 weight_decay: float = 0.0, support_replay: bool = False, device: str = "cpu",
                 p_mask_prompt: float = 0.15, elbo_samples: int = 8):
        table = plans(block)
        if plan not in table:
            raise ValueError(f"plan: must be one of {', '.join(PLANS)}, got {plan!r}")
        sampler.schedule()
        if estimator not in ("trajectory", "d1", "elbo"):
            raise ValueError(f"policy.diffusion.estimator: must be trajectory, d1 or elbo, got {estimator!r}")
        register_attention()
        self.sampler, self.estimator = sampler, estimator
        self.plan_name, self.plan = plan, table[plan]
        self.rollout_plan, self.trainer_plan = self.plan["rollout"], self.plan["trainer"]
        self.device = torch.device(device)
        mc = model.config
        mc._attn_implementation = ATTENTION_NAME
        self.cfg = DiffusionConfig(vocabSize=int(mc.vocab_size), maxLen=int(mc.max_position_embeddings), C=int(mc.hidden_size),
                                   H=int(mc.num_attention_heads), layers=int(mc.num_hidden_layers), hidden=int(mc.intermediate_size))
        self.model = model.to(self.device)
        self.model.train(False)
        adopt_linears(self.model, self.trainer_plan["linear"][1])
        set_attention(self.model, self.trainer_plan["attention"], None)
        for m in self.model.modules():
            if hasattr(m, "is_causal") and hasattr(m, "scaling"):
                m.is_causal = False
        self.rollout_params = copy.deepcopy(self.model).requires_grad_(False)
        self.reference = copy.deepcopy(self.model).requires_grad_(False)
        self.params = self.model
        self.opt_config = {"lr": lr, "betas": (beta1, beta2), "eps": eps}
        self.weight_decay = weight_decay
        self._new_optimizer()
        self.version = self.served = 0
        self.support_replay, self.p_mask_prompt, self.elbo_samples = support_replay, p_mask_prompt, elbo_samples
        self.handles: Dict[str, Any] = {}
        self.next_handle = 1
        self._grad = False
        refit_engine(self.rollout_params, self.model, self.rollout_plan)

    def _new_optimizer(self) -> None:
        decay = [p for p in self.model.parameters() if p.ndim >= 2]
        other = [p for p in self.model.parameters() if p.ndim < 2]
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": self.weight_decay}, {"params": other, "weight_decay": 0.0}], **self.opt_config)

    def info(self) -> Dict[str, Any]:
        import transformers

        rollout, trainer = self.plan["data"]
        return {
            "backend": {"name": "qrl_backend.hf_diffusion",
                        "version": f"{VERSION} ({type(self.model).__name__} bidirectional, transformers {transformers.__version__}, torch {torch.__version__}, {self.device.type})"},
            "policy": "diffusion",
            "vocabulary": {"size": self.cfg.vocabSize, "pad": PAD, "bos": 1, "eos": EOS, "sep": 3, "mask": MASK},
            "plan": {"name": self.plan_name, "rollout": dict(rollout, logprob="processed"), "trainer": trainer},
            "capabilities": {"logprobs": ["processed"], "entropy": True, "warmStart": True, "sftExamples": True, "handOver": False, "probSqSum": False},
            "parameters": int(sum(p.numel() for p in self.model.parameters())),
        }

    # --- the model seam ------------------------------------------------------------------------

    def _seam(self, weights: Any, plan: Any) -> Dict[str, Any]:
        return {"fwd": lambda tokens: self._forward(weights, tokens)}

    def _forward(self, model: torch.nn.Module, tokens: np.ndarray):
        ids = torch.from_numpy(np.ascontiguousarray(tokens, dtype=np.int64)).to(self.device)
        with torch.set_grad_enabled(self._grad and model is self.model):
            logits = model(input_ids=ids, use_cache=False).logits
        return logits.detach().to(torch.float32).cpu().numpy(), logits

    def _backprop(self, cache: Any, dlogits: np.ndarray) -> None:
        cache.backward(torch.from_numpy(dlogits).to(device=cache.device, dtype=cache.dtype))

    def logprobs(self, batch, rows, policy, grad):  # noqa: ANN001, ANN201
        self._grad = bool(grad)
        try:
            return super().logprobs(batch, rows, policy, grad)
        finally:
            self._grad = False

    # --- trainer -------------------------------------------------------------------------------

    def sync(self) -> int:
        refit_engine(self.rollout_params, self.model, self.rollout_plan)
        self.served = self.version
        return self.served

    def step(self, max_grad_norm: float) -> Dict[str, Any]:
        norm = clipped_step(self.model, self.opt, max_grad_norm)
        self.handles.clear()
        self.version += 1
        return {"gradNorm": norm, "weightVersion": self.version}

    def set_reference(self) -> None:
        with torch.no_grad():
            self.reference.load_state_dict(self.model.state_dict())

    warm_start_keywords = frozenset({"examples"})  # Backend.warm_start_keywords

    def warm_start(self, task: Dict[str, Any], steps: int, batch_size: int, lr: float, seed: int,
                   examples: Optional[SftExamples] = None) -> Dict[str, float]:
        """`steps` steps of LLaDA's SFT objective on the pairs the driver sent (sft.py): the trainer only,
        the RL optimizer's state untouched, the version +1. Without examples only `steps: 0` is served."""
        if examples is None:
            if steps == 0:
                return {}
            raise RpcError(FAILED_PRECONDITION, f"warmStart: {steps} supervised steps need the task's examples (capabilities.sftExamples), which this request does not carry", "examples")
        losses = diffusion_sft_steps(self.model, examples, steps, batch_size, lr, self.sampler.genLength, seed, self.trainer_plan, self.device)
        self.handles.clear()
        self.version += 1
        return warm_start_metrics(losses)

    # --- checkpoints ---------------------------------------------------------------------------

    def save(self, directory: str) -> None:
        from safetensors.torch import save_file

        os.makedirs(directory, exist_ok=True)
        meta = {CONFIG_KEY: self.model.config.to_json_string(use_diff=False)}
        for name, model in (("weights", self.model), ("reference", self.reference)):
            tmp = os.path.join(directory, f"{name}.safetensors.tmp")
            save_file({k: v.detach().cpu().contiguous().clone() for k, v in model.state_dict().items()}, tmp, metadata=meta)
            os.replace(tmp, os.path.join(directory, f"{name}.safetensors"))
        torch.save(self.opt.state_dict(), os.path.join(directory, "optimizer.pt"))
        with open(os.path.join(directory, "backend.json"), "w") as f:
            json.dump({"weightVersion": self.version, "servedVersion": self.served, "plan": self.plan_name}, f)

    def _read(self, path: str) -> Dict[str, torch.Tensor]:
        from safetensors import safe_open
        from safetensors.torch import load_file

        with safe_open(path, "pt") as f:
            meta = f.metadata() or {}
        if TOY_CONFIG_KEY in meta:
            raise RpcError(FAILED_PRECONDITION, f"load: {path} holds qrl-sim's toy diffusion weights (a warm start handed over); "
                           "this backend serves a transformers model: set sft.steps to 0", "dir")
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
        with torch.no_grad():
            self.model.load_state_dict(weights)
            self.reference.load_state_dict(ref)
        self._new_optimizer()
        opt = os.path.join(directory, "optimizer.pt")
        if os.path.exists(opt):
            self.opt.load_state_dict(torch.load(opt, map_location=self.device, weights_only=True))
        for p in self.model.parameters():
            p.grad = None
        st = os.path.join(directory, "backend.json")
        state = json.load(open(st)) if os.path.exists(st) else {}
        self.version = int(state.get("weightVersion", self.version))
        self.handles.clear()
        self.sync()
        self.served = int(state.get("servedVersion", self.served))
