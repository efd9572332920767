"""qrl_backend.hf_diffusion: a bidirectional transformers model with a mask token behind qrl-backend/1 as
the masked-diffusion policy (`python -m qrl_backend.hf_diffusion`): a small Llama config whose
attention is full (non-causal), under numpy_diffusion's sampler, estimators and record, with the hf
backend's refit plans (numerics.py there). backend.py (the backend and its attention), cli.py (the
command line). The names load on first use, so `--help` runs without torch."""

from typing import Any

__all__ = ["HfDiffusionBackend", "PLANS"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import backend

        return getattr(backend, name)
    raise AttributeError(f"module 'qrl_backend.hf_diffusion' has no attribute {name!r}")
