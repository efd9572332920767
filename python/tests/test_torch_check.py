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


# ---------------------------------------------------------------------------------------------
# The machine-independent GEMM verdict (qrl_golden.torch_gemm.guaranteed) must be able to fail.

import numpy as np  # noqa: E402


def _operands(seed=0, m=3, n=2, k=64):
    rng = np.random.default_rng(seed)
    return {"a": rng.standard_normal((m, k)).astype(np.float32), "b": rng.standard_normal((n, k)).astype(np.float32)}


def test_guarantee_holds_for_any_order_and_fails_for_a_wrong_output():
    from qrl_golden.torch_gemm import guaranteed

    arrays = _operands()
    a, b = arrays["a"], arrays["b"]
    seq = np.zeros((3, 2), np.float32)
    rev = np.zeros((3, 2), np.float32)
    for i in range(3):
        for j in range(2):
            s = np.float32(0)
            for t in range(64):
                s = np.float32(s + np.float32(a[i, t] * b[j, t]))
            seq[i, j] = s
            s = np.float32(0)
            for t in reversed(range(64)):
                s = np.float32(s + np.float32(a[i, t] * b[j, t]))
            rev[i, j] = s
    assert guaranteed("matmul-fp32", arrays, seq, "float32")["ok"]
    assert guaranteed("matmul-fp32", arrays, rev, "float32")["ok"]
    wrong = seq.copy()
    wrong[1, 1] = np.float32(wrong[1, 1] * np.float32(1.001) + np.float32(1e-3))
    g = guaranteed("matmul-fp32", arrays, wrong, "float32")
    assert not g["ok"] and g["within"] == 5


def test_order_independent_sums_must_be_exact():
    from qrl_golden.torch_gemm import guaranteed

    # small integers: every partial sum of every order is exact, so a 1-ulp error is a failure
    a = np.arange(1, 9, dtype=np.float32).reshape(1, 8)
    b = np.ones((1, 8), np.float32)
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert a.astype(ml_dtypes.float8_e4m3fn).astype(np.float32).tolist() == a.tolist()
    exact = np.array([[36.0]], np.float32)
    assert guaranteed("scaled_mm-e4m3fn", {"a": a, "b": b}, exact, "float32")["ok"]
    off = np.array([[np.nextafter(np.float32(36), np.float32(40))]], np.float32)
    g = guaranteed("scaled_mm-e4m3fn", {"a": a, "b": b}, off, "float32")
    assert g["within"] == 1 and g["exact"] == 1 and g["exact_ok"] == 0 and not g["ok"]


def test_bf16_outputs_are_held_to_the_roundings_inside_the_bound():
    from qrl_golden.torch_gemm import _bf16_rne, guaranteed

    arrays = _operands(1)
    a = _bf16_rne(arrays["a"]).astype(np.uint32) << 16
    b = _bf16_rne(arrays["b"]).astype(np.uint32) << 16
    fa, fb = a.view(np.float32), b.view(np.float32)
    out = _bf16_rne((fa.astype(np.float64) @ fb.astype(np.float64).T).astype(np.float32))
    assert guaranteed("matmul-bf16", arrays, out, "bf16")["ok"]
    bad = out.copy()
    bad[0, 0] = bad[0, 0] + 3  # three bf16 ulps away
    assert not guaranteed("matmul-bf16", arrays, bad, "bf16")["ok"]


def test_mkl_branch_names_from_banners():
    from qrl_golden.torch_gemm import _mkl_branch

    head = "MKL_VERBOSE oneMKL 2024.0 Update 2 Product build 20240605 for Intel(R) 64 architecture "
    assert _mkl_branch(head + "Intel(R) Advanced Vector Extensions 512 (Intel(R) AVX-512) with support for INT8, BF16, and FP16 (limited) instructions, Lnx") == "mkl avx512-e4"
    assert _mkl_branch(head + "Intel(R) Advanced Vector Extensions 512 (Intel(R) AVX-512) enabled processors, Lnx") == "mkl avx512"
    assert _mkl_branch(head + "Intel(R) Advanced Vector Extensions 2 (Intel(R) AVX2) enabled processors, Lnx") == "mkl avx2"
    assert _mkl_branch(head + "Intel(R) Streaming SIMD Extensions 4.2 (Intel(R) SSE4.2) enabled processors, Lnx") == "mkl sse4.2"
    assert _mkl_branch(head + "Intel(R) Architecture processors, Lnx") == "mkl compatible"


def test_unmeasured_kernels_only_observe():
    from qrl_golden.torch_gemm import EXPECTED

    # an AMD CPU or an AMX machine is never held to a model measured elsewhere
    assert not any(k.startswith("AuthenticAMD") or k.endswith(" amx") for k in EXPECTED)
