"""Measures where ModelOpt's NVFP4 static fake quant, read on CPU, cannot stand for its GPU run: ModelOpt's own
definitions (loaded by ``qrl_golden.modelopt_nvfp4_reference.load`` from a Model-Optimizer checkout) give the
block scales and quotients on CPU, and two GPU facts are counted against them.

1. ``compute_fp4_scales`` divides by the Python scalar 6.0 twice (``fp4_kernel.py`` lines 238 and 248). On CUDA,
   PyTorch's ``div_true_kernel_cuda`` turns ``tensor / cpu_scalar`` into ``tensor * (1/scalar)``
   (``aten/src/ATen/native/cuda/BinaryDivTrueKernel.cu``: "compute a * reciprocal(b) ... may lose one bit");
   on CPU it divides. Counted: tensors whose ``scale_fp8_quant_amax`` A differs, and blocks whose scale differs.
2. Triton's float32 ``/`` lowers to ``div.full.f32`` (≤ 2 ulp; triton-lang/triton #10661: 4.6875 / 0.9375 gives
   0x40a00001, not 5.0), used for ``abs_scaled = x_abs / scale_safe`` (``nvfp4_quant.py`` line 97) right before
   the E2M1 decision thresholds 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5. Counted: elements whose IEEE quotient lies
   within 2 ulp of a threshold (exactly on one included), i.e. those whose code a 2-ulp division may change.

    python -m qrl_golden.modelopt_nvfp4_gap PATH/TO/Model-Optimizer [tensors]
"""

from __future__ import annotations

import json
import sys
from typing import Any, Dict, List

from qrl_golden.modelopt_nvfp4_reference import load

THRESHOLDS = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]


def _gpu_scales(amax: Any, global_amax: Any, bound: float) -> Any:
    """``compute_fp4_scales`` with CUDA's ``tensor / 6.0`` = ``tensor * fl(1/6)``; fp8_eager unchanged
    (its ``448.0 / safe_amax`` is ``Tensor.__rdiv__`` = ``reciprocal() * 448`` on both devices)."""
    import torch  # noqa: PLC0415

    inv6 = torch.tensor(1.0, dtype=torch.float32) / torch.tensor(6.0, dtype=torch.float32)
    scale = amax.float() * inv6
    quant_amax = global_amax.float() * (448.0 / bound) * inv6
    s = (1 / quant_amax) * 448.0 if quant_amax > 2**-24 else torch.tensor(448.0)
    inv = 1 / s
    code = (scale * s).clamp(min=-448.0, max=448.0).to(torch.float8_e4m3fn)
    return code.to(torch.float32) * inv


def measure(root: str, tensors: int) -> Dict[str, Any]:
    """Per weight kind (float32 normals, the same rounded to BF16) and four_over_six setting, over ``tensors``
    weights of 64 × 256 (1 024 blocks each) with per-tensor standard deviations spread over six decades."""
    import torch  # noqa: PLC0415

    ns = load(root)
    gen = torch.Generator().manual_seed(0)
    out: List[Dict[str, Any]] = []
    for kind in ["float32", "bf16"]:
        for four_over_six in [False, True]:
            bound = 256.0 if four_over_six else 448.0
            n_a = n_blocks = n_scale = n_el = n_risk = n_tie = 0
            for t in range(tensors):
                std = 10.0 ** (-4 + 6 * t / max(1, tensors - 1))
                w = torch.randn(64, 256, generator=gen) * std
                if kind == "bf16":
                    w = w.to(torch.bfloat16).to(torch.float32)
                blocks = w.reshape(-1, 16)
                amax = blocks.abs().amax(dim=-1, keepdim=True)
                g = amax.max()
                cpu = ns["compute_fp4_scales"](amax, g, True, fp8_max_for_normalization=bound).view(-1, 1)
                gpu = _gpu_scales(amax, g, bound).view(-1, 1)
                a_cpu = g * (448.0 / bound) / 6.0
                a_gpu = g * (448.0 / bound) * (torch.tensor(1.0) / torch.tensor(6.0))
                n_a += int(a_cpu != a_gpu)
                n_blocks += cpu.numel()
                n_scale += int((cpu != gpu).sum())
                q = blocks.abs() / torch.where(cpu == 0, torch.ones_like(cpu), cpu)
                near = torch.zeros_like(q, dtype=torch.bool)
                tie = torch.zeros_like(q, dtype=torch.bool)
                for th in THRESHOLDS:
                    ulp = torch.tensor(th).nextafter(torch.tensor(float("inf"))) - th
                    near |= (q - th).abs() <= 2 * ulp
                    tie |= q == th
                n_el += q.numel()
                n_risk += int(near.sum())
                n_tie += int(tie.sum())
            out.append(
                {
                    "weights": kind,
                    "four_over_six": four_over_six,
                    "tensors": tensors,
                    "tensors_A_differs": n_a,
                    "blocks": n_blocks,
                    "blocks_scale_differs": n_scale,
                    "elements": n_el,
                    "elements_within_2ulp_of_threshold": n_risk,
                    "elements_on_threshold": n_tie,
                }
            )
    return {"results": out}


def main(argv: List[str]) -> int:
    if len(argv) not in (1, 2):
        print("usage: python -m qrl_golden.modelopt_nvfp4_gap PATH/TO/Model-Optimizer [tensors]", file=sys.stderr)
        return 2
    print(json.dumps(measure(argv[0], int(argv[1]) if len(argv) == 2 else 64), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
