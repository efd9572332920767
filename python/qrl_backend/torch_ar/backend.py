"""TorchArBackend: the toy AR policy on PyTorch (autograd backward, torch.optim.AdamW, CUDA when
present) behind qrl-backend/1 — the shape of a GPU backend. Where a real stack differs is marked
"REAL STACK:" (a Hugging Face model for the trainer, a vLLM engine for the rollout). Not bit-matched to
qrl-sim: float32 GEMMs on the device, bf16 via torch.bfloat16 casts of the operands, and the
`fp8-tensor-rollout` plan's rollout linears in real float8: operands cast to torch.float8_e4m3fn
with one TransformerEngine current-scaling scale per tensor (scale = 448/amax) and multiplied by
torch._scaled_mm (a Hopper/Ada FP8 GEMM on CUDA; on the CPU it dequantizes the operands and sums in
float32, where qrl-sim models Hopper's FP8 accumulator). Needs torch ≥ 2.13 (python/requirements.lock)."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import torch

from ..backend import Backend, ConfiguredFromRun, RolloutBatch
from ..numpy_ar.backend import BOS, EOS, MASK, PAD, SEP, _record_topk, _support, _support_replay, ar_record_support, ar_record_temperature
from ..numpy_ar.model import CONFIG_KEY, ArConfig, check_params, init_params, log_softmax_rows, param_specs
from ..server import add_server_arguments
from .scoring import GradHandles, replayed_log_softmax, score_rows
from ..wire import FAILED_PRECONDITION, ProtocolError, RpcError, TopkLogprobs, read_safetensors, write_safetensors

VERSION = "0.1.0"


E4M3_MAX = 448.0

#: plan → (rollout engine: bf16 operands, fp8 linears; trainer: bf16 operands). `fp8-tensor-rollout`
#: is qrl-sim's plan of that name: te-current E4M3 W8A8 linears, lm_head and attention in BF16,
#: BF16 trainer.
PLANS = {"fp32": ((False, False), False), "bf16": ((True, False), True), "fp8-tensor-rollout": ((True, True), True)}


def quantize_e4m3_tensor(x: torch.Tensor):
    """TransformerEngine current scaling (qrl-sim preset `te-current`): scale = fl(448/amax) (1 when
    amax is 0 or not finite), codes = (x·scale).to(torch.float8_e4m3fn) (torch 2.13 saturates finite
    overflow, as satfinite does), dequant scale = fl(1/scale). Returns (codes, dequant scale)."""
    amax = x.detach().abs().max().float()
    scale = torch.where(torch.isfinite(amax) & (amax > 0), E4M3_MAX / amax, torch.ones_like(amax)).float()
    return (x * scale).to(torch.float8_e4m3fn), (1.0 / scale).float()


class TinyAr(torch.nn.Module):
    """The toy transformer (RMSNorm or LayerNorm, SwiGLU or GELU, learned positions, no biases).
    Parameters keep the TypeScript ParamStore names (dots become `__` inside torch)."""

    def __init__(self, cfg: ArConfig, params: Dict[str, np.ndarray], bf16: bool, fp8: bool = False):
        super().__init__()
        self.cfg, self.bf16, self.fp8 = cfg, bf16, fp8
        self.names = [n for n, _, _ in param_specs(cfg)]
        for n in self.names:
            self.register_parameter(n.replace(".", "__"), torch.nn.Parameter(torch.from_numpy(np.array(params[n], dtype=np.float32))))

    def p(self, name: str) -> torch.Tensor:
        return getattr(self, name.replace(".", "__"))

    def mm(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if self.bf16:  # operands rounded to bf16, float32 accumulation (the `bf16` plan)
            return torch.matmul(a.to(torch.bfloat16).float(), b.to(torch.bfloat16).float())
        return torch.matmul(a, b)

    def linear(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """x (…, K) · wᵀ (w: N×K): FP8 W8A8 with per-tensor scales under an fp8 plan, else `mm`."""
        if not self.fp8:
            return self.mm(x, w.T)
        xq, xs = quantize_e4m3_tensor(x.reshape(-1, x.shape[-1]))
        wq, ws = quantize_e4m3_tensor(w)
        out = torch._scaled_mm(xq, wq.t(), scale_a=xs, scale_b=ws, out_dtype=torch.float32)
        return out.reshape(*x.shape[:-1], w.shape[0])

    def norm(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        if self.cfg.norm == "rmsnorm":
            return x * torch.rsqrt(torch.mean(x * x, -1, keepdim=True) + 1e-5) * w
        return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, None, 1e-5)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (B, T) → logits (B, T, V)."""
        cfg = self.cfg
        B, T = tokens.shape
        H, hs = cfg.H, cfg.C // cfg.H
        x = self.p("wte")[tokens] + self.p("wpe")[:T]
        causal = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril()
        for l in range(cfg.layers):
            pre = f"h{l}."
            h = self.norm(x, self.p(pre + "ln1.weight"))
            q, k, v = (self.linear(h, self.p(pre + f"attn.w{n}")).view(B, T, H, hs).transpose(1, 2) for n in "qkv")
            s = self.mm(q, k.transpose(-1, -2)) / hs**0.5
            a = torch.softmax(s.masked_fill(~causal, float("-inf")), -1)
            o = self.mm(a, v).transpose(1, 2).reshape(B, T, cfg.C)
            x = x + self.linear(o, self.p(pre + "attn.wo"))
            h2 = self.norm(x, self.p(pre + "ln2.weight"))
            up = self.linear(h2, self.p(pre + "mlp.up"))
            if cfg.mlp == "swiglu":
                act = up * torch.nn.functional.silu(self.linear(h2, self.p(pre + "mlp.gate")))
            else:
                act = torch.nn.functional.gelu(up, approximate="tanh")
            x = x + self.linear(act, self.p(pre + "mlp.down"))
        head = self.p("wte") if cfg.tiedEmbeddings else self.p("lmHead")
        return self.mm(self.norm(x, self.p("lnf.weight")), head.T)

    def state_numpy(self) -> Dict[str, np.ndarray]:
        return {n: self.p(n).detach().cpu().numpy().astype(np.float32) for n in self.names}

    def load_numpy(self, params: Dict[str, np.ndarray]) -> None:
        with torch.no_grad():
            for n in self.names:
                self.p(n).copy_(torch.from_numpy(np.array(params[n], dtype=np.float32)))


class TorchArBackend(Backend):
    """Trainer = `self.model` with autograd and AdamW; rollout engine = `self.engine`, a copy refreshed
    at `sync`; reference = `self.ref`, frozen at `setReference`.

    REAL STACK: the trainer is an FSDP/DeepSpeed-wrapped Hugging Face model; `sync` pushes its weights
    into a vLLM engine (vLLM's weight-transfer API, or safetensors on disk + a reload as prime-rl does)
    and `generate` calls the engine with logprobs=1 in processed mode; `logprobs` is the trainer's
    forward with the same temperature; `save`/`load` are the framework's sharded checkpoints."""

    def __init__(self, cfg: ArConfig, params: Dict[str, np.ndarray], plan: str = "fp32", lr: float = 1e-3,
                 weight_decay: float = 0.0, max_new_tokens: Optional[int] = None, device: Optional[str] = None,
                 support_replay: bool = False):
        if plan not in PLANS:
            raise ValueError(f"plan: {plan!r} is not supported by this backend ({', '.join(PLANS)})")
        check_params(cfg, params)
        self.cfg, self.plan_name, self.max_new_tokens = cfg, plan, max_new_tokens
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        (engine_bf16, engine_fp8), bf16 = PLANS[plan]
        self.model = TinyAr(cfg, params, bf16).to(self.device)
        self.engine = TinyAr(cfg, params, engine_bf16, engine_fp8).to(self.device).requires_grad_(False)
        self.ref = TinyAr(cfg, params, bf16).to(self.device).requires_grad_(False)
        decay = [p for n, p in zip(self.model.names, self.model.parameters()) if p.ndim == 2]
        other = [p for n, p in zip(self.model.names, self.model.parameters()) if p.ndim != 2]
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay}, {"params": other, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.999), eps=1e-8)
        self.version = 0
        self.served = 0
        self.grads = GradHandles(self.device)
        #: sampling-support replay (run.policy.sampler.supportReplay), as numpy_ar: a sampled batch's record
        #: keeps each position's kept set (`support`, uint8 (B, T, V)) and `logprobs` renormalises over it
        self.support_replay = support_replay

    def info(self) -> Dict[str, Any]:
        gemm = {"kind": "fp32"} if self.plan_name == "fp32" else {"kind": "rounding", "operands": "bf16"}
        rollout_gemm = gemm
        if self.plan_name == "fp8-tensor-rollout":
            rollout_gemm = {"kind": "quantized", "weights": "te-current", "activations": "te-current", "dtype": "torch.float8_e4m3fn", "kernel": "torch._scaled_mm"}
        return {
            "backend": {"name": "qrl_backend.torch_ar", "version": f"{VERSION} (torch {torch.__version__}, {self.device.type})"},
            "policy": "ar",
            "vocabulary": {"size": self.cfg.vocabSize, "pad": PAD, "bos": BOS, "eos": EOS, "sep": SEP, "mask": MASK},
            "plan": {"name": self.plan_name, "rollout": {"gemm": rollout_gemm, "decode": "recompute", "logprob": "processed"}, "trainer": {"gemm": gemm}},
            "capabilities": {"logprobs": ["processed", "raw"], "entropy": True, "warmStart": False, "probSqSum": True,
                             "topkLogprobs": True, "supportReplay": True},
            "parameters": int(sum(p.numel() for p in self.model.parameters())),
        }

    def sync(self) -> int:
        self.engine.load_state_dict(self.model.state_dict())
        self.served = self.version
        return self.served

    generate_keywords = frozenset({"max_new_tokens", "topk_logprobs"})  # Backend.generate_keywords

    def generate(self, prompts: List[List[int]], seed: str, sampling: Optional[Dict[str, Any]], greedy: bool, side: str,
                 max_new_tokens: Optional[int] = None, topk_logprobs: int = 0) -> RolloutBatch:
        import hashlib

        P = len(prompts[0])
        for b, p in enumerate(prompts):
            if len(p) != P or P == 0:
                raise ProtocolError(f"prompts.{b}", f"every prompt must have length {len(prompts[0])} ≥ 1 (left-pad them)")
        L = max_new_tokens if max_new_tokens is not None else self.max_new_tokens if self.max_new_tokens is not None else self.cfg.maxLen - P
        if L < 1 or P + L > self.cfg.maxLen:
            raise ProtocolError("maxNewTokens" if max_new_tokens is not None else "prompts", f"prompt length {P} + {L} response tokens must be ≤ maxLen {self.cfg.maxLen}")
        s = sampling or {"temperature": 1.0, "topK": 0, "topP": 1.0, "logprob": "processed"}
        model = self.engine if side == "rollout" else self.model
        rng = np.random.Generator(np.random.PCG64(int.from_bytes(hashlib.sha256(seed.encode()).digest()[:16], "little")))
        B = len(prompts)
        tokens = np.full((B, P + L), PAD, dtype=np.int64)
        tokens[:, :P] = prompts
        mask, logp = np.zeros((B, L)), np.zeros((B, L))
        active = np.ones(B, dtype=bool)
        K = 0 if greedy else topk_logprobs
        if K > self.cfg.vocabSize:
            raise ProtocolError("topkLogprobs", f"must be ≤ the vocabulary size {self.cfg.vocabSize}, got {K}")
        topk = TopkLogprobs(K, np.full((B, L, K), -1, dtype=np.int32), np.zeros((B, L, K))) if K else None
        support = np.zeros((B, L, self.cfg.vocabSize), dtype=np.uint8) if self.support_replay and not greedy else None
        # REAL STACK: one vLLM `generate` call with SamplingParams(temperature, top_k, top_p, logprobs=0, seed)
        # (and logprobs=K for topkLogprobs).
        with torch.no_grad():
            for k in range(L):
                z = model(torch.from_numpy(tokens[:, : P + k]).to(self.device))[:, -1].double().cpu().numpy()
                for b in np.nonzero(active)[0]:
                    if greedy:
                        y, lp = int(np.argmax(z[b])), 0.0
                    else:
                        keep = _support(z[b], s["temperature"], s["topK"], s["topP"])
                        proc = log_softmax_rows(z[b], s["temperature"], keep)
                        u = rng.random()
                        idx = np.nonzero(keep & (u < np.cumsum(np.where(keep, np.exp(proc), 0.0))))[0]
                        y = int(idx[0]) if idx.size else int(np.nonzero(keep)[0][-1])
                        lp = float(proc[y])
                        if support is not None:
                            support[b, k] = keep
                    tokens[b, P + k], mask[b, k] = y, 1.0
                    raw = None if s["logprob"] == "processed" else log_softmax_rows(z[b], 1.0)
                    logp[b, k] = lp if raw is None else float(raw[y])
                    if topk is not None:  # the ℓroll row itself: the sampled id's slot is ℓroll bit for bit
                        _record_topk(proc if raw is None else raw, keep, K, topk.ids[b, k], topk.logp[b, k])
                    active[b] = y != EOS
                if not active.any():
                    break
        record = {"kind": "ar", "promptLength": P, "temperature": 1.0 if greedy else float(s["temperature"])}
        if support is not None:  # REAL STACK: vLLM's sampling mask (--return-sampling-mask), per position
            record["support"] = support
        return RolloutBatch(self.served if side == "rollout" else self.version, prompts, tokens[:, P:].astype(np.int32), mask, logp, record, topk)

    logprobs_keywords = frozenset({"prob_sq_sum", "topk"})  # Backend.logprobs_keywords

    def logprobs(self, batch: RolloutBatch, rows: Sequence[int], policy: str, grad: bool, prob_sq_sum: bool = False,
                 topk: bool = False):
        tau = ar_record_temperature(batch)
        rows = list(rows)
        P = len(batch.prompts[0])
        tokens = torch.from_numpy(np.concatenate([np.asarray([batch.prompts[r] for r in rows]), batch.responses[rows]], axis=1).astype(np.int64)).to(self.device)
        resp = tokens[:, P:]
        mask = torch.from_numpy(batch.mask[rows]).to(self.device)
        model = self.model if policy == "current" else self.ref
        keep = ar_record_support(batch, rows, self.cfg.vocabSize)
        with torch.set_grad_enabled(grad):
            lsm, shifted = replayed_log_softmax(model(tokens)[:, P - 1 : -1].double() / tau, keep)
            lp, ent, sq, tk = score_rows(lsm, resp, mask, batch, rows, prob_sq_sum, topk, shifted)
        return self.grads.result(lp, ent, sq, tk, grad)

    backward_keywords = frozenset({"grad_topk"})  # Backend.backward_keywords

    def backward(self, handle: str, grad_logp: np.ndarray, grad_topk: Optional[np.ndarray] = None) -> None:
        self.grads.backward(handle, grad_logp, grad_topk)

    def step(self, max_grad_norm: float) -> Dict[str, Any]:
        for p in self.model.parameters():
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_grad_norm))
        self.opt.step()
        self.opt.zero_grad(set_to_none=False)
        self.grads.clear()
        self.version += 1
        return {"gradNorm": norm, "weightVersion": self.version}

    def set_reference(self) -> None:
        self.ref.load_state_dict(self.model.state_dict())

    def save(self, directory: str) -> None:
        os.makedirs(directory, exist_ok=True)
        meta = {CONFIG_KEY: self.cfg.to_json()}
        write_safetensors(os.path.join(directory, "weights.safetensors"), self.model.state_numpy(), meta)
        write_safetensors(os.path.join(directory, "reference.safetensors"), self.ref.state_numpy(), meta)
        torch.save(self.opt.state_dict(), os.path.join(directory, "optimizer.pt"))
        with open(os.path.join(directory, "backend.json"), "w") as f:
            json.dump({"weightVersion": self.version, "servedVersion": self.served, "plan": self.plan_name}, f)

    def load(self, directory: str) -> None:
        path = os.path.join(directory, "weights.safetensors")
        if not os.path.exists(path):
            raise RpcError(FAILED_PRECONDITION, f"load: no weights.safetensors in {directory}", "dir")
        params, _ = read_safetensors(path)
        check_params(self.cfg, params)
        self.model.load_numpy(params)
        ref = os.path.join(directory, "reference.safetensors")
        self.ref.load_numpy(read_safetensors(ref)[0] if os.path.exists(ref) else params)
        opt = os.path.join(directory, "optimizer.pt")
        if os.path.exists(opt):
            self.opt.load_state_dict(torch.load(opt, weights_only=True))
        st = os.path.join(directory, "backend.json")
        state = json.load(open(st)) if os.path.exists(st) else {}
        self.version = int(state.get("weightVersion", self.version))
        self.sync()
        self.served = int(state.get("servedVersion", self.served))


class ConfiguredTorchAr(ConfiguredFromRun):
    """The PyTorch backend built from what the driver sends (`configure`), as numpy_ar's
    ConfiguredNumpyAr is: `python3 -m qrl_backend.torch_ar` alone serves `qrl-sim run --backend` (the
    model from setup.model, the plan from setup.plan.name, AdamW's lr and weight decay from
    setup.optim); flags given override. Until configured, `info` is a failed precondition naming
    `setup`. Not a second model: every call goes to the TorchArBackend it builds."""

    def configure(self, run: Optional[Dict[str, Any]], setup: Optional[Dict[str, Any]]) -> None:
        if not self.needs_build(setup):
            return
        a = self.flags
        model = setup.get("model")
        if not isinstance(model, dict):
            raise ProtocolError("setup.model", "expected the ArConfig object (or start the backend with --config/--weights)")
        try:
            cfg = ArConfig.from_json(json.dumps(model))
        except (TypeError, ValueError) as e:
            raise ProtocolError("setup.model", str(e)) from None
        plan = a.plan
        if plan is None:
            name = (setup.get("plan") or {}).get("name") if isinstance(setup.get("plan"), dict) else None
            plan = name or "fp32"
            if plan not in PLANS:
                raise ProtocolError("setup.plan.name", f"this backend runs plans {', '.join(PLANS)}, the run asks for {plan!r}")
        optim = setup.get("optim") or {}
        self.inner = TorchArBackend(
            cfg, init_params(cfg, a.init_seed), plan=plan,
            lr=a.lr if a.lr is not None else float(optim.get("lr", 1e-3)),
            weight_decay=a.weight_decay if a.weight_decay is not None else float(optim.get("weightDecay", 0.0)),
            max_new_tokens=a.max_new_tokens if a.max_new_tokens is not None else setup.get("maxNewTokens"),
            device=a.device, support_replay=_support_replay(run, a),
        )
        self.setup = setup


def build(argv: Optional[List[str]] = None) -> Backend:
    """The backend from command-line options (`python3 -m qrl_backend.torch_ar --help`). With --config or
    --weights the model is built now; without, from the run the driver sends (`configure`), as numpy_ar
    does. Flags given override what the run sends."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python3 -m qrl_backend.torch_ar", description="qrl-backend/1 server: the toy AR policy on PyTorch.")
    ap.add_argument("--weights", help="safetensors file of initial weights (ParamStore names; its metadata holds the config)")
    ap.add_argument("--config", help="ArConfig as JSON (default: setup.model of the run)")
    ap.add_argument("--init-seed", type=int, default=0, help="seed of numpy's GPT-2 initialization (when --weights is absent)")
    ap.add_argument("--plan", choices=list(PLANS), help="default: setup.plan.name of the run, else fp32")
    ap.add_argument("--lr", type=float, help="default: setup.optim.lr of the run, else 1e-3")
    ap.add_argument("--weight-decay", type=float, help="default: setup.optim.weightDecay of the run, else 0")
    ap.add_argument("--max-new-tokens", type=int)
    ap.add_argument("--device", help="cuda, cpu, … (default: cuda when available)")
    ap.add_argument("--support-replay", action="store_true",
                    help="record each sampled position's kept set and score over it (default: the run's policy.sampler.supportReplay)")
    add_server_arguments(ap)
    a = ap.parse_args(argv)
    a.fixed = False
    if not (a.weights or a.config):
        return ConfiguredTorchAr(a)
    try:
        if a.weights:
            params, meta = read_safetensors(a.weights)
            cfg = ArConfig.from_json(a.config or meta[CONFIG_KEY])
        else:
            cfg = ArConfig.from_json(a.config)
            params = init_params(cfg, a.init_seed)
    except OSError as e:
        sys.stderr.write(f"{ap.prog}: --weights {a.weights}: {e.strerror or e}\n")
        sys.exit(2)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        sys.stderr.write(f"{ap.prog}: {'--config ' + a.config if a.config else '--weights ' + a.weights}: {e}\n")
        sys.exit(2)
    inner = TorchArBackend(cfg, params, plan=a.plan or "fp32", lr=1e-3 if a.lr is None else a.lr, weight_decay=a.weight_decay or 0.0,
                           max_new_tokens=a.max_new_tokens, device=a.device, support_replay=a.support_replay)
    return ConfiguredTorchAr(a, inner)
