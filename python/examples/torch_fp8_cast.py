"""Check torch's float32 → float8 cast against the golden `casts` suite (ml_dtypes when torch cannot).

    python3 torch_fp8_cast.py DIR      # DIR from: qrl-sim golden --suite casts --out DIR

torch 2.13's CPU torch.Tensor.to(torch.float8_e4m3fn) saturates finite overflow and ±Inf to ±448
and keeps a NaN's sign: the `torch-2.13` profile (before PyTorch PR 178817, torch ≤ 2.11, the
`torch-2.11` profile: overflow → NaN). Without torch float8 the same check runs with ml_dtypes
against the `ml-dtypes` profile; with neither it skips (exit 0).
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import qrl_golden  # noqa: E402


def torch_cast():
    try:
        import torch
    except ImportError:
        return None
    if not hasattr(torch, "float8_e4m3fn"):
        print(f"torch {torch.__version__} has no float8 dtypes")
        return None
    dtypes = {"e4m3fn": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}

    def cast(fmt, x):
        return torch.from_numpy(x).to(dtypes[fmt])  # a float8 tensor; the reader compares its codes

    return "torch-2.13", cast


def ml_dtypes_cast():
    try:
        import ml_dtypes
    except ImportError:
        return None
    dtypes = {"e4m3fn": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}
    return "ml-dtypes", lambda fmt, x: x.astype(dtypes[fmt])


def main(root: str) -> int:
    backend = torch_cast() or ml_dtypes_cast()
    if backend is None:
        print("skipped: neither torch with float8 nor ml_dtypes is importable")
        return 0
    profile, cast = backend
    golden = qrl_golden.load(root)
    failed = 0
    for fmt in ("e4m3fn", "e5m2"):
        for case in golden.cases("casts", format=fmt, profile=profile, mode="rne"):
            mismatches = case.compare({"codes": cast(fmt, case.inputs["input"])})
            print(f"{case.name}: {'ok' if not mismatches else mismatches[0]}")
            failed += bool(mismatches)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("QRL_GOLDEN_DIR", "golden")))
