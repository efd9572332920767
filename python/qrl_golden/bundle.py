"""qrl-step/1: one training step of any RL stack as a directory `qrl-sim replay` checks (docs/replay.md).

A bundle is a directory holding `tensors.safetensors` (the step's tensors, each under its field
name) and `manifest.json` (format, stack and version, the options as the user gave them, the sha256
of every tensor's stored bytes, the stack's logged metrics). `write` writes one from plain numpy
arrays (or torch tensors), atomically: a temporary sibling directory renamed into place, so a
bundle either exists whole or not at all. `read` reads one back and verifies it.

Needs numpy only (torch tensors are converted with `.detach().cpu().numpy()` when given).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import tempfile
from typing import Any, Mapping

import numpy as np

FORMAT = "qrl-step/1"
TENSORS = "tensors.safetensors"
MANIFEST = "manifest.json"

#: Every field of qrl-step/1: (rank-spec, kind, required, meaning). Rank-spec letters: B rows, P prompt
#: columns, T completion columns, `1` a broadcast column; `"B|BT"` accepts either; `""` a scalar.
FIELDS: dict[str, tuple[str, str, bool, str]] = {
    "prompt_ids": ("BP", "int", False, "prompt token ids, padded as the stack pads them"),
    "prompt_mask": ("BP", "int", False, "1 on prompt tokens, 0 on padding"),
    "completion_ids": ("BT", "int", True, "completion token ids, right-padded"),
    "completion_mask": ("BT", "int", True, "1 on completion tokens the model produced, 0 on padding"),
    "loss_mask": ("BT", "int", False, "the mask the loss runs over when it is not completion_mask (tool tokens, truncated rows)"),
    "group": ("B", "int", False, "which prompt each row answers (rows of a group share an id); needed to recompute advantages"),
    "rewards": ("B", "float", False, "the scalar reward of each row, after the stack's reward weighting"),
    "advantages": ("B|BT", "float", True, "the advantages the loss used"),
    "logp": ("BT", "float", True, "ℓθ: log-probs of the policy being trained, the tensor the gradient is taken of"),
    "logp_old": ("BT", "float", False, "ℓold: the behaviour policy of the ratio; absent = the stack used ℓθ detached"),
    "logp_rollout": ("BT", "float", False, "ℓroll: the rollout engine's log-probs of the sampled tokens"),
    "logp_ref": ("BT", "float", False, "ℓref: the reference policy of the KL term"),
    "is_weight": ("BT|B1", "float", False, "the rollout-correction weight the stack multiplied into the loss"),
    "token_loss": ("BT|B1", "float", True, "the per-token loss before the mask and the aggregation"),
    "loss": ("", "float", True, "the scalar loss that was differentiated"),
    "grad_logp": ("BT", "float", True, "d loss / d ℓθ"),
}

_DTYPES = {
    np.dtype("float64"): "F64",
    np.dtype("float32"): "F32",
    np.dtype("int64"): "I64",
    np.dtype("int32"): "I32",
}
_FROM_TAG = {v: k for k, v in _DTYPES.items()}


class BundleError(Exception):
    """A bundle that is not qrl-step/1: the message names the field (one line)."""


def _array(name: str, value: Any) -> np.ndarray:
    if hasattr(value, "detach"):
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()
        value = value.numpy()
    a = np.array(value, order="C")  # (np.ascontiguousarray would make a scalar 1-D)
    if a.dtype == np.bool_:
        a = a.astype(np.int64)
    if a.dtype not in _DTYPES:
        raise BundleError(f"{name}: unsupported dtype {a.dtype} (float64, float32, int64, int32)")
    return a


def _check_shapes(arrays: Mapping[str, np.ndarray]) -> None:
    dims: dict[str, int] = {}

    def bind(field: str, letter: str, n: int) -> None:
        if letter == "1":
            if n != 1:
                raise BundleError(f"{field}: expected a broadcast column of size 1, got {n}")
            return
        have = dims.setdefault(letter, n)
        if have != n:
            raise BundleError(f"{field}: dimension {letter} is {n}, other fields say {have}")

    for field, a in arrays.items():
        spec = FIELDS[field][0]
        options = spec.split("|")
        shapes = [o for o in options if len(o) == a.ndim]
        if not shapes:
            raise BundleError(f"{field}: expected shape ({') or ('.join(', '.join(o) for o in options)}), got {list(a.shape)}")
        # with two same-rank options (BT|B1) the column decides
        choice = shapes[0] if len(shapes) == 1 or a.ndim == 0 else (shapes[1] if a.shape[-1] == 1 and "1" in shapes[1] else shapes[0])
        for letter, n in zip(choice, a.shape):
            bind(field, letter, int(n))


def _safetensors(arrays: Mapping[str, np.ndarray], metadata: Mapping[str, str]) -> tuple[bytes, dict[str, str]]:
    header: dict[str, Any] = {"__metadata__": dict(metadata)}
    blobs: list[bytes] = []
    hashes: dict[str, str] = {}
    offset = 0
    for name in sorted(arrays):
        a = arrays[name]
        raw = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": _DTYPES[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        hashes[name] = hashlib.sha256(raw).hexdigest()
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs), hashes


def write(
    directory: str,
    *,
    stack: str,
    version: str,
    options: Mapping[str, Any],
    tensors: Mapping[str, Any],
    metrics: Mapping[str, float] | None = None,
    step: int | None = None,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """Writes the bundle `directory` (which must not exist yet) and returns its path.

    `options`: the stack's options exactly as the user gave them (JSON values); `tensors`: a subset of
    `FIELDS` (the required ones at least), numpy arrays or torch tensors; `metrics`: the stack's logged
    metrics of the step (numbers; NaN and None are dropped); `extra`: more JSON under `"extra"`.
    Raises `BundleError` naming the field on a missing field, an unknown one, or inconsistent shapes.
    """
    unknown = sorted(set(tensors) - set(FIELDS))
    if unknown:
        raise BundleError(f"{unknown[0]}: not a qrl-step/1 field (fields: {', '.join(FIELDS)})")
    missing = [f for f, (_, _, req, _) in FIELDS.items() if req and f not in tensors]
    if missing:
        raise BundleError(f"{missing[0]}: required field missing")
    arrays = {name: _array(name, value) for name, value in tensors.items()}
    _check_shapes(arrays)
    blob, hashes = _safetensors(arrays, {"format": FORMAT})
    clean_metrics = {k: float(v) for k, v in sorted((metrics or {}).items()) if v is not None and np.isfinite(float(v))}
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "stack": {"name": stack, "version": version},
        "step": step,
        "options": dict(options),
        "fields": sorted(arrays),
        "tensors": {name: {"dtype": _DTYPES[a.dtype], "shape": list(a.shape), "sha256": hashes[name]} for name, a in sorted(arrays.items())},
        "metrics": clean_metrics,
    }
    if extra:
        manifest["extra"] = dict(extra)
    target = os.path.abspath(directory)
    if os.path.exists(target):
        raise BundleError(f"{directory}: already exists (a bundle is written once)")
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".qrl-step-", dir=parent)
    try:
        with open(os.path.join(tmp, TENSORS), "wb") as f:
            f.write(blob)
        with open(os.path.join(tmp, MANIFEST), "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=1, sort_keys=False)
            f.write("\n")
        os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def read(directory: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Reads a bundle back as `(manifest, arrays)`, verifying format, hashes and shapes (`BundleError`)."""
    try:
        with open(os.path.join(directory, MANIFEST), encoding="utf-8") as f:
            manifest = json.load(f)
        with open(os.path.join(directory, TENSORS), "rb") as f:
            data = f.read()
    except (OSError, ValueError) as error:
        raise BundleError(f"{directory}: cannot read ({error})") from None
    if manifest.get("format") != FORMAT:
        raise BundleError(f"format: expected {FORMAT}, got {manifest.get('format')!r}")
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    arrays: dict[str, np.ndarray] = {}
    for name, entry in manifest["tensors"].items():
        if name not in header:
            raise BundleError(f"{name}: listed in manifest.json but not in {TENSORS}")
        start, end = header[name]["data_offsets"]
        raw = body[start:end]
        if hashlib.sha256(raw).hexdigest() != entry["sha256"]:
            raise BundleError(f"{name}: sha256 does not match manifest.json (the tensor's bytes changed)")
        arrays[name] = np.frombuffer(raw, dtype=_FROM_TAG[header[name]["dtype"]].newbyteorder("<")).reshape(header[name]["shape"])
    _check_shapes(arrays)
    return manifest, arrays
