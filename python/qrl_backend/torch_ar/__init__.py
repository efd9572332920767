"""The toy AR policy on PyTorch behind qrl-backend/1 (`python3 -m qrl_backend.torch_ar`): the template
a GPU stack starts from. CUDA when present, CPU otherwise."""

from .backend import TorchArBackend, build

__all__ = ["TorchArBackend", "build"]
