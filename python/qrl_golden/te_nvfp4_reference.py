"""Runs TransformerEngine's own PyTorch NVFP4 reference (``reference_nvfp4.py``, read from a TE checkout the
caller names; not shipped here) on cases written by ``scripts/te-nvfp4-check.ts`` and reports whether the
4over6 and row-scaled presets of qrl-sim give the same codes and E4M3 scale codes.

TE does not install on this machine (CUDA build), but ``NVFP4QuantizerRef._quantize_blockwise_reference``
needs only torch: the module's TE imports (``custom_recipes.gemm``, ``reference_utils``,
``quantized_tensor``) are replaced by empty stand-ins before it is loaded, and nothing else of TE runs.

    python -m qrl_golden.te_nvfp4_reference PATH/TO/reference_nvfp4.py cases.json
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from typing import Any, Dict, List


def _load_reference(path: str) -> Any:
    """The TE module at ``path`` with its TE imports stubbed (class bases and annotations only)."""
    names = [
        "transformer_engine",
        "transformer_engine.pytorch",
        "transformer_engine.pytorch.custom_recipes",
        "transformer_engine.pytorch.custom_recipes.gemm",
        "transformer_engine.pytorch.custom_recipes.reference_utils",
        "transformer_engine.pytorch.quantized_tensor",
    ]
    for name in names:
        sys.modules.setdefault(name, types.ModuleType(name))
    recipes = sys.modules["transformer_engine.pytorch.custom_recipes"]
    gemm = sys.modules["transformer_engine.pytorch.custom_recipes.gemm"]
    utils = sys.modules["transformer_engine.pytorch.custom_recipes.reference_utils"]
    qt = sys.modules["transformer_engine.pytorch.quantized_tensor"]

    class _Quantizer:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

    class _GemmType:
        FPROP = "fprop"

    class _Fp4Formats:
        E2M1 = "e2m1"

    qt.QuantizedTensorStorage = object
    qt.Quantizer = _Quantizer
    gemm.GEMMType = _GemmType
    gemm.MMParams = object
    utils.Fp4Formats = _Fp4Formats
    recipes.gemm = gemm
    recipes.reference_utils = utils
    spec = importlib.util.spec_from_file_location("te_reference_nvfp4", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check(reference_path: str, cases: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Per case: TE's ``_quantize_blockwise_reference`` (1×16, no RHT) against the codes qrl-sim wrote."""
    import torch  # noqa: PLC0415

    ref = _load_reference(reference_path).NVFP4QuantizerRef
    mismatches: List[Dict[str, Any]] = []
    blocks = 0
    for case in cases:
        x = torch.tensor(case["x"], dtype=torch.float32).view(case["rows"], case["cols"])
        row = bool(case.get("rowScaled"))
        if row:
            global_amax = torch.max(torch.abs(x), dim=1).values.to(torch.float32)
        else:
            global_amax = torch.max(torch.abs(x)).to(torch.float32).view(1)
        kwargs: Dict[str, Any] = {"pow_2_scales": False, "row_scaled_nvfp4": row, "eps": 0.0}
        if case.get("error"):
            kwargs.update(
                nvfp4_use_4over6=True,
                nvfp4_e4m3_max=case["tensorBound"],
                nvfp4_4over6_err_mode=case["error"].upper(),
            )
        qx, sx = ref._quantize_blockwise_reference(x, global_amax, 16, 1, **kwargs)
        codes = torch.stack([qx & 15, qx >> 4], dim=-1).reshape(-1).tolist()
        scale_codes = sx.contiguous().view(torch.uint8).reshape(-1).tolist()
        blocks += len(scale_codes)
        if codes != case["codes"] or scale_codes != case["scaleCodes"]:
            mismatches.append(
                {
                    "case": case["name"],
                    "codes": sum(a != b for a, b in zip(codes, case["codes"])),
                    "scaleCodes": sum(a != b for a, b in zip(scale_codes, case["scaleCodes"])),
                }
            )
    return {"cases": len(cases), "blocks": blocks, "mismatches": mismatches}


def main(argv: List[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m qrl_golden.te_nvfp4_reference REFERENCE_NVFP4_PY CASES_JSON", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf8") as f:
        cases = json.load(f)
    print(json.dumps(check(argv[0], cases)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
