"""Command-line options of `python -m qrl_backend.hf`: the model (a transformers config built with random
initialisation, or a local checkpoint directory), the plan, the optimizer, the sampler defaults, the
device and the determinism settings. Not the backend (backend.py)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, List, Optional

from ..deps import require
from ..server import add_server_arguments
from .names import DEFAULT_PLAN, FAULTS, PLAN_NAMES, SETUP_FIELDS, moe_experts

if TYPE_CHECKING:
    from .backend import HfBackend

# Small dense defaults (overridable with --model JSON); the vocabulary comes from the run's setup
# (qrl-sim run --backend) or --vocab-size.
ARCH_DEFAULTS = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
    "tie_word_embeddings": False,
}
# The flags' values when neither the command line nor a run's setup gives one.
FLAG_DEFAULTS = {"vocab_size": 13, "lr": 3e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0,
                 "max_new_tokens": 7, "temperature": 1.0, "top_k": 0, "top_p": 1.0, "logprob": "processed"}
ARCHS = ("llama", "qwen2", "mistral", "qwen2_moe", "mixtral")


def torch_runtime(threads: int, device: str):
    """Imports torch for a transformers backend (naming what is missing), fixes its CPU threads and
    deterministic algorithms, and refuses a CUDA `--device` torch cannot see. Returns the torch module."""
    require(("torch", "transformers", "safetensors"), "hf")
    import torch

    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device: {device} requested but torch sees no CUDA device")
    return torch

def model_config(arch: str, vocab_size: int, overrides: dict):
    """A transformers config of `arch` at the small defaults, vocabulary `vocab_size`, PAD/BOS/EOS = 0/1/2."""
    from transformers import AutoConfig

    kw = dict(ARCH_DEFAULTS, vocab_size=vocab_size, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    kw.update(overrides)
    return AutoConfig.for_model(arch, **kw)


def outlier_channels(width: int, count: int) -> List[int]:
    """⌊(i + ½)·width/count⌋, i = 0 … count−1: qrl-sim's outlier channels (src/nn/outliers.ts)."""
    return [int((i + 0.5) * width // count) for i in range(count)]


def plant_outliers(model, count: int, magnitude: float) -> int:
    """Sets the gain of `count` channels (outlier_channels) of every RMSNorm that feeds a linear layer
    (each layer's input and post-attention norm and the final norm before the LM head) to `magnitude`,
    as qrl-sim's AR `outliers`/`outlierMagnitude` do (LLM.int8(): a few hidden dimensions ≈ 20× the
    others at the linear layers' inputs); trainable like any gain. Returns how many norms it set."""
    import torch

    n = 0
    with torch.no_grad():
        for name, m in model.named_modules():
            w = getattr(m, "weight", None)
            if name.endswith(("input_layernorm", "post_attention_layernorm", "model.norm")) and w is not None and w.dim() == 1:
                w[outlier_channels(w.shape[0], count)] = magnitude
                n += 1
    return n


def build(argv: Optional[List[str]] = None) -> "HfBackend":
    """The backend the command line describes; a ValueError names a bad option or a refused model, a
    MissingDependency a missing torch or transformers (`--help` and the option checks need neither)."""
    ap = argparse.ArgumentParser(prog="python -m qrl_backend.hf", description="qrl-backend/1 server: a transformers causal LM (trainer + refitted rollout engine).")
    src = ap.add_argument_group("model")
    src.add_argument("--arch", default="llama", choices=ARCHS, help="model type built from a config with random initialisation (default llama)")
    src.add_argument("--model", default="{}", help="config overrides as JSON, e.g. '{\"hidden_size\":32,\"num_hidden_layers\":1}'")
    src.add_argument("--vocab-size", type=int, help="vocabulary (default: the run's setup.vocabulary.size, else 13, the reverse task's)")
    src.add_argument("--checkpoint", help="a local Hugging Face checkpoint directory instead of --arch (config.json + weights)")
    src.add_argument("--init-seed", type=int, default=0, help="seed of torch's initialisation of a config-built model")
    src.add_argument("--outliers", type=int, default=0, help="outlier channels of a config-built model: their gain in every norm feeding a linear starts at --outlier-magnitude (qrl-sim's AR `outliers`; default 0)")
    src.add_argument("--outlier-magnitude", type=float, default=20.0, help="initial gain of each outlier channel (default 20, LLM.int8()'s ≈ 20×)")
    src.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"], help="trainer (master) weight dtype")
    ap.add_argument("--plan", default=DEFAULT_PLAN, choices=PLAN_NAMES, help="this backend's own plans (a run takes them with \"plan\": \"backend\")")
    ap.add_argument("--fp8-block", type=int, default=128, help="block FP8: B×B weight blocks, 1×B activation groups (DeepSeek: 128; 16 matches qrl-sim's toy presets)")
    # Each of these overrides the run's setup (flag > setup > default); the defaults serve a backend
    # started without a run (e.g. backend-check).
    opt = ap.add_argument_group("optimizer (default: the run's setup.optim, else the value shown)")
    opt.add_argument("--lr", type=float, help="default 3e-3")
    opt.add_argument("--beta1", type=float, help="default 0.9")
    opt.add_argument("--beta2", type=float, help="default 0.999")
    opt.add_argument("--eps", type=float, help="default 1e-8")
    opt.add_argument("--weight-decay", type=float, help="default 0")
    smp = ap.add_argument_group("sampling defaults (default: the run's setup; a generate request's sampling and maxNewTokens win)")
    smp.add_argument("--max-new-tokens", type=int, help="response slots (default 7, the reverse task's)")
    smp.add_argument("--temperature", type=float, help="default 1")
    smp.add_argument("--top-k", type=int, help="default 0")
    smp.add_argument("--top-p", type=float, help="default 1")
    smp.add_argument("--logprob", choices=["processed", "raw"], help="default processed")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (the same code)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (fixed for determinism)")
    ap.add_argument("--timing", help="write the seconds spent per backend method and per message to this JSON file at shutdown")
    ap.add_argument("--fault", choices=FAULTS, help="test and diagnostic hook: plant this refit fault at every sync (docs/refit-check.md §8), so that refit-check has something to find")
    add_server_arguments(ap)
    a = ap.parse_args(argv)
    fixed = [f for f in SETUP_FIELDS if getattr(a, f) is not None]
    for f, v in FLAG_DEFAULTS.items():
        if getattr(a, f) is None:
            setattr(a, f, v)
    for name, v, lo in (("--vocab-size", a.vocab_size, 5), ("--max-new-tokens", a.max_new_tokens, 1), ("--fp8-block", a.fp8_block, 1), ("--threads", a.threads, 1)):
        if v < lo:
            raise ValueError(f"{name}: must be ≥ {lo}, got {v}")
    if a.outliers < 0:
        raise ValueError(f"--outliers: must be ≥ 0, got {a.outliers}")
    if not a.outlier_magnitude > 0:
        raise ValueError(f"--outlier-magnitude: must be > 0, got {a.outlier_magnitude}")
    if a.outliers and a.checkpoint:
        raise ValueError("--outliers: a checkpoint has its own activation statistics; --outliers applies to a config-built model (--arch)")
    if not a.temperature > 0:
        raise ValueError(f"--temperature: must be > 0, got {a.temperature}")
    if not 0 < a.top_p <= 1:
        raise ValueError(f"--top-p: must be in (0, 1], got {a.top_p}")

    torch = torch_runtime(a.threads, a.device)

    from .backend import HfBackend

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
        factory = None
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

        def factory(vocab_size: int):
            """The config-built model at `vocab_size`, initialised from --init-seed."""
            torch.manual_seed(a.init_seed)
            m = AutoModelForCausalLM.from_config(model_config(a.arch, vocab_size, overrides), attn_implementation=ATTENTION_NAME, dtype=dtype)
            if a.outliers:
                if a.outliers > m.config.hidden_size:
                    raise ValueError(f"--outliers: must be ≤ hidden_size {m.config.hidden_size}, got {a.outliers}")
                plant_outliers(m, a.outliers, a.outlier_magnitude)
            return m

        model = factory(a.vocab_size)
        source = f"{a.arch} {a.model}" + (f" outliers {a.outliers}×{a.outlier_magnitude:g}" if a.outliers else "")
        if "vocab_size" in overrides:
            fixed.append("vocab_size")
    sampling = {"temperature": a.temperature, "topK": a.top_k, "topP": a.top_p, "logprob": a.logprob}
    be = HfBackend(model, a.plan, block=a.fp8_block, lr=a.lr, beta1=a.beta1, beta2=a.beta2, eps=a.eps, weight_decay=a.weight_decay,
                   max_new_tokens=a.max_new_tokens, sampling=sampling, device=a.device, source=source, factory=factory, fixed=fixed, fault=a.fault)
    be.timing_path = a.timing
    return be
