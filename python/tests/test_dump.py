"""qrl_golden.dump: forward hooks record every submodule's output in forward order as a qrl-dump/1 file."""

import json
import struct

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from qrl_golden import dump  # noqa: E402


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(11, 8)
        self.up = torch.nn.Linear(8, 16)
        self.act = torch.nn.GELU()
        self.down = torch.nn.Linear(16, 11)

    def forward(self, ids):
        x = self.embed(ids)
        x = self.act(self.up(x))
        x = self.act(x)  # a second call of the same module
        return self.down(x)


def test_record_writes_every_output_in_forward_order(tmp_path):
    torch.manual_seed(0)
    model = Tiny().to(torch.bfloat16)
    ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
    path = str(tmp_path / "d.safetensors")
    names = dump.record(model, ids, path)
    assert names == ["embed", "up", "act", "act#2", "down", "output"]
    tokens, arrays, order = dump.read(path)
    assert order == names
    assert tokens.dtype == np.int32 and tokens.tolist() == ids.tolist()
    with torch.no_grad():
        want = model(ids).to(torch.float32).numpy()
    np.testing.assert_array_equal(arrays["down"], want)  # bf16 → float32 is exact
    assert arrays["up"].shape == (2, 3, 16) and arrays["up"].dtype == np.float32
    with open(path, "rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        meta = json.loads(fh.read(n))["__metadata__"]
    assert meta["qrl-dump"] == "1"
    assert json.loads(meta["qrl-dump.dtypes"])["down"] == "bfloat16"


def test_record_selects_modules_and_refuses_unknown_names(tmp_path):
    model = Tiny()
    ids = torch.tensor([[1, 2]])
    path = str(tmp_path / "s.safetensors")
    assert dump.record(model, ids, path, modules=["up", "down"]) == ["up", "down", "output"]
    assert dump.record(model, ids, path, select=lambda name, m: isinstance(m, torch.nn.Linear)) == ["up", "down", "output"]
    with pytest.raises(ValueError, match="not in the model"):
        dump.record(model, ids, path, modules=["nope"])
    assert all(not m._forward_hooks for m in model.modules())
