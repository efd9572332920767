"""Captures torch GEMMs on a device, operands and outputs, for comparison with qrl-sim's accumulator models.

    python -m qrl_golden.gemm_capture --device cuda OUT_DIR

Writes ``OUT_DIR/gemm-capture.json`` (the cases: op, shape, settings, byte offsets) and
``OUT_DIR/gemm-capture.bin`` (little-endian arrays: e4m3fn codes as uint8, scales and outputs as
float32, bf16 outputs as uint16 codes). ``scripts/gemm-capture-compare.ts`` then runs every qrl-sim
accumulator model on the same operands and prints, per case, which model reproduces the device bit
for bit (and the ulp distance of the others). The golden ``gemm`` suite holds 16 small cases; this
adds the shapes where a Hopper accumulator shows itself: K of thousands, operands whose exponents
spread over the whole E4M3 range, ``use_fast_accum`` on and off, per-tensor and row-wise scales.

Operands are drawn on the CPU from a seeded generator, so the same seed gives the same operands on
any device; only the outputs come from ``--device``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Dict, List

import numpy as np

SHAPES = [(16, 16, 32), (16, 32, 128), (32, 32, 512), (64, 64, 1024), (32, 64, 4096), (16, 16, 16384)]


def _e4m3(gen, m: int, k: int, spread: bool):
    import torch

    x = torch.randn((m, k), generator=gen, dtype=torch.float32)
    if spread:
        # exponents spread over about 2^-8 … 2^8: products of very different sizes meet in one chunk
        x = x * torch.exp2(torch.randint(-8, 9, (m, k), generator=gen).float())
    return x.clamp(-448, 448).to(torch.float8_e4m3fn)


def capture(device: str, seed: int = 0) -> tuple:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    gen = torch.Generator().manual_seed(seed)
    blob = bytearray()
    cases: List[Dict] = []

    def put(arr: np.ndarray) -> Dict:
        arr = np.ascontiguousarray(arr)
        off = len(blob)
        blob.extend(arr.tobytes())
        return {"offset": off, "bytes": arr.nbytes, "dtype": str(arr.dtype), "shape": list(arr.shape)}

    for (m, n, k) in SHAPES:
        for spread in (False, True):
            a8 = _e4m3(gen, m, k, spread)
            b8 = _e4m3(gen, n, k, spread)
            base = {"m": m, "n": n, "k": k, "spread": spread, "aCodes": put(a8.view(torch.uint8).numpy()), "bCodes": put(b8.view(torch.uint8).numpy())}
            A = a8.to(device)
            Bt = b8.to(device).t()  # column-major (k, n) as _scaled_mm wants
            for fast in (False, True):
                for scaled in (False, True):
                    # scales with full 24-bit mantissas (as amax/448 gives), so that epilogue orders differ
                    sa = (torch.rand((), generator=gen) + 0.5) / 64 if scaled else torch.tensor(1.0)
                    sb = (torch.rand((), generator=gen) + 0.5) * 2 if scaled else torch.tensor(1.0)
                    sa, sb = sa.float(), sb.float()
                    try:
                        out = torch._scaled_mm(A, Bt, scale_a=sa.to(device), scale_b=sb.to(device), out_dtype=torch.float32, use_fast_accum=fast)
                        case = dict(base, op="scaled_mm-tensor", fastAccum=fast, aScale=float(sa), bScale=float(sb), out=put(out.float().cpu().numpy()))
                    except Exception as e:  # noqa: BLE001 - report what the device refuses
                        case = dict(base, op="scaled_mm-tensor", fastAccum=fast, error=f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
                    cases.append(case)
                # row-wise scales (one per row of A, one per row of B): torch requires a bf16 output
                ra = (torch.rand((m, 1), generator=gen) + 0.5).float()
                rb = (torch.rand((1, n), generator=gen) + 0.5).float()
                try:
                    out = torch._scaled_mm(A, Bt, scale_a=ra.to(device), scale_b=rb.to(device), out_dtype=torch.bfloat16, use_fast_accum=fast)
                    case = dict(base, op="scaled_mm-rowwise", fastAccum=fast, aRowScales=put(ra.numpy().reshape(m)), bRowScales=put(rb.numpy().reshape(n)),
                                outBf16=put(out.cpu().view(torch.int16).numpy().astype(np.uint16)))
                except Exception as e:  # noqa: BLE001
                    case = dict(base, op="scaled_mm-rowwise", fastAccum=fast, error=f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
                cases.append(case)
            # bf16 and fp32 matmul on the dequantized operands (exact in bf16): the device's ordinary GEMMs
            af, bf = a8.float(), b8.float()
            out = torch.matmul(af.to(device).to(torch.bfloat16), bf.to(device).to(torch.bfloat16).t())
            cases.append(dict(base, op="matmul-bf16", outBf16=put(out.cpu().view(torch.int16).numpy().astype(np.uint16))))
            out = torch.matmul(af.to(device), bf.to(device).t())
            cases.append(dict(base, op="matmul-fp32", out=put(out.cpu().numpy())))
    info = {"device": device, "torch": torch.__version__, "seed": seed}
    if device.startswith("cuda"):
        info["name"] = torch.cuda.get_device_name(torch.device(device))
        info["capability"] = ".".join(str(v) for v in torch.cuda.get_device_capability(torch.device(device)))
    return {"schema": "qrl-gemm-capture/1", "info": info, "cases": cases}, bytes(blob)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m qrl_golden.gemm_capture", description=__doc__.splitlines()[0])
    ap.add_argument("out", help="output directory")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    import torch

    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("gemm_capture: --device cuda: CUDA is not available here", file=sys.stderr)
        return 2
    manifest, blob = capture(a.device, a.seed)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "gemm-capture.bin"), "wb") as f:
        f.write(blob)
    with open(os.path.join(a.out, "gemm-capture.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    errors = sum(1 for c in manifest["cases"] if "error" in c)
    print(f"gemm_capture: {len(manifest['cases'])} cases on {manifest['info']}, {len(blob)} bytes, {errors} refused by the device")
    return 0


if __name__ == "__main__":
    sys.exit(main())
