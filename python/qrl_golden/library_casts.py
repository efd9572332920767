"""Casts of the real libraries against the ``library-casts`` golden suite.

Every cast profile named after a library (``torch-2.13``, ``ml-dtypes``, ``ort-1.30``, ``onnx-sat``)
is compared code for code with that library on the suite's inputs: every bf16 bit pattern and
every tie between bf16 neighbours, sampled float32 subnormals, random float32 bit patterns,
specials, and the format's own codes and ties. ``compare_casts`` returns one dict per case;
``python -m qrl_golden.torch_check`` prints them. torch runs on the requested device; ml_dtypes
and onnxruntime run on the CPU (they have no other).
"""

from __future__ import annotations

import ctypes
from typing import Callable, Dict, List, Optional

import numpy as np

from .reader import load


class Unavailable(Exception):
    """The library is not importable, or has no such format."""


# ---------------------------------------------------------------------------------------------
# torch: Tensor.to(dtype) on the device


TORCH_DTYPES = {
    "e4m3fn": "float8_e4m3fn", "e4m3fnuz": "float8_e4m3fnuz", "e5m2": "float8_e5m2", "e5m2fnuz": "float8_e5m2fnuz",
    "e8m0": "float8_e8m0fnu", "bf16": "bfloat16", "fp16": "float16",
}


def torch_cast(fmt: str, x: np.ndarray, device: str = "cpu") -> np.ndarray:
    """Codes of ``torch.from_numpy(x).to(device).to(dtype)`` (uint8 or uint16)."""
    try:
        import torch
    except ImportError as e:
        raise Unavailable(f"torch is not importable ({e})")
    name = TORCH_DTYPES.get(fmt)
    if name is None or not hasattr(torch, name):
        raise Unavailable(f"torch {torch.__version__} has no {fmt}")
    y = torch.from_numpy(x).to(device).to(getattr(torch, name))
    if y.element_size() == 1:
        return y.view(torch.uint8).cpu().numpy()
    return y.view(torch.int16).cpu().numpy().view(np.uint16)


# ---------------------------------------------------------------------------------------------
# ml_dtypes: ndarray.astype (numpy's float16 for fp16)


ML_DTYPES = {
    "e4m3fn": "float8_e4m3fn", "e4m3fnuz": "float8_e4m3fnuz", "e5m2": "float8_e5m2", "e5m2fnuz": "float8_e5m2fnuz",
    "e3m2": "float6_e3m2fn", "e2m3": "float6_e2m3fn", "e2m1": "float4_e2m1fn", "e8m0": "float8_e8m0fnu", "bf16": "bfloat16",
}
NARROW_BITS = {"e3m2": 6, "e2m3": 6, "e2m1": 4}


def ml_dtypes_cast(fmt: str, x: np.ndarray, device: str = "cpu") -> np.ndarray:
    """Codes of ``x.astype(ml_dtypes.<dtype>)``; FP4/FP6 codes are the low bits of their byte."""
    if fmt == "fp16":
        with np.errstate(invalid="ignore", over="ignore"):
            return x.astype(np.float16).view(np.uint16)
    try:
        import ml_dtypes
    except ImportError as e:
        raise Unavailable(f"ml_dtypes is not importable ({e})")
    name = ML_DTYPES.get(fmt)
    if name is None or not hasattr(ml_dtypes, name):
        raise Unavailable(f"ml_dtypes has no {fmt}")
    with np.errstate(invalid="ignore", over="ignore"):
        y = x.astype(getattr(ml_dtypes, name))
    codes = y.view(np.uint16 if y.dtype.itemsize == 2 else np.uint8)
    if fmt in NARROW_BITS:
        codes = codes & ((1 << NARROW_BITS[fmt]) - 1)
    return codes


# ---------------------------------------------------------------------------------------------
# onnxruntime: a one-node Cast model, encoded here (the onnx package is not needed)

ONNX_TYPES = {"e4m3fn": 17, "e4m3fnuz": 18, "e5m2": 19, "e5m2fnuz": 20, "e2m1": 23, "e8m0": 24, "bf16": 16, "fp16": 10}
# First Cast opset that knows the type: 19 (float8 and `saturate`), 23 (float4e2m1), 24 (float8e8m0, `round_mode`).
ONNX_OPSET = {"e2m1": 23, "e8m0": 24}
FLOAT8 = ("e4m3fn", "e4m3fnuz", "e5m2", "e5m2fnuz", "e8m0")


def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | 0x80 if n else b)
        if not n:
            return bytes(out)


def _field(num: int, payload) -> bytes:
    """A protobuf field: varint for int payloads, length-delimited for bytes/str."""
    if isinstance(payload, int):
        return _varint(num << 3) + _varint(payload)
    if isinstance(payload, str):
        payload = payload.encode()
    return _varint((num << 3) | 2) + _varint(len(payload)) + payload


def _attr(name: str, value) -> bytes:
    # AttributeProto: name = 1, i = 3, s = 4, type = 20 (INT = 2, STRING = 3)
    if isinstance(value, int):
        return _field(5, _field(1, name) + _field(20, 2) + _field(3, value))
    return _field(5, _field(1, name) + _field(20, 3) + _field(4, value))


def onnx_cast_model(fmt: str, saturate: int) -> bytes:
    """ModelProto bytes of y = Cast(x: float, to=fmt[, saturate][, round_mode='nearest'])."""
    to = ONNX_TYPES[fmt]
    opset = ONNX_OPSET.get(fmt, 19)
    attrs = _attr("to", to)
    if fmt in FLOAT8:
        attrs += _attr("saturate", saturate)
    if fmt == "e8m0":
        attrs += _attr("round_mode", "nearest")
    node = _field(1, "x") + _field(2, "y") + _field(4, "Cast") + attrs  # NodeProto: input 1, output 2, op_type 4, attribute 5
    value_info = lambda n, t: _field(1, n) + _field(2, _field(1, _field(1, t)))  # name, TypeProto.tensor_type.elem_type
    graph = _field(1, node) + _field(2, "cast") + _field(11, value_info("x", 1)) + _field(12, value_info("y", to))
    ir = 9 if opset <= 19 else 10 if opset <= 22 else 11  # onnx docs/Versioning.md
    return _field(1, ir) + _field(2, "qrl-golden") + _field(7, graph) + _field(8, _field(1, "") + _field(2, opset))


def ort_cast(fmt: str, x: np.ndarray, saturate: int) -> np.ndarray:
    """Codes of onnxruntime's CPU Cast kernel (graph optimizations off, one thread)."""
    try:
        import onnxruntime as ort
    except ImportError as e:
        raise Unavailable(f"onnxruntime is not importable ({e})")
    if fmt not in ONNX_TYPES:
        raise Unavailable(f"onnxruntime has no {fmt}")
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.log_severity_level = 4
    try:
        sess = ort.InferenceSession(onnx_cast_model(fmt, saturate), so, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime 1.30 CPU: "Could not find an implementation for Cast(23)" (float4e2m1)
        raise Unavailable(f"onnxruntime {ort.__version__} CPU has no Cast kernel to {fmt} ({str(e).splitlines()[0][:120]})")
    out = sess.run_with_ort_values(["y"], {"x": ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(x))})[0]
    n = x.size
    if fmt == "e2m1":  # two codes per byte, element 0 in the low nibble (onnx docs/technical/float4.md)
        raw = np.ctypeslib.as_array((ctypes.c_uint8 * ((n + 1) // 2)).from_address(out.data_ptr())).copy()
        return np.stack([raw & 0x0F, raw >> 4], axis=1).reshape(-1)[:n]
    width = ctypes.c_uint16 if fmt in ("bf16", "fp16") else ctypes.c_uint8
    return np.ctypeslib.as_array((width * n).from_address(out.data_ptr())).copy()


# ---------------------------------------------------------------------------------------------
# The comparison

#: profile → (library label, cast function(fmt, x, device)); torch alone runs on the device.
LIBRARIES: Dict[str, tuple] = {
    "torch-2.13": ("torch", torch_cast),
    "torch-2.13-scalar": ("torch", torch_cast),
    "torch-2.11": ("torch", torch_cast),
    "ml-dtypes": ("ml_dtypes", ml_dtypes_cast),
    "ort-1.30": ("onnxruntime", lambda fmt, x, device="cpu": ort_cast(fmt, x, 0)),
    "onnx-sat": ("onnxruntime", lambda fmt, x, device="cpu": ort_cast(fmt, x, 1)),
}


#: (profile, format) → the CPU capabilities (``torch.backends.cpu.get_cpu_capability()``) whose kernel the
#: profile models, where that differs between capabilities: torch's vectorized fp32 → bf16 conversion
#: (aten/src/ATen/cpu/vec/vec256|vec512 ``cvtfp32_bf16``) writes NaN as 0xFFFF, the scalar one
#: (c10/util/BFloat16.h ``round_to_nearest_even``, taken under ATEN_CPU_CAPABILITY=default) as 0x7FC0.
#: On another capability, or on CUDA, such a case is an observation: compared and printed, never a failure.
#: Every other (profile, format) is expected on every x86-64 capability (measured under DEFAULT, AVX2 and AVX512).
KERNEL_CAPABILITIES: Dict[tuple, frozenset] = {
    ("torch-2.13", "bf16"): frozenset({"AVX2", "AVX512"}),
    ("torch-2.13-scalar", "bf16"): frozenset({"DEFAULT"}),
}


def cpu_capability() -> str:
    """``torch.backends.cpu.get_cpu_capability()`` (DEFAULT, AVX2, AVX512, …), or "?" without torch."""
    try:
        import torch
    except ImportError:
        return "?"
    return str(torch.backends.cpu.get_cpu_capability())


def expected_here(profile: str, fmt: str, device: str) -> tuple:
    """(whether the case is an expectation on this device and CPU capability, the capability it is keyed by or "")."""
    kernels = KERNEL_CAPABILITIES.get((profile, fmt))
    if device != "cpu" and profile.startswith("torch-") and fmt in ("bf16", "fp16"):
        # torch's CUDA casts canonicalise a bf16/fp16 NaN to 0x7FFF (measured on an H200, torch 2.11:
        # test/fixtures/h200/torch-check-cuda.md); the profiles model the CPU kernels, so on CUDA these are
        # observations. The float8 casts agree on CUDA and stay expected.
        return False, "CPU"
    if kernels is None:
        return True, ""
    return cpu_capability() in kernels, "/".join(sorted(kernels))


def _torch_release_is(release: str) -> bool:
    """Whether the installed torch is ``release`` (major.minor): a ``torch-X.Y`` profile is checked only against torch X.Y."""
    version = library_version("torch")
    return version is not None and version.split("+")[0].split(".")[:2] == release.split(".")[:2]


def library_version(label: str) -> Optional[str]:
    try:
        mod = __import__(label)
    except ImportError:
        return None
    return getattr(mod, "__version__", None)


def compare_casts(golden_dir: str, device: str = "cpu", where: Optional[Callable[[dict], bool]] = None) -> List[dict]:
    """One dict per ``library-casts`` case: ``case``, ``profile``, ``format``, ``library``, ``device``,
    ``compared``, ``agreeing``, ``max_abs_diff`` (largest |code difference|, 0 when all agree),
    ``expected`` (False: the profile models another CPU kernel than the one running here, see
    ``KERNEL_CAPABILITIES``; the case is then an observation), ``kernel`` (the capabilities it is keyed by, or "")
    and ``note`` (the first differing inputs, or why the case did not run; then ``compared`` is 0)."""
    golden = load(golden_dir)
    if "library-casts" not in golden.suites:
        raise FileNotFoundError(f"{golden_dir}: no 'library-casts' suite (qrl-sim golden --suite library-casts --out DIR)")
    rows = []
    for case in golden.cases("library-casts", where=where):
        fmt, profile = case.params["format"], case.params["profile"]
        label, cast = LIBRARIES.get(profile, (None, None))
        expected, kernel = expected_here(profile, fmt, device if label == "torch" else "cpu")
        row = {"case": case.name, "profile": profile, "format": fmt, "library": label, "device": device if label == "torch" else "cpu",
               "compared": 0, "agreeing": 0, "max_abs_diff": 0, "expected": expected, "kernel": kernel, "note": ""}
        rows.append(row)
        if cast is None:
            row["note"] = f"no library is known for profile {profile}"
            continue
        release = profile[len("torch-"):].split("-")[0]  # torch-2.13-scalar: torch 2.13's scalar kernel
        if label == "torch" and not _torch_release_is(release):
            row["note"] = f"not available: torch {library_version('torch')} is installed, the profile is torch {release}'s"
            continue
        arrays = case.arrays()
        x, want = arrays["input"], arrays["codes"].astype(np.int64)
        try:
            got = np.asarray(cast(fmt, x, device)).astype(np.int64)
        except Unavailable as e:
            row["note"] = f"not available: {e}"
            continue
        bad = np.flatnonzero(got != want)
        row["compared"] = int(x.size)
        row["agreeing"] = int(x.size - bad.size)
        row["max_abs_diff"] = int(np.abs(got - want).max()) if bad.size else 0
        if bad.size:
            bits = x.view(np.uint32)
            shown = ", ".join(f"{bits[k]:#010x} → {got[k]:#x} (profile {want[k]:#x})" for k in bad[:3])
            row["note"] = f"{bad.size} differ, e.g. {shown}"
    return rows
