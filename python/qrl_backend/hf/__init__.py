"""qrl_backend.hf: a Hugging Face transformers causal LM behind qrl-backend/1 — trainer, refitted rollout
engine (bf16, FP8 W8A8, block FP8, FP8 KV cache), reference (`python -m qrl_backend.hf`). The names are
loaded on first use, so `python -m qrl_backend.hf --help` runs without torch (the `hf` extra)."""

from typing import Any

__all__ = ["HfBackend", "plan_table"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import backend

        return getattr(backend, name)
    raise AttributeError(f"module 'qrl_backend.hf' has no attribute {name!r}")
