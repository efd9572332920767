"""The checkpoint directory of the SDK's numpy backends (numpy_ar, numpy_diffusion): weights, reference and
AdamW moments as safetensors, and the versions and plan in backend.json, written atomically last. Not a
format of the protocol: `save`/`load` only promise that a backend reads back what it wrote."""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from .wire import FAILED_PRECONDITION, RpcError, read_safetensors, write_safetensors

Arrays = Dict[str, np.ndarray]


def save_checkpoint(directory: str, config_key: str, config_json: str, order: Sequence[str], params: Arrays,
                    reference: Arrays, moments: Tuple[Arrays, Arrays, int], state: Dict[str, Any]) -> None:
    """Writes weights, reference and optimizer (m, v, step) in `order`, then backend.json (`state`) atomically."""
    os.makedirs(directory, exist_ok=True)
    meta = {config_key: config_json}
    m, v, t = moments
    write_safetensors(os.path.join(directory, "weights.safetensors"), {n: params[n] for n in order}, meta)
    write_safetensors(os.path.join(directory, "reference.safetensors"), {n: reference[n] for n in order}, meta)
    opt = {f"m.{n}": m[n] for n in order}
    opt.update({f"v.{n}": v[n] for n in order})
    write_safetensors(os.path.join(directory, "optimizer.safetensors"), opt, {"step": str(t)})
    tmp = os.path.join(directory, "backend.json.tmp")
    with open(tmp, "w") as f:
        json.dump(state, f)
    os.replace(tmp, os.path.join(directory, "backend.json"))


def load_weights(directory: str, config_key: str, same_config: Callable[[str], bool], config_json: str,
                 check: Callable[[Arrays], None]) -> Tuple[Arrays, Arrays]:
    """The float32 weights and reference of a checkpoint (the reference defaults to the weights), refused with
    one line naming `dir` when the file is missing, holds another config, or does not fit (`check` raises)."""
    path = os.path.join(directory, "weights.safetensors")
    if not os.path.exists(path):
        raise RpcError(FAILED_PRECONDITION, f"load: no weights.safetensors in {directory}", "dir")
    params, meta = read_safetensors(path)
    if config_key in meta and not same_config(meta[config_key]):
        raise RpcError(FAILED_PRECONDITION, f"load: {path} holds config {meta[config_key]}, this backend runs {config_json}", "dir")
    try:
        check(params)
    except ValueError as e:
        raise RpcError(FAILED_PRECONDITION, f"load: {path}: {e}", "dir") from None
    params = {k: v.astype(np.float32) for k, v in params.items()}
    ref = os.path.join(directory, "reference.safetensors")
    reference = {k: v.astype(np.float32) for k, v in read_safetensors(ref)[0].items()} if os.path.exists(ref) else {k: v.copy() for k, v in params.items()}
    return params, reference


def load_moments(directory: str, names: Sequence[str]) -> Optional[Tuple[Arrays, Arrays, int]]:
    """AdamW's (m, v, step) of a checkpoint, or None when it has no optimizer file."""
    opt = os.path.join(directory, "optimizer.safetensors")
    if not os.path.exists(opt):
        return None
    t, m = read_safetensors(opt)
    return {n: t[f"m.{n}"] for n in names}, {n: t[f"v.{n}"] for n in names}, int(m.get("step", "0"))


def load_state(directory: str) -> Dict[str, Any]:
    """backend.json of a checkpoint ({} when absent)."""
    st = os.path.join(directory, "backend.json")
    if not os.path.exists(st):
        return {}
    with open(st) as f:
        return json.load(f)
