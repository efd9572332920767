"""qrl_backend.hf's engine dump (capabilities.dumpEngine, docs/refit-check.md §8) checked by refit-check's
Python twin: a healthy sync is clean under every FP8 plan, and each fault `--fault` plants is named on
the right tensor with the right kind; the dump travels over the SDK's dumpEngine method. The TypeScript
refit-check on the same dumps is test/python/hf-refit-dump.test.ts."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("safetensors")
pytest.importorskip("ml_dtypes")

from qrl_backend import server  # noqa: E402
from qrl_backend.hf.cli import build  # noqa: E402
from qrl_golden.refit_check import refit_check  # noqa: E402

MODEL = json.dumps({"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1})
PROMPTS = [[1, 5, 6, 7, 3], [1, 8, 9, 10, 3]]


def backend(plan: str, fault: str | None = None):
    return build(["--model", MODEL, "--plan", plan, "--fp8-block", "16", "--vocab-size", "13"] + (["--fault", fault] if fault else []))


def train_step(be) -> None:
    """One real step: a rollout, ℓ with a gradient, backward of Σℓ, an AdamW step."""
    b = be.generate(PROMPTS, "0/step/1/rollout", None, False, "rollout", None)
    r = be.logprobs(b, list(range(b.B)), "current", True)
    be.backward(r.handle, np.ones((b.B, b.T)))
    be.step(1.0)


def synced_dump(be, directory: str) -> dict:
    """sync, one generate (the FP8 KV cache calibrates its scales on it), the dump."""
    be.sync()
    be.generate(PROMPTS, "0/after-sync", None, True, "rollout", None)
    return be.dump_engine(directory)


def check(directory: str, r: dict, previous: str | None = None) -> list[tuple[str, str]]:
    res = refit_check(os.path.join(directory, r["trainer"]), os.path.join(directory, r["engine"]), r["recipe"], r.get("block"), previous, r["ignore"], r["match"])
    return [(f["tensor"], f["kind"]) for f in res["findings"]]


@pytest.mark.parametrize("plan", ["hf-fp8-rollout", "hf-fp8-kv", "hf-fp8-w8a8-rollout", "hf-bf16"])
def test_a_healthy_sync_is_clean(plan, tmp_path):
    be = backend(plan)
    r = synced_dump(be, str(tmp_path / "0"))
    assert r["match"] == "prefix" and "lm_head" in r["ignore"] and "model.embed_tokens" in r["ignore"]
    assert check(str(tmp_path / "0"), r) == []
    train_step(be)
    r = synced_dump(be, str(tmp_path / "1"))
    assert check(str(tmp_path / "1"), r, str(tmp_path / "0" / "trainer.safetensors")) == []
    if plan == "hf-fp8-kv":
        from safetensors.torch import load_file

        held = load_file(str(tmp_path / "1" / "engine.safetensors"))
        assert held["model.layers.0.self_attn.k_scale"].shape == () and float(held["model.layers.0.self_attn.k_scale"]) != 1.0
        assert held["model.layers.0.mlp.gate_up_proj.weight"].dtype == torch.float8_e4m3fn and held["lm_head.weight"].dtype == torch.float32


@pytest.mark.parametrize(
    "fault, plan, expected",
    [
        ("halves-swapped", "hf-fp8-rollout", [("model.layers.0.mlp.gate_up_proj.weight", "layout-permuted")]),
        ("ignore-rule", "hf-fp8-rollout", [("model.layers.0.mlp.gate_up_proj.weight", "not-quantized")]),
        ("unity-kv-scales", "hf-fp8-kv", [("model.layers.0.self_attn.k_scale", "unity-scale"), ("model.layers.0.self_attn.v_scale", "unity-scale")]),
        (
            "rows-permuted",
            "hf-fp8-w8a8-rollout",
            [(f"model.layers.0.{m}.weight", "layout-permuted") for m in ("mlp.down_proj", "mlp.gate_up_proj", "self_attn.o_proj", "self_attn.q_proj")],
        ),
    ],
)
def test_each_planted_fault_is_named(fault, plan, expected, tmp_path):
    r = synced_dump(backend(plan, fault), str(tmp_path))
    assert check(str(tmp_path), r) == expected
    if fault == "halves-swapped":
        res = refit_check(str(tmp_path / r["trainer"]), str(tmp_path / r["engine"]), r["recipe"], r.get("block"), None, r["ignore"], r["match"])
        assert res["findings"][0]["permutation"] == "halves-swapped"


def test_a_stale_sync_is_stale_against_the_previous_trainer(tmp_path):
    be = backend("hf-fp8-rollout", "stale-sync")
    r0 = synced_dump(be, str(tmp_path / "0"))
    assert check(str(tmp_path / "0"), r0) == []  # the first sync is right
    train_step(be)
    r = synced_dump(be, str(tmp_path / "1"))
    found = check(str(tmp_path / "1"), r, str(tmp_path / "0" / "trainer.safetensors"))
    # every tensor the step moved is the previous sync's (k/v/rows the step did not move would be clean)
    assert found and all(k == "stale" for _, k in found)
    assert ("model.layers.0.mlp.gate_up_proj.weight", "stale") in found
    without_previous = check(str(tmp_path / "1"), r)
    assert without_previous and all(k == "value-error" for _, k in without_previous)


def test_dump_engine_over_the_protocol(tmp_path):
    be = backend("hf-fp8-rollout", "ignore-rule")
    info = server.handle_message(be, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "info", "params": {"protocols": ["qrl-backend/1"]}}))
    assert info["result"]["capabilities"]["dumpEngine"] is True
    server.handle_message(be, json.dumps({"jsonrpc": "2.0", "id": 2, "method": "sync", "params": {}}))
    d = str(tmp_path / "d")
    answer = server.handle_message(be, json.dumps({"jsonrpc": "2.0", "id": 3, "method": "dumpEngine", "params": {"dir": d}}))
    r = answer["result"]
    assert r == {"trainer": "trainer.safetensors", "engine": "engine.safetensors", "recipe": "deepseek-fp8-block", "block": 16, "ignore": ["lm_head", "model.embed_tokens"], "match": "prefix"}
    assert check(d, r) == [("model.layers.0.mlp.gate_up_proj.weight", "not-quantized")]
    refused = server.handle_message(be, json.dumps({"jsonrpc": "2.0", "id": 4, "method": "dumpEngine", "params": {"dir": d, "extra": 1}}))
    assert refused["error"]["code"] == -32602
    # the HTTP server's state root confines dumpEngine as it does save and load
    root = tmp_path / "root"
    root.mkdir()
    outside = server.handle_message(be, json.dumps({"jsonrpc": "2.0", "id": 5, "method": "dumpEngine", "params": {"dir": str(tmp_path / "elsewhere")}}), state_root=str(root))
    assert outside["error"]["code"] == -32602 and "state root" in outside["error"]["message"]
    assert not (tmp_path / "elsewhere").exists()


def test_a_fault_the_plan_cannot_have_is_refused():
    for fault, plan in (("unity-kv-scales", "hf-fp8-rollout"), ("halves-swapped", "hf-bf16")):
        with pytest.raises(ValueError, match=r"--fault: " + fault):
            backend(plan, fault)
