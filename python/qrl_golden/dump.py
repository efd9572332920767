"""Record a forward of any torch module as a qrl-dump/1 file, for ``qrl-sim diverge --dump``.

Forward hooks on the module's submodules capture each one's output in the order the forwards finish;
every output is stored as float32 (an exact upcast of bf16/fp16) under the module's name, with the
dtype it had, and the token ids as ``__tokens__`` (int32). Needs torch and numpy.

    import qrl_golden.dump
    qrl_golden.dump.record(model, input_ids, "rollout.safetensors")
"""

from __future__ import annotations

import json
import struct
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import numpy as np

VERSION_KEY = "qrl-dump"
ORDER_KEY = "qrl-dump.order"
DTYPES_KEY = "qrl-dump.dtypes"
TOKENS = "__tokens__"


def _first_tensor(output: Any):
    """The tensor a module produced: itself, the first tensor of a tuple/list, or a ModelOutput's logits."""
    import torch  # noqa: PLC0415

    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, dict):
        if isinstance(output.get("logits"), torch.Tensor):
            return output["logits"]
        output = list(output.values())
    if isinstance(output, (tuple, list)):
        for item in output:
            if isinstance(item, torch.Tensor):
                return item
    return None


def write(path: str, tensors: List[Tuple[str, np.ndarray]], tokens: np.ndarray, dtypes: Dict[str, str]) -> None:
    """Writes the qrl-dump/1 layout: F32 tensors in the given order, I32 ``__tokens__``, metadata."""
    header: Dict[str, Any] = {
        "__metadata__": {
            VERSION_KEY: "1",
            ORDER_KEY: json.dumps([name for name, _ in tensors]),
            DTYPES_KEY: json.dumps(dtypes),
        }
    }
    blobs: List[bytes] = []
    offset = 0
    entries = [(TOKENS, np.ascontiguousarray(tokens, dtype="<i4"), "I32")] + [(n, np.ascontiguousarray(a, dtype="<f4"), "F32") for n, a in tensors]
    for name, arr, dtype in entries:
        raw = arr.tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(text)))
        fh.write(text)
        for b in blobs:
            fh.write(b)


def record(
    model: Any,
    input_ids: Any,
    path: str,
    modules: Optional[Iterable[str]] = None,
    select: Optional[Callable[[str, Any], bool]] = None,
    **forward_kwargs: Any,
) -> List[str]:
    """Runs ``model(input_ids, **forward_kwargs)`` under ``torch.no_grad`` with a forward hook on every
    submodule (or only those named in ``modules``, or those ``select(name, module)`` accepts) and writes
    what they returned to ``path`` (qrl-dump/1). A module called more than once gets ``#2``, ``#3``…
    on its later calls. The model's own output is recorded last as ``output``. Returns the names in order.
    """
    import torch  # noqa: PLC0415

    wanted = set(modules) if modules is not None else None
    recorded: List[Tuple[str, np.ndarray]] = []
    dtypes: Dict[str, str] = {}
    calls: Dict[str, int] = {}
    handles = []

    def hook_for(name: str):
        def hook(_module, _inputs, output):
            t = _first_tensor(output)
            if t is None:
                return
            calls[name] = calls.get(name, 0) + 1
            key = name if calls[name] == 1 else f"{name}#{calls[name]}"
            recorded.append((key, t.detach().to(torch.float32).cpu().numpy()))
            dtypes[key] = str(t.dtype).replace("torch.", "")

        return hook

    for name, module in model.named_modules():
        if name == "" or (wanted is not None and name not in wanted) or (select is not None and not select(name, module)):
            continue
        handles.append(module.register_forward_hook(hook_for(name)))
    if wanted is not None:
        missing = wanted - {n for n, _ in model.named_modules()}
        if missing:
            for h in handles:
                h.remove()
            raise ValueError(f"record: modules not in the model: {sorted(missing)}")
    try:
        with torch.no_grad():
            out = model(input_ids, **forward_kwargs)
    finally:
        for h in handles:
            h.remove()
    final = _first_tensor(out)
    if final is not None:
        recorded.append(("output", final.detach().to(torch.float32).cpu().numpy()))
        dtypes["output"] = str(final.dtype).replace("torch.", "")
    ids = input_ids.detach().cpu().numpy() if hasattr(input_ids, "detach") else np.asarray(input_ids)
    write(path, recorded, ids.astype(np.int32), dtypes)
    return [n for n, _ in recorded]


def read(path: str) -> Tuple[np.ndarray, Dict[str, np.ndarray], List[str]]:
    """Reads a qrl-dump/1 file: (token ids, name → float32 array, forward order)."""
    from .reader import read_safetensors  # noqa: PLC0415

    with open(path, "rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        meta = json.loads(fh.read(n)).get("__metadata__", {})
    if meta.get(VERSION_KEY) != "1":
        raise ValueError(f"{path}: metadata {VERSION_KEY} must be '1'")
    order = json.loads(meta[ORDER_KEY])
    arrays = read_safetensors(path)
    tokens = arrays.pop(TOKENS)
    return tokens, arrays, order
