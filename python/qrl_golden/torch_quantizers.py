"""The quantizer presets whose real implementation is PyTorch code (or a CUDA/Triton kernel with a
published formula), written in torch from their sources, and compared with ``qrl-sim golden --suite
quantizers`` bit for bit.

Not qrl-sim's generic interpreter: every function below is a transcription of one library's own
code path (file and line cited in its docstring), so that a difference from the golden files means
the preset and the library disagree. Casts use torch's real float8 dtypes; E2M1 (no torch cast
kernel in 2.13) uses the library's own PyTorch cast where the library has one, else the PTX
``cvt.rn.satfinite.e2m1x2.f32`` rule written out in torch.

    from qrl_golden.torch_quantizers import compare_quantizers
    for row in compare_quantizers("golden/", device="cuda"):
        print(row["case"], row["agreeing"], "/", row["compared"], row["note"])

Sources, at the commits read (line numbers refer to them): vllm-project/vllm
csrc/quantization/w8a8/fp8/per_token_group_quant.cu @ 0f5257e2, common.cu/common.cuh,
vllm/model_executor/layers/quantization/utils/fp8_utils.py @ 007d5005; sgl-project/sglang
python/sglang/srt/layers/quantization/fp8_kernel.py @ 008601fa; deepseek-ai/DeepSeek-V3
inference/kernel.py @ 06231633; deepseek-ai/DeepGEMM deep_gemm/utils/math.py @ 54e2261;
NVIDIA/TransformerEngine @ d0067d0d; pytorch/ao @ 36027d82.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Mapping, Optional

import numpy as np

try:  # torch is optional for the qrl_golden package; this module needs it.
    import torch
except ImportError:  # pragma: no cover - reported by compare_quantizers
    torch = None  # type: ignore[assignment]

E4M3_MAX = 448.0
FLT_MAX = 3.4028234663852886e38

Outputs = Dict[str, Any]


# --------------------------------------------------------------------------------------------
# Layout helpers: cells of a row-major (rows, cols) tensor, zero-padded as the kernels pad.
# --------------------------------------------------------------------------------------------


def _groups(x: "torch.Tensor", g: int) -> "torch.Tensor":
    """(rows, ⌈cols/g⌉, g) view of x zero-padded along K (DeepGEMM ``per_token_cast_to_fp8`` pads with zeros)."""
    rows, cols = x.shape
    ng = -(-cols // g)
    padded = torch.zeros((rows, ng * g), dtype=x.dtype, device=x.device)
    padded[:, :cols] = x
    return padded.view(rows, ng, g)


def _ungroup(y: "torch.Tensor", rows: int, cols: int) -> "torch.Tensor":
    return y.reshape(rows, -1)[:, :cols]


def _blocks(x: "torch.Tensor", b: int) -> "torch.Tensor":
    """(⌈rows/b⌉, b, ⌈cols/b⌉, b) view of x zero-padded (DeepGEMM ``per_block_cast_to_fp8``)."""
    rows, cols = x.shape
    pr, pc = -(-rows // b) * b, -(-cols // b) * b
    padded = torch.zeros((pr, pc), dtype=x.dtype, device=x.device)
    padded[:rows, :cols] = x
    return padded.view(pr // b, b, pc // b, b)


def _unblock(y: "torch.Tensor", rows: int, cols: int) -> "torch.Tensor":
    nb, b, nc, _ = y.shape
    return y.reshape(nb * b, nc * b)[:rows, :cols]


def _amax_fmaxf(a: "torch.Tensor", dim: Any) -> "torch.Tensor":
    """amax as a CUDA ``fmaxf`` reduction from 0: NaN operands are skipped."""
    return torch.where(torch.isnan(a), torch.zeros_like(a), a).amax(dim=dim)


def _e4m3(v: "torch.Tensor") -> "torch.Tensor":
    """torch's own cast to float8_e4m3fn, as uint8 codes."""
    return v.to(torch.float8_e4m3fn).view(torch.uint8)


def _e4m3_satfinite(v: "torch.Tensor") -> "torch.Tensor":
    """PTX ``cvt.rn.satfinite.e4m3x2.f32`` (CUDA ``__nv_fp8_e4m3``, Triton's fp8e4nv cast on sm_89+):
    round to nearest even, saturating to ±448 (±Inf too), and every NaN → 0x7F whatever its sign
    (GPU arithmetic NaNs are canonical, and cvt writes +NaN). The clamp to ±448 before torch's cast
    makes this independent of the torch version: torch's own cast saturates from 2.13, while earlier
    versions (2.11 on the GPU machine this was checked on) give NaN from 464 up; clamping first gives
    the same code as a saturating round-to-nearest-even for every number."""
    codes = _e4m3(torch.clamp(v, -E4M3_MAX, E4M3_MAX))
    return torch.where(torch.isnan(v), torch.full_like(codes, 0x7F), codes)


def _div_const(a: "torch.Tensor", c: float) -> "torch.Tensor":
    """``a / c`` rounded once (IEEE division), on every device. On CUDA, torch divides by a Python
    number (a CPU scalar) as ``a * fl(1/c)`` (aten/src/ATen/native/cuda/BinaryDivTrueKernel.cu,
    ``div_true_kernel_cuda``: "may lose one bit of precision"), one ulp off in some scales; the CUDA
    C++ and Triton kernels these functions port divide. A divisor on the tensor's device is divided."""
    return a / torch.tensor(c, dtype=a.dtype, device=a.device)


def _e4m3_value(codes: "torch.Tensor") -> "torch.Tensor":
    return codes.view(torch.float8_e4m3fn).to(torch.float32)


_E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def _e2m1_value(codes: "torch.Tensor") -> "torch.Tensor":
    table = torch.tensor(_E2M1_VALUES + tuple(-v for v in _E2M1_VALUES), dtype=torch.float32, device=codes.device)
    return table[codes.long()]


def _e2m1_satfinite(v: "torch.Tensor") -> "torch.Tensor":
    """PTX ``cvt.rn.satfinite.e2m1x2.f32``: round to nearest even, saturate at ±6, keep the sign
    of zero, NaN → +6 (0x7). Magnitude codes by the midpoints 0.25, 0.75, …, 5 (ties to the even
    code), as TransformerEngine's reference ``cast_to_fp4x2`` lays them out."""
    a = v.abs()
    mid = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=torch.float32, device=v.device)
    up = torch.bucketize(a, mid, right=False)  # number of midpoints < a
    at_mid = torch.isin(a, mid)
    # a exactly on a midpoint: bucketize counts it below; round to the even code.
    code = torch.where(at_mid & (up % 2 == 1), up + 1, up)
    code = torch.where(a > 6.0, torch.full_like(code, 7), code)  # satfinite (also +Inf)
    code = code.to(torch.uint8) | (torch.signbit(v).to(torch.uint8) << 3)
    return torch.where(torch.isnan(v), torch.full_like(code, 7), code)


# --------------------------------------------------------------------------------------------
# vLLM (CUDA kernels; their float32 formulas in torch).
# --------------------------------------------------------------------------------------------


def vllm_fp8_tensor(x: "torch.Tensor", p: Mapping[str, Any]) -> Outputs:
    """vLLM dynamic per-tensor FP8. vllm csrc/quantization/w8a8/fp8/common.cu
    ``segmented_max_reduction`` (fmaxf reduction), ``scaled_fp8_quant_kernel_strided_dynamic``
    (scale = amax / FP8_E4M3_MAX, elements through ``scaled_fp8_conversion<true>`` with
    ``1.0f / scale``); common.cuh ``scaled_fp8_conversion``: ``fmax(-max, fmin(x * inv, max))``
    then the satfinite cast."""
    s = _div_const(_amax_fmaxf(x.abs(), dim=(0, 1)), E4M3_MAX)
    inv = 1.0 / s
    v = torch.fmax(torch.tensor(-E4M3_MAX, device=x.device), torch.fmin(x * inv, torch.tensor(E4M3_MAX, device=x.device)))
    codes = _e4m3_satfinite(v)
    return {"codes": codes, "scales": s.reshape(()), "dequantized": _e4m3_value(codes) * s}


def vllm_fp8_token(x: "torch.Tensor", p: Mapping[str, Any]) -> Outputs:
    """vLLM dynamic per-token FP8. vllm csrc/quantization/w8a8/fp8/common.cu
    ``dynamic_per_token_scaled_fp8_quant_kernel_strided``: per row ``fmaxf`` amax, scale =
    max(min(amax, scale_ub) / FP8_E4M3_MAX, min_scaling_factor = 1/(448·512)) (utils.cuh), then
    ``scaled_fp8_conversion<false>`` (x / scale, fminf/fmaxf clamp, satfinite)."""
    amax = _amax_fmaxf(x.abs(), dim=1)
    if p.get("scaleUb") is not None:
        amax = torch.fmin(amax, torch.tensor(float(p["scaleUb"]), device=x.device))
    floor = torch.tensor(1.0, device=x.device) / torch.tensor(E4M3_MAX * 512.0, device=x.device)
    s = torch.fmax(_div_const(amax, E4M3_MAX), floor)
    m = torch.tensor(E4M3_MAX, device=x.device)
    codes = _e4m3_satfinite(torch.fmax(-m, torch.fmin(x / s[:, None], m)))
    return {"codes": codes, "scales": s, "dequantized": _e4m3_value(codes) * s[:, None]}


def _vllm_group(x: "torch.Tensor", p: Mapping[str, Any], ue8m0_floor: bool) -> Outputs:
    rows, cols = x.shape
    g = int(p["block"])
    xg = _groups(x, g)
    eps = torch.tensor(1e-10, dtype=torch.float32, device=x.device)
    absmax = torch.fmax(_amax_fmaxf(xg.abs(), dim=2), eps)  # local_absmax = eps; fmaxf(...)
    s = _div_const(absmax, E4M3_MAX)
    if p.get("ue8m0"):
        arg = torch.fmax(s.abs(), eps) if ue8m0_floor else s
        s = torch.exp2(torch.ceil(torch.log2(arg)))
    m = torch.tensor(E4M3_MAX, device=x.device)
    q = torch.fmin(torch.fmax(xg / s[..., None], -m), m)
    codes = _ungroup(_e4m3_satfinite(q), rows, cols)
    deq = _ungroup(_e4m3_value(_e4m3_satfinite(q)) * s[..., None], rows, cols)
    return {"codes": codes, "scales": s, "dequantized": deq}


def vllm_fp8_group(x: "torch.Tensor", p: Mapping[str, Any]) -> Outputs:
    """vLLM per-token-group FP8, CUDA kernel. vllm csrc/quantization/w8a8/fp8/per_token_group_quant.cu
    ``ComputeGroupScale``: local_absmax = eps, ``fmaxf`` over |x|, y_s = absmax / max_8bit, UE8M0:
    ``exp2f(ceilf(log2f(fmaxf(fabsf(y_s), 1e-10f))))``; ``QuantizeGroup``:
    ``fminf(fmaxf(x / y_s, min_8bit), max_8bit)`` then the satfinite cast."""
    return _vllm_group(x, p, ue8m0_floor=True)


def vllm_fp8_group_triton(x: "torch.Tensor", p: Mapping[str, Any]) -> Outputs:
    """vLLM per-token-group FP8, Triton fallback. vllm/model_executor/layers/quantization/utils/
    fp8_utils.py ``_per_token_group_quant_fp8``: ``tl.maximum(tl.max(tl.abs(y)), eps)``,
    scale_raw = absmax / fp8_max, UE8M0 ``exp2(ceil(log2(scale_raw)))`` (no 1e-10 floor),
    ``tl.clamp(y / y_s, fp8_min, fp8_max)`` then the cast (satfinite on sm_89+)."""
    return _vllm_group(x, p, ue8m0_floor=False)


def sglang_fp8_group_triton(x: "torch.Tensor", p: Mapping[str, Any]) -> Outputs:
    """SGLang per-token-group FP8, Triton. sgl-project/sglang python/sglang/srt/layers/quantization/
    fp8_kernel.py ``_per_token_group_quant_8bit``: ``tl.maximum(tl.max(tl.abs(y)), eps)``,
    y_s = absmax / bit8_max, ``y_s_inv = 1.0 / y_s``, ``tl.clamp(y * y_s_inv, bit8_min, bit8_max)``
    then the cast (row-major scales; UE8M0 is only on the column-major kernel)."""
    rows, cols = x.shape
    xg = _groups(x, int(p["block"]))
    eps = torch.tensor(1e-10, dtype=torch.float32, device=x.device)
    s = _div_const(torch.fmax(_amax_fmaxf(xg.abs(), dim=2), eps), E4M3_MAX)
    m = torch.tensor(E4M3_MAX, device=x.device)
    q = torch.fmin(torch.fmax(xg * (1.0 / s[..., None]), -m), m)
    codes = _e4m3_satfinite(q)
    return {"codes": _ungroup(codes, rows, cols), "scales": s, "dequantized": _ungroup(_e4m3_value(codes) * s[..., None], rows, cols)}


# --------------------------------------------------------------------------------------------
# DeepSeek-V3 Triton kernels and DeepGEMM's PyTorch reference casts.
# --------------------------------------------------------------------------------------------


def _deepseek(x: "torch.Tensor", p: Mapping[str, Any], block: bool) -> Outputs:
    rows, cols = x.shape
    b = int(p["block"])
    eps = float(p.get("eps", 1e-4))
    xv = _blocks(x, b) if block else _groups(x, b)
    dims = (1, 3) if block else 2
    amax = _amax_fmaxf(xv.abs(), dim=dims)  # tl.max reduces with maxnum: NaN skipped
    if eps > 0:
        amax = torch.fmax(amax, torch.tensor(eps, dtype=torch.float32, device=x.device))
    s = _div_const(amax, E4M3_MAX)
    if p.get("ue8m0"):
        s = torch.exp2(torch.ceil(torch.log2(s)))
    sb = s[:, None, :, None] if block else s[..., None]
    codes = _e4m3_satfinite(xv / sb)
    deq = _e4m3_value(codes) * sb
    un = (lambda t: _unblock(t, rows, cols)) if block else (lambda t: _ungroup(t, rows, cols))
    return {"codes": un(codes), "scales": s, "dequantized": un(deq)}


def deepseek_fp8_group(x: "torch.Tensor", p: Mapping[str, Any]) -> Outputs:
    """DeepSeek-V3 activation quantization. deepseek-ai/DeepSeek-V3 inference/kernel.py
    ``act_quant_kernel`` (lines 9-31): s = tl.max(tl.abs(x)) / 448, y = x / s, cast; the amax floor
    ``eps`` and the UE8M0 ``exp2(ceil(log2 s))`` of the V3.2-style kernel as preset parameters."""
    return _deepseek(x, p, block=False)


def deepseek_fp8_block(x: "torch.Tensor", p: Mapping[str, Any]) -> Outputs:
    """DeepSeek-V3 weight quantization. deepseek-ai/DeepSeek-V3 inference/kernel.py
    ``weight_quant_kernel``: max_val = tl.max(tl.abs(x)) per B×B block, s = max_val / 448, y = x / s."""
    return _deepseek(x, p, block=True)


def _ceil_to_ue8m0(s: "torch.Tensor") -> "torch.Tensor":
    """DeepGEMM deep_gemm/utils/math.py ``ceil_to_ue8m0`` (lines 13-16): exponent field + (mantissa ≠ 0), clamped
    to [1, 254], read back as a float (NaN and Inf scales become 2^127)."""
    bits = s.abs().float().view(torch.int32)
    exp = ((bits >> 23) & 0xFF) + (bits & 0x7FFFFF).bool().int()
    return (exp.clamp(1, 254) << 23).view(torch.float32)


def deepgemm_fp8_group(x: "torch.Tensor", p: Mapping[str, Any]) -> Outputs:
    """DeepGEMM deep_gemm/utils/math.py ``per_token_cast_to_fp8`` (lines 26-37): zero-pad to the group, ``x_view.abs()
    .float().amax(dim=2)`` (NaN propagates) ``.clamp(1e-4)`` (NaN stays NaN), sf = amax / 448.0,
    optionally ``ceil_to_ue8m0``, ``(x_view * (1.0 / sf)).to(torch.float8_e4m3fn)``. This is PyTorch code, run as
    written: on CUDA ``amax / 448.0`` is torch's scalar division ``amax * fl(1/448)`` (see ``_div_const``), so its
    scales on a GPU differ from the CPU's (and from the preset) by one ulp where that rounding differs."""
    rows, cols = x.shape
    xv = _groups(x, int(p["block"]))
    sf = xv.abs().float().amax(dim=2).clamp(1e-4) / 448.0
    if p.get("ue8m0"):
        sf = _ceil_to_ue8m0(sf)
    codes = _e4m3(xv * (1.0 / sf[..., None]))
    deq = _e4m3_value(codes) * sf[..., None]
    return {"codes": _ungroup(codes, rows, cols), "scales": sf, "dequantized": _ungroup(deq, rows, cols)}


def deepgemm_fp8_block(x: "torch.Tensor", p: Mapping[str, Any]) -> Outputs:
    """DeepGEMM deep_gemm/utils/math.py ``per_block_cast_to_fp8`` (lines 51-60): zero-padded B×B blocks,
    ``amax(dim=(1, 3)).clamp(1e-4)``, sf = amax / 448.0, optionally ``ceil_to_ue8m0``,
    ``(x_view * (1.0 / sf)).to(torch.float8_e4m3fn)``."""
    rows, cols = x.shape
    xv = _blocks(x, int(p["block"]))
    sf = xv.abs().float().amax(dim=(1, 3), keepdim=True).clamp(1e-4) / 448.0
    if p.get("ue8m0"):
        sf = _ceil_to_ue8m0(sf)
    codes = _e4m3(xv * (1.0 / sf))
    deq = _e4m3_value(codes) * sf
    return {"codes": _unblock(codes, rows, cols), "scales": sf.view(sf.shape[0], sf.shape[2]), "dequantized": _unblock(deq, rows, cols)}


# --------------------------------------------------------------------------------------------
# TransformerEngine current scaling: the CUDA rule, and the PyTorch reference recipe.
# --------------------------------------------------------------------------------------------


def te_current(x: "torch.Tensor", p: Mapping[str, Any]) -> Outputs:
    """TransformerEngine Float8CurrentScaling, CUDA path. TransformerEngine transformer_engine/common/
    recipe/recipe_common.cuh ``compute_scale_from_amax`` (lines 14-49): an infinite, zero or NaN amax
    gives scale 1; else ``__fdiv_rn(max_fp8, amax)``, Inf → FLT_MAX; the amax is an ``fmaxf``
    reduction (NaN skipped); elements ``x * scale`` cast satfinite; scale_inv = 1 / scale."""
    amax = _amax_fmaxf(x.abs(), dim=(0, 1))
    bad = torch.isinf(amax) | (amax == 0) | torch.isnan(amax)
    scale = torch.where(bad, torch.ones_like(amax), torch.tensor(E4M3_MAX, device=x.device) / amax)
    scale = torch.where(torch.isinf(scale), torch.full_like(scale, FLT_MAX), scale)
    inv = 1.0 / scale
    codes = _e4m3_satfinite(x * scale)
    return {"codes": codes, "scales": inv.reshape(()), "dequantized": _e4m3_value(codes) * inv}


def te_current_pyref(x: "torch.Tensor", p: Mapping[str, Any]) -> Outputs:
    """TransformerEngine's PyTorch current-scaling reference. TransformerEngine transformer_engine/
    pytorch/custom_recipes/reference_current_scaling.py ``compute_scale`` (torch.amax: NaN
    propagates) and ``_scale_from_amax_tensor`` (lines 155-198: torch.max(amax, eps = 0), fp8_max /
    amax, Inf → finfo(float32).max, amax == 0 → 1, scale_inv = reciprocal), ``_quantize`` line 320:
    ``(tensor.float() * scale).to(self.dtype)``. A NaN amax gives NaN scales; an infinite one
    scale 0 (finite elements → 0, scale_inv Inf)."""
    amax = torch.amax(torch.abs(x.float())).view(1)
    amax = torch.max(amax, torch.tensor(0.0, device=x.device))
    scale = torch.div(E4M3_MAX, amax)
    scale = torch.where(scale == torch.inf, torch.finfo(torch.float32).max, scale)
    scale = torch.where(amax == 0, 1.0, scale)
    inv = torch.reciprocal(scale)
    codes = _e4m3(x.float() * scale)
    return {"codes": codes, "scales": inv.reshape(()), "dequantized": _e4m3_value(codes) * inv}


# --------------------------------------------------------------------------------------------
# torchao float8 row-wise and MX.
# --------------------------------------------------------------------------------------------


def torchao_fp8_row(x: "torch.Tensor", p: Mapping[str, Any]) -> Outputs:
    """torchao float8 row-wise (``Float8LinearRecipeName.ROWWISE``: round_scales_to_power_of_2).
    pytorch/ao torchao/float8/float8_utils.py ``tensor_to_amax`` (torch.amax over |x|, NaN
    propagates), ``amax_to_scale`` (lines 32-53: amax in float64, ``max / clamp(amax, EPS = 1e-12)``,
    to float32), ``_round_scale_down_to_power_of_2`` (line 244: ``exp2(floor(log2(scale)))`` in
    float32), float8_training_tensor.py line 153 ``tensor.to(float32) * scale``,
    ``to_fp8_saturated`` (line 118: clamp then cast); dequant line 205 ``data / scale``."""
    amax = torch.amax(torch.abs(x), dim=1, keepdim=True).to(torch.float64)
    scale = (E4M3_MAX / torch.clamp(amax, min=1e-12)).to(torch.float32)
    scale = torch.exp2(torch.floor(torch.log2(scale)))
    scaled = x.to(torch.float32) * scale
    codes = _e4m3(scaled.clamp(min=-E4M3_MAX, max=E4M3_MAX))
    # qrl-sim stores the dequant scale fl(1/scale); for a power of two (or 0, NaN) it is exact.
    return {"codes": codes, "scales": (1.0 / scale).view(-1), "dequantized": _e4m3_value(codes) / scale}


def _torchao_f4_unpacked(x: "torch.Tensor") -> "torch.Tensor":
    """pytorch/ao torchao/prototype/custom_fp_utils.py ``_f32_to_floatx_unpacked`` (lines 27-142) for
    E2M1: RNE by the magic adder, saturation to ±6, sign re-attached; no NaN handling (a NaN becomes
    whatever its bits round to)."""
    ebits, mbits = 2, 1
    exp_bias = 1
    max_int = 7
    sign_mask = 1 << 3
    magic_adder = (1 << (23 - mbits - 1)) - 1
    max_normal = 6.0
    min_normal = 1.0
    denorm_exp = (127 - exp_bias) + (23 - mbits) + 1
    denorm_mask_int = denorm_exp << 23
    denorm_mask_float = torch.tensor(denorm_mask_int, dtype=torch.int32).view(torch.float32).to(x.device)
    xi = x.contiguous().view(torch.int32)
    sign = xi & -0x80000000
    xi = xi ^ sign
    xf = xi.view(torch.float32)
    saturate = xf >= max_normal
    denormal = torch.logical_and(torch.logical_not(saturate), xf < min_normal)
    normal = torch.logical_not(torch.logical_or(saturate, denormal))
    den = (xf + denorm_mask_float).view(torch.int32) - denorm_mask_int
    den = den.to(torch.uint8)
    nx = xf.view(torch.int32)
    odd = (nx >> (23 - mbits)) & 1
    nx = nx + (((exp_bias - 127) << 23) + magic_adder) + odd
    nx = (nx >> (23 - mbits)).to(torch.uint8)
    out = torch.full_like(xf, max_int, dtype=torch.uint8)
    out = torch.where(denormal, den, out)
    out = torch.where(normal, nx, out)
    sign_lp = ((sign >> (23 + 8 - mbits - ebits)) & sign_mask).to(torch.uint8)
    return out | sign_lp


def _torchao_mx(x: "torch.Tensor", p: Mapping[str, Any], elem: str) -> Outputs:
    rows, cols = x.shape
    g = int(p["block"])
    xg = _groups(x, g)
    max_abs = torch.amax(torch.abs(xg), -1).unsqueeze(-1).to(torch.float32)  # NaN propagates
    target_max_pow2 = 8 if elem == "e4m3" else 2
    extracted = ((max_abs.view(torch.int32) >> 23) & 0xFF) - 127
    unbiased = torch.clamp(extracted - target_max_pow2, min=-127, max=128)
    biased = (unbiased + 127).to(torch.uint8)
    biased = torch.where(torch.isfinite(max_abs), biased, torch.full_like(biased, 255))
    # _e8m0_scale_to_reciprocal_fp32 (torch 2.13 branch): 2^(127 - e) from the bits; 254 - 255 → NaN.
    rec = (254 - biased.to(torch.int32)).to(torch.uint8).to(torch.int32)
    rec_bits = torch.where(rec == 0, torch.full_like(rec, 0x00400000), rec << 23)
    rec_bits = torch.where(rec == 255, torch.full_like(rec, 0x7F800001), rec_bits)
    data_lp = xg.to(torch.float32) * rec_bits.view(torch.float32)
    codes = _e4m3(data_lp) if elem == "e4m3" else _torchao_f4_unpacked(data_lp)
    # get_fp_scale (line 412): 2^(e - 127) as float32, NaN for 0xFF.
    s_fp = torch.pow(torch.full_like(biased, 2.0, dtype=torch.float32), biased.to(torch.int16) - 127)
    s_fp = torch.where(biased != 255, s_fp, torch.full_like(s_fp, float("nan")))
    vals = _e4m3_value(codes) if elem == "e4m3" else _e2m1_value(codes)
    return {
        "codes": _ungroup(codes, rows, cols),
        "scales": s_fp.squeeze(-1),
        "scaleCodes": biased.squeeze(-1),
        "dequantized": _ungroup(vals * s_fp, rows, cols),
    }


def mxfp8(x: "torch.Tensor", p: Mapping[str, Any]) -> Outputs:
    """torchao MX, FLOOR scale. pytorch/ao torchao/prototype/mx_formats/mx_tensor.py ``to_mx``
    (lines 228-410; ``_e8m0_scale_to_reciprocal_fp32`` line 132): torch.amax (NaN propagates), E8M0 exponent ⌊log2 amax⌋ − 8 from the float32
    bits clamped to [−127, 128], non-finite amax → 0xFF, elements ``data_hp * reciprocal`` from
    ``_e8m0_scale_to_reciprocal_fp32``, cast ``.to(torch.float8_e4m3fn)`` (saturating from torch
    2.13, so no clamp); dequant ``get_fp_scale`` (line 412)."""
    if p.get("exponent", "floor") != "floor":
        raise NotImplementedError("only the FLOOR exponent")
    return _torchao_mx(x, p, "e4m3")


def mxfp4(x: "torch.Tensor", p: Mapping[str, Any]) -> Outputs:
    """torchao MX FP4, FLOOR scale: ``to_mx`` as for MXFP8 with ⌊log2 amax⌋ − 2 and the element cast
    ``f32_to_f4_unpacked`` (torchao/prototype/mx_formats/kernels.py line 59 →
    custom_fp_utils.py ``_f32_to_floatx_unpacked``)."""
    if p.get("exponent", "floor") != "floor":
        raise NotImplementedError("only the FLOOR exponent")
    return _torchao_mx(x, p, "e2m1")


# --------------------------------------------------------------------------------------------
# NVFP4: TransformerEngine's CUDA rule, and its PyTorch reference recipe.
# --------------------------------------------------------------------------------------------


def _nvfp4(x: "torch.Tensor", p: Mapping[str, Any], reference: bool) -> Outputs:
    rows, cols = x.shape
    xg = _groups(x, int(p["block"]))
    f32max = torch.tensor(FLT_MAX, dtype=torch.float32, device=x.device)
    six = torch.tensor(6.0, dtype=torch.float32, device=x.device)
    if reference:
        vec_max = torch.amax(torch.abs(xg), dim=-1, keepdim=True)  # NaN propagates
        global_amax = torch.max(torch.abs(x)).to(torch.float32).view(1)
    else:
        vec_max = _amax_fmaxf(xg.abs(), dim=-1)[..., None]
        global_amax = _amax_fmaxf(x.abs(), dim=(0, 1)).view(1)
    s_enc = torch.min(torch.div(torch.tensor(448.0 * 6.0, device=x.device), global_amax), f32max)
    if reference:
        s_enc = torch.where(s_enc == 0.0, torch.ones_like(s_enc), s_enc)
    else:  # compute_global_encode_scaling_factor_FP4: 0 or NaN (amax 0 → 0/0) give 1
        s_enc = torch.where((s_enc == 0.0) | torch.isnan(s_enc), torch.ones_like(s_enc), s_enc)
    s_dec = torch.div(1.0, s_enc)
    mult = s_enc * torch.reciprocal(six)
    dscale = torch.min(vec_max * mult, f32max)
    clamped = torch.clamp(dscale, min=-E4M3_MAX, max=E4M3_MAX)
    dcode = _e4m3(clamped) if reference else _e4m3_satfinite(clamped)
    sb = _e4m3_value(dcode)
    enc = torch.min(torch.div(1.0, sb * s_dec), f32max)
    scaled = xg.to(torch.float32) * enc
    if reference:
        codes = _te_cast_to_fp4(torch.clamp(scaled, -6.0, 6.0))
    else:
        codes = _e2m1_satfinite(scaled)
    deq = _e2m1_value(codes) * (sb * s_dec)
    return {
        "codes": _ungroup(codes, rows, cols),
        "scales": sb.squeeze(-1),
        "scaleCodes": dcode.squeeze(-1),
        "globalScale": s_dec.reshape(()),
        "dequantized": _ungroup(deq, rows, cols),
    }


def _te_cast_to_fp4(x: "torch.Tensor") -> "torch.Tensor":
    """TransformerEngine transformer_engine/pytorch/custom_recipes/reference_nvfp4.py ``cast_to_fp4x2``
    (lines 49-71), unpacked: one threshold table per code; −0 satisfies ``x >= 0.0`` and becomes
    +0, NaN matches no threshold and stays 0."""
    r = torch.zeros_like(x, dtype=torch.uint8)
    table = [
        ((x >= 0.0) & (x <= 0.25), 0), ((x > 0.25) & (x < 0.75), 1), ((x >= 0.75) & (x <= 1.25), 2),
        ((x > 1.25) & (x < 1.75), 3), ((x >= 1.75) & (x <= 2.5), 4), ((x > 2.5) & (x < 3.5), 5),
        ((x >= 3.5) & (x <= 5.0), 6), (x > 5.0, 7),
        ((x >= -0.25) & (x < -0.0), 8), ((x < -0.25) & (x > -0.75), 9), ((x <= -0.75) & (x >= -1.25), 10),
        ((x < -1.25) & (x > -1.75), 11), ((x <= -1.75) & (x >= -2.5), 12), ((x < -2.5) & (x > -3.5), 13),
        ((x <= -3.5) & (x >= -5.0), 14), (x < -5.0, 15),
    ]
    for mask, code in table:
        r[mask] = code
    return r


def nvfp4(x: "torch.Tensor", p: Mapping[str, Any]) -> Outputs:
    """NVFP4, TransformerEngine CUDA rule. TransformerEngine transformer_engine/common/cast/nvfp4/
    core_nvfp4.cuh ``compute_global_encode_scaling_factor_FP4`` (lines 82-95: S_enc = min(448·6 / amax, FLT_MAX),
    1 when 0), ``compute_decoding_scaling_factor`` (lines 61-69: block scale e4m3(amax_b · S_enc · (1/6)),
    satfinite), element multiplier min(1 / (s_b · S_dec), FLT_MAX), ``cvt.rn.satfinite.e2m1x2.f32``;
    amax reductions with ``fmaxf`` (NaN skipped)."""
    return _nvfp4(x, p, reference=False)


def nvfp4_te_pyref(x: "torch.Tensor", p: Mapping[str, Any]) -> Outputs:
    """TransformerEngine's PyTorch NVFP4 reference. TransformerEngine transformer_engine/pytorch/
    custom_recipes/reference_nvfp4.py ``_quantize_blockwise_reference`` (lines 689-777, 1×16, no RHT):
    torch.amax per block and torch.max for the global amax (NaN propagates), the same scale formulas
    as the kernel, ``clamp(±6)`` then ``cast_to_fp4x2`` (−0 → +0, NaN → 0)."""
    return _nvfp4(x, p, reference=True)


#: Which code path each transcription follows (the docs' agreement table prints it).
PATHS: Dict[str, str] = {
    "vllm-fp8-tensor": "vLLM CUDA kernel (common.cu)",
    "vllm-fp8-token": "vLLM CUDA kernel (common.cu)",
    "vllm-fp8-group": "vLLM CUDA kernel (per_token_group_quant.cu)",
    "vllm-fp8-group-triton": "vLLM Triton fallback (fp8_utils.py)",
    "sglang-fp8-group-triton": "SGLang Triton kernel (fp8_kernel.py)",
    "deepseek-fp8-group": "DeepSeek-V3 Triton kernel (kernel.py)",
    "deepseek-fp8-block": "DeepSeek-V3 Triton kernel (kernel.py)",
    "deepgemm-fp8-group": "DeepGEMM PyTorch (utils/math.py)",
    "deepgemm-fp8-block": "DeepGEMM PyTorch (utils/math.py)",
    "te-current": "TransformerEngine CUDA (recipe_common.cuh)",
    "te-current-pyref": "TransformerEngine PyTorch reference (reference_current_scaling.py)",
    "torchao-fp8-row": "torchao PyTorch (float8_utils.py)",
    "mxfp8": "torchao PyTorch, FLOOR (mx_tensor.py)",
    "mxfp4": "torchao PyTorch, FLOOR (mx_tensor.py)",
    "nvfp4": "TransformerEngine CUDA (core_nvfp4.cuh)",
    "nvfp4-te-pyref": "TransformerEngine PyTorch reference (reference_nvfp4.py)",
}

#: Preset name → torch transcription. Presets absent here (int8, GPTQ, AWQ, TE delayed) are not
#: PyTorch code in their libraries, or are stateful across steps.
TORCH_QUANTIZERS: Dict[str, Callable[["torch.Tensor", Mapping[str, Any]], Outputs]] = {
    "vllm-fp8-tensor": vllm_fp8_tensor,
    "vllm-fp8-token": vllm_fp8_token,
    "vllm-fp8-group": vllm_fp8_group,
    "vllm-fp8-group-triton": vllm_fp8_group_triton,
    "sglang-fp8-group-triton": sglang_fp8_group_triton,
    "deepseek-fp8-group": deepseek_fp8_group,
    "deepseek-fp8-block": deepseek_fp8_block,
    "deepgemm-fp8-group": deepgemm_fp8_group,
    "deepgemm-fp8-block": deepgemm_fp8_block,
    "te-current": te_current,
    "te-current-pyref": te_current_pyref,
    "torchao-fp8-row": torchao_fp8_row,
    "mxfp8": mxfp8,
    "mxfp4": mxfp4,
    "nvfp4": nvfp4,
    "nvfp4-te-pyref": nvfp4_te_pyref,
}


# --------------------------------------------------------------------------------------------
# Comparison with the golden files.
# --------------------------------------------------------------------------------------------


def _agreement(got: np.ndarray, want: np.ndarray, dtype: str, skip: Optional[np.ndarray] = None) -> "tuple[np.ndarray, float]":
    """(per-element agreement mask, max |got − want| over finite pairs outside ``skip``). Integer
    codes: equal values. Float32 tensors: equal bit patterns (−0 ≠ +0), except that any NaN matches
    any NaN."""
    want = np.asarray(want)
    got = np.asarray(got).reshape(want.shape)
    if dtype == "F32":
        g = got.astype(np.float32)
        w = want.astype(np.float32)
        same = (g.view(np.uint32) == w.view(np.uint32)) | (np.isnan(g) & np.isnan(w))
        finite = np.isfinite(g) & np.isfinite(w)
        diff = np.abs(g[finite].astype(np.float64) - w[finite].astype(np.float64))
    else:
        g = got.astype(np.int64)
        w = want.astype(np.int64)
        same = g == w
        d = np.abs(g - w).astype(np.float64)
        diff = d[~skip] if skip is not None else d
    mad = float(diff.max()) if diff.size else 0.0
    return same, mad


def _nan_on_both_sides(name: str, got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray], shape: tuple) -> Optional[np.ndarray]:
    """Where a code's value is NaN in both results: ``codes`` whose dequantized value is NaN on both
    sides, ``scaleCodes`` whose scale is. A code that differs there differs only in how a NaN is
    encoded (its sign, or the element code under a NaN block scale)."""
    ref = {"codes": "dequantized", "scaleCodes": "scales"}.get(name)
    if ref is None or ref not in got or ref not in want:
        return None
    w = np.asarray(want[ref]).reshape(shape)
    g = np.asarray(got[ref]).reshape(shape)
    return np.isnan(w) & np.isnan(g)


def _to_numpy(t: Any) -> np.ndarray:
    if hasattr(t, "detach"):
        t = t.detach().cpu()
        if t.dtype == torch.uint8 or t.dtype == torch.int32:
            return t.numpy()
        return t.to(torch.float32).numpy()
    return np.asarray(t)


def quantize_case(preset: str, x: np.ndarray, params: Mapping[str, Any], device: str = "cpu") -> Dict[str, np.ndarray]:
    """Runs the torch transcription of ``preset`` on a float32 numpy array (rows, cols) on ``device``
    and returns its outputs as numpy arrays, named as the golden tensors."""
    fn = TORCH_QUANTIZERS[preset]
    t = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(device)
    return {k: _to_numpy(v) for k, v in fn(t, params).items()}


def compare_quantizers(golden_dir: str, device: str = "cpu") -> List[Dict[str, Any]]:
    """Compares every ``quantizers`` golden case whose preset has a torch transcription.

    Returns one dict per case: ``case`` (the case name), ``compared`` (values compared over codes,
    scales, scale codes, global scale and dequantized values), ``agreeing`` (bit-identical; NaN
    matches NaN in float32 tensors), ``nan_encoding`` (codes that differ only where both sides
    decode to NaN: the sign of a NaN code, or an element code under a NaN block scale),
    ``max_abs_diff`` (largest |torch − golden| over finite pairs, NaN encodings left out) and
    ``note`` (the tensors that differ, and how many, or why the case was skipped). Runs on
    ``device`` (``"cpu"`` or ``"cuda"``) with the same code.
    """
    from . import load  # noqa: PLC0415

    if torch is None:
        raise RuntimeError("compare_quantizers needs torch")
    golden = load(golden_dir)
    rows: List[Dict[str, Any]] = []
    for case in golden.cases("quantizers"):
        preset = case.params.get("preset")
        if preset not in TORCH_QUANTIZERS:
            continue
        expected = case.expected
        try:
            got = quantize_case(preset, case.inputs["input"], case.params, device)
        except NotImplementedError as exc:
            rows.append({"case": case.name, "compared": 0, "agreeing": 0, "max_abs_diff": 0.0, "note": f"skipped: {exc}"})
            continue
        compared = agreeing = nan_encoding = 0
        mad = 0.0
        diffs = []
        for name, want in expected.items():
            if name not in got:
                continue
            nan_both = _nan_on_both_sides(name, got, expected, want.shape)
            same, d = _agreement(got[name], want, case.tensors[name]["dtype"], nan_both)
            only_nan = int((~same & nan_both).sum()) if nan_both is not None else 0
            compared += same.size
            agreeing += int(same.sum())
            nan_encoding += only_nan
            mad = max(mad, d)
            if not same.all():
                diffs.append(f"{name} {int((~same).sum())}/{same.size}" + (f" ({only_nan} NaN encodings only)" if only_nan else ""))
        missing = sorted(set(expected) - set(got))
        note = ("differs: " + ", ".join(diffs)) if diffs else "bit-identical"
        if missing:
            note += f" (not produced: {', '.join(missing)})"
        rows.append({"case": case.name, "compared": compared, "agreeing": agreeing, "nan_encoding": nan_encoding, "max_abs_diff": mad, "note": note})
    return rows


def agreement_markdown(rows: List[Dict[str, Any]], golden_dir: str) -> str:
    """The docs' agreement table: one row per preset, summed over its cases."""
    from . import load  # noqa: PLC0415

    preset_of = {c.name: c.params["preset"] for c in load(golden_dir).cases("quantizers")}
    by: Dict[str, Dict[str, int]] = {}
    for r in rows:
        t = by.setdefault(preset_of[r["case"]], {"cases": 0, "compared": 0, "agreeing": 0, "nan": 0})
        t["cases"] += 1
        t["compared"] += r["compared"]
        t["agreeing"] += r["agreeing"]
        t["nan"] += r.get("nan_encoding", 0)
    lines = [
        "| preset | torch transcription of | cases | values compared | agreeing bit for bit | differ only in a NaN's encoding | other differences |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in TORCH_QUANTIZERS:
        if name not in by:
            continue
        t = by[name]
        other = t["compared"] - t["agreeing"] - t["nan"]
        lines.append(f"| `{name}` | {PATHS[name]} | {t['cases']} | {t['compared']} | {t['agreeing']} | {t['nan']} | {other} |")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m qrl_golden.torch_quantizers GOLDEN_DIR [--device cuda] [--json | --markdown]``: one
    line per case (exit 1 when any value differs other than in a NaN's encoding)."""
    import argparse  # noqa: PLC0415
    import json  # noqa: PLC0415

    ap = argparse.ArgumentParser(prog="python -m qrl_golden.torch_quantizers", description=main.__doc__)
    ap.add_argument("golden_dir")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--json", action="store_true", help="print the rows as one JSON array")
    ap.add_argument("--markdown", action="store_true", help="print the per-preset agreement table of docs/quantization.md")
    args = ap.parse_args(argv)
    rows = compare_quantizers(args.golden_dir, args.device)
    if args.json:
        print(json.dumps(rows))
    elif args.markdown:
        print(agreement_markdown(rows, args.golden_dir))
    else:
        for r in rows:
            print(f"{r['case']}: {r['agreeing']}/{r['compared']} agree, max |diff| {r['max_abs_diff']:g}; {r['note']}")
    return 0 if all(r["agreeing"] + r.get("nan_encoding", 0) == r["compared"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
