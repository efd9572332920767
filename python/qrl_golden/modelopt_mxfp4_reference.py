"""Runs ModelOpt's own ``MXFP4QTensor.quantize`` (``modelopt/torch/quantization/qtensor/mxfp4_tensor.py``, read
from a Model-Optimizer checkout the caller names; not shipped here) on cases written by
``scripts/mxfp4-qat-check.ts`` and reports whether the preset ``modelopt-mxfp4-qtensor`` gives the same E2M1
codes and E8M0 scale bytes, and ``megatron-lite-mxfp4-qat`` the same dequantized values up to the sign of zero.

ModelOpt does not install on this machine (no wheel in the local package sources), but ``MXFP4QTensor.quantize``
needs only torch: the module's one ModelOpt import (``..qtensor.base_qtensor.BaseQuantizedTensor``, the class
base) is replaced by a stand-in before it is loaded, and nothing else of ModelOpt runs.

    python -m qrl_golden.modelopt_mxfp4_reference PATH/TO/mxfp4_tensor.py cases.json
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from typing import Any, Dict, List


def _load_qtensor(path: str) -> Any:
    """``MXFP4QTensor`` from the file at ``path``, loaded as ``modelopt_ref.qtensor.mxfp4_tensor`` with its base stubbed."""
    pkg = types.ModuleType("modelopt_ref")
    pkg.__path__ = []  # a package, so the relative import resolves
    sub = types.ModuleType("modelopt_ref.qtensor")
    sub.__path__ = []
    base = types.ModuleType("modelopt_ref.qtensor.base_qtensor")

    class BaseQuantizedTensor:  # the stored fields only
        def __init__(self, original_shape: Any, original_dtype: Any, quantized_data: Any) -> None:
            self.metadata = {"shape": original_shape, "dtype": original_dtype}
            self._quantized_data = quantized_data

    base.BaseQuantizedTensor = BaseQuantizedTensor
    sys.modules.update({"modelopt_ref": pkg, "modelopt_ref.qtensor": sub, "modelopt_ref.qtensor.base_qtensor": base})
    spec = importlib.util.spec_from_file_location("modelopt_ref.qtensor.mxfp4_tensor", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["modelopt_ref.qtensor.mxfp4_tensor"] = module
    spec.loader.exec_module(module)
    return module.MXFP4QTensor


def check(path: str, cases: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Per case: ModelOpt's codes (unpacked nibbles) and E8M0 bytes against qrl-sim's; its dequantized values
    against the Megatron Lite preset's (which keeps the sign of an exact zero where the stored code is −0)."""
    import torch  # noqa: PLC0415

    qtensor = _load_qtensor(path)
    mismatches: List[Dict[str, Any]] = []
    blocks = 0
    for case in cases:
        rows, cols = case["rows"], case["cols"]
        x = torch.tensor(case["xBits"], dtype=torch.int64).to(torch.int32).view(torch.float32).view(rows, cols)
        q, scale = qtensor.quantize(x, 32)
        packed = q._quantized_data.view(-1)
        codes = torch.stack([packed & 0x0F, packed >> 4], dim=-1).view(-1).tolist()
        scale_bytes = scale.view(-1).tolist()
        deq = q.dequantize(dtype=torch.float32, scale=scale, block_sizes={-1: 32}).view(-1)
        blocks += len(scale_bytes)
        if codes != case["codes"] or scale_bytes != case["scaleCodes"]:
            bad = [i for i, (a, b) in enumerate(zip(codes, case["codes"])) if a != b]
            bad_s = [i for i, (a, b) in enumerate(zip(scale_bytes, case["scaleCodes"])) if a != b]
            mismatches.append(
                {
                    "case": case["name"],
                    "what": "codes/scale bytes",
                    "elements": bad[:8],
                    "blocks": bad_s[:8],
                    "modelopt": [codes[i] for i in bad[:8]] + [scale_bytes[i] for i in bad_s[:8]],
                    "qrl": [case["codes"][i] for i in bad[:8]] + [case["scaleCodes"][i] for i in bad_s[:8]],
                }
            )
        lite = torch.tensor(case["liteBits"], dtype=torch.int64).to(torch.int32)
        # Megatron Lite's fake quant is sign(x)·level·2^e: the same values as ModelOpt's dequant except that an
        # exact zero keeps its sign (ModelOpt stores it as −0). Compare bits, a zero's sign bit cleared on both.
        zero = (deq == 0).view(-1)
        mine = torch.where(zero, torch.zeros_like(lite), lite)
        theirs = torch.where(zero, torch.zeros_like(lite), deq.view(torch.int32))
        if not torch.equal(mine, theirs):
            bad = torch.nonzero(mine != theirs).view(-1).tolist()
            mismatches.append({"case": case["name"], "what": "dequantized vs megatron-lite", "elements": bad[:8]})
    return {"cases": len(cases), "blocks": blocks, "mismatches": mismatches}


def main(argv: List[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m qrl_golden.modelopt_mxfp4_reference PATH/TO/mxfp4_tensor.py cases.json", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf8") as f:
        cases = json.load(f)
    print(json.dumps(check(argv[0], cases)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
