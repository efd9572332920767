"""torch_check's CUDA path: the same code as the CPU run (test/python/torch-check.test.ts), on the
GPU. Skipped, saying so, without CUDA or without a golden directory that has the three suites."""

import os

import pytest

torch = pytest.importorskip("torch")

GOLDEN = os.environ.get("QRL_GOLDEN_DIR")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available: torch_check --device cuda runs only on a GPU")
def test_cuda_path():
    if not GOLDEN or not all(os.path.isdir(os.path.join(GOLDEN, s)) for s in ("library-casts", "gemm")):
        pytest.skip("QRL_GOLDEN_DIR does not hold library-casts and gemm (qrl-sim golden --suite library-casts,quantizers,gemm --out DIR)")
    from qrl_golden.torch_check import main

    assert main(["--device", "cuda", GOLDEN]) == 0


def test_cuda_device_refused_without_cuda(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    (tmp_path / "manifest.json").write_text("{}")
    from qrl_golden.torch_check import main

    assert main(["--device", "cuda", str(tmp_path)]) == 2
