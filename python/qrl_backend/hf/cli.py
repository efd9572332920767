"""Command-line options of `python -m qrl_backend.hf`: the model (a transformers config built with random
initialisation, or a local checkpoint directory), the plan, the optimizer, the sampler defaults, the
device and the determinism settings. Not the backend (backend.py)."""

from __future__ import annotations

import argparse
import json
from typing import List, Optional

from .backend import PLAN_NAMES, HfBackend, moe_experts

# Small dense defaults (overridable with --model JSON); the vocabulary comes from --vocab-size.
ARCH_DEFAULTS = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
    "tie_word_embeddings": False,
}
ARCHS = ("llama", "qwen2", "mistral", "qwen2_moe", "mixtral")


def model_config(arch: str, vocab_size: int, overrides: dict):
    """A transformers config of `arch` at the small defaults, vocabulary `vocab_size`, PAD/BOS/EOS = 0/1/2."""
    from transformers import AutoConfig

    kw = dict(ARCH_DEFAULTS, vocab_size=vocab_size, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    kw.update(overrides)
    return AutoConfig.for_model(arch, **kw)


def build(argv: Optional[List[str]] = None) -> HfBackend:
    """The backend the command line describes; a ValueError names a bad option or a refused model."""
    ap = argparse.ArgumentParser(prog="python -m qrl_backend.hf", description="qrl-backend/1 server: a transformers causal LM (trainer + refitted rollout engine).")
    src = ap.add_argument_group("model")
    src.add_argument("--arch", default="llama", choices=ARCHS, help="model type built from a config with random initialisation (default llama)")
    src.add_argument("--model", default="{}", help="config overrides as JSON, e.g. '{\"hidden_size\":32,\"num_hidden_layers\":1}'")
    src.add_argument("--vocab-size", type=int, default=13, help="vocabulary of the task (qrl-sim's reverse task: 13)")
    src.add_argument("--checkpoint", help="a local Hugging Face checkpoint directory instead of --arch (config.json + weights)")
    src.add_argument("--init-seed", type=int, default=0, help="seed of torch's initialisation of a config-built model")
    src.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"], help="trainer (master) weight dtype")
    ap.add_argument("--plan", default="bf16", choices=PLAN_NAMES)
    ap.add_argument("--fp8-block", type=int, default=128, help="block FP8: B×B weight blocks, 1×B activation groups (DeepSeek: 128; 16 matches qrl-sim's toy presets)")
    opt = ap.add_argument_group("optimizer (the run's optim.*)")
    opt.add_argument("--lr", type=float, default=3e-3)
    opt.add_argument("--beta1", type=float, default=0.9)
    opt.add_argument("--beta2", type=float, default=0.999)
    opt.add_argument("--eps", type=float, default=1e-8)
    opt.add_argument("--weight-decay", type=float, default=0.0)
    smp = ap.add_argument_group("sampling defaults (a generate request's sampling and maxNewTokens win)")
    smp.add_argument("--max-new-tokens", type=int, default=7, help="response slots (reverse task default: 7)")
    smp.add_argument("--temperature", type=float, default=1.0)
    smp.add_argument("--top-k", type=int, default=0)
    smp.add_argument("--top-p", type=float, default=1.0)
    smp.add_argument("--logprob", default="processed", choices=["processed", "raw"])
    ap.add_argument("--device", default="cpu", help="cpu or cuda (the same code)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (fixed for determinism)")
    ap.add_argument("--timing", help="write the seconds spent per backend method and per message to this JSON file at shutdown")
    ap.add_argument("--stdio", action="store_true", help="serve over stdin/stdout (the default)")
    ap.add_argument("--port", type=int, help="serve HTTP POST /rpc on this port instead (0 picks one)")
    ap.add_argument("--host", default="127.0.0.1")
    a = ap.parse_args(argv)
    for name, v, lo in (("--vocab-size", a.vocab_size, 5), ("--max-new-tokens", a.max_new_tokens, 1), ("--fp8-block", a.fp8_block, 1), ("--threads", a.threads, 1)):
        if v < lo:
            raise ValueError(f"{name}: must be ≥ {lo}, got {v}")
    if not a.temperature > 0:
        raise ValueError(f"--temperature: must be > 0, got {a.temperature}")
    if not 0 < a.top_p <= 1:
        raise ValueError(f"--top-p: must be in (0, 1], got {a.top_p}")

    import torch

    torch.set_num_threads(a.threads)
    torch.use_deterministic_algorithms(True)
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device: {a.device} requested but torch sees no CUDA device")
    dtype = torch.float32 if a.dtype == "fp32" else torch.bfloat16
    from transformers import AutoConfig, AutoModelForCausalLM

    from .numerics import ATTENTION_NAME, register_attention

    register_attention()
    if a.checkpoint:
        cfg = AutoConfig.from_pretrained(a.checkpoint)
        if moe_experts(cfg):
            raise ValueError(f"--checkpoint: {a.checkpoint} is a mixture-of-experts model ({moe_experts(cfg)} experts); this backend refuses MoE models (no routing replay)")
        model = AutoModelForCausalLM.from_pretrained(a.checkpoint, attn_implementation=ATTENTION_NAME, dtype=dtype)
        source = a.checkpoint
    else:
        try:
            overrides = json.loads(a.model)
        except ValueError:
            raise ValueError(f"--model: not JSON: {a.model!r}") from None
        if not isinstance(overrides, dict):
            raise ValueError(f"--model: expected a JSON object, got {a.model!r}")
        cfg = model_config(a.arch, a.vocab_size, overrides)
        if moe_experts(cfg):
            raise ValueError(f"--arch {a.arch}: a mixture-of-experts model ({moe_experts(cfg)} experts); this backend does not record or replay MoE routing (docs/moe.md), so it refuses MoE models: use llama, qwen2 or mistral")
        torch.manual_seed(a.init_seed)
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation=ATTENTION_NAME, dtype=dtype)
        source = f"{a.arch} {a.model}"
    sampling = {"temperature": a.temperature, "topK": a.top_k, "topP": a.top_p, "logprob": a.logprob}
    be = HfBackend(model, a.plan, block=a.fp8_block, lr=a.lr, beta1=a.beta1, beta2=a.beta2, eps=a.eps, weight_decay=a.weight_decay,
                   max_new_tokens=a.max_new_tokens, sampling=sampling, device=a.device, source=source)
    be.timing_path = a.timing
    return be
