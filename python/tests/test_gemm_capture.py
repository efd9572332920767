"""qrl_golden.gemm_capture on the CPU: the same operands for the same seed, every case written with its arrays in
bounds, and the CPU's _scaled_mm with unit scales equal to float32 sums of the decoded operands (the CPU's model at
small K, as torch_check measures); on a GPU the same code captures the device (scripts/gpu-check.sh)."""

import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from qrl_golden.gemm_capture import main  # noqa: E402


def _load(d):
    with open(os.path.join(d, "gemm-capture.json")) as f:
        m = json.load(f)
    with open(os.path.join(d, "gemm-capture.bin"), "rb") as f:
        blob = f.read()
    return m, blob


def _arr(blob, ref):
    return np.frombuffer(blob, dtype=np.dtype(ref["dtype"]), count=ref["bytes"] // np.dtype(ref["dtype"]).itemsize, offset=ref["offset"]).reshape(ref["shape"])


def test_capture_on_cpu(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["--device", "cpu", str(a)]) == 0
    assert main(["--device", "cpu", str(b)]) == 0
    ma, blob_a = _load(a)
    mb, blob_b = _load(b)
    assert ma["schema"] == "qrl-gemm-capture/1" and ma["info"]["device"] == "cpu"
    assert blob_a == blob_b and ma["cases"] == mb["cases"]  # seeded: byte-identical
    assert len(ma["cases"]) == 96 and not any("error" in c for c in ma["cases"])
    for c in ma["cases"]:
        for key in ("aCodes", "bCodes", "out", "outBf16", "aRowScales", "bRowScales"):
            if key in c:
                assert c[key]["offset"] + c[key]["bytes"] <= len(blob_a)
    small = next(c for c in ma["cases"] if c["op"] == "scaled_mm-tensor" and c["k"] == 32 and c["aScale"] == 1.0)
    av = torch.from_numpy(_arr(blob_a, small["aCodes"]).copy()).view(torch.float8_e4m3fn).float().numpy()
    bv = torch.from_numpy(_arr(blob_a, small["bCodes"]).copy()).view(torch.float8_e4m3fn).float().numpy()
    want = np.zeros((small["m"], small["n"]), dtype=np.float32)
    for kk in range(small["k"]):  # float32 products summed in increasing k
        want = (want + (av[:, kk : kk + 1] * bv[:, kk][None, :]).astype(np.float32)).astype(np.float32)
    assert np.array_equal(_arr(blob_a, small["out"]), want)


def test_cuda_refused_without_cuda(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    assert main(["--device", "cuda", str(tmp_path)]) == 2
