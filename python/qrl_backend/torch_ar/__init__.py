"""The toy AR policy on PyTorch behind qrl-backend/1 (`python3 -m qrl_backend.torch_ar`): the template
a GPU stack starts from. CUDA when present, CPU otherwise. The names are loaded on first use, so the
command answers in one line without torch (the `torch` extra)."""

from typing import Any

__all__ = ["TorchArBackend", "build"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import backend

        return getattr(backend, name)
    raise AttributeError(f"module 'qrl_backend.torch_ar' has no attribute {name!r}")
