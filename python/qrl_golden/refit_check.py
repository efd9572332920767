"""`python -m qrl_golden.refit_check`: the Python twin of `qrl-sim refit-check` (docs/refit-check.md).

Independent code: the safetensors header is parsed here, each tensor read by offset, and the
recipes are written in numpy + ml_dtypes from the preset formulas of docs/quantization.md, not
from the TypeScript. Same flags, same findings, same JSON. Not a converter: it writes nothing.
"""

from __future__ import annotations

import argparse
import json
import re
import struct
import sys
from typing import Any, Callable

import ml_dtypes
import numpy as np

E4M3 = ml_dtypes.float8_e4m3fn
F32 = np.float32
#: 0b0_1111_110 = 1.75·2^8: the largest finite E4M3FN value.
E4M3_MAX = F32(448.0)
E4M3_VALUES = np.arange(256, dtype=np.uint8).view(E4M3).astype(F32)

KINDS = ("missing", "not-quantized", "unexpectedly-quantized", "unity-scale", "stale", "layout-permuted", "value-error")

MATCH_RULES: dict[str, Callable[[str, str], bool]] = {
    # vLLM's `in` test: is_layer_skipped(…, skip_with_substr=True) → substr_match
    # (vllm/model_executor/layers/quantization/utils/quant_utils.py lines 386–387, commit 01693a61);
    # verl #7519: `mlp.gate` also catches `mlp.gate_up_proj`.
    "substring": lambda module, pattern: pattern in module,
    # The name itself or a dotted prefix of it.
    "prefix": lambda module, pattern: module == pattern or module.startswith(pattern + "."),
    # compressed-tensors: `re:` patterns matched at the start (re.match), other patterns exact.
    "regex": lambda module, pattern: re.match(pattern[3:], module) is not None if pattern.startswith("re:") else module == pattern,
}
MATCH_ALIASES = {"vllm": "substring", "compressed-tensors": "regex"}


class BadInput(Exception):
    """Bad input: one line on stderr, exit 2."""


# --- the recipes in numpy (float32 throughout; fl = float32 rounding) -------------------------


def _e4m3_codes(v: np.ndarray) -> np.ndarray:
    """RNE cast of float32 values already within ±448 (satfinite) to E4M3FN codes."""
    return np.clip(v, -E4M3_MAX, E4M3_MAX).astype(E4M3).view(np.uint8)


def _amax(x: np.ndarray, axis: Any = None) -> np.ndarray:
    """max |x| skipping NaN, starting from 0 (CUDA fmaxf reductions)."""
    return np.fmax.reduce(np.abs(x), axis=axis, initial=F32(0))


def deepseek_fp8_block(x: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """DeepSeek-V3 weight_quant_kernel: s = fl(max(amax, 1e-4)/448) per B×B block, q = e4m3(fl(x/s))."""
    rows, cols = x.shape
    br, bc = -(-rows // block), -(-cols // block)
    scales = np.empty((br, bc), F32)
    codes = np.empty((rows, cols), np.uint8)
    for i in range(br):
        for j in range(bc):
            cell = x[i * block:(i + 1) * block, j * block:(j + 1) * block]
            a = np.fmax(_amax(cell), F32(1e-4))
            s = F32(a / E4M3_MAX)
            scales[i, j] = s
            codes[i * block:(i + 1) * block, j * block:(j + 1) * block] = _e4m3_codes((cell / s).astype(F32))
    return codes, scales


def vllm_fp8_tensor(x: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """vLLM scaled_fp8_quant (dynamic per tensor): s = fl(amax/448), q = e4m3(fmaxf(−448, fminf(fl(x·fl(1/s)), 448)))."""
    s = F32(_amax(x) / E4M3_MAX)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = F32(F32(1) / s)
        v = (x * inv).astype(F32)
    v = np.fmax(-E4M3_MAX, np.fmin(v, E4M3_MAX))  # fminf first: NaN → +448
    return v.astype(E4M3).view(np.uint8), np.array([s], F32)


def vllm_fp8_token(x: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """vLLM per-token FP8 on weight rows (channels): s = max(fl(amax/448), fl(1/(448·512))), q = e4m3(clamp(fl(x/s)))."""
    s = np.fmax((_amax(x, axis=1) / E4M3_MAX).astype(F32), F32(1.0 / (448 * 512)))
    v = (x / s[:, None]).astype(F32)
    v = np.fmax(-E4M3_MAX, np.fmin(v, E4M3_MAX))
    return v.astype(E4M3).view(np.uint8), s


#: recipe → (quantizer, engine scale tensor suffix, granularity, accepted scale shapes for (rows, cols, block)).
RECIPES: dict[str, tuple[Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]], str, str, Callable[[int, int, int], list[list[int]]]]] = {
    "deepseek-fp8-block": (deepseek_fp8_block, "weight_scale_inv", "block", lambda r, c, b: [[-(-r // b), -(-c // b)]]),
    "vllm-fp8-tensor": (vllm_fp8_tensor, "weight_scale", "tensor", lambda r, c, b: [[], [1]]),
    "vllm-fp8-token": (vllm_fp8_token, "weight_scale", "row", lambda r, c, b: [[r], [r, 1]]),
}


# --- safetensors, one tensor at a time ---------------------------------------------------------

WIDTHS = {"F64": 8, "F32": 4, "I32": 4, "U32": 4, "I64": 8, "U64": 8, "BF16": 2, "F16": 2, "U16": 2, "I16": 2, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "BOOL": 1}


class Safetensors:
    """The header of a safetensors file; `read(name)` reads one tensor's bytes by offset."""

    def __init__(self, path: str, flag: str):
        self.path, self.flag = path, flag
        try:
            self.f = open(path, "rb")
        except OSError as e:
            raise BadInput(f"--{flag}: safetensors: {path}: {e.strerror}") from None
        size = self.f.seek(0, 2)
        self.f.seek(0)
        head = self.f.read(8)
        if len(head) < 8:
            raise BadInput(f"--{flag}: safetensors: {path}: shorter than its 8-byte header length")
        (n,) = struct.unpack("<Q", head)
        if n > 100_000_000 or 8 + n > size:
            raise BadInput(f"--{flag}: safetensors: {path}: header length {n} exceeds the file")
        try:
            header = json.loads(self.f.read(n))
        except ValueError:
            raise BadInput(f"--{flag}: safetensors: {path}: the header is not JSON") from None
        self.entries: dict[str, dict[str, Any]] = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            b, e = info["data_offsets"]
            width = WIDTHS.get(info["dtype"])
            count = int(np.prod(info["shape"], dtype=np.int64))
            if e < b or 8 + n + e > size or (width is not None and e - b != count * width):
                raise BadInput(f"--{flag}: safetensors: {path}: {name}: data_offsets [{b}, {e}] do not fit shape {info['shape']} of {info['dtype']} in the file")
            self.entries[name] = {"dtype": info["dtype"], "shape": list(info["shape"]), "begin": 8 + n + b, "end": 8 + n + e}

    def read(self, name: str) -> bytes:
        e = self.entries[name]
        self.f.seek(e["begin"])
        return self.f.read(e["end"] - e["begin"])

    def dense(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(float32 values, stored bits) of a BF16 or F32 tensor, in its shape."""
        e = self.entries[name]
        raw = self.read(name)
        if e["dtype"] == "F32":
            bits = np.frombuffer(raw, "<u4").reshape(e["shape"])
            return bits.view(F32), bits
        if e["dtype"] == "BF16":
            bits = np.frombuffer(raw, "<u2").reshape(e["shape"])
            return (bits.astype(np.uint32) << 16).view(F32), bits
        raise BadInput(f"--{self.flag}: {name}: dtype {e['dtype']} (expected BF16 or F32)")

    def close(self) -> None:
        self.f.close()


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """float32 → bfloat16 bits, round to nearest even (ml_dtypes); NaN quiet, sign kept."""
    return values.astype(F32).astype(ml_dtypes.bfloat16).view(np.uint16)


# --- the check ---------------------------------------------------------------------------------


def _position(i: int, shape: list[int]) -> list[int]:
    return [int(v) for v in np.unravel_index(i, shape)] if shape else []


def _unit_keys(bits: np.ndarray, unit_rows: int, scale_bits: np.ndarray | None = None, per_unit: int = 0) -> list[bytes]:
    rows = bits.shape[0]
    flat_scales = None if scale_bits is None else scale_bits.reshape(-1)
    keys = []
    for u in range(-(-rows // unit_rows)):
        key = bits[u * unit_rows:(u + 1) * unit_rows].tobytes() + b"|"
        if flat_scales is not None:
            key += flat_scales[u * per_unit:(u + 1) * per_unit].tobytes()
        keys.append(key)
    return keys


def _row_permutation(expected: list[bytes], engine: list[bytes]) -> list[int] | None:
    """Engine unit i takes expected unit i when the keys agree, else the first unused one with its key."""
    by_key: dict[bytes, list[int]] = {}
    for j, k in enumerate(expected):
        by_key.setdefault(k, []).append(j)
    used = [False] * len(expected)
    order = []
    for i, k in enumerate(engine):
        candidates = [j for j in by_key.get(k, []) if not used[j]]
        if not candidates:
            return None
        j = i if i in candidates else candidates[0]
        used[j] = True
        order.append(j)
    return None if order == list(range(len(order))) else order


def _permutation_finding(tensor: str, order: list[int], unit_rows: int) -> dict[str, Any]:
    n = len(order)
    halves = n % 2 == 0 and all(j == (i + n // 2) % n for i, j in enumerate(order))
    name = "halves-swapped" if halves else "rows" if unit_rows == 1 else "row-blocks"
    return {"tensor": tensor, "kind": "layout-permuted", "permutation": name, "unitRows": unit_rows, "order": order}


def _max_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    d = d[np.isfinite(d)]
    return float(d.max()) if d.size else 0


def refit_check(trainer_path: str, engine_path: str, recipe: str, block: int | None = None, previous_path: str | None = None, ignore: list[str] | None = None, match: str = "substring") -> dict[str, Any]:
    if recipe not in RECIPES:
        raise BadInput(f"--recipe: unsupported preset '{recipe}' (supported: {', '.join(RECIPES)})")
    quantizer, scale_suffix, granularity, scale_shapes = RECIPES[recipe]
    if block is not None and granularity != "block":
        raise BadInput(f"--block: preset '{recipe}' has no block size")
    block = (block or 128) if granularity == "block" else None
    ignore = ignore or []
    matches = MATCH_RULES[match]
    for p in ignore:
        if match == "regex" and p.startswith("re:"):
            try:
                re.compile(p[3:])
            except re.error:
                raise BadInput(f"--ignore: '{p}' is not a valid regular expression") from None
    files = [Safetensors(trainer_path, "trainer")]
    try:
        trainer = files[0]
        engine = Safetensors(engine_path, "engine")
        files.append(engine)
        previous = Safetensors(previous_path, "previous") if previous_path is not None else None
        if previous is not None:
            files.append(previous)
        findings: list[dict[str, Any]] = []
        quantized = 0
        names = sorted(trainer.entries)

        def previous_dense(name: str, shape: list[int]):
            if previous is None or name not in previous.entries:
                return None
            if previous.entries[name]["shape"] != shape:
                raise BadInput(f"--previous: {name}: shape {_shape(previous.entries[name]['shape'])} (the trainer's is {_shape(shape)})")
            return previous.dense(name)

        for name in names:
            t = trainer.entries[name]
            shape = t["shape"]
            module = name[: -len(".weight")] if name.endswith(".weight") else name
            ignored_by = next((p for p in ignore if matches(module, p)), None)
            quantizes = name.endswith(".weight") and len(shape) == 2 and ignored_by is None
            quantized += quantizes
            e = engine.entries.get(name)
            if e is None:
                findings.append({"tensor": name, "kind": "missing"})
                continue
            x, _ = trainer.dense(name)
            if e["shape"] != shape:
                raise BadInput(f"--engine: {name}: shape {_shape(e['shape'])} (the trainer's is {_shape(shape)})")
            if e["dtype"] not in ("F8_E4M3", "BF16", "F32"):
                raise BadInput(f"--engine: {name}: dtype {e['dtype']} (expected F8_E4M3, BF16 or F32)")
            if not quantizes:
                if e["dtype"] == "F8_E4M3":
                    findings.append({"tensor": name, "kind": "unexpectedly-quantized", "dtype": e["dtype"], "pattern": ignored_by})
                    continue
                held_values, held_bits = engine.dense(name)
                rounded = (lambda v: bf16_bits(v)) if e["dtype"] == "BF16" else (lambda v: v.view(np.uint32))
                want = rounded(x)
                if np.array_equal(held_bits, want):
                    continue
                prev = previous_dense(name, shape)
                if prev is not None and np.array_equal(held_bits, rounded(prev[0])):
                    findings.append({"tensor": name, "kind": "stale"})
                    continue
                if len(shape) == 2:
                    order = _row_permutation(_unit_keys(want, 1), _unit_keys(held_bits, 1))
                    if order is not None:
                        findings.append(_permutation_finding(name, order, 1))
                        continue
                want_values = (want.astype(np.uint32) << 16).view(F32) if e["dtype"] == "BF16" else x
                differs = (held_bits != want).reshape(-1)
                first = int(np.argmax(differs))
                findings.append({"tensor": name, "kind": "value-error", "values": int(differs.sum()), "first": _position(first, shape), "maxAbsDiff": _max_abs_diff(held_values.reshape(-1)[differs], want_values.reshape(-1)[differs])})
                continue
            if e["dtype"] != "F8_E4M3":
                findings.append({"tensor": name, "kind": "not-quantized", "dtype": e["dtype"]})
                continue
            rows, cols = shape
            scale_name = f"{module}.{scale_suffix}"
            s = engine.entries.get(scale_name)
            if s is None:
                other = next((f"{module}.{n}" for n in ("weight_scale", "weight_scale_inv") if f"{module}.{n}" in engine.entries), None)
                if other is not None:
                    raise BadInput(f"--engine: {other}: recipe {recipe} keeps its scales in {scale_name}")
                findings.append({"tensor": scale_name, "kind": "missing"})
                continue
            shapes = scale_shapes(rows, cols, block or 0)
            if s["dtype"] != "F32":
                raise BadInput(f"--engine: {scale_name}: dtype {s['dtype']} (expected F32)")
            if s["shape"] not in shapes:
                raise BadInput(f"--engine: {scale_name}: shape {_shape(s['shape'])} (recipe {recipe} gives {' or '.join(_shape(x) for x in shapes)})")
            codes = np.frombuffer(engine.read(name), np.uint8).reshape(rows, cols)
            scales = np.frombuffer(engine.read(scale_name), "<f4").astype(F32)
            want_codes, want_scales = quantizer(x, block or 0)
            want_scales = want_scales.reshape(-1)
            if np.array_equal(codes, want_codes) and np.array_equal(scales.view(np.uint32), want_scales.view(np.uint32)):
                continue
            if np.all(scales == 1) and not np.all(want_scales == 1):
                findings.append({"tensor": scale_name, "kind": "unity-scale", "count": int(scales.size)})
                continue
            prev = previous_dense(name, shape)
            if prev is not None:
                prev_codes, prev_scales = quantizer(prev[0], block or 0)
                if np.array_equal(codes, prev_codes) and np.array_equal(scales.view(np.uint32), prev_scales.reshape(-1).view(np.uint32)):
                    findings.append({"tensor": name, "kind": "stale"})
                    continue
            unit_rows = block if granularity == "block" else 1
            per_unit = -(-cols // block) if granularity == "block" else 1 if granularity == "row" else 0
            scale_bits, want_scale_bits = scales.view(np.uint32), want_scales.view(np.uint32)
            if granularity != "tensor" or np.array_equal(scale_bits, want_scale_bits):
                sb = scale_bits if per_unit else None
                wsb = want_scale_bits if per_unit else None
                order = _row_permutation(_unit_keys(want_codes, unit_rows, wsb, per_unit), _unit_keys(codes, unit_rows, sb, per_unit))
                if order is not None:
                    findings.append(_permutation_finding(name, order, unit_rows))
                    continue
            # Each element's scale cell, then the elements whose code or cell scale differ.
            r_idx, c_idx = np.indices((rows, cols))
            cell = (r_idx // block) * per_unit + c_idx // block if granularity == "block" else r_idx if granularity == "row" else np.zeros_like(r_idx)
            differs = (codes != want_codes) | (scale_bits[cell] != want_scale_bits[cell])
            flat = differs.reshape(-1)
            held = (E4M3_VALUES[codes] * scales[cell]).astype(F32)
            wanted = (E4M3_VALUES[want_codes] * want_scales[cell]).astype(F32)
            findings.append({
                "tensor": name, "kind": "value-error",
                "codes": int((codes != want_codes).sum()), "scales": int((scale_bits != want_scale_bits).sum()),
                "first": _position(int(np.argmax(flat)), shape),
                "maxAbsDiff": _max_abs_diff(held[differs], wanted[differs]),
            })

        kv_names = sorted(n for n in engine.entries if (n.endswith(".k_scale") or n.endswith(".v_scale")) and n not in trainer.entries)
        for name in kv_names:
            values, _ = engine.dense(name)
            if values.size > 0 and np.all(values == 1):
                findings.append({"tensor": name, "kind": "unity-scale", "count": int(values.size)})
        return {"findings": findings, "tensors": len(names), "quantized": int(quantized), "kvScales": len(kv_names), "recipe": recipe, "block": block, "match": match}
    finally:
        for f in files:
            f.close()


def _shape(shape: list[int]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (as the CLI's UsageError)
        print(f"refit_check: {message}", file=sys.stderr)
        sys.exit(2)


def main(argv: list[str] | None = None) -> int:
    p = _Parser(prog="python -m qrl_golden.refit_check", allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("--trainer", required=True)
    p.add_argument("--engine", required=True)
    p.add_argument("--recipe", required=True)
    p.add_argument("--block", type=int)
    p.add_argument("--previous")
    p.add_argument("--ignore", action="append", default=[])
    p.add_argument("--match", default="substring", choices=[*MATCH_RULES, *MATCH_ALIASES])
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    if a.block is not None and a.block < 1:
        p.error(f"--block: expected an integer ≥ 1, got '{a.block}'")
    try:
        result = refit_check(a.trainer, a.engine, a.recipe, a.block, a.previous, a.ignore, MATCH_ALIASES.get(a.match, a.match))
    except BadInput as e:
        print(f"refit_check: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(result, separators=(",", ":"), ensure_ascii=False))
    else:
        for f in result["findings"]:
            detail = " ".join(f"{k}={_text(v)}" for k, v in f.items() if k not in ("tensor", "kind"))
            print(f"{f['tensor']}  {f['kind']}" + (f"  {detail}" if detail else ""))
        n = len(result["findings"])
        blk = "" if result["block"] is None else f" {result['block']}×{result['block']}"
        state = "clean" if n == 0 else f"{n} finding{'' if n == 1 else 's'}"
        print(f"{result['tensors']} tensors ({result['quantized']} quantized by {result['recipe']}{blk}, ignore rule {result['match']}), {result['kvScales']} kv scales: {state}")
    return 0 if not result["findings"] else 1


def _text(v: Any) -> str:
    if isinstance(v, list):
        return "[" + ",".join(str(x) for x in v[:16]) + (",…]" if len(v) > 16 else "]")
    if v is None:
        return "null"
    return str(v)


if __name__ == "__main__":
    sys.exit(main())
