"""The transformers backend's warm start on the driver's examples (capabilities.sftExamples): it declares the
capability, trains the trainer only (the engine keeps its weights until sync, the reference until
setReference, the RL optimizer's state stays empty), advances the version by one, lowers the loss on a
copy task until greedy decoding copies held-out prompts, and gives the same bits twice; without
examples a warm start of > 0 steps is refused in one line naming `examples`; through the server the
examples arrive as three I32 tensors, are checked, and are refused naming the field by a backend whose
warm_start does not take them (numpy_ar)."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from hf_tiny import tiny_llama  # noqa: E402
from qrl_backend import SftExamples, encode_tensor  # noqa: E402
from qrl_backend.hf.backend import HfBackend  # noqa: E402
from qrl_backend.server import handle_message  # noqa: E402
from qrl_backend.wire import RpcError  # noqa: E402

V = 9  # specials 0…4, symbols 5…8


def copy_examples(n: int, seed: int):
    """Copy task: prompt BOS a b c SEP, response a b c EOS (lengths 3 or 4 with PAD after a shorter one)."""
    rng = np.random.default_rng(seed)
    prompts, responses, lengths = [], [], []
    for _ in range(n):
        k = int(rng.integers(2, 4))
        sym = [int(x) for x in rng.integers(5, V, size=k)]
        prompts.append([0] * (3 - k) + [1] + sym + [3])
        resp = sym + [2]
        lengths.append(len(resp))
        responses.append(resp + [0] * (4 - len(resp)))
    return SftExamples(np.array(prompts, np.int32), np.array(responses, np.int32), np.array(lengths, np.int32))


@pytest.fixture(scope="module")
def base_model():
    torch.set_num_threads(1)  # as the backend's --threads default
    return tiny_llama(V)


def backend(model) -> HfBackend:
    return HfBackend(copy.deepcopy(model), "hf-bf16", lr=3e-3, max_new_tokens=4)


def test_declares_the_capability(base_model):
    assert backend(base_model).info()["capabilities"]["sftExamples"] is True


def test_refuses_steps_without_examples_in_one_line(base_model):
    be = backend(base_model)
    assert be.warm_start({"name": "reverse", "options": {}}, 0, 32, 3e-3, 0) == {}
    with pytest.raises(RpcError) as e:
        be.warm_start({"name": "reverse", "options": {}}, 5, 32, 3e-3, 0)
    assert e.value.field == "examples" and "\n" not in str(e.value) and "capabilities.sftExamples" in str(e.value)


def test_warm_start_learns_the_task_and_touches_the_trainer_only(base_model):
    be = backend(base_model)
    probe = be.generate([[1, 5, 6, 7, 3]], "p", None, True, "rollout")
    ref_before = {k: v.clone() for k, v in be.ref.state_dict().items()}
    steps, B = 80, 16
    metrics = be.warm_start({"name": "copy", "options": {}}, steps, B, 3e-3, 0, examples=copy_examples(steps * B, 0))
    assert metrics["sft/steps"] == steps and metrics["sft/loss_last10"] < 0.5 * metrics["sft/loss_first"]
    assert be.version == 1 and not be.opt.state  # the RL optimizer was never stepped
    assert all(torch.equal(v, be.ref.state_dict()[k]) for k, v in ref_before.items())
    again = be.generate([[1, 5, 6, 7, 3]], "p", None, True, "rollout")
    assert np.array_equal(again.responses, probe.responses)  # the engine serves the old weights until sync
    be.sync()
    held = copy_examples(32, 99)
    out = be.generate(held.prompts.tolist(), "e", None, True, "rollout")
    right = [list(out.responses[i, : held.lengths[i]]) == list(held.responses[i, : held.lengths[i]]) for i in range(32)]
    assert np.mean(right) >= 0.5
    # the trainer numerics are the plan's again (the warm start ran fp32 GEMMs)
    assert all(m.gemm == ("exact", "bf16") for m in be.model.modules() if hasattr(m, "gemm"))
    a, b = backend(base_model), backend(base_model)
    for be2 in (a, b):
        be2.warm_start({"name": "copy", "options": {}}, 3, B, 3e-3, 0, examples=copy_examples(3 * B, 0))
    assert all(torch.equal(v, b.model.state_dict()[k]) for k, v in a.model.state_dict().items())


def _request(examples: SftExamples, steps: int, batch: int):
    e = {"prompts": encode_tensor(examples.prompts), "responses": encode_tensor(examples.responses), "lengths": encode_tensor(examples.lengths)}
    params = {"task": {"name": "copy", "options": {}}, "steps": steps, "batchSize": batch, "lr": 3e-3, "seed": 0, "examples": e}
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "warmStart", "params": params})


def test_server_decodes_and_checks_the_examples(base_model):
    be = backend(base_model)
    answer = handle_message(be, _request(copy_examples(8, 0), 2, 4))
    assert answer["result"]["sft/steps"] == 2.0 and be.version == 1
    err = handle_message(backend(base_model), _request(copy_examples(8, 0), 3, 4))["error"]
    assert err["code"] == -32602 and err["data"]["field"] == "examples.prompts"
    bad = copy_examples(8, 0)
    bad.lengths[0] = 9
    err = handle_message(backend(base_model), _request(bad, 2, 4))["error"]
    assert err["code"] == -32602 and err["data"]["field"] == "examples.lengths"


def test_a_backend_without_the_keyword_refuses_the_field():
    from qrl_backend.numpy_ar.backend import NumpyArBackend

    be = NumpyArBackend.__new__(NumpyArBackend)  # the field is refused before anything of the backend is used
    err = handle_message(be, _request(copy_examples(4, 0), 1, 4))["error"]
    assert err["data"]["field"] == "examples"
