"""torch's GEMMs against qrl-sim's accumulator models on the ``gemm`` golden suite.

Each torch computation runs on the operands of a golden case and is compared with every qrl-sim
accumulator model on the same operands (max ulp distance, outputs equal): ``torch.matmul`` in
float32, ``torch.matmul`` in bf16 (bf16 output: the models' float32 outputs are rounded to bf16
first), and ``torch._scaled_mm`` with e4m3fn operands, with unit scales and with per-tensor scales
(with and without ``use_fast_accum``).

Three kinds of verdict, so that a verdict never depends silently on the machine:

* **guaranteed** (every machine, every kernel): each output lies within the error bound that any
  float32 summation order has, |out − S| ≤ γ_(k+3)·Σ|a_i·b_i| with S the exact dot product
  (Higham, *Accuracy and Stability of Numerical Algorithms*, §3.1; the +3 covers dequantizing
  each operand and scaling in the epilogue); where every partial sum of every order is exact, out = S;
  a bf16 output is one of the bf16 roundings of the float32 values inside that bound.
* **expected by kernel**: the model an op must match bit for bit on the BLAS kernel that runs here,
  keyed by ``blas_path()`` (CPU vendor, the MKL code branch, its CNR mode, AMX) and measured for each
  key in ``EXPECTED``; on CUDA keyed by the compute capability. A key without an entry measures only.
* **observed**: every other (op, model) pair, printed with the key named, never a failure.

On the CPU, torch 2.13's ``_scaled_mm`` without AMX dequantizes each operand (code·scale in float32)
and calls ``at::matmul``, that is MKL's sgemm (aten/src/ATen/native/Blas.cpp
``_scaled_mm_out_cpu_emulated``; with AMX-INT8 it calls oneDNN instead, ``mkldnn_scaled_mm``), so its
summation order is MKL's: MKL picks its kernel from the CPU (``MKL_ENABLE_INSTRUCTIONS`` and
``MKL_CBWR`` steer it; ``ATEN_CPU_CAPABILITY`` does not).
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from fractions import Fraction
from typing import Dict, List, Optional

import numpy as np

from .reader import load

#: torch op → (how the operands are made, the golden cases holding each model's output on them)
OPS = {
    "matmul-fp32": ("float32 operands", ["fp32", "fp32-fma", "fp32-fma-x2", "pairwise", "fp64"]),
    "matmul-bf16": ("bf16 operands, bf16 output", ["fp32.bf16-operands", "pairwise.bf16-operands", "fp64.bf16-operands"]),
    "scaled_mm-e4m3fn": ("e4m3fn operands (RNE), scales 1", ["fp32.e4m3fn-operands", "pairwise.e4m3fn-operands", "fp64.e4m3fn-operands", "hopper-fp8.promote4", "hopper-fp8.no-promotion"]),
    "scaled_mm-e4m3fn-tensor": ("vllm-fp8-tensor codes and scales", [
        "fp32.e4m3fn-tensor-dequantized", "fp32-fma.e4m3fn-tensor-dequantized", "fp32-fma-x2.e4m3fn-tensor-dequantized",
        "fp32.e4m3fn-tensor-scaled", "fp64.e4m3fn-tensor-scaled", "hopper-fp8.e4m3fn-tensor-scaled", "hopper-fp8.e4m3fn-tensor-alpha",
    ]),
    "scaled_mm-e4m3fn-tensor-fast-accum": ("as scaled_mm-e4m3fn-tensor, use_fast_accum=True", [
        "fp32.e4m3fn-tensor-dequantized", "fp32-fma.e4m3fn-tensor-dequantized", "fp32-fma-x2.e4m3fn-tensor-dequantized",
        "hopper-fp8.e4m3fn-tensor-alpha",
    ]),
}

_MKL_AVX512_E4 = "mkl avx512-e4"  # banner "AVX-512 ... with support for INT8, BF16, and FP16 (limited) instructions" (Sapphire Rapids class)
_TENSOR_MODELS = {
    "fp32": "fp32.e4m3fn-tensor-dequantized",
    "fp32-fma": "fp32-fma.e4m3fn-tensor-dequantized",
    "fp32-fma-x2": "fp32-fma-x2.e4m3fn-tensor-dequantized",
}


def _scaled(model: str) -> Dict[str, str]:
    """The per-tensor ``_scaled_mm`` expectations of a CPU kernel that sums the dequantized operands by ``model``."""
    return {"scaled_mm-e4m3fn-tensor": _TENSOR_MODELS[model], "scaled_mm-e4m3fn-tensor-fast-accum": _TENSOR_MODELS[model]}


#: The model each op must reproduce, per kernel key (``blas_path()["key"]`` on CPU, ``cuda-smXY`` on CUDA).
#: CPU keys measured with torch 2.13.0+cpu (MKL 2024.2, oneDNN 3.12), one thread, on an Intel Xeon with
#: AVX-512 (avx512f/bw/vl/vnni/bf16/fp16, no AMX), the MKL branch steered by MKL_ENABLE_INSTRUCTIONS and
#: MKL_CBWR (``python -m qrl_golden.torch_check --device cpu DIR`` under each; docs/golden.md has the
#: tables). The orders found: MKL's AVX-512-E4 sgemm on ``_scaled_mm``'s layout (A row-major, B
#: k-major, SGEMM(N,N)) is one fused multiply-add chain in increasing k (``fp32-fma``); its AVX2
#: kernel two interleaved FMA chains, even and odd k, added at the end (``fp32-fma-x2``), also for
#: ``matmul`` (SGEMM(T,N)); the SSE4.2 and CNR-COMPATIBLE kernels separate multiply and add in
#: increasing k (``fp32``). ``matmul`` in float32 on the AVX-512 and SSE kernels follows no model
#: (AVX-512-E4: 4×4 FMA lanes k mod 16, summed per lane group in order, then lanes pairwise;
#: SSE: 4 lanes, non-fused, halving tree) and is measured only. ``use_fast_accum`` is ignored on the CPU.
#: On Hopper the FP8 tensor-core model, measured on an H200 with torch 2.11: promoted every 4 chunks of 32
#: without ``use_fast_accum``, and per-tensor scales applied as cuBLASLt does, fl(fl(sa·sb)·acc).
#: Other GPUs (sm80, sm100) and other CPU kernels (AMD, AMX, other MKL branches): measured only.
EXPECTED: Dict[str, Dict[str, str]] = {
    f"GenuineIntel {_MKL_AVX512_E4} cnr-off": _scaled("fp32-fma"),
    "GenuineIntel mkl avx512 cnr-off": _scaled("fp32-fma"),
    "GenuineIntel mkl avx2 cnr-off": {**_scaled("fp32-fma-x2"), "matmul-fp32": "fp32-fma-x2"},
    "GenuineIntel mkl avx2 cnr-avx2": {**_scaled("fp32-fma-x2"), "matmul-fp32": "fp32-fma-x2"},
    "GenuineIntel mkl sse4.2 cnr-off": _scaled("fp32"),
    "GenuineIntel mkl compatible cnr-compatible": _scaled("fp32"),
    "cuda-sm90": {
        "scaled_mm-e4m3fn": "hopper-fp8.promote4",
        "scaled_mm-e4m3fn-tensor": "hopper-fp8.e4m3fn-tensor-alpha",
    },
}


#: Ops whose float32 any-order bound holds on CUDA too (float32 matmul: torch's default
#: ``float32_matmul_precision`` "highest" keeps TF32 off). On the CPU it holds for every op.
GUARANTEED_ON_CUDA = frozenset({"matmul-fp32"})


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
    """``cpu``, or ``cuda-smXY`` for the CUDA device's compute capability."""
    if not device.startswith("cuda"):
        return "cpu"
    import torch

    major, minor = torch.cuda.get_device_capability(torch.device(device))
    return f"cuda-sm{major}{minor}"


# ---------------------------------------------------------------------------------------------
# Which CPU kernel runs

_PATH_CACHE: Dict[str, dict] = {}


def _cpu_vendor() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine() or "?"


def _cpu_flags() -> set:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _mkl_branch(banner: str) -> str:
    """The MKL code branch named by its verbose banner ("for Intel(R) 64 architecture <ISA> …")."""
    if "AVX-512" in banner:
        return _MKL_AVX512_E4 if "INT8, BF16" in banner else "mkl avx512"
    if "AVX2" in banner:
        return "mkl avx2"
    if "AVX)" in banner or "Advanced Vector Extensions (" in banner:
        return "mkl avx"
    if "SSE4.2" in banner or "SSE4_2" in banner:
        return "mkl sse4.2"
    if "Architecture processors" in banner:
        return "mkl compatible"
    return "mkl ?"


def blas_path() -> dict:
    """The kernel torch's CPU float32 GEMMs run in this process's environment: ``vendor``, ``mkl`` (the
    branch MKL's verbose banner names, or "" when torch does not use MKL), ``cnr`` (MKL_CBWR mode),
    ``amx`` (AMX-INT8: ``_scaled_mm`` then goes to oneDNN), ``capability`` (ATen's, for torch's own
    kernels), ``banner`` and ``key`` (the EXPECTED key). MKL is asked in a child process with
    MKL_VERBOSE=1 (its banner goes to the C stdout), under this process's environment."""
    import torch

    env_key = "\0".join(f"{k}={os.environ.get(k, '')}" for k in ("MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR", "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA"))
    if env_key in _PATH_CACHE:
        return _PATH_CACHE[env_key]
    vendor = _cpu_vendor()
    amx = "amx_int8" in _cpu_flags()
    banner, cnr, mkl = "", "", ""
    if torch.backends.mkl.is_available():
        code = "import torch; torch.set_num_threads(1); torch.ones(4, 4) @ torch.ones(4, 4)"
        r = subprocess.run([sys.executable, "-c", code], env={**os.environ, "MKL_VERBOSE": "1"}, capture_output=True, text=True, timeout=120)
        lines = [l for l in r.stdout.splitlines() if l.startswith("MKL_VERBOSE")]
        banner = next((l for l in lines if "oneMKL" in l or "Intel(R) MKL" in l), "")
        m = next((re.search(r"CNR:(\S+)", l) for l in lines if "CNR:" in l), None)
        cnr = m.group(1).lower() if m else "?"
        mkl = _mkl_branch(banner) if banner else "mkl ?"
    key = f"{vendor} {mkl or 'no-mkl'} cnr-{cnr or 'none'}" + (" amx" if amx else "")
    path = {"vendor": vendor, "mkl": mkl, "cnr": cnr, "amx": amx, "capability": str(torch.backends.cpu.get_cpu_capability()),
            "banner": banner.replace("MKL_VERBOSE ", "").strip(), "key": key}
    _PATH_CACHE[env_key] = path
    return path


def kernel_key(device: str) -> str:
    """The EXPECTED key of the kernels that run on ``device`` in this environment."""
    return device_kind(device) if device.startswith("cuda") else blas_path()["key"]


def describe_kernel(device: str) -> str:
    """One line naming the kernels a GEMM table or verdict comes from."""
    import torch

    if device.startswith("cuda"):
        d = torch.device(device)
        major, minor = torch.cuda.get_device_capability(d)
        return f"{torch.cuda.get_device_name(d)} (compute capability {major}.{minor}), torch {torch.__version__}"
    p = blas_path()
    mkl = re.search(r"oneMKL [^\s]+ (?:Update \d+ )?", p["banner"])
    return (f"torch {torch.__version__} CPU, ATen capability {p['capability']}, {p['vendor']}, "
            f"{p['mkl'] or 'no MKL'} (MKL_CBWR {p['cnr'] or '-'}{', AMX-INT8: _scaled_mm on oneDNN' if p['amx'] else ''})"
            + (f", {mkl.group(0).strip()}" if mkl else "") + ", one thread")


# ---------------------------------------------------------------------------------------------
# The torch computations


def scaled_mm(a8, b8, scale_a, scale_b, fast_accum: bool = False) -> np.ndarray:
    """``torch._scaled_mm(a8, b8ᵀ)`` in float32. On CUDA the rows of A and B are zero-padded to
    multiples of 16 (its FP8 GEMMs need 16-aligned sizes; each output is its own dot product, so the
    padding changes no value there). Not on the CPU: there the shape picks MKL's kernel, and padding
    would change the summation order (padded to 16×256 the AVX2 machine's MKL took a blocked path)."""
    import torch

    def pad(x):
        rows = -x.shape[0] % 16 if x.device.type == "cuda" else 0
        if rows == 0:
            return x
        return torch.cat([x, torch.zeros((rows, x.shape[1]), dtype=x.dtype, device=x.device)]) if x.dtype != torch.float8_e4m3fn else \
            torch.cat([x.view(torch.uint8), torch.zeros((rows, x.shape[1]), dtype=torch.uint8, device=x.device)]).view(torch.float8_e4m3fn)

    m, n = a8.shape[0], b8.shape[0]
    out = torch._scaled_mm(pad(a8), pad(b8).t(), scale_a=scale_a, scale_b=scale_b, out_dtype=torch.float32, use_fast_accum=fast_accum)
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
    if op in ("scaled_mm-e4m3fn-tensor", "scaled_mm-e4m3fn-tensor-fast-accum"):
        a8 = torch.from_numpy(arrays["aCodes"]).to(device).view(torch.float8_e4m3fn)
        b8 = torch.from_numpy(arrays["bCodes"]).to(device).view(torch.float8_e4m3fn)
        sa = torch.from_numpy(arrays["aScale"]).to(device).reshape(())
        sb = torch.from_numpy(arrays["bScale"]).to(device).reshape(())
        return scaled_mm(a8, b8, sa, sb, fast_accum=op.endswith("fast-accum")), "float32"
    raise ValueError(f"unknown op {op}")


# ---------------------------------------------------------------------------------------------
# What holds on every machine


def _e4m3_values(codes: np.ndarray) -> np.ndarray:
    """float64 values of e4m3fn codes (the format's exact values; NaN for 0x7F/0xFF)."""
    c = codes.astype(np.int64)
    e, m = (c >> 3) & 0xF, c & 7
    v = np.where(e == 0, m * 2.0 ** -9, (8 + m) * 2.0 ** (e.astype(np.float64) - 10))
    v = np.where((c & 0x7F) == 0x7F, np.nan, v)
    return np.where(c & 0x80, -v, v)


def _bf16_rne(x: np.ndarray) -> np.ndarray:
    """bf16 codes of float32 values, round to nearest even (finite inputs)."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def _exact_terms(op: str, arrays: Dict[str, np.ndarray]) -> tuple:
    """The exact operand values an op multiplies, as two (rows, k) float64 arrays (each value exact), and
    whether every kernel multiplies exactly these values (False: it may round code·scale to float32 first)."""
    if op == "matmul-fp32":
        return arrays["a"].astype(np.float64), arrays["b"].astype(np.float64), True
    if op == "matmul-bf16":
        return _bf16_values(arrays["a"]), _bf16_values(arrays["b"]), True
    if op == "scaled_mm-e4m3fn":
        import ml_dtypes  # noqa: PLC0415  (a dependency of the golden check)

        f8 = lambda x: x.astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
        return f8(arrays["a"]), f8(arrays["b"]), True
    # per-tensor: code values times the scales, exactly; the kernel may round code·scale first (the CPU does)
    sa, sb = float(arrays["aScale"].reshape(-1)[0]), float(arrays["bScale"].reshape(-1)[0])
    return _e4m3_values(arrays["aCodes"]) * sa, _e4m3_values(arrays["bCodes"]) * sb, False


def _bf16_values(x: np.ndarray) -> np.ndarray:
    code = _bf16_rne(x).astype(np.uint32) << 16
    return code.view(np.float32).astype(np.float64)


def guaranteed(op: str, arrays: Dict[str, np.ndarray], got: np.ndarray, dtype: str) -> dict:
    """Checks what holds for ``op`` on every machine and kernel (see the module docstring): returns
    ``compared``, ``within`` (outputs inside their bound), ``exact`` (outputs every order computes
    exactly, and how many of them equal S), ``worst`` (largest |out − S| / bound) and ``note``."""
    A, B, operands_exact = _exact_terms(op, arrays)
    m, k = A.shape
    n = B.shape[0]
    u = 2.0 ** -24
    gamma = (k + 3) * u / (1 - (k + 3) * u)
    got = got.reshape(m, n)
    within = exact_n = exact_ok = 0
    worst = 0.0
    for i in range(m):
        for j in range(n):
            # exact products: a float32 (or code·scale) value has ≤ 53 significant bits in float64 and
            # the product is formed exactly as a Fraction
            terms = [Fraction(float(A[i, t])) * Fraction(float(B[j, t])) for t in range(k)]
            S = sum(terms, Fraction(0))
            absum = float(sum((abs(t) for t in terms), Fraction(0)))
            bound = gamma * absum * (1 + 2.0 ** -40)
            # every partial sum of every order exact: all terms multiples of q and Σ|t| < 2^24·q
            nz = [t for t in terms if t != 0]
            q = min((Fraction(1, t.denominator) for t in nz), default=Fraction(1))
            exact = operands_exact and all((t / q).denominator == 1 for t in nz) and Fraction(absum) < (2 ** 24) * q and float(absum) < 2.0 ** 127
            if dtype == "bf16":
                lo, hi = float(S) - bound, float(S) + bound
                lo32 = np.float32(lo)
                if float(lo32) < lo:
                    lo32 = np.nextafter(lo32, np.float32(np.inf))
                hi32 = np.float32(hi)
                if float(hi32) > hi:
                    hi32 = np.nextafter(hi32, np.float32(-np.inf))
                lo_c, hi_c = _bf16_rne(np.array([lo32, hi32], dtype=np.float32))
                g = int(got[i, j])
                order = lambda c: -(c & 0x7FFF) if c & 0x8000 else c
                ok = order(int(lo_c)) <= order(g) <= order(int(hi_c))
                within += ok
                if lo_c == hi_c:
                    exact_n += 1
                    exact_ok += g == int(lo_c)
                continue
            g = float(got[i, j])
            err = abs(Fraction(g) - S) if math.isfinite(g) else Fraction(10 ** 40)
            within += float(err) <= bound
            worst = max(worst, float(err) / bound if bound else (0.0 if err == 0 else math.inf))
            if exact:
                exact_n += 1
                exact_ok += err == 0
    note = f"{within}/{m * n} within the any-order bound"
    if dtype != "bf16":
        note += f" (largest deviation from S {worst:.2g} of it)"
    if exact_n:
        note += f", {exact_ok}/{exact_n} {'determined by it' if dtype == 'bf16' else 'exact in every order'} equal"
    return {"compared": m * n, "within": within, "exact": exact_n, "exact_ok": exact_ok, "worst": worst, "note": note,
            "ok": within == m * n and exact_ok == exact_n}


# ---------------------------------------------------------------------------------------------
# The comparison


def compare_gemms(golden_dir: str, device: str = "cpu") -> List[dict]:
    """One dict per (torch op, qrl-sim model): ``case`` (``op vs model``), ``op``, ``model``,
    ``expected`` (whether this model is the one the op must match on the kernel that runs here,
    ``EXPECTED[kernel_key(device)]``), ``kernel`` (that key), ``compared``, ``agreeing`` (outputs with ulp
    distance 0), ``max_abs_diff`` (max ulp distance, in the output's dtype) and ``note``; and one dict per
    op with ``model`` = "guaranteed" (the machine-independent check, ``expected`` True, ``ok``)."""
    try:
        import torch
    except ImportError as e:
        return [{"case": "gemm", "op": None, "model": None, "expected": False, "compared": 0, "agreeing": 0, "max_abs_diff": 0, "note": f"not available: torch is not importable ({e})"}]
    golden = load(golden_dir)
    if "gemm" not in golden.suites:
        raise FileNotFoundError(f"{golden_dir}: no 'gemm' suite (qrl-sim golden --suite gemm --out DIR)")
    cases = {c.name: c for c in golden.cases("gemm")}
    key = kernel_key(device)
    expected = EXPECTED.get(key, {})
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one summation order on CPU
    rows = []
    try:
        for op, (operands, models) in OPS.items():
            present = [m for m in models if m in cases]
            if not present:
                continue
            arrays = cases[present[0]].arrays()
            got, dtype = torch_gemm(op, arrays, device)
            g = guaranteed(op, arrays, got, dtype)
            # GPU tensor cores accumulate FP8 products below float32 precision (Hopper: 13 fractional
            # bits, truncated) and cuBLAS may reduce bf16 split-K partials in bf16: no float32 bound there
            holds = not device.startswith("cuda") or op in GUARANTEED_ON_CUDA
            if not holds:
                g["note"] += " (observed: the GPU's tensor cores accumulate below float32 precision)"
            rows.append({"case": f"{op} guaranteed", "op": op, "model": "guaranteed", "operands": operands, "device": device, "kernel": key,
                         "expected": holds, "guarantee": True, "compared": g["compared"], "agreeing": g["compared"] if g["ok"] else g["within"],
                         "max_abs_diff": 0, "note": g["note"]})
            for model in present:
                want = cases[model].arrays()["out"]
                if dtype == "bf16":
                    want = torch.from_numpy(want).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
                d = ulp_distance(got.reshape(-1), want.reshape(-1), dtype)
                rows.append({
                    "case": f"{op} vs {model}", "op": op, "model": model, "operands": operands, "device": device, "kernel": key,
                    "expected": expected.get(op) == model, "guarantee": False, "compared": int(d.size), "agreeing": int((d == 0).sum()),
                    "max_abs_diff": int(d.max()), "note": f"max {int(d.max())} ulp ({'bf16' if dtype == 'bf16' else 'float32'})",
                })
    finally:
        torch.set_num_threads(threads)
    return rows
