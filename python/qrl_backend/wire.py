"""The JSON forms of qrl-backend/1: wire tensors ({dtype, shape, data}: little-endian bytes in base64,
safetensors dtype names), tensor references ({safetensors, name}), replay records, a small
safetensors reader/writer, and the errors that name a field. Not the transport (server.py)."""

from __future__ import annotations

import base64
import json
import os
import struct
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

PROTOCOL = "qrl-backend/1"

# JSON-RPC 2.0 error codes used by qrl-backend/1 (same table as src/protocol/jsonrpc.ts).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
FAILED_PRECONDITION = -32000
UNAUTHORIZED = -32001  # HTTP only: no token or a wrong one (status 401); nothing executed

DTYPES: Dict[str, np.dtype] = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "I32": np.dtype("<i4"),
    "U8": np.dtype("u1"),
    "U16": np.dtype("<u2"),
    "U32": np.dtype("<u4"),
}
_NAMES = {np.dtype(v).str: k for k, v in DTYPES.items()}
# safetensors names this module reads beyond the wire dtypes (kept as raw codes or upcast).
_FILE_DTYPES = dict(DTYPES, BF16=np.dtype("<u2"), F16=np.dtype("<f2"), I64=np.dtype("<i8"))


class RpcError(Exception):
    """An error answered to the client: a JSON-RPC code, a message, and the field it concerns."""

    def __init__(self, code: int, message: str, field: str | None = None):
        super().__init__(message)
        self.code = code
        self.field = field

    def to_json(self) -> Dict[str, Any]:
        err: Dict[str, Any] = {"code": self.code, "message": str(self)}
        if self.field is not None:
            err["data"] = {"field": self.field}
        return err


class ProtocolError(RpcError):
    """Invalid params: names the method's field (answered with code -32602 and data.field)."""

    def __init__(self, field: str, message: str):
        super().__init__(INVALID_PARAMS, f"{field}: {message}" if field else message, field)


def encode_tensor(array: np.ndarray) -> Dict[str, Any]:
    """A wire tensor of `array` (its dtype must be one of DTYPES)."""
    a = np.ascontiguousarray(array)
    name = _NAMES.get(a.dtype.newbyteorder("<").str if a.dtype.byteorder == ">" else a.dtype.str)
    if name is None:
        raise ValueError(f"tensor: unsupported dtype {a.dtype}")
    data = a.astype(DTYPES[name], copy=False).tobytes()
    return {"dtype": name, "shape": list(a.shape), "data": base64.b64encode(data).decode("ascii")}


def decode_tensor(value: Any, field: str, dtypes: Tuple[str, ...] | None = None, shape: Tuple[int, ...] | None = None) -> np.ndarray:
    """Decodes a wire tensor or a {safetensors, name} reference; raises ProtocolError naming `field`."""
    if not isinstance(value, dict):
        raise ProtocolError(field, "expected a tensor object")
    if set(value.keys()) == {"safetensors", "name"}:
        path, name = value["safetensors"], value["name"]
        if not isinstance(path, str) or not isinstance(name, str):
            raise ProtocolError(field, "safetensors and name must be strings")
        try:
            tensors, _ = read_safetensors(path)
        except (OSError, ValueError) as e:
            raise ProtocolError(field + ".safetensors", f"cannot read {path}: {e}") from None
        if name not in tensors:
            raise ProtocolError(field + ".name", f"no tensor {name!r} in {path}")
        arr = tensors[name]
        dt = _NAMES.get(arr.dtype.str)
    else:
        if set(value.keys()) != {"dtype", "shape", "data"}:
            raise ProtocolError(field, "expected {dtype, shape, data} or {safetensors, name}")
        dt = value["dtype"]
        if dt not in DTYPES:
            raise ProtocolError(field + ".dtype", f"unknown dtype {dt!r} (known: {', '.join(DTYPES)})")
        shp = value["shape"]
        if not isinstance(shp, list) or any((not isinstance(d, int)) or isinstance(d, bool) or d < 0 for d in shp):
            raise ProtocolError(field + ".shape", f"expected non-negative integers, got {shp!r}")
        data = value["data"]
        if not isinstance(data, str):
            raise ProtocolError(field + ".data", "expected a base64 string")
        try:
            raw = base64.b64decode(data, validate=True)
        except ValueError:
            raise ProtocolError(field + ".data", "not standard base64") from None
        size = int(np.prod(shp)) if shp else 1
        if len(raw) != size * DTYPES[dt].itemsize:
            raise ProtocolError(field + ".data", f"{len(raw)} bytes for shape {shp} of {dt} (expected {size * DTYPES[dt].itemsize})")
        arr = np.frombuffer(raw, dtype=DTYPES[dt]).reshape(shp).copy()
    if dtypes is not None and dt not in dtypes:
        raise ProtocolError(field + ".dtype", f"must be {' or '.join(dtypes)}, got {dt}")
    if shape is not None and tuple(arr.shape) != tuple(shape):
        raise ProtocolError(field + ".shape", f"must be {list(shape)}, got {list(arr.shape)}")
    return arr


def is_wire_tensor(value: Any) -> bool:
    return isinstance(value, dict) and set(value.keys()) == {"dtype", "shape", "data"}


def record_from_json(value: Any, field: str = "record") -> Any:
    """A replay record with its wire tensors decoded to numpy arrays."""
    if is_wire_tensor(value):
        return decode_tensor(value, field)
    if isinstance(value, list):
        return [record_from_json(v, f"{field}.{i}") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: record_from_json(v, f"{field}.{k}") for k, v in value.items()}
    return value


def record_to_json(value: Any) -> Any:
    """A replay record with numpy arrays encoded as 1-D wire tensors (a typed record, e.g.
    diffusion_record.DiffusionEngineRecord, through its own `to_json`)."""
    if hasattr(value, "to_json") and callable(value.to_json):
        return value.to_json()
    if isinstance(value, np.ndarray):
        return encode_tensor(value.reshape(-1))
    if isinstance(value, (list, tuple)):
        return [record_to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: record_to_json(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value


def write_safetensors(path: str, tensors: Dict[str, np.ndarray], metadata: Dict[str, str] | None = None) -> None:
    """Writes a safetensors file (whole or absent: a temporary file renamed into place)."""
    header: Dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    parts = []
    offset = 0
    for name, arr in tensors.items():
        a = np.ascontiguousarray(arr)
        dt = _NAMES.get(a.dtype.str)
        if dt is None:
            raise ValueError(f"safetensors: unsupported dtype {a.dtype} for {name}")
        raw = a.tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        parts.append(raw)
        offset += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode("utf8")
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for p in parts:
            f.write(p)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_safetensors(path: str) -> Tuple[Dict[str, np.ndarray], Dict[str, str]]:
    """Reads a safetensors file: (name → array, metadata)."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError("safetensors: file shorter than its header length")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        raise ValueError("safetensors: header length past the end of the file")
    header = json.loads(blob[8 : 8 + n].decode("utf8"))
    body = memoryview(blob)[8 + n :]
    meta = header.pop("__metadata__", {}) or {}
    out = {}
    for name, e in header.items():
        dt = _FILE_DTYPES.get(e["dtype"])
        if dt is None:
            raise ValueError(f"safetensors: unsupported dtype {e['dtype']} for {name}")
        a, b = e["data_offsets"]
        out[name] = np.frombuffer(body[a:b], dtype=dt).reshape(e["shape"]).copy()
    return out, meta


# --- the rollout batch and the params checks (each names the field) ---------------------------


@dataclass
class RolloutBatch:
    """A batch of sampled responses, padded to T response positions (the contract's RolloutBatch).

    responses: int32 (B, T); mask: float64 (B, T) of 0/1; logp_rollout: float64 (B, T), 0 off the mask;
    record: what the trainer needs to score the samples again (a dict with a "kind", numpy arrays allowed).
    """

    weight_version: int
    prompts: List[List[int]]
    responses: np.ndarray
    mask: np.ndarray
    logp_rollout: np.ndarray
    record: Dict[str, Any] = field(default_factory=lambda: {"kind": "unknown"})
    #: capabilities.topkLogprobs: the rollout engine's top-k of each position, or None.
    topk: Optional["TopkLogprobs"] = None

    @property
    def B(self) -> int:
        return int(self.responses.shape[0])

    @property
    def T(self) -> int:
        return int(self.responses.shape[1])


@dataclass
class TopkLogprobs:
    """A batch's `topk` (capabilities.topkLogprobs): per response position the engine's K most likely ids
    of the distribution it sampled from, ℓ descending with ties to the lower id, and their ℓ (of the kind
    of ℓroll). ids: int32 (B, T, K), −1 at an empty slot (past the top-k/top-p support, off the mask);
    logp: float64 (B, T, K), 0 at an empty slot."""

    K: int
    ids: np.ndarray
    logp: np.ndarray


# --- params validation: shared by the codec (batch_from_json) and the server's methods; each error names the field ---


def check_params(params: Any, keys: Dict[str, bool]) -> Dict[str, Any]:
    """Checks params is an object with exactly the allowed keys (value: required)."""
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise ProtocolError("", "params must be an object")
    for k in params:
        if k not in keys:
            raise ProtocolError(k, "unknown field")
    for k, required in keys.items():
        if required and k not in params:
            raise ProtocolError(k, "required")
    return params


def int_field(v: Any, field: str, lo: int = 0) -> int:
    """`v` as an integer ≥ lo (not a bool), else a ProtocolError naming `field`."""
    if not isinstance(v, int) or isinstance(v, bool) or v < lo:
        raise ProtocolError(field, f"expected an integer ≥ {lo}, got {v!r}")
    return v


def number_field(v: Any, field: str) -> float:
    """`v` as a finite float (int or float, not a bool), else a ProtocolError naming `field`."""
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not np.isfinite(v):
        raise ProtocolError(field, f"expected a finite number, got {v!r}")
    return float(v)


def string_field(v: Any, field: str) -> str:
    """`v` as a non-empty string, else a ProtocolError naming `field`."""
    if not isinstance(v, str) or v == "":
        raise ProtocolError(field, f"expected a non-empty string, got {v!r}")
    return v


def prompts_field(v: Any, field: str) -> list:
    """`v` as a list of token-id lists (integers ≥ 0), else a ProtocolError naming `field.i.j`."""
    if not isinstance(v, list):
        raise ProtocolError(field, "expected a list of token lists")
    out = []
    for i, row in enumerate(v):
        if not isinstance(row, list):
            raise ProtocolError(f"{field}.{i}", "expected a list of token ids")
        out.append([int_field(t, f"{field}.{i}.{j}") for j, t in enumerate(row)])
    return out


def batch_from_json(v: Any, field: str) -> RolloutBatch:
    """Decodes and checks a rollout batch (tensors of shape (B, T), prompts B rows, mask 0/1)."""
    p = check_params(v, {**{k: True for k in ("weightVersion", "B", "T", "prompts", "responses", "mask", "logpRollout", "record")}, "topk": False})
    B = int_field(p["B"], f"{field}.B", 1)
    T = int_field(p["T"], f"{field}.T")
    prompts = prompts_field(p["prompts"], f"{field}.prompts")
    if len(prompts) != B:
        raise ProtocolError(f"{field}.prompts", f"must hold B={B} rows, got {len(prompts)}")
    responses = decode_tensor(p["responses"], f"{field}.responses", ("I32",), (B, T))
    mask = decode_tensor(p["mask"], f"{field}.mask", ("F64",), (B, T))
    logp = decode_tensor(p["logpRollout"], f"{field}.logpRollout", ("F64",), (B, T))
    if not np.all((mask == 0) | (mask == 1)):
        raise ProtocolError(f"{field}.mask", "must hold 0 or 1")
    rec = p["record"]
    if not isinstance(rec, dict) or not isinstance(rec.get("kind"), str):
        raise ProtocolError(f"{field}.record.kind", "expected a string")
    topk = topk_from_json(p["topk"], f"{field}.topk", (B, T)) if "topk" in p else None
    return RolloutBatch(int_field(p["weightVersion"], f"{field}.weightVersion"), prompts, responses, mask, logp, record_from_json(rec, f"{field}.record"), topk)


def topk_from_json(v: Any, field: str, bt: Tuple[int, int]) -> TopkLogprobs:
    """Decodes a batch's `topk`: {K ≥ 1, ids: I32 (B, T, K) ≥ −1, logp: F64 (B, T, K) ≤ 0}, each error naming the field."""
    p = check_params(v, {"K": True, "ids": True, "logp": True})
    K = int_field(p["K"], f"{field}.K", 1)
    ids = decode_tensor(p["ids"], f"{field}.ids", ("I32",), (*bt, K))
    logp = decode_tensor(p["logp"], f"{field}.logp", ("F64",), (*bt, K))
    if ids.size and ids.min() < -1:
        raise ProtocolError(f"{field}.ids", f"must hold ids ≥ −1 (−1 = empty slot), got {int(ids.min())}")
    if not np.all(logp <= 0):
        raise ProtocolError(f"{field}.logp", "must hold log-probs ≤ 0")
    return TopkLogprobs(K, ids.astype(np.int32), logp)


def topk_to_json(t: TopkLogprobs) -> Dict[str, Any]:
    return {"K": int(t.K), "ids": encode_tensor(np.asarray(t.ids, dtype=np.int32)), "logp": encode_tensor(np.asarray(t.logp, dtype=np.float64))}


def batch_to_json(b: RolloutBatch) -> Dict[str, Any]:
    return {
        "weightVersion": int(b.weight_version),
        "B": b.B,
        "T": b.T,
        "prompts": [list(map(int, p)) for p in b.prompts],
        "responses": encode_tensor(np.asarray(b.responses, dtype=np.int32)),
        "mask": encode_tensor(np.asarray(b.mask, dtype=np.float64)),
        "logpRollout": encode_tensor(np.asarray(b.logp_rollout, dtype=np.float64)),
        # the TypeScript codec's key order (schema.ts batchToJson): topk between logpRollout and record
        **({"topk": topk_to_json(b.topk)} if b.topk is not None else {}),
        "record": record_to_json(b.record),
    }


