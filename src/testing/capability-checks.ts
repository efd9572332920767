// The pieces of the conformance battery shared by its rows: bitwise and JSON equality, the row and attempt
// callbacks, and the checks of the optional capabilities (probSqSum, MoE routing replay), each of which reports
// an informational row when its capability is not declared. conformance.ts runs them.

import type { BackendInfo, RolloutBatch } from '../core/backend-contract.js';
import { probeDiagnostics } from '../policies/diagnostics.js';
import type { RemoteBackend } from '../protocol/remote.js';

/** JSON with object keys sorted (key order carries no meaning). */
function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v !== null && typeof v === 'object')
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  return JSON.stringify(v);
}

/** Whether two JSON values are equal up to object key order. */
export function sameJson(a: unknown, b: unknown): boolean {
  return canonicalJson(a) === canonicalJson(b);
}

/** Whether two arrays hold the same numbers bit for bit (`Object.is`: NaN equals NaN, −0 differs from +0). */
export function equalArrays(a: ArrayLike<number>, b: ArrayLike<number>): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return false;
  return true;
}

/** Where two ℓ arrays differ, in words: how many positions and the largest |Δ|. */
export function differences(a: Float64Array, b: Float64Array): string {
  let n = 0;
  let max = 0;
  for (let i = 0; i < a.length; i++) {
    if (!Object.is(a[i], b[i])) {
      n += 1;
      max = Math.max(max, Math.abs(a[i]! - b[i]!));
    }
  }
  return `ℓ differs at ${n} of ${a.length} positions, max |Δ| ${max.toExponential(3)}`;
}

/** Adds one row to the table (`informational`: reported, never a violation). */
export type AddRow = (check: string, ok: boolean, detail: string, informational?: boolean) => void;
/** Runs one request; a thrown error becomes a FAIL row named `check` and the result `undefined`. */
export type Attempt = <T>(check: string, fn: () => Promise<T>) => Promise<T | undefined>;

/** What a capability check reads: the backend, its info, one rollout batch and the current ℓ of its rows, and the table. */
export interface CapabilityCheck {
  readonly backend: RemoteBackend;
  readonly info: BackendInfo;
  readonly batch: RolloutBatch;
  /** The rows of `batch` the `logprobs` calls score. */
  readonly rows: readonly number[];
  /** `logprobs` ℓ of `rows` under the current weights, from a pass with no capability asked for. */
  readonly logp: Float64Array;
  readonly add: AddRow;
  readonly attempt: Attempt;
}

/**
 * The `probSqSum` capability (veRL's optimal token baseline reads it): declared ⇒ `logprobs` with
 * `probSqSum: true` returns Σ_v π(v)² without changing ℓ, in [π(y)², 1] on the mask (the sampled
 * token's own term is one of the sum's) and 0 off it.
 */
export async function checkProbSqSum(check: CapabilityCheck): Promise<void> {
  const { backend, info, batch, rows, logp, add, attempt } = check;
  if (info.capabilities.probSqSum !== true) {
    add('probSqSum capability', true, 'not declared (runs with advantage optimal_token_baseline are refused)', true);
    return;
  }
  const r = await attempt('probSqSum capability', () =>
    backend.logprobs({ batch, rows, policy: 'current', probSqSum: true }),
  );
  if (r === undefined) return;
  const sq = r.probSqSum as Float64Array;
  let bad = equalArrays(r.logp, logp) ? '' : 'ℓ differs from the same pass without probSqSum';
  for (let i = 0; i < sq.length && bad === ''; i++) {
    const low = Math.exp(2 * logp[i]!) * (1 - 1e-9);
    if (batch.mask[i] === 1 ? !(sq[i]! >= low && sq[i]! <= 1) : sq[i] !== 0)
      bad = `probSqSum ${sq[i]} at ${i} (π(y)² = ${Math.exp(2 * logp[i]!)}, mask ${batch.mask[i]})`;
  }
  add(
    'probSqSum capability',
    bad === '',
    bad === '' ? 'declared and returned: Σπ² in [π(y)², 1] on the mask, ℓ unchanged' : bad,
  );
}

/**
 * The MoE routing checks (docs/moe.md), run when the rollout record carries the engine's routing
 * (`moeRouting`): the trainer pass returns its own routing per layer without changing ℓ, its flip
 * rates against the record lie in [0, 1], replaying its own routing (R2's request) reproduces ℓ bit
 * for bit, and replaying the rollout's (R3) answers; the k3 with and without R3 is reported.
 */
export async function checkRoutingReplay(check: CapabilityCheck): Promise<void> {
  const { backend, batch, rows, logp, add, attempt } = check;
  const recorded = (batch.record as { moeRouting?: unknown }).moeRouting;
  if (!Array.isArray(recorded) || recorded.length === 0) {
    add('MoE routing replay', true, 'no moeRouting in the rollout record (a dense model): not exercised', true);
    return;
  }
  const layers = recorded.length;
  const own = await attempt('MoE: own routing returned', () =>
    backend.logprobs({ batch, rows, policy: 'current', returnRouting: true }),
  );
  if (own === undefined) return;
  const routing = own.routing;
  const shaped =
    routing !== undefined && routing.length === layers && routing.every((r) => r instanceof Int32Array && r.length > 0);
  const sameLogp = equalArrays(own.logp, logp);
  add(
    'MoE: own routing returned',
    shaped && sameLogp,
    !shaped
      ? `returnRouting gave ${routing === undefined ? 'no routing' : `${routing.length} array(s)`} for ${layers} recorded layer(s)`
      : sameLogp
        ? `${layers} layer(s), ${routing[0]!.length} experts each; ℓ unchanged by returnRouting`
        : 'ℓ differs from the same pass without returnRouting',
  );
  const rates = own.routingFlipRate;
  const ratesOk = rates !== undefined && rates.length === layers && rates.every((r) => r >= 0 && r <= 1);
  add(
    'MoE: flip rate per layer',
    ratesOk,
    ratesOk
      ? rates.map((r, l) => `l${l} ${(100 * r).toFixed(2)} %`).join(', ')
      : `routingFlipRate ${JSON.stringify(rates)} for ${layers} layer(s)`,
  );
  if (shaped) {
    const replayed = await attempt('MoE: replaying its own routing (R2) keeps ℓ', () =>
      backend.logprobs({ batch, rows, policy: 'current', routing }),
    );
    if (replayed !== undefined) {
      const same = equalArrays(replayed.logp, own.logp);
      add(
        'MoE: replaying its own routing (R2) keeps ℓ',
        same,
        same
          ? 'ℓ bit-identical with the returned routing replayed'
          : 'replaying the routing the pass returned changes ℓ: the returned routing is not the one used',
      );
    }
  }
  const r3 = await attempt('MoE: rollout routing replay (R3)', () =>
    backend.logprobs({ batch, rows, policy: 'current', routing: 'rollout' }),
  );
  if (r3 !== undefined) {
    const before = probeDiagnostics(batch.logpRollout, own.logp, batch.mask);
    const after = probeDiagnostics(batch.logpRollout, r3.logp, batch.mask);
    add(
      'MoE: rollout routing replay (R3)',
      true,
      `k3 ${before.k3.toExponential(3)} with the trainer's own routing → ${after.k3.toExponential(3)} with the rollout's`,
      true,
    );
  }
}
