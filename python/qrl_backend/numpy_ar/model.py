"""The toy AR policy of qrl-sim written independently in numpy: config, parameter names (the TypeScript
ParamStore's, src/policies/ar/config.ts arParamSpecs), forward to logits, backward to parameter
gradients, and the fp32 / bf16 GEMM plans. Not the sampler or the optimizer (backend.py)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Dict, List, Tuple

import numpy as np

EPS = 1e-5
GELU_SCALE = np.sqrt(2.0 / np.pi)
CONFIG_KEY = "qrl-sim.ar-config"  # safetensors metadata key holding the ArConfig as JSON


@dataclass(frozen=True)
class ArConfig:
    """The TypeScript ArConfig (same field names). Supported here: no biases, learned positions."""

    vocabSize: int
    maxLen: int
    C: int = 32
    H: int = 4
    layers: int = 2
    hidden: int = 64
    norm: str = "rmsnorm"
    mlp: str = "swiglu"
    bias: bool = False
    positions: str = "learned"
    tiedEmbeddings: bool = False

    def __post_init__(self) -> None:
        for k in ("vocabSize", "maxLen", "C", "H", "layers", "hidden"):
            v = getattr(self, k)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"ar config: {k} must be a positive integer, got {v!r}")
        if self.C % self.H:
            raise ValueError(f"ar config: H must divide C, got C={self.C}, H={self.H}")
        if self.norm not in ("rmsnorm", "layernorm"):
            raise ValueError(f"ar config: norm must be rmsnorm or layernorm, got {self.norm!r}")
        if self.mlp not in ("swiglu", "gelu"):
            raise ValueError(f"ar config: mlp must be swiglu or gelu, got {self.mlp!r}")
        if self.bias:
            raise ValueError("ar config: bias is not supported by the numpy backend (use bias: false)")
        if self.positions != "learned":
            raise ValueError(f"ar config: positions {self.positions!r} is not supported by the numpy backend (use learned)")

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @staticmethod
    def from_json(text: str) -> "ArConfig":
        d = json.loads(text)
        known = set(ArConfig.__dataclass_fields__)
        extra = set(d) - known
        if extra:
            raise ValueError(f"ar config: unknown fields {sorted(extra)}")
        return ArConfig(**d)


def param_specs(cfg: ArConfig) -> List[Tuple[str, Tuple[int, ...], str]]:
    """(name, shape, init) in the TypeScript buffer order; init is 'w', 'res', 'one'."""
    V, C, Hd = cfg.vocabSize, cfg.C, cfg.hidden
    specs = [("wte", (V, C), "w"), ("wpe", (cfg.maxLen, C), "w")]
    for l in range(cfg.layers):
        p = f"h{l}."
        specs.append((p + "ln1.weight", (C,), "one"))
        for x in "qkvo":
            specs.append((p + f"attn.w{x}", (C, C), "res" if x == "o" else "w"))
        specs.append((p + "ln2.weight", (C,), "one"))
        specs.append((p + "mlp.up", (Hd, C), "w"))
        if cfg.mlp == "swiglu":
            specs.append((p + "mlp.gate", (Hd, C), "w"))
        specs.append((p + "mlp.down", (C, Hd), "res"))
    specs.append(("lnf.weight", (C,), "one"))
    if not cfg.tiedEmbeddings:
        specs.append(("lmHead", (V, C), "w"))
    return specs


def init_params(cfg: ArConfig, seed: int, dtype=np.float32) -> Dict[str, np.ndarray]:
    """GPT-2 initialization (std 0.02, residual projections 0.02/√(2L), norm gains 1) from numpy's PCG64.
    Not the TypeScript stream: the same seed gives other values (load the TS weights to compare)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape, kind in param_specs(cfg):
        if kind == "one":
            out[name] = np.ones(shape, dtype)
        else:
            std = 0.02 if kind == "w" else 0.02 / np.sqrt(2 * cfg.layers)
            out[name] = (rng.standard_normal(shape) * std).astype(dtype)
    return out


def check_params(cfg: ArConfig, params: Dict[str, np.ndarray]) -> None:
    """Raises naming the first missing, extra or mis-shaped tensor."""
    specs = param_specs(cfg)
    names = {n for n, _, _ in specs}
    for n, shape, _ in specs:
        if n not in params:
            raise ValueError(f"weights: missing tensor {n!r}")
        if tuple(params[n].shape) != shape:
            raise ValueError(f"weights: {n} must have shape {list(shape)}, got {list(params[n].shape)}")
    extra = sorted(set(params) - names)
    if extra:
        raise ValueError(f"weights: unexpected tensors {extra}")


# --- GEMM plans ------------------------------------------------------------------------------


def round_bf16(x: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even float32 → bfloat16 → float32 (overflow to ±Inf), elementwise."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return r.astype(np.uint32).view(np.float32)


class Plan:
    """One side of a precision plan: what every GEMM does. `fp32`: float32 products and sums;
    `bf16`: both operands rounded to bf16, float32 accumulation (qrl-sim's `bf16` plan, both sides)."""

    PLANS = {
        "fp32": {"gemm": {"kind": "fp32"}},
        "bf16": {"gemm": {"kind": "rounding", "operands": "bf16"}},
    }

    def __init__(self, name: str):
        if name not in self.PLANS:
            raise ValueError(f"plan: {name!r} is not supported by this backend (known: {', '.join(self.PLANS)})")
        self.name = name

    def op(self, x: np.ndarray) -> np.ndarray:
        if self.name == "bf16" and x.dtype == np.float32:
            return round_bf16(x)
        return x

    def mm(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """a @ b with both operands through the plan (batched over leading axes)."""
        return np.matmul(self.op(a), self.op(b))


# --- forward / backward ----------------------------------------------------------------------


def _norm_fwd(cfg: ArConfig, x: np.ndarray, w: np.ndarray):
    xd = x.astype(np.float64)
    if cfg.norm == "rmsnorm":
        mu = None
        r = 1.0 / np.sqrt(np.mean(xd * xd, axis=-1, keepdims=True) + EPS)
        n = xd * r
    else:
        mu = np.mean(xd, axis=-1, keepdims=True)
        r = 1.0 / np.sqrt(np.mean((xd - mu) ** 2, axis=-1, keepdims=True) + EPS)
        n = (xd - mu) * r
    return (n * w.astype(np.float64)).astype(x.dtype), (mu, r)


def _norm_bwd(cfg: ArConfig, dout: np.ndarray, x: np.ndarray, w: np.ndarray, cache):
    mu, r = cache
    xd, dd, wd = x.astype(np.float64), dout.astype(np.float64), w.astype(np.float64)
    dn = dd * wd
    if cfg.norm == "rmsnorm":
        n = xd * r
        dx = r * (dn - n * np.mean(dn * n, axis=-1, keepdims=True))
    else:
        n = (xd - mu) * r
        dx = r * (dn - np.mean(dn, axis=-1, keepdims=True) - n * np.mean(dn * n, axis=-1, keepdims=True))
    dw = np.sum((n * dd).reshape(-1, x.shape[-1]), axis=0)
    return dx.astype(x.dtype), dw.astype(x.dtype)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return np.where(z >= 0, 1.0 / (1.0 + np.exp(-np.abs(z))), np.exp(-np.abs(z)) / (1.0 + np.exp(-np.abs(z))))


def forward(cfg: ArConfig, P: Dict[str, np.ndarray], tokens: np.ndarray, plan: Plan):
    """tokens (B, T) int → logits (B, T, V) and the caches for `backward`."""
    B, T = tokens.shape
    if T > cfg.maxLen:
        raise ValueError(f"forward: T={T} exceeds maxLen={cfg.maxLen}")
    C, H = cfg.C, cfg.H
    hs = C // H
    dt = P["wte"].dtype
    x = (P["wte"][tokens] + P["wpe"][:T][None]).astype(dt)  # (B, T, C)
    mask = np.tril(np.ones((T, T), dtype=bool))
    scale = 1.0 / np.sqrt(hs)
    caches = []
    for l in range(cfg.layers):
        p = f"h{l}."
        c: Dict[str, object] = {"x": x}
        h, c["n1"] = _norm_fwd(cfg, x, P[p + "ln1.weight"])
        c["h"] = h
        q, k, v = (plan.mm(h, P[p + f"attn.w{n}"].T) for n in "qkv")  # (B, T, C)
        split = lambda a: a.reshape(B, T, H, hs).transpose(0, 2, 1, 3)  # (B, H, T, hs)
        qh, kh, vh = split(q), split(k), split(v)
        S = plan.mm(qh, kh.transpose(0, 1, 3, 2)).astype(np.float64) * scale  # (B, H, T, T)
        S = np.where(mask, S, -np.inf)
        S = S - S.max(axis=-1, keepdims=True)
        E = np.exp(S)
        att = (E / E.sum(axis=-1, keepdims=True)).astype(dt)  # (B, H, T, T)
        oh = plan.mm(att, vh)  # (B, H, T, hs)
        a = oh.transpose(0, 2, 1, 3).reshape(B, T, C)
        o = plan.mm(a, P[p + "attn.wo"].T)
        x1 = (x + o).astype(dt)
        c.update(qh=qh, kh=kh, vh=vh, att=att, a=a, x1=x1)
        h2, c["n2"] = _norm_fwd(cfg, x1, P[p + "ln2.weight"])
        up = plan.mm(h2, P[p + "mlp.up"].T)  # (B, T, Hd)
        if cfg.mlp == "swiglu":
            gate = plan.mm(h2, P[p + "mlp.gate"].T)
            gd = gate.astype(np.float64)
            act = (up.astype(np.float64) * gd * _sigmoid(gd)).astype(dt)
        else:
            gate = None
            u = up.astype(np.float64)
            act = (0.5 * u * (1 + np.tanh(GELU_SCALE * (u + 0.044715 * u**3)))).astype(dt)
        m = plan.mm(act, P[p + "mlp.down"].T)
        x = (x1 + m).astype(dt)
        c.update(h2=h2, up=up, gate=gate, act=act)
        caches.append(c)
    xf, nf = _norm_fwd(cfg, x, P["lnf.weight"])
    head = P["wte"] if cfg.tiedEmbeddings else P["lmHead"]
    logits = plan.mm(xf, head.T)  # (B, T, V)
    return logits, {"tokens": tokens, "blocks": caches, "xlast": x, "nf": nf, "xf": xf}


def backward(cfg: ArConfig, P: Dict[str, np.ndarray], cache, dlogits: np.ndarray, plan: Plan) -> Dict[str, np.ndarray]:
    """Gradients of Σ dlogits·logits with respect to every parameter (a fresh dict)."""
    G = {k: np.zeros_like(v) for k, v in P.items()}
    tokens = cache["tokens"]
    B, T = tokens.shape
    C, H = cfg.C, cfg.H
    hs = C // H
    dt = P["wte"].dtype
    scale = 1.0 / np.sqrt(hs)
    headname = "wte" if cfg.tiedEmbeddings else "lmHead"
    flat = lambda a: a.reshape(-1, a.shape[-1])

    def lin_bwd(dout, inp, wname):
        G[wname] += plan.mm(flat(dout).T, flat(inp))
        return plan.mm(dout, P[wname])

    dxf = lin_bwd(dlogits.astype(dt), cache["xf"], headname)
    dx, dw = _norm_bwd(cfg, dxf, cache["xlast"], P["lnf.weight"], cache["nf"])
    G["lnf.weight"] += dw
    for l in reversed(range(cfg.layers)):
        p = f"h{l}."
        c = cache["blocks"][l]
        # MLP branch
        dact = lin_bwd(dx, c["act"], p + "mlp.down")
        ud = c["up"].astype(np.float64)
        da = dact.astype(np.float64)
        if cfg.mlp == "swiglu":
            gd = c["gate"].astype(np.float64)
            s = _sigmoid(gd)
            dup = (da * gd * s).astype(dt)
            dgate = (da * ud * s * (1 + gd * (1 - s))).astype(dt)
            dh2 = lin_bwd(dup, c["h2"], p + "mlp.up") + lin_bwd(dgate, c["h2"], p + "mlp.gate")
        else:
            u = GELU_SCALE * (ud + 0.044715 * ud**3)
            th = np.tanh(u)
            g = 0.5 * (1 + th) + 0.5 * ud * (1 - th * th) * GELU_SCALE * (1 + 3 * 0.044715 * ud * ud)
            dh2 = lin_bwd((da * g).astype(dt), c["h2"], p + "mlp.up")
        dx1, dw = _norm_bwd(cfg, dh2, c["x1"], P[p + "ln2.weight"], c["n2"])
        G[p + "ln2.weight"] += dw
        dx1 = (dx1 + dx).astype(dt)
        # attention branch
        da_ = lin_bwd(dx1, c["a"], p + "attn.wo")  # (B, T, C)
        doh = da_.reshape(B, T, H, hs).transpose(0, 2, 1, 3)
        att, qh, kh, vh = c["att"], c["qh"], c["kh"], c["vh"]
        dP = plan.mm(doh, vh.transpose(0, 1, 3, 2)).astype(np.float64)
        dvh = plan.mm(att.transpose(0, 1, 3, 2), doh)
        A = att.astype(np.float64)
        dS = (A * (dP - np.sum(A * dP, axis=-1, keepdims=True)) * scale).astype(dt)
        dqh = plan.mm(dS, kh)
        dkh = plan.mm(dS.transpose(0, 1, 3, 2), qh)
        merge = lambda a: a.transpose(0, 2, 1, 3).reshape(B, T, C)
        dh = lin_bwd(merge(dqh), c["h"], p + "attn.wq") + lin_bwd(merge(dkh), c["h"], p + "attn.wk") + lin_bwd(merge(dvh), c["h"], p + "attn.wv")
        dxn, dw = _norm_bwd(cfg, dh, c["x"], P[p + "ln1.weight"], c["n1"])
        G[p + "ln1.weight"] += dw
        dx = (dxn + dx1).astype(dt)
    np.add.at(G["wte"], tokens.reshape(-1), flat(dx))
    G["wpe"][:T] += dx.sum(axis=0)
    return G


def log_softmax_rows(z: np.ndarray, tau: float, keep: np.ndarray | None = None) -> np.ndarray:
    """log softmax(z/τ) over the last axis in float64 (over `keep` only when given; −inf elsewhere)."""
    s = z.astype(np.float64) / tau
    if keep is not None:
        s = np.where(keep, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    return s - (m + np.log(np.sum(np.exp(s - m), axis=-1, keepdims=True)))
