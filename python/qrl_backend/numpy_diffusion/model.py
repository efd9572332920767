"""The toy masked-diffusion policy's network in numpy (docs/policies-diffusion.md "Model"): token and
learned position embeddings, pre-norm GPT-2 blocks (LayerNorm with bias, biased q/k/v/o, GELU MLP
with biases) with full bidirectional attention, a final LayerNorm and a separate LM head; MASK is an
ordinary input token and there is no timestep input. Forward and backward under the `fp32` and `bf16`
plans with the NN core's arithmetic: every GEMM forms float32 products and adds them in float32 in
increasing k from +0 (`bf16`: both operands rounded to bf16 first), elementwise layers compute in
doubles and store float32, reductions are sequential. Parameter names and the GPT-2 initialization
from the named stream `<seed>/diffusion-policy/init/<tensor>` are the TypeScript ParamStore's, so a
weights file is interchangeable. Not the sampler, the estimators or the optimizer."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Dict, List, Tuple

import numpy as np

from .fdlibm import exp_array
from .rng import Rng

EPS = 1e-5
GELU_SCALE = math.sqrt(2 / math.pi)
CONFIG_KEY = "qrl-sim.diffusion-config"  # safetensors metadata key holding the model config as JSON
F32 = np.float32

#: docs/policies-diffusion.md "Presets".
PRESETS = {
    "tiny": {"C": 32, "layers": 2, "H": 4, "hidden": 128},
    "small": {"C": 64, "layers": 4, "H": 4, "hidden": 256},
    "medium": {"C": 128, "layers": 4, "H": 8, "hidden": 512},
}


@dataclass(frozen=True)
class DiffusionConfig:
    """The model's shape (the TypeScript DiffusionModelConfig keys). Toy defaults: C 32, H 4, hidden
    128, 2 layers, maxLen 64 (docs/policies-diffusion.md)."""

    vocabSize: int
    maxLen: int = 64
    C: int = 32
    H: int = 4
    layers: int = 2
    hidden: int = 128

    def __post_init__(self) -> None:
        for k in ("vocabSize", "maxLen", "C", "H", "layers", "hidden"):
            v = getattr(self, k)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"diffusion model: {k} must be a positive integer, got {v!r}")
        if self.vocabSize < 5:
            raise ValueError(f"diffusion model: vocabSize must be ≥ 5 (ids 0–4 are PAD BOS EOS SEP MASK), got {self.vocabSize}")
        if self.C % self.H:
            raise ValueError(f"diffusion model: C ({self.C}) must be divisible by H ({self.H})")

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @staticmethod
    def from_json(text: str) -> "DiffusionConfig":
        d = json.loads(text)
        if not isinstance(d, dict):
            raise ValueError("diffusion model: expected a JSON object")
        extra = set(d) - set(DiffusionConfig.__dataclass_fields__)
        if extra:
            raise ValueError(f"diffusion model: unknown fields {sorted(extra)}")
        return DiffusionConfig(**d)


def config_from_run(model: Dict, vocab_size: int) -> DiffusionConfig:
    """`policy.model` of a run config ({preset?, C, H, layers, hidden, maxLen}) → the config; a preset's
    fields are overridden by the fields set next to it."""
    m = dict(model or {})
    preset = m.pop("preset", None)
    base = {"maxLen": 64, **PRESETS["tiny"]}
    if preset is not None:
        if preset not in PRESETS:
            raise ValueError(f"policy.model.preset: unknown preset {preset!r} (known: {', '.join(PRESETS)})")
        base.update(PRESETS[preset])
    for k in ("moe", "outliers"):
        if m.get(k):
            raise ValueError(f"policy.model.{k}: not supported by the numpy diffusion backend")
        m.pop(k, None)
    base.update(m)
    return DiffusionConfig(vocabSize=vocab_size, **base)


def param_specs(cfg: DiffusionConfig) -> List[Tuple[str, Tuple[int, ...], Tuple[str, float]]]:
    """(name, shape, init) in the TypeScript buffer order; init ('normal', std) or ('constant', value)."""
    V, C, Hd, L = cfg.vocabSize, cfg.C, cfg.hidden, cfg.layers
    w, res = ("normal", 0.02), ("normal", 0.02 / math.sqrt(2 * L))
    one, zero = ("constant", 1.0), ("constant", 0.0)
    specs = [("wte", (V, C), w), ("wpe", (cfg.maxLen, C), w)]
    for l in range(L):
        p = f"h{l}."
        specs += [(p + "ln1.weight", (C,), one), (p + "ln1.bias", (C,), zero)]
        for x in "qkvo":
            specs += [(p + f"attn.w{x}", (C, C), res if x == "o" else w), (p + f"attn.b{x}", (C,), zero)]
        specs += [(p + "ln2.weight", (C,), one), (p + "ln2.bias", (C,), zero)]
        specs += [(p + "mlp.up", (Hd, C), w), (p + "mlp.upBias", (Hd,), zero), (p + "mlp.down", (C, Hd), res), (p + "mlp.downBias", (C,), zero)]
    specs += [("lnf.weight", (C,), one), ("lnf.bias", (C,), zero), ("lmHead", (V, C), w)]
    return specs


def init_params(cfg: DiffusionConfig, seed: str) -> Dict[str, np.ndarray]:
    """GPT-2 initialization from the stream `<seed>/init/<tensor>` (std · normal() per element, stored
    float32); `seed` is the store's seed path, `<run seed>/diffusion-policy` for a run."""
    root = Rng(seed).fork("init")
    out = {}
    for name, shape, (kind, val) in param_specs(cfg):
        n = int(np.prod(shape))
        if kind == "normal":
            r = root.fork(name)
            out[name] = np.array([val * r.normal() for _ in range(n)], dtype=np.float64).astype(F32).reshape(shape)
        else:
            out[name] = np.full(shape, val, dtype=F32)
    return out


def check_params(cfg: DiffusionConfig, params: Dict[str, np.ndarray]) -> None:
    """Raises naming the first missing, extra or mis-shaped tensor."""
    names = set()
    for n, shape, _ in param_specs(cfg):
        names.add(n)
        if n not in params:
            raise ValueError(f"weights: missing tensor {n!r}")
        if tuple(params[n].shape) != shape:
            raise ValueError(f"weights: {n} must have shape {list(shape)}, got {list(params[n].shape)}")
    extra = sorted(set(params) - names)
    if extra:
        raise ValueError(f"weights: unexpected tensors {extra}")


# --- arithmetic ------------------------------------------------------------------------------


def round_bf16(x: np.ndarray) -> np.ndarray:
    """float32 → bfloat16 (round to nearest, ties to even) → float32."""
    b = np.ascontiguousarray(x, dtype=F32).view(np.uint32).astype(np.uint64)
    r = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return r.astype(np.uint32).view(F32)


def seq_gemm(a: np.ndarray, bt: np.ndarray) -> np.ndarray:
    """out[..., i, j] = Σ_p a[..., i, p]·bt[..., j, p]: each product rounded to float32, added in
    float32 in increasing p from +0 (the NN core's sequential GEMM)."""
    a = np.asarray(a, dtype=F32)
    bt = np.asarray(bt, dtype=F32)
    K = a.shape[-1]
    acc = np.zeros(np.broadcast_shapes(a.shape[:-2], bt.shape[:-2]) + (a.shape[-2], bt.shape[-2]), dtype=F32)
    for p in range(K):
        acc += a[..., :, p, None] * bt[..., None, :, p]
    return acc


class Plan:
    """One side of a precision plan: `fp32` (float32 operands) or `bf16` (operands of every GEMM —
    projections, MLP, attention QKᵀ/PV and their backward, LM head — rounded to bf16; float32
    accumulation). The plan data are qrl-sim's presets of the same names."""

    PLANS = {
        "fp32": {"gemm": {"kind": "fp32"}},
        "bf16": {"gemm": {"kind": "rounding", "operands": "bf16"}},
    }

    def __init__(self, name: str):
        if name not in self.PLANS:
            raise ValueError(f"plan: {name!r} is not supported by this backend (known: {', '.join(self.PLANS)})")
        self.name = name

    def op(self, x: np.ndarray) -> np.ndarray:
        return round_bf16(x) if self.name == "bf16" else np.asarray(x, dtype=F32)

    def mm(self, a: np.ndarray, bt: np.ndarray) -> np.ndarray:
        return seq_gemm(self.op(a), self.op(bt))


def _seqsum(x: np.ndarray, axis: int) -> np.ndarray:
    """Sequential double sum along `axis` (JavaScript's left-to-right loop, not numpy's pairwise sum)."""
    x = np.moveaxis(np.asarray(x, dtype=np.float64), axis, 0)
    s = np.zeros(x.shape[1:])
    for i in range(x.shape[0]):
        s = s + x[i]
    return s


def _layernorm(x: np.ndarray, w: np.ndarray, b: np.ndarray):
    """(N, C) → out, mean, rstd (float32): sums in doubles, mean and rstd stored float32."""
    C = x.shape[-1]
    xd = x.astype(np.float64)
    mean = (_seqsum(xd, 1) / C).astype(F32)
    d = xd - mean.astype(np.float64)[:, None]
    rstd = (1 / np.sqrt(_seqsum(d * d, 1) / C + EPS)).astype(F32)
    n = d * rstd.astype(np.float64)[:, None]
    return (n * w.astype(np.float64) + b.astype(np.float64)).astype(F32), mean, rstd


def _layernorm_bwd(dinp, dw, db, dout, x, w, mean, rstd):
    """Accumulates into dinp (N, C), dw (C), db (C) in place, row by row as the NN core does."""
    C = x.shape[-1]
    n = (x.astype(np.float64) - mean.astype(np.float64)[:, None]) * rstd.astype(np.float64)[:, None]
    dy = dout.astype(np.float64)
    dn = w.astype(np.float64) * dy
    dn_mean = _seqsum(dn, 1) / C
    dnn_mean = _seqsum(dn * n, 1) / C
    r = rstd.astype(np.float64)[:, None]
    dinp[...] = (dinp.astype(np.float64) + r * (dn - dn_mean[:, None] - n * dnn_mean[:, None])).astype(F32)
    ndy = n * dy
    for i in range(x.shape[0]):
        db[...] = (db.astype(np.float64) + dy[i]).astype(F32)
        dw[...] = (dw.astype(np.float64) + ndy[i]).astype(F32)


def _linear(plan: Plan, x: np.ndarray, w: np.ndarray, b) -> np.ndarray:
    out = plan.mm(x, w)
    return out if b is None else out + b


def _linear_bwd(plan: Plan, dinp, G, wname, bname, dout, x, w):
    """dinp += dout·W (float32 add of the GEMM result); G[w] += doutᵀ·x; G[b] += Σ_rows dout (double sum)."""
    if dinp is not None:
        dinp += plan.mm(dout, w.T)
    G[wname] += plan.mm(dout.T, x.T)
    if bname is not None:
        G[bname][...] = (G[bname].astype(np.float64) + _seqsum(dout, 0)).astype(F32)


def _softmax_rows(S: np.ndarray, scale: float) -> np.ndarray:
    """Attention probabilities in doubles over the last axis (max, exp, sequential sum), stored float32."""
    z = scale * S.astype(np.float64)
    m = np.max(z, axis=-1, keepdims=True)
    e = exp_array(z - m)  # Math.exp's bits (fdlibm), not the C library's
    s = _seqsum(e, e.ndim - 1)[..., None]
    return (e / s).astype(F32)


def forward(cfg: DiffusionConfig, P: Dict[str, np.ndarray], tokens: np.ndarray, plan: Plan):
    """tokens (B, T) int → logits (B, T, V) float32 and the caches for `backward`."""
    tokens = np.asarray(tokens, dtype=np.int64)
    B, T = tokens.shape
    if T > cfg.maxLen:
        raise ValueError(f"forward: T={T} exceeds maxLen={cfg.maxLen}")
    C, H = cfg.C, cfg.H
    hs = C // H
    N = B * T
    scale = 1 / math.sqrt(hs)
    x = (P["wte"][tokens] + P["wpe"][:T][None]).reshape(N, C).astype(F32)
    caches = []
    for l in range(cfg.layers):
        p = f"h{l}."
        c: Dict[str, object] = {"x": x}
        h, c["m1"], c["r1"] = _layernorm(x, P[p + "ln1.weight"], P[p + "ln1.bias"])
        q = _linear(plan, h, P[p + "attn.wq"], P[p + "attn.bq"])
        k = _linear(plan, h, P[p + "attn.wk"], P[p + "attn.bk"])
        v = _linear(plan, h, P[p + "attn.wv"], P[p + "attn.bv"])
        split = lambda a: a.reshape(B, T, H, hs).transpose(0, 2, 1, 3)  # (B, H, T, hs)
        qh, kh, vh = split(plan.op(q)), split(plan.op(k)), split(plan.op(v))
        S = seq_gemm(qh, kh)  # (B, H, T, T)
        att = _softmax_rows(S, scale)
        oh = seq_gemm(plan.op(att), vh.transpose(0, 1, 3, 2))  # (B, H, T, hs)
        a = oh.transpose(0, 2, 1, 3).reshape(N, C)
        x1 = x + _linear(plan, a, P[p + "attn.wo"], P[p + "attn.bo"])
        h2, c["m2"], c["r2"] = _layernorm(x1, P[p + "ln2.weight"], P[p + "ln2.bias"])
        up = _linear(plan, h2, P[p + "mlp.up"], P[p + "mlp.upBias"])
        u = up.astype(np.float64)
        act = (0.5 * u * (1 + np.tanh(GELU_SCALE * (u + 0.044715 * u * u * u)))).astype(F32)
        x = x1 + _linear(plan, act, P[p + "mlp.down"], P[p + "mlp.downBias"])
        c.update(h=h, qh=qh, kh=kh, vh=vh, att=att, a=a, x1=x1, h2=h2, up=up, act=act)
        caches.append(c)
    xf, mf, rf = _layernorm(x, P["lnf.weight"], P["lnf.bias"])
    logits = plan.mm(xf, P["lmHead"])
    return logits.reshape(B, T, -1), {"tokens": tokens, "blocks": caches, "xlast": x, "mf": mf, "rf": rf, "xf": xf}


def backward(cfg: DiffusionConfig, P: Dict[str, np.ndarray], G: Dict[str, np.ndarray], cache, dlogits: np.ndarray, plan: Plan) -> None:
    """Accumulates the gradients of Σ dlogits·logits into G (float32 arrays named as P), in place."""
    tokens = cache["tokens"]
    B, T = tokens.shape
    N = B * T
    C, H = cfg.C, cfg.H
    hs = C // H
    scale = 1 / math.sqrt(hs)
    dl = np.asarray(dlogits, dtype=F32).reshape(N, -1)
    dxf = np.zeros((N, C), F32)
    _linear_bwd(plan, dxf, G, "lmHead", None, dl, cache["xf"], P["lmHead"])
    dx = np.zeros((N, C), F32)
    _layernorm_bwd(dx, G["lnf.weight"], G["lnf.bias"], dxf, cache["xlast"], P["lnf.weight"], cache["mf"], cache["rf"])
    for l in reversed(range(cfg.layers)):
        p = f"h{l}."
        c = cache["blocks"][l]
        dx1 = dx.copy()
        dact = np.zeros((N, cfg.hidden), F32)
        _linear_bwd(plan, dact, G, p + "mlp.down", p + "mlp.downBias", dx, c["act"], P[p + "mlp.down"])
        u = c["up"].astype(np.float64)
        th = np.tanh(GELU_SCALE * (u + 0.044715 * u * u * u))
        g = 0.5 * (1 + th) + 0.5 * u * (1 - th * th) * GELU_SCALE * (1 + 3 * 0.044715 * u * u)
        dup = (g * dact.astype(np.float64)).astype(F32)
        dln2 = np.zeros((N, C), F32)
        _linear_bwd(plan, dln2, G, p + "mlp.up", p + "mlp.upBias", dup, c["h2"], P[p + "mlp.up"])
        _layernorm_bwd(dx1, G[p + "ln2.weight"], G[p + "ln2.bias"], dln2, c["x1"], P[p + "ln2.weight"], c["m2"], c["r2"])
        dinp = dx1.copy()
        datt = np.zeros((N, C), F32)
        _linear_bwd(plan, datt, G, p + "attn.wo", p + "attn.bo", dx1, c["a"], P[p + "attn.wo"])
        doh = plan.op(datt).reshape(B, T, H, hs).transpose(0, 2, 1, 3)  # (B, H, T, hs)
        att, qh, kh, vh = c["att"], c["qh"], c["kh"], c["vh"]
        dP = seq_gemm(doh, vh)  # (B, H, T, T)
        dvh = seq_gemm(plan.op(att).transpose(0, 1, 3, 2), doh.transpose(0, 1, 3, 2))  # (B, H, T, hs)
        A = att.astype(np.float64)
        dot = _seqsum(A * dP.astype(np.float64), 3)[..., None]
        dS = (scale * A * (dP.astype(np.float64) - dot)).astype(F32)
        dSr = plan.op(dS)
        dqh = seq_gemm(dSr, kh.transpose(0, 1, 3, 2))
        dkh = seq_gemm(dSr.transpose(0, 1, 3, 2), qh.transpose(0, 1, 3, 2))
        merge = lambda a: np.ascontiguousarray(a.transpose(0, 2, 1, 3).reshape(N, C))
        dln1 = np.zeros((N, C), F32)
        for name, d in (("q", dqh), ("k", dkh), ("v", dvh)):
            _linear_bwd(plan, dln1, G, p + f"attn.w{name}", p + f"attn.b{name}", merge(d), c["h"], P[p + f"attn.w{name}"])
        _layernorm_bwd(dinp, G[p + "ln1.weight"], G[p + "ln1.bias"], dln1, c["x"], P[p + "ln1.weight"], c["m1"], c["r1"])
        dx = dinp
    pos = np.tile(np.arange(T), B)
    np.add.at(G["wte"], tokens.reshape(-1), dx)
    np.add.at(G["wpe"], pos, dx)
