"""The toy masked-diffusion policy of qrl-sim written independently in numpy, served over qrl-backend/1
(`python3 -m qrl_backend.numpy_diffusion`): model.py (network, plans), policy.py (sampler, estimators),
rng.py (qrl-sim's named streams), fdlibm.py (JavaScript's exp/log), sft.py (LLaDA's SFT loss),
backend.py (the backend)."""

from .backend import NumpyDiffusionBackend, build
from .model import DiffusionConfig, Plan, backward, forward, init_params, param_specs
from .policy import SamplerConfig, sample, views_for
from .sft import masked_diffusion_loss, pad_response

__all__ = ["NumpyDiffusionBackend", "build", "DiffusionConfig", "Plan", "backward", "forward", "init_params", "param_specs", "SamplerConfig", "sample", "views_for", "masked_diffusion_loss", "pad_response"]
