// Mixture-of-experts feed-forward layer: a router GEMM, top-k routing (or a replayed routing), E
// expert MLPs and the Switch load-balancing loss, as a forward/backward pair. Not a block (block.ts
// puts the norm and residual around it) and not a dispatcher across devices: experts run in turn.

import { allocLike, type FloatArray } from './array.js';
import { sequentialLinearGemms, type LinearGemms } from './gemm.js';
import { linearBackward, linearForward } from './linear.js';
import {
  createMlpCache,
  mlpBackward,
  mlpForward,
  sequentialMlpGemms,
  type MlpCache,
  type MlpGemms,
  type MlpKind,
  type MlpWeights,
} from './mlp.js';

/** Sizes and routing rule of an MoE layer. */
export interface MoeConfig {
  /** Number of experts E. */
  readonly experts: number;
  /** Experts per token k (1 ≤ k ≤ E). */
  readonly topK: number;
  /** Nonlinearity of every expert MLP. */
  readonly kind: MlpKind;
}

/** Weights of an MoE layer with model width C and expert hidden width Hd. */
export interface MoeWeights {
  /** (E, C) router; logits = x·routerᵀ. */
  readonly router: FloatArray;
  /** E expert MLPs, each (Hd, C) up/gate and (C, Hd) down. */
  readonly experts: readonly MlpWeights[];
}

/** Gradient buffers of an MoE layer, same shapes as {@link MoeWeights}. */
export type MoeGrads = MoeWeights;

/** The GEMM sites of an MoE layer: the router's and the experts' (shared by every expert). */
export interface MoeGemms {
  readonly router: LinearGemms;
  readonly expert: MlpGemms;
}

/** The default {@link MoeGemms}: sequential everywhere. */
export const sequentialMoeGemms: MoeGemms = Object.freeze({
  router: sequentialLinearGemms,
  expert: sequentialMlpGemms,
});

/** What {@link moeForward} keeps for {@link moeBackward} (and what a rollout records). */
export interface MoeCache {
  /** (N, E) router logits. */
  readonly logits: FloatArray;
  /** (N, E) softmax of the logits over all experts. */
  readonly probs: FloatArray;
  /** (N, k) chosen experts per token, in rank order (computed, or the replayed ones). */
  readonly routing: Int32Array;
  /** (N, k) gate of each chosen expert: its probability renormalised over the chosen set. */
  readonly gates: Float64Array;
  /** (N, k) row of token n inside the batch of its j-th expert. */
  readonly slots: Int32Array;
  /** Per expert: the token rows routed to it, in increasing order (refilled by each forward). */
  readonly tokens: Int32Array[];
  /** Per expert: (n_e, C) gathered inputs. */
  readonly inputs: FloatArray[];
  /** Per expert: (n_e, C) expert outputs before gating. */
  readonly outputs: FloatArray[];
  /** Per expert: the expert MLP's cache. */
  readonly mlp: MlpCache[];
}

/**
 * The k experts of largest probability in one row, in decreasing probability; equal probabilities
 * rank by the lower expert index (a fixed rule, so routing is deterministic).
 */
export function topKExperts(
  probs: ArrayLike<number>,
  offset: number,
  E: number,
  k: number,
  out: Int32Array,
  outOffset: number,
): void {
  for (let j = 0; j < k; j++) {
    let best = -1;
    let bestP = -Infinity;
    for (let e = 0; e < E; e++) {
      let taken = false;
      for (let i = 0; i < j; i++) if (out[outOffset + i] === e) taken = true;
      const p = probs[offset + e] as number;
      if (!taken && (p > bestP || best === -1)) {
        best = e;
        bestP = p;
      }
    }
    out[outOffset + j] = best;
  }
}

function checkConfig(cfg: MoeConfig, w: MoeWeights): void {
  if (!Number.isInteger(cfg.experts) || cfg.experts < 1)
    throw new Error(`moe: experts must be a positive integer, got ${cfg.experts}`);
  if (!Number.isInteger(cfg.topK) || cfg.topK < 1 || cfg.topK > cfg.experts)
    throw new Error(`moe: topK must be an integer in [1, ${cfg.experts}], got ${cfg.topK}`);
  if (w.experts.length !== cfg.experts)
    throw new Error(`moe: expected ${cfg.experts} expert weight sets, got ${w.experts.length}`);
}

/**
 * MoE forward (Mixtral / Qwen3-MoE routing): `logits = x·routerᵀ`, `p = softmax(logits)`, the top-k
 * experts by p (or `replay`), gates `g_j = p_{e_j} / Σ_{i<k} p_{e_i}`, and
 * `out_n = Σ_j g_{n,j} · expert_{e_j}(x_n)`, summed over j in rank order in doubles and stored once.
 * With `replay` the choice is given (routing replay: R2 replays the trainer's own earlier choice, R3
 * the rollout engine's); the gates are still computed from this pass's router, so the router trains.
 * A replay row of k × −1 (a position the recording engine never ran) takes this pass's own top-k.
 *
 * @param out - (N, C)
 * @param cache - from {@link createMoeCache}, filled
 * @param inp - (N, C)
 * @param replay - (N, k) expert indices to use instead of the top-k (a row of −1: the own top-k), or null
 */
export function moeForward(
  out: FloatArray,
  cache: MoeCache,
  inp: FloatArray,
  w: MoeWeights,
  N: number,
  C: number,
  Hd: number,
  cfg: MoeConfig,
  gemms: MoeGemms = sequentialMoeGemms,
  replay: Int32Array | null = null,
): void {
  checkConfig(cfg, w);
  const { experts: E, topK: k } = cfg;
  linearForward(cache.logits, inp, w.router, null, N, C, E, gemms.router); // (N, E)
  for (let n = 0; n < N; n++) {
    let m = -Infinity;
    for (let e = 0; e < E; e++) m = Math.max(m, cache.logits[n * E + e] as number);
    let s = 0;
    for (let e = 0; e < E; e++) s += Math.exp((cache.logits[n * E + e] as number) - m);
    for (let e = 0; e < E; e++) cache.probs[n * E + e] = Math.exp((cache.logits[n * E + e] as number) - m) / s;
  }
  if (replay === null) {
    for (let n = 0; n < N; n++) topKExperts(cache.probs, n * E, E, k, cache.routing, n * k);
  } else {
    if (replay.length !== N * k)
      throw new Error(`moe: replay routing must hold N·k = ${N * k} experts, got ${replay.length}`);
    for (let n = 0; n < N; n++) {
      if (replay[n * k] === -1) {
        // a row of −1 (a position the recording engine never ran): this pass's own top-k
        for (let j = 1; j < k; j++)
          if (replay[n * k + j] !== -1)
            throw new Error(
              `moe: replay routing of token ${n} mixes −1 and experts (${Array.from(replay.subarray(n * k, n * k + k)).join(', ')})`,
            );
        topKExperts(cache.probs, n * E, E, k, cache.routing, n * k);
        continue;
      }
      for (let i = n * k; i < n * k + k; i++) {
        const e = replay[i] as number;
        if (!Number.isInteger(e) || e < 0 || e >= E)
          throw new Error(`moe: replay routing[${i}] must be an expert in [0, ${E}), got ${e}`);
        for (let i0 = n * k; i0 < i; i0++)
          if (replay[i0] === e) throw new Error(`moe: replay routing of token ${n} names expert ${e} twice`);
        cache.routing[i] = e;
      }
    }
  }
  for (let n = 0; n < N; n++) {
    let s = 0;
    for (let j = 0; j < k; j++) s += cache.probs[n * E + (cache.routing[n * k + j] as number)] as number;
    for (let j = 0; j < k; j++)
      cache.gates[n * k + j] = (cache.probs[n * E + (cache.routing[n * k + j] as number)] as number) / s;
  }
  // Dispatch: each expert runs on the rows routed to it, in increasing token order.
  const counts = new Int32Array(E);
  for (let i = 0; i < N * k; i++) cache.slots[i] = counts[cache.routing[i] as number]!++;
  cache.tokens.length = cache.inputs.length = cache.outputs.length = cache.mlp.length = 0;
  for (let e = 0; e < E; e++) {
    const n_e = counts[e] as number;
    cache.tokens.push(new Int32Array(n_e));
    cache.inputs.push(allocLike(inp, n_e * C)); // (n_e, C)
    cache.outputs.push(allocLike(inp, n_e * C)); // (n_e, C)
    cache.mlp.push(createMlpCache(inp, n_e, Hd, cfg.kind));
  }
  for (let n = 0; n < N; n++) {
    for (let j = 0; j < k; j++) {
      const e = cache.routing[n * k + j] as number;
      const r = cache.slots[n * k + j] as number;
      (cache.tokens[e] as Int32Array)[r] = n;
      (cache.inputs[e] as FloatArray).set(inp.subarray(n * C, n * C + C), r * C);
    }
  }
  for (let e = 0; e < E; e++) {
    const n_e = (cache.tokens[e] as Int32Array).length;
    if (n_e > 0)
      mlpForward(
        cache.outputs[e] as FloatArray,
        cache.mlp[e] as MlpCache,
        cache.inputs[e] as FloatArray,
        w.experts[e] as MlpWeights,
        n_e,
        C,
        Hd,
        cfg.kind,
        gemms.expert,
      );
  }
  // Combine: out_n = Σ_j g_{n,j} · y_{e_j}[slot], in rank order.
  for (let n = 0; n < N; n++) {
    for (let c = 0; c < C; c++) {
      let s = 0;
      for (let j = 0; j < k; j++) {
        const y = cache.outputs[cache.routing[n * k + j] as number] as FloatArray;
        s += (cache.gates[n * k + j] as number) * (y[(cache.slots[n * k + j] as number) * C + c] as number);
      }
      out[n * C + c] = s;
    }
  }
}

/** Allocates an {@link MoeCache} for N tokens (the per-expert parts are sized by the forward). */
export function createMoeCache(like: FloatArray, N: number, cfg: MoeConfig): MoeCache {
  return {
    logits: allocLike(like, N * cfg.experts),
    probs: allocLike(like, N * cfg.experts),
    routing: new Int32Array(N * cfg.topK),
    gates: new Float64Array(N * cfg.topK),
    slots: new Int32Array(N * cfg.topK),
    tokens: [],
    inputs: [],
    outputs: [],
    mlp: [],
  };
}

/**
 * The Switch-Transformer load-balancing loss (Fedus et al. 2021, eq. 4; Megatron-LM
 * `switch_load_balancing_loss_func`): `L = E · Σ_e f_e · P_e`, with `f_e` the share of the N·k
 * routing slots that went to expert e and `P_e` the mean router probability of e over the N tokens.
 * Equals 1 when routing and probabilities are uniform. Its gradient flows through P only.
 */
export function moeAuxLoss(cache: MoeCache, N: number, cfg: MoeConfig): number {
  const { experts: E, topK: k } = cfg;
  let loss = 0;
  for (let e = 0; e < E; e++) {
    const f = (cache.tokens[e] as Int32Array).length / (N * k);
    let P = 0;
    for (let n = 0; n < N; n++) P += cache.probs[n * E + e] as number;
    loss += f * (P / N);
  }
  return E * loss;
}

/**
 * MoE backward, accumulating into `dinp` and every gradient in `g`. With `auxCoeff` α the gradient
 * of α·{@link moeAuxLoss} is added. No gradient flows through the choice of experts (top-k or
 * replayed); it flows through the gates into the router:
 * `dg_{n,j} = dout_n · y_{e_j}(x_n)`, `dp_{e_j} = (dg_j − Σ_i g_i·dg_i) / S` with `S = Σ_i p_{e_i}`,
 * aux `dp_{n,e} += α·E·f_e/N`, then the softmax and router backward.
 *
 * @param dinp - (N, C) accumulated
 * @param g - gradients, accumulated
 * @param dout - (N, C)
 * @param cache - from the forward
 * @param inp - (N, C) forward input
 */
export function moeBackward(
  dinp: FloatArray,
  g: MoeGrads,
  dout: FloatArray,
  cache: MoeCache,
  inp: FloatArray,
  w: MoeWeights,
  N: number,
  C: number,
  Hd: number,
  cfg: MoeConfig,
  gemms: MoeGemms = sequentialMoeGemms,
  auxCoeff = 0,
): void {
  checkConfig(cfg, w);
  const { experts: E, topK: k } = cfg;
  const slot = cache.slots;
  // Expert paths: dy_e[row] = g · dout_n.
  for (let e = 0; e < E; e++) {
    const rows = cache.tokens[e] as Int32Array;
    if (rows.length === 0) continue;
    const dy = allocLike(dout, rows.length * C); // (n_e, C)
    for (let n = 0; n < N; n++) {
      for (let j = 0; j < k; j++) {
        if (cache.routing[n * k + j] !== e) continue;
        const r = slot[n * k + j] as number;
        const gate = cache.gates[n * k + j] as number;
        for (let c = 0; c < C; c++) dy[r * C + c] = gate * (dout[n * C + c] as number);
      }
    }
    const dx = allocLike(dout, rows.length * C); // (n_e, C)
    mlpBackward(
      dx,
      g.experts[e] as MlpWeights,
      dy,
      cache.mlp[e] as MlpCache,
      cache.inputs[e] as FloatArray,
      w.experts[e] as MlpWeights,
      rows.length,
      C,
      Hd,
      cfg.kind,
      gemms.expert,
    );
    for (let r = 0; r < rows.length; r++) {
      const n = rows[r] as number;
      for (let c = 0; c < C; c++) dinp[n * C + c] = (dinp[n * C + c] as number) + (dx[r * C + c] as number);
    }
  }
  // Router path: gates → probs → logits.
  const dprobs = allocLike(dout, N * E); // (N, E)
  for (let n = 0; n < N; n++) {
    const dg = new Float64Array(k);
    let S = 0;
    let dot = 0;
    for (let j = 0; j < k; j++) {
      const e = cache.routing[n * k + j] as number;
      const y = cache.outputs[e] as FloatArray;
      const r = slot[n * k + j] as number;
      let s = 0;
      for (let c = 0; c < C; c++) s += (dout[n * C + c] as number) * (y[r * C + c] as number);
      dg[j] = s;
      S += cache.probs[n * E + e] as number;
      dot += (cache.gates[n * k + j] as number) * s;
    }
    for (let j = 0; j < k; j++) {
      const e = cache.routing[n * k + j] as number;
      dprobs[n * E + e] = (dprobs[n * E + e] as number) + ((dg[j] as number) - dot) / S;
    }
  }
  if (auxCoeff !== 0) {
    for (let e = 0; e < E; e++) {
      const f = (cache.tokens[e] as Int32Array).length / (N * k);
      const d = (auxCoeff * E * f) / N;
      for (let n = 0; n < N; n++) dprobs[n * E + e] = (dprobs[n * E + e] as number) + d;
    }
  }
  const dlogits = allocLike(dout, N * E); // (N, E)
  for (let n = 0; n < N; n++) {
    let dot = 0;
    for (let e = 0; e < E; e++) dot += (cache.probs[n * E + e] as number) * (dprobs[n * E + e] as number);
    for (let e = 0; e < E; e++)
      dlogits[n * E + e] = (cache.probs[n * E + e] as number) * ((dprobs[n * E + e] as number) - dot);
  }
  linearBackward(dinp, g.router, null, dlogits, inp, w.router, N, C, E, gemms.router);
}

/**
 * Share of routing decisions that differ between two routings of the same N tokens: the number of
 * (token, expert) pairs chosen in `a` but not in `b`, over N·k. Rank order does not count (the same
 * set of experts is the same decision). 0 for identical routings; 1 when no token shares an expert.
 */
export function routingFlipRate(a: Int32Array, b: Int32Array, N: number, k: number): number {
  if (a.length !== N * k || b.length !== N * k)
    throw new Error(`moe: routings must hold N·k = ${N * k} experts, got ${a.length} and ${b.length}`);
  if (N === 0) return 0;
  let differ = 0;
  for (let n = 0; n < N; n++) {
    for (let j = 0; j < k; j++) {
      let found = false;
      for (let i = 0; i < k; i++) if (a[n * k + j] === b[n * k + i]) found = true;
      if (!found) differ++;
    }
  }
  return differ / (N * k);
}
