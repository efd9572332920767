"""Command line of `python -m qrl_backend.hf_diffusion`: the transformers config (random initialisation
from --init-seed, the hf backend's small defaults), the plan, the device; the sampler, the estimator,
the vocabulary and AdamW come from the run the driver sends (flags override lr). Not the backend
(backend.py)."""

from __future__ import annotations

import argparse
import json
from typing import Any, Dict, List, Optional

from ..backend import Backend, ConfiguredFromRun
from ..hf.cli import torch_runtime
from ..server import add_server_arguments
from ..wire import ProtocolError

PLAN_CHOICES = ("hf-fp32", "hf-bf16", "hf-fp8-w8a8-rollout", "hf-fp8-rollout")  # backend.PLANS, without importing torch
ARCHS = ("llama", "qwen2", "mistral")


class ConfiguredHfDiffusion(ConfiguredFromRun):
    """The transformers diffusion backend built from the run: vocabulary from `setup.vocabulary.size`,
    sampler from `run.policy.diffusion` and `run.policy.sampler`, estimator from
    `run.policy.diffusion.estimator`, AdamW from `setup.optim`; the model from the flags."""

    policy = "diffusion"

    def configure(self, run: Optional[Dict[str, Any]], setup: Optional[Dict[str, Any]]) -> None:
        if not self.needs_build(setup):
            return
        if not isinstance(run, dict):
            raise ProtocolError("run", "the diffusion backend builds its sampler from the run config (qrl-sim run --backend sends it)")
        from ..numpy_diffusion.backend import _sampler_from_run

        voc = setup.get("vocabulary") or {}
        for key, want in (("pad", 0), ("bos", 1), ("eos", 2), ("sep", 3), ("mask", 4)):
            if voc.get(key) != want:
                raise ProtocolError(f"setup.vocabulary.{key}", f"this backend's special tokens are PAD 0, BOS 1, EOS 2, SEP 3, MASK 4; the run has {key} {voc.get(key)!r}")
        try:
            sampler = _sampler_from_run(run)
            sampler.schedule()
        except (ValueError, TypeError) as e:
            raise ProtocolError("run.policy", str(e)) from None
        pol = run.get("policy") or {}
        optim = setup.get("optim") or {}
        a = self.flags
        self.inner = _backend(a, int(voc["size"]), sampler, str((pol.get("diffusion") or {}).get("estimator", "d1")), optim,
                              bool((pol.get("sampler") or {}).get("supportReplay", False)))
        self.setup = setup

    def info(self) -> Dict[str, Any]:
        if self.inner is None:
            # a client without a run (backend-check without --config): the numpy twin's defaults
            from ..numpy_diffusion.policy import SamplerConfig

            self.inner = _backend(self.flags, self.flags.vocab_size, SamplerConfig(), "d1", {}, False)
        return self.inner.info()

    def logprobs(self, batch, rows, policy, grad):  # noqa: ANN001, ANN201
        return self._be().logprobs(batch, rows, policy, grad)

    logprobs_keywords = frozenset()
    warm_start_keywords = frozenset({"examples"})

    def warm_start(self, task, steps, batch_size, lr, seed, examples=None):  # noqa: ANN001, ANN201
        return self._be().warm_start(task, steps, batch_size, lr, seed, examples=examples)


def _backend(a: Any, vocab: int, sampler: Any, estimator: str, optim: Dict[str, Any], support_replay: bool) -> Backend:
    import torch
    from transformers import AutoModelForCausalLM

    from ..hf.cli import model_config
    from .backend import ATTENTION_NAME, HfDiffusionBackend, register_attention

    register_attention()
    torch.manual_seed(a.init_seed)
    dtype = torch.float32 if a.dtype == "fp32" else torch.bfloat16
    model = AutoModelForCausalLM.from_config(model_config(a.arch, vocab, a.overrides), attn_implementation=ATTENTION_NAME, dtype=dtype)
    try:
        return HfDiffusionBackend(model, sampler, estimator, a.plan, block=a.fp8_block, lr=a.lr if a.lr is not None else float(optim.get("lr", 1e-3)),
                                  beta1=float(optim.get("beta1", 0.9)), beta2=float(optim.get("beta2", 0.999)), eps=float(optim.get("eps", 1e-8)),
                                  weight_decay=float(optim.get("weightDecay", 0.0)), support_replay=support_replay, device=a.device)
    except ValueError as e:
        raise ProtocolError("run.policy", str(e)) from None


def build(argv: Optional[List[str]] = None) -> Backend:
    """The backend the command line describes (built when the run arrives). A ValueError names a bad
    option, a MissingDependency a missing torch or transformers."""
    ap = argparse.ArgumentParser(prog="python -m qrl_backend.hf_diffusion", description="qrl-backend/1 server: a bidirectional transformers model as the masked-diffusion policy.")
    ap.add_argument("--arch", default="llama", choices=ARCHS, help="model type built from a config with random initialisation (default llama)")
    ap.add_argument("--model", default="{}", help="config overrides as JSON, e.g. '{\"hidden_size\":32,\"num_hidden_layers\":1}'")
    ap.add_argument("--vocab-size", type=int, default=13, help="vocabulary of a backend started without a run (default 13, the reverse task's; a run's setup sets it)")
    ap.add_argument("--init-seed", type=int, default=0, help="seed of torch's initialisation")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"], help="trainer (master) weight dtype")
    ap.add_argument("--plan", default="hf-bf16", choices=PLAN_CHOICES, help="this backend's own plans (a run takes them with \"plan\": \"backend\")")
    ap.add_argument("--fp8-block", type=int, default=128, help="block FP8 (hf-fp8-rollout): B×B weight blocks, 1×B activation groups")
    ap.add_argument("--lr", type=float, help="default: setup.optim.lr of the run, else 1e-3")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (the same code)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (fixed for determinism)")
    add_server_arguments(ap)
    a = ap.parse_args(argv)
    for name, v, lo in (("--vocab-size", a.vocab_size, 5), ("--fp8-block", a.fp8_block, 1), ("--threads", a.threads, 1)):
        if v < lo:
            raise ValueError(f"{name}: must be ≥ {lo}, got {v}")
    try:
        a.overrides = json.loads(a.model)
    except ValueError:
        raise ValueError(f"--model: not JSON: {a.model!r}") from None
    if not isinstance(a.overrides, dict):
        raise ValueError(f"--model: expected a JSON object, got {a.model!r}")
    torch_runtime(a.threads, a.device)
    a.fixed = False
    return ConfiguredHfDiffusion(a)
