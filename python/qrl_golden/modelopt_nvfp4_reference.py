"""Runs ModelOpt's own NVFP4 static fake-quant code (read from a Model-Optimizer checkout the caller names; not
shipped here) in torch on CPU, for each setting of ``block_sizes.four_over_six`` and the weight calibration
``method`` (``max``, or ``mse`` with the 4/6 stanza). This is the *CPU reading* of code that ModelOpt runs only on
the GPU; ``qrl_golden.modelopt_nvfp4_gap`` counts where the two differ (docs/quantization.md, "ModelOpt's 4/6 flag
and MSE stanza").

ModelOpt does not install here and its NVFP4 fake quant is a Triton kernel (no Triton, no GPU on this machine).
The definitions that carry the arithmetic are taken from ModelOpt's files by name (``ast``) and executed as
written, in torch on CPU:

- ``utils/numeric_utils.py``: ``E2M1_MAX``, ``E4M3_MAX``, ``E4M3_MAX_46``, ``fp8_max_for_normalization``;
- ``tensor_quant.py``: ``_fp8_eager``, ``fp8_eager``, ``scaled_e4m3_impl`` (the CPU branch);
- ``kernels/quantization/gemm/fp4_kernel.py``: ``compute_fp4_scales``;
- ``kernels/quantization/common/nvfp4_quant.py``: ``fp4_round_magnitude``, ``nvfp4_scalar_quant`` (Triton JIT
  functions; ``triton.jit`` is the identity and ``tl.where``/``tl.abs``/``libdevice.isnan`` are torch's, i.e. the
  ``TRITON_INTERPRET`` reading: IEEE float32 division where the GPU's ``/`` is ``div.full.f32``);
- ``utils/core_utils.py``: ``convert_quantization_axis_to_reduce_axis``, ``reduce_sum``;
- ``calib/mse.py``: ``MseCalibrator`` (its base ``_Calibrator`` stubbed to the stored fields).

``reduce_amax`` is a stand-in (``compute_fp4_scales`` reads it only when no global amax is passed, never here).

Only the launch is written here: ``static_blockwise_fp4_fake_quant`` (fp4_kernel.py lines 254–316) calls
``compute_fp4_scales`` and runs ``nvfp4_scalar_quant`` once per block, done below as one broadcast over
``(blocks, 16)``; and ``_mse_quant_func`` (model_calib.py lines 639–662) sets the candidate amax and calls it.

    python -m qrl_golden.modelopt_nvfp4_reference PATH/TO/Model-Optimizer
"""

from __future__ import annotations

import ast
import collections.abc
import json
import math
import os
import sys
import types
from typing import Any, Dict, List


def _definitions(path: str, names: List[str], namespace: Dict[str, Any]) -> None:
    """Executes the top-level functions, classes and assignments called ``names`` of the file at ``path``."""
    with open(path, encoding="utf8") as f:
        source = f.read()
    tree = ast.parse(source)
    found = set()
    for node in tree.body:
        name = None
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            name = node.name
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
        if name in names:
            module = ast.Module(body=[node], type_ignores=[])
            exec(compile(module, path, "exec"), namespace)  # noqa: S102 — ModelOpt's own definition
            found.add(name)
    missing = set(names) - found
    if missing:
        raise SystemExit(f"{path}: no top-level definition of {sorted(missing)}")


def load(root: str) -> Dict[str, Any]:
    """ModelOpt's NVFP4 definitions from the checkout at ``root``, in one namespace."""
    import torch  # noqa: PLC0415
    import torch.nn.functional as F  # noqa: N812, PLC0415

    q = os.path.join(root, "modelopt", "torch", "quantization")
    k = os.path.join(root, "modelopt", "torch", "kernels", "quantization")
    tl = types.SimpleNamespace(where=torch.where, abs=torch.abs, constexpr=object, float32=torch.float32)
    libdevice = types.SimpleNamespace(isnan=torch.isnan)
    triton = types.SimpleNamespace(jit=lambda fn: fn)

    class _Calibrator:  # calib/calibrator.py: the stored fields only
        def __init__(self, num_bits=8, axis=None, unsigned=False):
            self._num_bits, self._axis, self._unsigned = num_bits, axis, unsigned

    ns: Dict[str, Any] = {"torch": torch, "F": F, "math": math, "os": os, "tl": tl, "triton": triton}
    ns.update({"libdevice": libdevice, "_Calibrator": _Calibrator, "Callable": collections.abc.Callable})
    _definitions(os.path.join(q, "utils", "numeric_utils.py"), ["E2M1_MAX", "E4M3_MAX", "E4M3_MAX_46"], ns)
    _definitions(os.path.join(q, "utils", "numeric_utils.py"), ["fp8_max_for_normalization"], ns)
    _definitions(os.path.join(q, "tensor_quant.py"), ["_fp8_eager", "fp8_eager", "scaled_e4m3_impl"], ns)
    _definitions(os.path.join(k, "common", "nvfp4_quant.py"), ["fp4_round_magnitude", "nvfp4_scalar_quant"], ns)
    utils = types.SimpleNamespace()
    _definitions(os.path.join(q, "utils", "core_utils.py"), ["convert_quantization_axis_to_reduce_axis"], ns)
    _definitions(os.path.join(q, "utils", "core_utils.py"), ["reduce_sum"], ns)
    utils.convert_quantization_axis_to_reduce_axis = ns["convert_quantization_axis_to_reduce_axis"]
    utils.reduce_sum = ns["reduce_sum"]
    utils.reduce_amax = lambda x, axis=None, keepdims=True, squeeze_scalar=True: x.abs().amax()
    ns["quant_utils"] = utils
    _definitions(os.path.join(q, "calib", "mse.py"), ["MseCalibrator"], ns)
    # compute_fp4_scales imports scaled_e4m3_impl and reduce_amax from ModelOpt modules: serve the ones above.
    tq = types.ModuleType("modelopt.torch.quantization.tensor_quant")
    tq.scaled_e4m3_impl = ns["scaled_e4m3_impl"]
    um = types.ModuleType("modelopt.torch.quantization.utils")
    um.reduce_amax = utils.reduce_amax
    for name in ["modelopt", "modelopt.torch", "modelopt.torch.quantization"]:
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["modelopt.torch.quantization.tensor_quant"] = tq
    sys.modules["modelopt.torch.quantization.utils"] = um
    _definitions(os.path.join(k, "gemm", "fp4_kernel.py"), ["compute_fp4_scales"], ns)
    return ns


def fake_quant(ns: Dict[str, Any], x: Any, amax: Any, global_amax: Any, four_over_six: bool) -> Any:
    """``static_blockwise_fp4_fake_quant(x, amax, global_amax, True, fp8_max_for_normalization(q))``: the
    scales by ``compute_fp4_scales``, each block by ``nvfp4_scalar_quant`` (x: (blocks, 16), amax: (blocks, 1))."""
    quantizer = types.SimpleNamespace(block_sizes={-1: 16, "four_over_six": four_over_six})
    bound = ns["fp8_max_for_normalization"](quantizer)
    scale = ns["compute_fp4_scales"](amax, global_amax, True, fp8_max_for_normalization=bound)
    return ns["nvfp4_scalar_quant"](x.float(), scale.view(-1, 1), x.shape[-1]).to(x.dtype), scale.view(-1)


def run_case(ns: Dict[str, Any], x: Any, four_over_six: bool, method: str) -> Any:
    """One weight through ModelOpt's flow: max calibration (per-block amax, global amax = their max), then for
    ``mse`` the MseCalibrator with the 4/6 stanza (step 0.5 from 1.0 to 1.5), then the fake quant. The calibrator
    sees the weight as (blocks, 16) with axis 0 (one amax per block), the layout assumed for the static quantizer."""
    import torch  # noqa: PLC0415

    blocks = x.reshape(-1, 16)
    amax = blocks.abs().amax(dim=-1, keepdim=True)
    global_amax = amax.max()
    if method == "mse":

        def quant_func(xx: Any, candidate_amax: Any) -> Any:
            return fake_quant(ns, xx, candidate_amax, global_amax, four_over_six)[0]

        cal = ns["MseCalibrator"](
            amax=amax, axis=0, step_size=0.5, start_multiplier=1.0, stop_multiplier=1.5, quant_func=quant_func
        )
        cal.collect(blocks)
        amax = cal.compute_amax()
    with torch.no_grad():
        return fake_quant(ns, blocks, amax, global_amax, four_over_six)


def main(argv: List[str]) -> int:
    """Prints, for one seeded 8 × 64 weight and each (four_over_six, method), ModelOpt's CPU-read block scales
    and fake-quantized values as float32 bits (JSON), the oracle a future ``modelopt-nvfp4`` preset is checked
    against on CPU."""
    if len(argv) != 1:
        print("usage: python -m qrl_golden.modelopt_nvfp4_reference PATH/TO/Model-Optimizer", file=sys.stderr)
        return 2
    import torch  # noqa: PLC0415

    ns = load(argv[0])
    x = torch.randn(8, 64, generator=torch.Generator().manual_seed(0))
    out = []
    for four_over_six in [False, True]:
        for method in ["max", "mse"]:
            xq, scale = run_case(ns, x, four_over_six, method)
            out.append(
                {
                    "four_over_six": four_over_six,
                    "method": method,
                    "scaleBits": scale.view(torch.int32).tolist(),
                    "valueBits": xq.reshape(-1).view(torch.int32).tolist(),
                }
            )
    print(json.dumps({"xBits": x.reshape(-1).view(torch.int32).tolist(), "settings": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
