"""The names `python -m qrl_backend.hf --help` shows and the checks it runs before loading a model:
the plan names, the setup fields, the MoE test. Imports neither torch nor transformers, so `--help`
and a bad option answer without them. Not the plans' numerics (backend.py, numerics.py)."""

from __future__ import annotations

from typing import Any

# Every name is prefixed `hf-`: these are this backend's numerics (float64 accumulation rounded once,
# torch's quantizers), not qrl-sim's presets of the bare names, whose plan data differ; a run takes
# them with `"plan": "backend"` (the driver then names the served plan in its reports).
PLAN_NAMES = ("hf-fp32", "hf-bf16", "hf-fp8-w8a8-rollout", "hf-fp8-rollout", "hf-fp8-kv", "hf-int8-rollout")
DEFAULT_PLAN = "hf-bf16"
# What `configure` may take from the run's setup, unless the command line fixed it (HfBackend.fixed).
SETUP_FIELDS = ("vocab_size", "lr", "beta1", "beta2", "eps", "weight_decay", "max_new_tokens", "temperature", "top_k", "top_p", "logprob")
# The refit faults `--fault` plants (refit_dump.py; docs/refit-check.md §8), named as docs/refit.md's plan faults.
FAULTS = ("halves-swapped", "rows-permuted", "stale-sync", "unity-kv-scales", "ignore-rule")
MOE_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")


def moe_experts(config: Any) -> int:
    """The number of routed experts a transformers config declares (0 for a dense model)."""
    for k in MOE_KEYS:
        v = getattr(config, k, None)
        if isinstance(v, int) and v > 0:
            return v
    return 0
