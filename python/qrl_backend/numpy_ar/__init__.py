"""The toy AR policy of qrl-sim in numpy, served over qrl-backend/1 (`python3 -m qrl_backend.numpy_ar`)."""

from .backend import NumpyArBackend, build
from .model import ArConfig, Plan, backward, forward, init_params, param_specs, round_bf16

__all__ = ["NumpyArBackend", "build", "ArConfig", "Plan", "backward", "forward", "init_params", "param_specs", "round_bf16"]
