"""qrl_golden.bundle: qrl-step/1 written whole, read back verified (format, hashes, shapes, fields)."""

import json
import os

import numpy as np
import pytest

from qrl_golden import bundle


def fields(B=2, T=3):
    rng = np.random.default_rng(0)
    return {
        "completion_ids": np.arange(B * T, dtype=np.int64).reshape(B, T),
        "completion_mask": np.ones((B, T), dtype=np.int64),
        "advantages": rng.standard_normal(B).astype(np.float32),
        "logp": -rng.random((B, T)).astype(np.float32),
        "token_loss": rng.standard_normal((B, 1)).astype(np.float32),
        "loss": np.float32(0.25),
        "grad_logp": rng.standard_normal((B, T)).astype(np.float32),
        "group": np.array([0, 0]),
    }


def test_round_trip(tmp_path):
    path = bundle.write(str(tmp_path / "s"), stack="mine", version="1", options={"lr": 1e-6}, tensors=fields(), metrics={"a": 1.0, "b": float("nan"), "c": None}, step=7)
    manifest, arrays = bundle.read(path)
    assert manifest["format"] == "qrl-step/1" and manifest["step"] == 7 and manifest["options"] == {"lr": 1e-6}
    assert manifest["metrics"] == {"a": 1.0}
    assert manifest["fields"] == sorted(fields())
    assert arrays["loss"].shape == () and arrays["token_loss"].shape == (2, 1)
    np.testing.assert_array_equal(arrays["logp"], fields()["logp"])
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".qrl-step-")]


def test_refusals(tmp_path):
    missing = fields()
    del missing["grad_logp"]
    with pytest.raises(bundle.BundleError, match="grad_logp: required field missing"):
        bundle.write(str(tmp_path / "a"), stack="s", version="1", options={}, tensors=missing)
    with pytest.raises(bundle.BundleError, match="entropy: not a qrl-step/1 field"):
        bundle.write(str(tmp_path / "b"), stack="s", version="1", options={}, tensors={**fields(), "entropy": np.zeros(2)})
    with pytest.raises(bundle.BundleError, match="logp: dimension T is 4, other fields say 3"):
        bundle.write(str(tmp_path / "c"), stack="s", version="1", options={}, tensors={**fields(), "logp": np.zeros((2, 4), np.float32)})
    bundle.write(str(tmp_path / "d"), stack="s", version="1", options={}, tensors=fields())
    with pytest.raises(bundle.BundleError, match="already exists"):
        bundle.write(str(tmp_path / "d"), stack="s", version="1", options={}, tensors=fields())
    assert sorted(os.listdir(tmp_path)) == ["d"]  # nothing half-written


def test_a_changed_byte_is_named(tmp_path):
    path = bundle.write(str(tmp_path / "s"), stack="s", version="1", options={}, tensors=fields())
    with open(os.path.join(path, "tensors.safetensors"), "r+b") as f:
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 1]))
    with pytest.raises(bundle.BundleError, match="token_loss: sha256 does not match"):
        bundle.read(path)
    with open(os.path.join(path, "manifest.json")) as f:
        m = json.load(f)
    m["format"] = "qrl-step/2"
    with open(os.path.join(path, "manifest.json"), "w") as f:
        json.dump(m, f)
    with pytest.raises(bundle.BundleError, match="format: expected qrl-step/1"):
        bundle.read(path)
