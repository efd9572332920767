"""The GEMM numerics of the transformers backend: every nn.Linear of a Hugging Face causal LM and its
attention run under one plan side — exact (fp32 or bf16 operands, float64 accumulation rounded to the
model's dtype), FP8 W8A8 with per-channel weight and per-token activation scales through
`torch._scaled_mm`, block FP8 (B×B weight blocks, 1×B activation groups), or INT8 W8A8 (per-channel
weight, per-token activation symmetric scales, exact integer sums) — plus the FP8 KV cache.
The refit (`refit_engine`) builds the rollout engine's quantized weights from the trainer's. Not the
backend (backend.py).

Why float64 accumulation: products of two bf16 values are exact in float64, and their sums over a
model this size are exact too, so a row's result does not depend on how many rows the GEMM had (a
decode step of one token versus the trainer's forward over the whole sequence) nor on the kernel's
reduction order. Identical plan sides therefore give bit-identical log-probs on both sides (the
`bf16` plan's k3 is exactly 0), as qrl-sim's own engines do with their fixed accumulation order.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import torch
from torch import nn

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
# vLLM's floor of a dynamic per-token FP8 scale: 1 / (448 · 512) (csrc/quantization/w8a8/fp8/common.cu,
# dynamic_per_token_scaled_fp8_quant_kernel_strided; utils.cuh min_scaling_factor).
TOKEN_SCALE_FLOOR = 1.0 / (FP8_MAX * 512.0)
# DeepSeek-V3 weight_quant_kernel divides amax by 448 per block (inference/kernel.py); qrl-sim's
# deepseek-fp8-block preset floors amax at 1e-4, vLLM's per_token_group_quant_8bit at 1e-10.
BLOCK_AMAX_FLOOR = 1e-4
GROUP_AMAX_FLOOR = 1e-10

ATTENTION_NAME = "qrl_exact"


def cast(x: torch.Tensor, fmt: str) -> torch.Tensor:
    """x rounded to `fmt` ('fp32' or 'bf16', round-to-nearest-even), as float64."""
    if fmt == "bf16":
        return x.to(torch.bfloat16).to(torch.float64)
    return x.to(torch.float32).to(torch.float64)


def _fp8(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """E4M3 codes of x / scale, saturated to ±448 (satfinite)."""
    return torch.clamp(x / scale, -FP8_MAX, FP8_MAX).to(FP8)


def quant_rows(x: torch.Tensor, floor: float = TOKEN_SCALE_FLOOR):
    """Per-row FP8 (vLLM dynamic per-token; per output channel for a weight (out, in)):
    s = max(amax/448, floor), q = e4m3(clamp(x/s)). Returns (codes, scales (rows, 1) float32)."""
    x32 = x.to(torch.float32)
    s = torch.clamp(x32.abs().amax(dim=-1, keepdim=True) / FP8_MAX, min=floor)
    return _fp8(x32, s), s


INT8_MAX = 127.0


def quant_int8_weight(w: torch.Tensor):
    """Per-output-channel symmetric INT8 of a weight (out, in), as qrl-sim's `int8-row` preset
    (SmoothQuant fake_quant.py quantize_weight_per_channel_absmax: s = amax/127, round(w/s)):
    s = amax/127, q = clamp(rne(w/s), −128, 127) (an all-zero row keeps s = 0 and codes 0).
    Returns (codes int8, scales (rows, 1) float32)."""
    w32 = w.to(torch.float32)
    s = w32.abs().amax(dim=-1, keepdim=True) / INT8_MAX
    q = torch.where(s > 0, w32 / torch.where(s > 0, s, torch.ones_like(s)), torch.zeros_like(w32))
    return torch.clamp(torch.round(q), -128, 127).to(torch.int8), s


def quant_int8_rows(x: torch.Tensor):
    """vLLM's dynamic per-token symmetric INT8 (csrc/quantization/w8a8/int8/scaled_quant.cu,
    dynamic_scaled_int8_quant_kernel; qrl-sim's `vllm-int8-token` preset): s = amax/127, the row
    multiplied by 127/amax (0 when amax = 0), rounded to nearest even and saturated to [−128, 127]
    (float_to_int8_rn: `cvt.rni.sat.s8.f32`, NaN → 0). Returns (codes int8, scales (rows, 1) float32)."""
    x32 = x.to(torch.float32)
    amax = x32.abs().amax(dim=-1, keepdim=True)
    inv = torch.where(amax > 0, INT8_MAX / torch.where(amax > 0, amax, torch.ones_like(amax)), torch.zeros_like(amax))
    q = torch.nan_to_num(torch.round(x32 * inv), nan=0.0)
    return torch.clamp(q, -128, 127).to(torch.int8), amax / INT8_MAX


def int8_gemm(xq: torch.Tensor, xs: torch.Tensor, wq: torch.Tensor, ws: torch.Tensor) -> torch.Tensor:
    """INT8 × INT8 with an exact integer accumulator (the int32 of vLLM's cutlass_scaled_mm; here float64,
    exact while |Σ| < 2⁵³) and its ScaledEpilogue in float32: y = s_x · (s_w · float(acc))
    (csrc/cutlass_extensions/epilogue/scaled_mm_epilogues_c3x.hpp, ScaledEpilogue)."""
    acc = (xq.to(torch.float64) @ wq.to(torch.float64).T).to(torch.float32)
    return xs * (ws.T * acc)


def quant_groups(x: torch.Tensor, block: int):
    """1×B groups along the last axis (vLLM per_token_group_quant_fp8; DeepSeek act_quant):
    s = max(amax, 1e-10)/448 per group. x: (M, K) → codes (M, K), scales (M, ⌈K/B⌉)."""
    M, K = x.shape
    G = -(-K // block)
    x32 = torch.nn.functional.pad(x.to(torch.float32), (0, G * block - K)).view(M, G, block)
    s = torch.clamp(x32.abs().amax(dim=-1), min=GROUP_AMAX_FLOOR) / FP8_MAX
    q = _fp8(x32, s[..., None]).view(M, G * block)[:, :K]
    return q, s


def quant_blocks(w: torch.Tensor, block: int):
    """B×B blocks (DeepSeek-V3 weight_quant_kernel: s = amax/448 per block; amax floored at 1e-4 as
    qrl-sim's deepseek-fp8-block). w: (N, K) → codes (N, K), scales (⌈N/B⌉, ⌈K/B⌉)."""
    N, K = w.shape
    GN, GK = -(-N // block), -(-K // block)
    w32 = torch.nn.functional.pad(w.to(torch.float32), (0, GK * block - K, 0, GN * block - N)).view(GN, block, GK, block)
    s = torch.clamp(w32.abs().amax(dim=(1, 3)), min=BLOCK_AMAX_FLOOR) / FP8_MAX
    q = _fp8(w32, s[:, None, :, None]).view(GN * block, GK * block)[:N, :K]
    return q, s


def _expand(s: torch.Tensor, block: int, rows: int, cols: int, row_block: int) -> torch.Tensor:
    return s.repeat_interleave(row_block, 0)[:rows].repeat_interleave(block, 1)[:, :cols]


class PlanLinear(nn.Linear):
    """An nn.Linear whose forward follows a plan side (`gemm`):

    - ``("exact", fmt)``: operands rounded to fmt, float64 accumulation, output in the input's dtype;
    - ``("fp8-w8a8",)``: weight codes and per-channel scales from the refit, per-token dynamic
      activation scales, `torch._scaled_mm(x_q, w_qᵀ, scale_a=s_x, scale_b=s_wᵀ)` with fp32 output
      (vLLM torch_row_wise_w8a8_scaled_mm, kernels/scaled_mm/pytorch.py);
    - ``("int8-w8a8",)``: INT8 weight codes and per-channel scales from the refit, per-token dynamic
      INT8 activations (vLLM int8 W8A8), exact integer sums, float32 scale epilogue (`int8_gemm`);
    - ``("fp8-block", B)``: B×B weight blocks and 1×B activation groups, dequantized and accumulated
      in float64 (the scales are applied per K-block, as DeepGEMM/DeepSeek's fp8_gemm does; the
      Hopper 14-bit accumulator is not modelled).

    Only the rollout engine holds quantized layers (never differentiated)."""

    gemm: tuple = ("exact", "fp32")
    qweight: Optional[torch.Tensor] = None
    wscale: Optional[torch.Tensor] = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        kind = self.gemm[0]
        shape = x.shape[:-1]
        x2 = x.reshape(-1, x.shape[-1])
        if kind == "exact":
            y = (cast(x2, self.gemm[1]) @ cast(self.weight, self.gemm[1]).T).to(x.dtype)
        elif kind == "fp8-w8a8":
            xq, xs = quant_rows(x2)
            y = torch._scaled_mm(xq, self.qweight.T, scale_a=xs, scale_b=self.wscale.T.contiguous(), out_dtype=torch.float32).to(x.dtype)
        elif kind == "int8-w8a8":
            xq, xs = quant_int8_rows(x2)
            y = int8_gemm(xq, xs, self.qweight, self.wscale).to(x.dtype)
        elif kind == "fp8-block":
            B = self.gemm[1]
            xq, xs = quant_groups(x2, B)
            xd = xq.to(torch.float64) * _expand(xs.to(torch.float64), B, xq.shape[0], xq.shape[1], 1)
            N, K = self.qweight.shape
            wd = self.qweight.to(torch.float64) * _expand(self.wscale.to(torch.float64), B, N, K, B)
            y = (xd @ wd.T).to(x.dtype)
        else:
            raise ValueError(f"PlanLinear: unknown gemm {self.gemm!r}")
        if self.bias is not None:
            y = y + self.bias
        return y.view(*shape, y.shape[-1])


def adopt_linears(model: nn.Module, fmt: str) -> int:
    """Turns every nn.Linear of `model` into a PlanLinear computing ("exact", fmt); returns how many."""
    n = 0
    for m in model.modules():
        if type(m) is nn.Linear or isinstance(m, PlanLinear):
            m.__class__ = PlanLinear
            m.gemm = ("exact", fmt)
            m.qweight = None
            m.wscale = None
            n += 1
    return n


def set_attention(model: nn.Module, fmt: str, kv: Optional[str]) -> None:
    """Operand format of the attention GEMMs and the KV-cache format ('fp8' or None) of every layer."""
    for m in model.modules():
        if hasattr(m, "layer_idx") and hasattr(m, "scaling"):
            m._qrl_fmt = fmt
            m._qrl_kv = kv
            m._qrl_kv_scale = None


def refit_engine(engine: nn.Module, trainer: nn.Module, side: Dict[str, Any]) -> None:
    """The refit at `sync`: copies the trainer's weights into the engine, then quantizes every linear
    except the LM head under the side's GEMM plan and resets the KV-cache scales (recalibrated on the
    engine's next forward)."""
    with torch.no_grad():
        engine.load_state_dict(trainer.state_dict())
        head = engine.get_output_embeddings()
        for m in engine.modules():
            if not isinstance(m, PlanLinear):
                continue
            kind = side["linear"][0]
            if m is head or kind == "exact":
                m.gemm = ("exact", side["head"] if m is head else side["linear"][1])
                m.qweight = m.wscale = None
            elif kind == "fp8-w8a8":
                m.gemm = ("fp8-w8a8",)
                m.qweight, m.wscale = quant_rows(m.weight)
            elif kind == "int8-w8a8":
                m.gemm = ("int8-w8a8",)
                m.qweight, m.wscale = quant_int8_weight(m.weight)
            elif kind == "fp8-block":
                m.gemm = ("fp8-block", side["linear"][1])
                m.qweight, m.wscale = quant_blocks(m.weight, side["linear"][1])
            else:
                raise ValueError(f"refit: unknown linear kind {kind!r}")
    set_attention(engine, side["attention"], side.get("kv"))


def _repeat_kv(x: torch.Tensor, n: int) -> torch.Tensor:
    return x if n == 1 else x.repeat_interleave(n, dim=1)


def _kv_fp8(module: nn.Module, k: torch.Tensor, v: torch.Tensor):
    """FP8 E4M3 KV cache: per-tensor scales per layer (amax/448 of K and of V), calibrated on the first
    forward after a refit (vLLM calculate_kv_scales; verl resets them at every weight update), then
    fixed; the cache holds e4m3 codes, read back as code·scale. Quantizing the whole cache at every
    step with the fixed scale equals storing the codes (quantization is idempotent)."""
    if module._qrl_kv_scale is None:
        module._qrl_kv_scale = (
            torch.clamp(k.abs().amax().to(torch.float64) / FP8_MAX, min=1e-12),
            torch.clamp(v.abs().amax().to(torch.float64) / FP8_MAX, min=1e-12),
        )
    sk, sv = module._qrl_kv_scale
    kq = torch.clamp(k.to(torch.float64) / sk, -FP8_MAX, FP8_MAX).to(FP8).to(torch.float64) * sk
    vq = torch.clamp(v.to(torch.float64) / sv, -FP8_MAX, FP8_MAX).to(FP8).to(torch.float64) * sv
    return kq, vq


def exact_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Causal attention in float64 with operands in the module's format: for query i (absolute position
    K − Q + i) the scores against keys 0…K−Q+i, softmax, probabilities (rounded like the operands) times
    values. Each query is reduced over exactly its own prefix, so a decode step and a full forward give
    the same numbers. Padding is attended like any token (as qrl-sim's toy policies do); the mask
    transformers built is not used."""
    fmt = getattr(module, "_qrl_fmt", "fp32")
    k, v = key, value
    if getattr(module, "_qrl_kv", None) == "fp8":
        k, v = _kv_fp8(module, k, v)
    groups = query.shape[1] // k.shape[1]
    q = cast(query, fmt)
    k = cast(_repeat_kv(k, groups), fmt)
    v = cast(_repeat_kv(v, groups), fmt)
    scale = module.scaling if scaling is None else scaling
    Q, K = q.shape[2], k.shape[2]
    out = torch.empty(q.shape[0], q.shape[1], Q, v.shape[3], dtype=torch.float64, device=q.device)
    for i in range(Q):
        n = K - Q + i + 1
        s = (q[:, :, i : i + 1] @ k[:, :, :n].transpose(-1, -2)) * scale
        p = torch.softmax(s, dim=-1)
        if fmt == "bf16":
            p = p.to(torch.bfloat16).to(torch.float64)
        out[:, :, i] = (p @ v[:, :, :n])[:, :, 0]
    return out.to(query.dtype).transpose(1, 2).contiguous(), None


def register_attention() -> None:
    """Registers `exact_attention` with transformers under ATTENTION_NAME (and an sdpa-style mask)."""
    from transformers import AttentionInterface

    AttentionInterface.register(ATTENTION_NAME, exact_attention)
    try:
        from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

        ALL_MASK_ATTENTION_FUNCTIONS.register(ATTENTION_NAME, sdpa_mask)
    except ImportError:  # older transformers: the mask interface is absent and not needed
        pass
