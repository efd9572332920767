// MoE routing replay helpers shared by both policies' engines: gathering rows of a per-layer routing
// record, and the flip rate between a recorded and a used routing at chosen positions. Not the MoE
// layer (src/nn/moe.ts) and not the GRPO loop's choice of mode (src/rl/grpo/loop.ts).

import { UsageError } from '../core/errors.js';
import { routingFlipRate } from '../nn/moe.js';
import type { EngineRoutingReplay } from './engine.js';

/**
 * Rows `rows` of every layer's routing, each array (B, S, k) with `S·k` entries per row.
 *
 * @param routing - one (B, S, k) array per layer
 * @param rowSize - S·k
 * @returns one (rows.length, S, k) array per layer
 */
export function gatherRoutingRows(
  routing: readonly Int32Array[],
  rows: readonly number[],
  rowSize: number,
): Int32Array[] {
  return routing.map((layer) => {
    const out = new Int32Array(rows.length * rowSize); // (rows, S, k)
    rows.forEach((r, i) => {
      if ((r + 1) * rowSize > layer.length)
        throw new Error(`moe replay: row ${r} is outside a routing of ${layer.length / rowSize} rows`);
      out.set(layer.subarray(r * rowSize, (r + 1) * rowSize), i * rowSize);
    });
    return out;
  });
}

/**
 * Per layer, the share of router decisions that differ between `recorded` and `used` at the listed
 * flat positions ({@link routingFlipRate} over those positions only; 0 when there are none).
 *
 * @param recorded - one (rows, S, k) array per layer (e.g. the rollout's record, gathered)
 * @param used - same shapes (the trainer pass's routing)
 * @param positions - flat indices `row·S + s` of the positions to compare
 */
export function flipRatesAt(
  recorded: readonly Int32Array[],
  used: readonly Int32Array[],
  k: number,
  positions: readonly number[],
): number[] {
  if (recorded.length !== used.length)
    throw new Error(`moe replay: ${recorded.length} recorded layers against ${used.length} used`);
  const N = positions.length;
  return recorded.map((rec, l) => {
    const a = new Int32Array(N * k); // (N, k)
    const b = new Int32Array(N * k); // (N, k)
    const u = used[l] as Int32Array;
    positions.forEach((p, n) => {
      a.set(rec.subarray(p * k, p * k + k), n * k);
      b.set(u.subarray(p * k, p * k + k), n * k);
    });
    return routingFlipRate(a, b, N, k);
  });
}

/**
 * The per-layer (rows, S, k) routing a trainer pass replays (`size` = rows·S·k entries, k experts per
 * token, 0 for a dense model), or undefined: `'rollout'` takes the
 * record's (gathered) routing (R3), an array is replayed as given (R2).
 */
export function replayRouting(
  routing: EngineRoutingReplay | undefined,
  recorded: readonly Int32Array[] | undefined,
  size: number,
  layers: number,
  k: number,
): readonly Int32Array[] | undefined {
  if (routing === undefined) return undefined;
  if (k === 0)
    throw new UsageError(
      `logprobs.routing: a routing replay needs an MoE model (policy.model.moe), got ${routing === 'rollout' ? "'rollout'" : 'a routing array'} for a dense model`,
    );
  if (routing === 'rollout') {
    if (recorded === undefined)
      throw new UsageError(
        "logprobs.routing: 'rollout' replays the rollout's routing, but the batch record carries no moeRouting (not an MoE rollout)",
      );
    return recorded;
  }
  if (
    !Array.isArray(routing) ||
    routing.length !== layers ||
    routing.some((r) => !(r instanceof Int32Array) || r.length !== size)
  ) {
    throw new UsageError(
      `logprobs.routing: must be 'rollout' or one Int32Array of ${size} experts per layer (${layers} layers), got ${Array.isArray(routing) ? `${routing.length} arrays` : JSON.stringify(routing)}`,
    );
  }
  return routing;
}
