"""qrl_backend.hf_diffusion in-process: the attention is bidirectional (a slot's logits depend on a later
token), the trajectory estimator's ℓ equals ℓroll bit for bit under hf-bf16 and differs on every token
under the FP8 W8A8 rollout, the engine changes only at sync, hf-fp8-kv is refused, and LLaDA's SFT warm
start lowers its loss."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from qrl_backend.backend import SftExamples  # noqa: E402
from qrl_backend.hf.cli import model_config  # noqa: E402
from qrl_backend.hf_diffusion.backend import ATTENTION_NAME, HfDiffusionBackend, register_attention  # noqa: E402
from qrl_backend.numpy_diffusion.policy import SamplerConfig  # noqa: E402

TINY = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1}
PROMPTS = [[1, 5, 6, 7, 3], [1, 8, 9, 10, 3], [1, 12, 6, 5, 3], [1, 7, 7, 9, 3]]
SAMPLER = SamplerConfig(genLength=8, blockLength=4, steps=4)


def make(plan="hf-bf16", estimator="trajectory") -> HfDiffusionBackend:
    from transformers import AutoModelForCausalLM

    torch.use_deterministic_algorithms(True)
    register_attention()
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(model_config("llama", 13, TINY), attn_implementation=ATTENTION_NAME)
    return HfDiffusionBackend(model, SAMPLER, estimator, plan, lr=3e-3)


def test_attention_is_bidirectional():
    be = make()
    a = np.array([[1, 5, 6, 7, 3, 4, 4, 4]])
    b = a.copy()
    b[0, -1] = 9  # a later token changes
    za, _ = be._forward(be.model, a)
    zb, _ = be._forward(be.model, b)
    assert not np.array_equal(za[0, 0], zb[0, 0])


def test_trajectory_exact_under_bf16_and_not_under_fp8():
    for plan, exact in (("hf-bf16", True), ("hf-fp8-w8a8-rollout", False)):
        be = make(plan)
        batch = be.generate(PROMPTS, "s", None, False, "rollout")
        lp = be.logprobs(batch, list(range(len(PROMPTS))), "current", False).logp
        on = batch.mask == 1
        if exact:
            assert np.array_equal(lp[on], batch.logp_rollout[on])
        else:
            assert np.all(lp[on] != batch.logp_rollout[on])


def test_engine_changes_only_at_sync_and_kv_plan_refused():
    be = make(estimator="d1")
    batch = be.generate(PROMPTS, "s", None, False, "rollout")
    h = be.logprobs(batch, list(range(len(PROMPTS))), "current", True).handle
    be.backward(h, -np.ones(batch.mask.size) * batch.mask.reshape(-1))
    be.step(1.0)
    again = be.generate(PROMPTS, "s", None, False, "rollout")
    assert np.array_equal(again.logp_rollout, batch.logp_rollout)
    be.sync()
    assert not np.array_equal(be.generate(PROMPTS, "s", None, False, "rollout").logp_rollout, batch.logp_rollout)
    with pytest.raises(ValueError, match="plan"):
        make("hf-fp8-kv")


def test_warm_start_lowers_the_sft_loss():
    be = make()
    n = 20 * 4
    prompts = np.array([PROMPTS[i % 4] for i in range(n)], dtype=np.int32)
    responses = prompts[:, 1:4][:, ::-1].copy()  # the reversed symbols, then EOS
    responses = np.concatenate([responses, np.full((n, 1), 2)], axis=1).astype(np.int32)
    m = be.warm_start({"name": "reverse"}, 20, 4, 1e-2, 0, SftExamples(prompts, responses, np.full(n, 4, dtype=np.int32)))
    assert m["sft/loss_last10"] < m["sft/loss_first"]
    assert be.version == 1
