"""torch's GEMMs against qrl-sim's accumulator models on the ``gemm`` golden suite.

Each torch computation runs on the operands of a golden case and is compared with every qrl-sim
accumulator model on the same operands (max ulp distance, outputs equal): ``torch.matmul`` in
float32, ``torch.matmul`` in bf16 (bf16 output: the models' float32 outputs are rounded to bf16
first), and ``torch._scaled_mm`` with e4m3fn operands, with unit scales and with per-tensor scales.
The model a computation is expected to match (``EXPECTED``) decides agreement; the others are
measured and printed. On CUDA, ``_scaled_mm`` runs the device's FP8 tensor cores: on Hopper
(compute capability 9.0) it is expected to match ``hopper-fp8``.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from .reader import load

#: torch op → (how the operands are made, the golden cases holding each model's output on them)
OPS = {
    "matmul-fp32": ("float32 operands", ["fp32", "pairwise", "fp64"]),
    "matmul-bf16": ("bf16 operands, bf16 output", ["fp32.bf16-operands", "pairwise.bf16-operands", "fp64.bf16-operands"]),
    "scaled_mm-e4m3fn": ("e4m3fn operands (RNE), scales 1", ["fp32.e4m3fn-operands", "pairwise.e4m3fn-operands", "fp64.e4m3fn-operands", "hopper-fp8.promote4", "hopper-fp8.no-promotion"]),
    "scaled_mm-e4m3fn-tensor": ("vllm-fp8-tensor codes and scales", ["fp32.e4m3fn-tensor-scaled", "fp64.e4m3fn-tensor-scaled", "fp32.e4m3fn-tensor-dequantized", "hopper-fp8.e4m3fn-tensor-scaled", "hopper-fp8.e4m3fn-tensor-alpha"]),
}

#: The model each op is expected to reproduce, per device kind (measured on CPU with torch 2.13,
#: one thread: ``_scaled_mm`` dequantizes each operand to float32 and sums in increasing k; on
#: Hopper the FP8 tensor-core model, measured on an H200 with torch 2.11: promoted every 4 chunks of
#: 32 without ``use_fast_accum``, and per-tensor scales applied as cuBLASLt does, fl(fl(sa·sb)·acc)). Ops without an entry are measured only: CPU float32 matmul
#: (the BLAS sums in SIMD lanes, an order no model has) and everything on other GPUs.
EXPECTED: Dict[str, Dict[str, str]] = {
    "cpu": {
        "matmul-bf16": "fp32.bf16-operands",
        "scaled_mm-e4m3fn": "fp32.e4m3fn-operands",
        "scaled_mm-e4m3fn-tensor": "fp32.e4m3fn-tensor-dequantized",
    },
    "cuda-sm90": {
        "scaled_mm-e4m3fn": "hopper-fp8.promote4",
        "scaled_mm-e4m3fn-tensor": "hopper-fp8.e4m3fn-tensor-alpha",
    },
}


def _ordered(bits: np.ndarray, width: int) -> np.ndarray:
    """Float bit patterns on the ordered integer line (+0 and −0 coincide)."""
    b = bits.astype(np.int64)
    sign = 1 << (width - 1)
    return np.where(b & sign, -(b & (sign - 1)), b)


def ulp_distance(got: np.ndarray, want: np.ndarray, dtype: str = "float32") -> np.ndarray:
    """Elementwise ulp distance of float32 (or bf16 given as uint16 codes) arrays; NaN vs NaN = 0."""
    if dtype == "float32":
        g, w = got.astype(np.float32), want.astype(np.float32)
        d = np.abs(_ordered(g.view(np.uint32), 32) - _ordered(w.view(np.uint32), 32))
        nan_g, nan_w = np.isnan(g), np.isnan(w)
    else:
        d = np.abs(_ordered(got.astype(np.uint16), 16) - _ordered(want.astype(np.uint16), 16))
        nan_g = (got.astype(np.int64) & 0x7FFF) > 0x7F80
        nan_w = (want.astype(np.int64) & 0x7FFF) > 0x7F80
    d = np.where(nan_g & nan_w, 0, d)
    return np.where(nan_g ^ nan_w, np.iinfo(np.int64).max, d)


def device_kind(device: str) -> str:
    if not device.startswith("cuda"):
        return "cpu"
    import torch

    major, minor = torch.cuda.get_device_capability(torch.device(device))
    return f"cuda-sm{major}{minor}"


def scaled_mm(a8, b8, scale_a, scale_b) -> np.ndarray:
    """``torch._scaled_mm(a8, b8ᵀ)`` in float32. On CUDA the rows of A and B are zero-padded to
    multiples of 16 (its FP8 GEMMs need 16-aligned sizes; each output is its own dot product, so the
    padding changes no value there). Not on the CPU: there the shape picks the kernel — at 4×256·256×4
    it dequantizes and sums in increasing k (the expected model), padded to 16×16 it takes a blocked
    path that matches no model (measured: 35 ulp from fp32 on the dequantized operands)."""
    import torch

    def pad(x):
        rows = -x.shape[0] % 16 if x.device.type == "cuda" else 0
        if rows == 0:
            return x
        return torch.cat([x, torch.zeros((rows, x.shape[1]), dtype=x.dtype, device=x.device)]) if x.dtype != torch.float8_e4m3fn else \
            torch.cat([x.view(torch.uint8), torch.zeros((rows, x.shape[1]), dtype=torch.uint8, device=x.device)]).view(torch.float8_e4m3fn)

    m, n = a8.shape[0], b8.shape[0]
    out = torch._scaled_mm(pad(a8), pad(b8).t(), scale_a=scale_a, scale_b=scale_b, out_dtype=torch.float32)
    return out[:m, :n].cpu().numpy()


def torch_gemm(op: str, arrays: Dict[str, np.ndarray], device: str) -> tuple:
    """Runs ``op`` on a case's operands; returns (output as float32 or bf16 codes, dtype name)."""
    import torch

    a = torch.from_numpy(arrays["a"]).to(device)
    b = torch.from_numpy(arrays["b"]).to(device)
    if op == "matmul-fp32":
        return torch.matmul(a, b.t()).cpu().numpy(), "float32"
    if op == "matmul-bf16":
        out = torch.matmul(a.to(torch.bfloat16), b.to(torch.bfloat16).t())
        return out.view(torch.int16).cpu().numpy().view(np.uint16), "bf16"
    if op == "scaled_mm-e4m3fn":
        one = torch.ones((), dtype=torch.float32, device=device)
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
        return scaled_mm(a8, b8, one, one), "float32"
    if op == "scaled_mm-e4m3fn-tensor":
        a8 = torch.from_numpy(arrays["aCodes"]).to(device).view(torch.float8_e4m3fn)
        b8 = torch.from_numpy(arrays["bCodes"]).to(device).view(torch.float8_e4m3fn)
        sa = torch.from_numpy(arrays["aScale"]).to(device).reshape(())
        sb = torch.from_numpy(arrays["bScale"]).to(device).reshape(())
        return scaled_mm(a8, b8, sa, sb), "float32"
    raise ValueError(f"unknown op {op}")


def compare_gemms(golden_dir: str, device: str = "cpu") -> List[dict]:
    """One dict per (torch op, qrl-sim model): ``case`` (``op vs model``), ``op``, ``model``,
    ``expected`` (whether this model is the one the op must match on this device), ``compared``,
    ``agreeing`` (outputs with ulp distance 0), ``max_abs_diff`` (max ulp distance, in the output's
    dtype) and ``note``."""
    try:
        import torch
    except ImportError as e:
        return [{"case": "gemm", "op": None, "model": None, "expected": False, "compared": 0, "agreeing": 0, "max_abs_diff": 0, "note": f"not available: torch is not importable ({e})"}]
    golden = load(golden_dir)
    if "gemm" not in golden.suites:
        raise FileNotFoundError(f"{golden_dir}: no 'gemm' suite (qrl-sim golden --suite gemm --out DIR)")
    cases = {c.name: c for c in golden.cases("gemm")}
    kind = device_kind(device)
    expected = EXPECTED.get(kind, {})
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one summation order on CPU
    rows = []
    try:
        for op, (operands, models) in OPS.items():
            present = [m for m in models if m in cases]
            if not present:
                continue
            got, dtype = torch_gemm(op, cases[present[0]].arrays(), device)
            for model in present:
                want = cases[model].arrays()["out"]
                if dtype == "bf16":
                    want = torch.from_numpy(want).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
                d = ulp_distance(got.reshape(-1), want.reshape(-1), dtype)
                rows.append({
                    "case": f"{op} vs {model}", "op": op, "model": model, "operands": operands, "device": device,
                    "expected": expected.get(op) == model, "compared": int(d.size), "agreeing": int((d == 0).sum()),
                    "max_abs_diff": int(d.max()), "note": f"max {int(d.max())} ulp ({'bf16' if dtype == 'bf16' else 'float32'})",
                })
    finally:
        torch.set_num_threads(threads)
    return rows
