"""The transformers backend's engine dump and its planted refit faults: `dump_engine` writes what the
rollout engine computes with after `sync` in the Hugging Face FP8 checkpoint conventions that
`qrl-sim refit-check` reads (docs/refit-check.md §8), and the trainer's state dict beside it; `FAULTS`
are refits that go wrong without an error (docs/refit.md "Faults"), planted by `--fault` as a test and
diagnostic hook. Not the refit itself (numerics.refit_engine) nor the check (qrl_golden.refit_check)."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import nn

from .names import FAULTS
from .numerics import PlanLinear

# The faults `--fault` plants (FAULTS, names.py), as the plan faults of docs/refit.md name them:
# halves-swapped — every MLP's gate and up weights exchanged (a fused w13 read as w31, verl #7986);
# rows-permuted — each pair of B-row blocks of every quantized weight (codes and scales) exchanged;
# stale-sync — `sync` refits from the trainer weights of the previous sync (the first is right);
# unity-kv-scales — the FP8 KV-cache scales set to 1.0 and never recalibrated (NeMo-RL #3225/#3226);
# ignore-rule — the engine keeps in high precision the modules that IGNORE_RULE's list catches by
# substring in the engine's module names (`mlp.gate` also catches `mlp.gate_up_proj`, verl #7519).
#: The ignore list and matching rule of the `ignore-rule` fault: verl #7519's router entry under vLLM's substring test.
IGNORE_RULE = (("lm_head", "mlp.gate"), "substring")

ENGINE_FILE = "engine.safetensors"
TRAINER_FILE = "trainer.safetensors"


def check_fault(fault: Optional[str], side: Dict[str, Any]) -> None:
    """Refuses a fault this plan side cannot have (ValueError naming --fault)."""
    if fault is None:
        return
    if fault not in FAULTS:
        raise ValueError(f"--fault: must be one of {', '.join(FAULTS)}, got {fault!r}")
    if fault == "unity-kv-scales" and side.get("kv") != "fp8":
        raise ValueError("--fault: unity-kv-scales needs an FP8 KV cache (--plan hf-fp8-kv)")
    if fault in ("halves-swapped", "rows-permuted", "ignore-rule") and side["linear"][0] == "exact":
        raise ValueError(f"--fault: {fault} needs quantized linears (--plan hf-fp8-rollout, hf-fp8-kv, hf-fp8-w8a8-rollout or hf-int8-rollout)")


def engine_module_name(name: str) -> str:
    """The engine's name of a transformers module: gate_proj and up_proj are one fused `gate_up_proj`
    (vLLM's merged module; qrl-sim's engineModuleName, src/policies/ignore-rules.ts)."""
    for part in (".gate_proj", ".up_proj"):
        if name.endswith(part):
            return name[: -len(part)] + ".gate_up_proj"
    return name


def _swap_row_blocks(x: torch.Tensor, rows_per_unit: int) -> torch.Tensor:
    """Each pair of `rows_per_unit`-row units of x exchanged (a trailing odd unit stays)."""
    y = x.clone()
    for b in range(0, x.shape[0] // rows_per_unit - 1, 2):
        i, j = b * rows_per_unit, (b + 1) * rows_per_unit
        y[i:j], y[j : j + rows_per_unit] = x[j : j + rows_per_unit], x[i:j]
    return y


def plant_after_refit(engine: nn.Module, fault: Optional[str], side: Dict[str, Any], block: int) -> None:
    """Applies a fault that changes what the refit left in the engine (all but stale-sync)."""
    if fault is None or fault == "stale-sync":
        return
    if fault == "unity-kv-scales":
        one = torch.tensor(1.0, dtype=torch.float64)
        for m in engine.modules():
            if hasattr(m, "_qrl_kv_scale"):
                m._qrl_kv_scale = (one, one)  # held, so never recalibrated
        return
    linears = {n: m for n, m in engine.named_modules() if isinstance(m, PlanLinear) and m.qweight is not None}
    if fault == "ignore-rule":
        from qrl_golden.refit_check import MATCH_RULES  # the matching refit-check itself applies

        ignore, rule = IGNORE_RULE
        for n, m in linears.items():
            if any(MATCH_RULES[rule](engine_module_name(n), p) for p in ignore):
                m.gemm = ("exact", side["head"])
                m.qweight = m.wscale = None
        return
    if fault == "halves-swapped":
        for n, m in linears.items():
            if n.endswith(".gate_proj") and n[: -len("gate_proj")] + "up_proj" in linears:
                up = linears[n[: -len("gate_proj")] + "up_proj"]
                m.qweight, up.qweight = up.qweight, m.qweight
                m.wscale, up.wscale = up.wscale, m.wscale
        return
    # rows-permuted: block FP8 keeps one scale row per B rows, per-channel one scale per row
    blockwise = side["linear"][0] == "fp8-block"
    for m in linears.values():
        m.qweight = _swap_row_blocks(m.qweight.view(torch.uint8), block).view(m.qweight.dtype)
        m.wscale = _swap_row_blocks(m.wscale, 1 if blockwise else block)


def recipe_of(side: Dict[str, Any], block: int) -> Tuple[str, Optional[int]]:
    """The refit-check recipe of a plan side's linears: block FP8 → deepseek-fp8-block B, FP8 W8A8
    (per-channel weight scales) → vllm-fp8-token, exact → vllm-fp8-tensor (nothing is quantized)."""
    kind = side["linear"][0]
    if kind == "fp8-block":
        return "deepseek-fp8-block", block
    if kind == "fp8-w8a8":
        return "vllm-fp8-token", None
    if kind == "int8-w8a8":
        raise ValueError("dumpEngine: refit-check reads FP8 checkpoints; the INT8 engine of hf-int8-rollout is not dumped")
    return "vllm-fp8-tensor", None


def _fusable(rows: int, recipe: Tuple[str, Optional[int]]) -> bool:
    """gate and up can be written as one gate_up_proj tensor: per-row scales always, B×B blocks when B divides the rows."""
    return recipe[1] is None or rows % recipe[1] == 0


def _fuse_gate_up(tensors: Dict[str, torch.Tensor], recipe: Tuple[str, Optional[int]]) -> Dict[str, torch.Tensor]:
    """`P.gate_proj.X` and `P.up_proj.X` stacked along rows as `P.gate_up_proj.X` ([gate; up], w13), when fusable."""
    out = dict(tensors)
    for name in list(tensors):
        if not name.endswith(".gate_proj.weight"):
            continue
        prefix = name[: -len("gate_proj.weight")]
        if prefix + "up_proj.weight" not in tensors or not _fusable(tensors[name].shape[0], recipe):
            continue
        for suffix in ("weight", "weight_scale_inv", "weight_scale", "bias"):
            g, u = prefix + "gate_proj." + suffix, prefix + "up_proj." + suffix
            if g in out and u in out:
                out[prefix + "gate_up_proj." + suffix] = torch.cat([out.pop(g), out.pop(u)], dim=0).contiguous()
    return out


def _save(tensors: Dict[str, torch.Tensor], path: str) -> None:
    from safetensors.torch import save_file

    save_file({k: v.detach().to("cpu").contiguous().clone() for k, v in sorted(tensors.items())}, path)


def dump_engine(engine: nn.Module, trainer: nn.Module, side: Dict[str, Any], block: int, directory: str) -> Dict[str, Any]:
    """Writes `engine.safetensors` (what the engine computes with: a quantized linear as `X.weight`
    F8_E4M3 codes with `X.weight_scale_inv` (F32 block scales) or `X.weight_scale` (F32 (rows, 1)
    channel scales); every other tensor as held; `…self_attn.k_scale`/`v_scale` (F32 scalars) where the
    FP8 KV cache holds scales) and `trainer.safetensors` (the trainer's state dict) under `directory`,
    gate/up fused as the engine names them. Returns the refit-check arguments for the plan's intent."""
    recipe = recipe_of(side, block)
    scale_name = "weight_scale_inv" if recipe[0] == "deepseek-fp8-block" else "weight_scale"
    quantized = {n: m for n, m in engine.named_modules() if isinstance(m, PlanLinear) and m.qweight is not None}
    tensors: Dict[str, torch.Tensor] = {}
    for name, t in engine.state_dict().items():
        module = name[: -len(".weight")] if name.endswith(".weight") else None
        if module in quantized:
            m = quantized[module]
            tensors[name] = m.qweight
            tensors[f"{module}.{scale_name}"] = m.wscale.to(torch.float32)
        else:
            tensors[name] = t
    for n, m in engine.named_modules():
        if getattr(m, "_qrl_kv_scale", None) is not None:
            sk, sv = m._qrl_kv_scale
            tensors[f"{n}.k_scale"] = sk.to(torch.float32).reshape(())
            tensors[f"{n}.v_scale"] = sv.to(torch.float32).reshape(())
    os.makedirs(directory, exist_ok=True)
    _save(_fuse_gate_up(tensors, recipe), os.path.join(directory, ENGINE_FILE))
    _save(_fuse_gate_up(dict(trainer.state_dict()), recipe), os.path.join(directory, TRAINER_FILE))
    # What the plan keeps in high precision: every 2-D weight that is not a quantized linear's (the
    # LM head, the embeddings); under an exact plan, everything.
    linear_names = {n for n, m in trainer.named_modules() if isinstance(m, PlanLinear) and m is not trainer.get_output_embeddings()}
    ignore: List[str] = []
    for name, t in trainer.state_dict().items():
        module = name[: -len(".weight")] if name.endswith(".weight") else None
        if module is None or t.dim() != 2:
            continue
        if module not in linear_names or side["linear"][0] == "exact":
            ignore.append(engine_module_name(module))
    return {"trainer": TRAINER_FILE, "engine": ENGINE_FILE, "recipe": recipe[0], **({"block": recipe[1]} if recipe[1] is not None else {}),
            "ignore": sorted(set(ignore)), "match": "prefix"}
