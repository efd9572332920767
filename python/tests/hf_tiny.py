"""The tiny transformers models the qrl_backend.hf tests build: a Llama config of the given sizes with the
backend's registered float64 attention, under deterministic algorithms and a fixed torch seed."""

from __future__ import annotations

TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2}
SMALLER = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1}


def tiny_llama(vocab_size: int, sizes: dict = TINY, seed: int = 0):
    """A freshly initialised Llama of `sizes` over `vocab_size` ids (torch.manual_seed(seed))."""
    import torch
    from transformers import AutoModelForCausalLM

    from qrl_backend.hf.cli import model_config
    from qrl_backend.hf.numerics import ATTENTION_NAME, register_attention

    torch.use_deterministic_algorithms(True)
    register_attention()
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(model_config("llama", vocab_size, sizes), attn_implementation=ATTENTION_NAME)
