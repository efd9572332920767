"""qrl-golden/1 reader: manifest, safetensors parsing with numpy, compare rules and readable diffs.

Not a safetensors library: it reads the dtypes qrl-sim writes (F64, F32, I32, U32, U16, U8,
F8_E4M3, F8_E5M2); float8 tensors come back as uint8 codes unless ml_dtypes is installed and
``f8="ml_dtypes"`` is asked for.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Union

import numpy as np

SCHEMA = "qrl-golden/1"

_NUMPY_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "I32": np.dtype("<i4"),
    "U32": np.dtype("<u4"),
    "U16": np.dtype("<u2"),
    "U8": np.dtype("u1"),
    "F8_E4M3": np.dtype("u1"),
    "F8_E5M2": np.dtype("u1"),
}
_BITS_VIEW = {"F64": np.dtype("<u8"), "F32": np.dtype("<u4")}

Rule = Union[str, Mapping[str, float]]


def read_safetensors(path: str, f8: str = "codes") -> Dict[str, np.ndarray]:
    """Reads a safetensors file into numpy arrays (F8 as uint8 codes, or ml_dtypes float8 with f8="ml_dtypes")."""
    with open(path, "rb") as fh:
        raw = fh.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    body = memoryview(raw)[8 + n :]
    out: Dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = info["dtype"]
        if dtype not in _NUMPY_DTYPES:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dtype!r}")
        begin, end = info["data_offsets"]
        arr = np.frombuffer(body[begin:end], dtype=_NUMPY_DTYPES[dtype]).reshape(info["shape"]).copy()
        if dtype.startswith("F8_") and f8 == "ml_dtypes":
            import ml_dtypes  # noqa: PLC0415

            arr = arr.view(ml_dtypes.float8_e4m3fn if dtype == "F8_E4M3" else ml_dtypes.float8_e5m2)
        out[name] = arr
    return out


@dataclass
class Mismatch:
    """The first element of a tensor that breaks its compare rule, and how many do."""

    tensor: str
    index: tuple
    got: float
    want: float
    got_hex: str
    want_hex: str
    count: int
    total: int
    rule: Rule

    def __str__(self) -> str:
        return (
            f"{self.tensor}[{', '.join(map(str, self.index))}]: got {_fmt(self.got)} ({self.got_hex}), "
            f"expected {_fmt(self.want)} ({self.want_hex}) — {self.count} of {self.total} differ ({rule_text(self.rule)})"
        )


class GoldenMismatch(AssertionError):
    """Raised by :meth:`Case.assert_matches`; the message lists every mismatching tensor."""

    def __init__(self, case: "Case", mismatches: List[Mismatch]):
        self.case = case
        self.mismatches = mismatches
        lines = [f"{case.file}: {case.description}", f"params: {json.dumps(case.params)}"]
        lines += [f"  {m}" for m in mismatches]
        super().__init__("\n".join(lines))


def _fmt(v: float) -> str:
    if isinstance(v, float) and v == 0 and np.signbit(v):
        return "-0"
    return repr(v)


def rule_text(rule: Rule) -> str:
    if rule == "bitwise":
        return "bitwise"
    if "ulp" in rule:
        return f"ulp ≤ {rule['ulp']}"
    return f"rtol {rule['rtol']} atol {rule['atol']}"


def _hex(v: Any, dtype: str) -> str:
    if dtype in _BITS_VIEW:
        width = 16 if dtype == "F64" else 8
        bits = np.array([v], dtype=_NUMPY_DTYPES[dtype]).view(_BITS_VIEW[dtype])[0]
        return f"0x{int(bits):0{width}x}"
    width = {"U16": 4, "U32": 8, "I32": 8}.get(dtype, 2)
    return f"0x{int(v) & (16 ** width - 1):0{width}x}"


def _ulp_distance(a: np.ndarray, b: np.ndarray, dtype: str) -> np.ndarray:
    """Units in the last place between floats of ``dtype`` (+0 and −0 coincide), as float64."""
    width = 64 if dtype == "F64" else 32
    ints = np.int64 if width == 64 else np.int32
    ma = (a.view(_BITS_VIEW[dtype]) & ((1 << (width - 1)) - 1)).astype(ints).astype(np.int64)
    mb = (b.view(_BITS_VIEW[dtype]) & ((1 << (width - 1)) - 1)).astype(ints).astype(np.int64)
    same = np.signbit(a) == np.signbit(b)
    return np.where(same, np.abs(ma - mb).astype(np.float64), ma.astype(np.float64) + mb.astype(np.float64))


def compare(got: Any, want: np.ndarray, rule: Rule, dtype: str, name: str = "tensor") -> Optional[Mismatch]:
    """Compares ``got`` (anything numpy can convert; torch tensors via .numpy()) with ``want`` by ``rule``."""
    if hasattr(got, "detach"):
        got = got.detach().cpu()
        if "float8" in str(got.dtype):
            got = got.view(__import__("torch").uint8)
        got = got.numpy()
    ndt = _NUMPY_DTYPES[dtype]
    got = np.asarray(got)
    if got.dtype.itemsize == 1 and ndt == np.dtype("u1") and got.dtype != ndt:
        got = got.view(np.uint8)  # ml_dtypes float8 arrays: compare their codes
    if got.shape != want.shape:
        if got.size != want.size:
            raise AssertionError(f"{name}: got shape {got.shape}, expected {want.shape}")
        got = got.reshape(want.shape)
    if rule == "bitwise":
        if dtype in _BITS_VIEW:
            ok = got.astype(ndt).view(_BITS_VIEW[dtype]) == want.view(_BITS_VIEW[dtype])
        else:
            ok = got.astype(np.int64) == want.astype(np.int64)
    else:
        g = got.astype(np.float64) if dtype not in _BITS_VIEW else got.astype(ndt)
        w = want if dtype in _BITS_VIEW else want.astype(np.float64)
        gn, wn = np.isnan(g.astype(np.float64)), np.isnan(w.astype(np.float64))
        both_nan = gn & wn
        finite = np.isfinite(g.astype(np.float64)) & np.isfinite(w.astype(np.float64))
        exact_inf = (~finite) & (~gn) & (~wn) & (g.astype(np.float64) == w.astype(np.float64))
        if "ulp" in rule:
            if dtype in _BITS_VIEW:
                dist = _ulp_distance(np.where(finite, g, 0).astype(ndt), np.where(finite, w, 0).astype(ndt), dtype)
                close = finite & (dist <= rule["ulp"])
            else:
                close = finite & (np.abs(g - w) <= rule["ulp"])
        else:
            g64, w64 = g.astype(np.float64), w.astype(np.float64)
            with np.errstate(invalid="ignore", over="ignore"):
                close = finite & (np.abs(g64 - w64) <= rule["atol"] + rule["rtol"] * np.abs(w64))
        ok = both_nan | exact_inf | close
    ok = np.asarray(ok, dtype=bool)
    if ok.all():
        return None
    bad = np.argwhere(~ok.reshape(want.shape) if want.ndim else ~ok.reshape(()))
    index = tuple(int(i) for i in bad[0]) if want.ndim else ()
    gv = got[index] if want.ndim else got[()]
    wv = want[index] if want.ndim else want[()]
    as_py = (lambda v: float(v)) if dtype.startswith("F") and not dtype.startswith("F8") else (lambda v: int(v))
    return Mismatch(name, index, as_py(gv), as_py(wv), _hex(gv, dtype), _hex(wv, dtype), int((~ok).sum()), int(want.size), rule)


@dataclass
class Case:
    """One golden case: parameters, input tensors, expected tensors and their compare rules."""

    suite: str
    file: str
    description: str
    params: Dict[str, Any]
    tensors: Dict[str, Dict[str, Any]]
    root: str
    _data: Optional[Dict[str, np.ndarray]] = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return os.path.basename(self.file)[: -len(".safetensors")]

    def arrays(self) -> Dict[str, np.ndarray]:
        """Every tensor of the case (read on first use)."""
        if self._data is None:
            self._data = read_safetensors(os.path.join(self.root, self.file))
            for name, info in self.tensors.items():
                if list(self._data[name].shape) != list(info["shape"]):
                    raise ValueError(f"{self.file}: tensor {name} has shape {self._data[name].shape}, manifest says {info['shape']}")
        return self._data

    @property
    def inputs(self) -> Dict[str, np.ndarray]:
        return {k: v for k, v in self.arrays().items() if self.tensors[k]["role"] == "input"}

    @property
    def expected(self) -> Dict[str, np.ndarray]:
        return {k: v for k, v in self.arrays().items() if self.tensors[k]["role"] == "expected"}

    def compare(self, outputs: Mapping[str, Any], rules: Optional[Mapping[str, Rule]] = None) -> List[Mismatch]:
        """Compares the outputs given (a subset of the expected tensors) by their rules (or ``rules`` overrides)."""
        found = []
        for name, got in outputs.items():
            if name not in self.tensors or self.tensors[name]["role"] != "expected":
                known = ", ".join(k for k, v in self.tensors.items() if v["role"] == "expected")
                raise KeyError(f"{self.file}: no expected tensor {name!r} (expected tensors: {known})")
            info = self.tensors[name]
            rule = (rules or {}).get(name, info["compare"])
            m = compare(got, self.arrays()[name], rule, info["dtype"], name)
            if m is not None:
                found.append(m)
        return found

    def assert_matches(self, outputs: Mapping[str, Any], rules: Optional[Mapping[str, Rule]] = None) -> None:
        """Raises :class:`GoldenMismatch` with a readable diff when any output breaks its rule."""
        found = self.compare(outputs, rules)
        if found:
            raise GoldenMismatch(self, found)


class Golden:
    """A golden directory: its manifest and cases."""

    def __init__(self, root: str):
        self.root = root
        with open(os.path.join(root, "manifest.json"), encoding="utf-8") as fh:
            self.manifest = json.load(fh)
        if self.manifest.get("schema") != SCHEMA:
            raise ValueError(f"{root}/manifest.json: schema {self.manifest.get('schema')!r}, this reader knows {SCHEMA!r}")

    @property
    def suites(self) -> List[str]:
        return list(self.manifest["suites"])

    def cases(self, suite: str, where: Optional[Callable[[Dict[str, Any]], bool]] = None, **params: Any) -> Iterator[Case]:
        """The cases of ``suite`` whose params equal every keyword given and satisfy ``where``."""
        if suite not in self.manifest["suites"]:
            raise KeyError(f"{self.root}: no suite {suite!r} (suites: {', '.join(self.suites)})")
        for c in self.manifest["suites"][suite]["cases"]:
            if any(c["params"].get(k) != v for k, v in params.items()):
                continue
            if where is not None and not where(c["params"]):
                continue
            yield Case(suite, c["file"], c["description"], c["params"], c["tensors"], self.root)


def load(root: Optional[str] = None) -> Golden:
    """Loads a golden directory (default: $QRL_GOLDEN_DIR)."""
    root = root or os.environ.get("QRL_GOLDEN_DIR")
    if not root:
        raise ValueError("qrl_golden.load: no directory given and QRL_GOLDEN_DIR is not set")
    return Golden(root)
