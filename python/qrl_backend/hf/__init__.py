"""qrl_backend.hf: a Hugging Face transformers causal LM behind qrl-backend/1 — trainer, refitted rollout
engine (bf16, FP8 W8A8, block FP8, FP8 KV cache), reference (`python -m qrl_backend.hf`)."""

from .backend import HfBackend, plan_table

__all__ = ["HfBackend", "plan_table"]
