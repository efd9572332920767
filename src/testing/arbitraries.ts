// fast-check arbitraries for qrl-sim's inputs: formats, profiles, float32 edge values, estimator
// batches and configs, quantizer inputs, precision plans. Not properties (see invariants.ts).

import fc from 'fast-check';
import { decode, floatFormats, isNanCode, type FloatFormat } from '../numerics/formats.js';
import { castProfiles, profileCoverage, type RoundingMode } from '../numerics/profiles.js';
import { quantPresets, type QuantPreset } from '../numerics/presets.js';
import { precisionPlans } from '../policies/plans.js';
import { corrections, losses, type BatchJson } from '../golden/suites/estimators.js';

export type { BatchJson };

/** Any float format name. */
export const formatArb = (): fc.Arbitrary<string> => fc.constantFrom(...Object.keys(floatFormats));

/** Any cast profile name. */
export const profileArb = (): fc.Arbitrary<string> => fc.constantFrom(...Object.keys(castProfiles));

/** A (format, profile) pair the profile covers, with a deterministic rounding mode (`stochastic` excluded). */
export const castTargetArb = (): fc.Arbitrary<{ format: string; profile: string; mode: RoundingMode }> =>
  fc
    .record({
      pair: fc.constantFrom(
        ...profileCoverage().map(({ profile, format }) => ({ format: format.name, profile: profile.name })),
      ),
      mode: fc.constantFrom<RoundingMode>('rne', 'rtz', 'rha'),
    })
    .map(({ pair, mode }) => ({ ...pair, mode }));

const valueCache = new Map<string, number[]>();

/** Every non-negative finite value of `format` (sampled for formats wider than 8 bits; cached). */
function formatValues(format: FloatFormat): number[] {
  const cached = valueCache.get(format.name);
  if (cached !== undefined) return cached;
  const top = format.signed ? format.signMask : format.codeCount;
  const step = format.bits <= 8 ? 1 : Math.max(1, Math.floor(top / 4096));
  const out: number[] = [];
  for (let c = 0; c < top; c += step)
    if (!isNanCode(format, c) && Number.isFinite(decode(format, c))) out.push(decode(format, c));
  valueCache.set(format.name, out);
  return out;
}

/**
 * float32 inputs that stress a cast to `format`: its values, exact ties between neighbours and
 * the float32 one ulp either side, beyond max, ±0, ±Inf, NaN, and any float32.
 */
export function castValueArb(formatName: string): fc.Arbitrary<number> {
  const format = (floatFormats as Record<string, FloatFormat>)[formatName];
  if (format === undefined) throw new Error(`format: unknown format '${formatName}'`);
  const values = formatValues(format);
  const f32 = new Float32Array(1);
  const u32 = new Uint32Array(f32.buffer);
  const nudge = (x: number, d: number): number => {
    f32[0] = x;
    if (x === 0) return d * 2 ** -149;
    u32[0] = (u32[0] as number) + (x > 0 ? d : -d);
    return f32[0] as number;
  };
  const tie = fc
    .integer({ min: 0, max: values.length - 2 })
    .chain((i) =>
      fc
        .constantFrom(-1, 0, 1)
        .map((d) => nudge(Math.fround(((values[i] as number) + (values[i + 1] as number)) / 2), d)),
    );
  const special = fc.constantFrom(
    0,
    -0,
    Infinity,
    -Infinity,
    Number.NaN,
    Math.fround(format.maxFinite * 1.0625),
    3.4028234663852886e38,
    2 ** -149,
  );
  const magnitude = fc.oneof(fc.constantFrom(...values), tie, special, fc.float({ noNaN: true }));
  return fc.tuple(magnitude, fc.boolean()).map(([v, neg]) => Math.fround(neg ? -v : v));
}

/** Options of {@link batchArb}. */
export interface BatchArbOptions {
  /** Largest number of sequences. @defaultValue 6 */
  readonly maxB?: number;
  /** Largest sequence length. @defaultValue 6 */
  readonly maxT?: number;
  /** Include `logpRef` (needed by KL configs). @defaultValue true */
  readonly withRef?: boolean;
}

/**
 * `estimate` batches: ragged masks (empty rows included), singleton groups, binary or real rewards,
 * log-ratios that are exactly 0 (ρ = 1, ties at clip edges), small, huge (ρ up to e⁸) or tiny, and
 * arbitrary log-probs on padded positions.
 */
export function batchArb(options: BatchArbOptions = {}): fc.Arbitrary<BatchJson> {
  const maxB = options.maxB ?? 6;
  const maxT = options.maxT ?? 6;
  const logp = fc.double({ min: -6, max: -1e-3, noNaN: true });
  const gap = fc.oneof(
    { weight: 3, arbitrary: fc.double({ min: -0.3, max: 0.3, noNaN: true }) },
    { weight: 1, arbitrary: fc.constant(0) },
    { weight: 1, arbitrary: fc.double({ min: 2, max: 8, noNaN: true }).chain((g) => fc.constantFrom(g, -g)) },
  );
  // Full maxB × maxT grids sliced to B × T (no chain): B, T and every value shrink independently.
  const grid = <V>(a: fc.Arbitrary<V>): fc.Arbitrary<V[][]> =>
    fc.array(fc.array(a, { minLength: maxT, maxLength: maxT }), { minLength: maxB, maxLength: maxB });
  const vec = <V>(a: fc.Arbitrary<V>): fc.Arbitrary<V[]> => fc.array(a, { minLength: maxB, maxLength: maxB });
  return fc
    .record({
      B: fc.integer({ min: 1, max: maxB }),
      T: fc.integer({ min: 1, max: maxT }),
      lengths: vec(fc.integer({ min: 0, max: maxT })),
      logpRollout: grid(logp),
      dOld: grid(gap),
      dTheta: grid(fc.double({ min: -0.3, max: 0.3, noNaN: true })),
      dRef: grid(fc.double({ min: -0.5, max: 0.5, noNaN: true })),
      rewards: vec(fc.oneof(fc.constantFrom(0, 1), fc.double({ min: -2, max: 2, noNaN: true }))),
      groups: vec(fc.integer({ min: 0, max: Math.max(0, Math.ceil(maxB / 2) - 1) })),
    })
    .map((r) => {
      const { B, T } = r;
      const cut = <V>(g: V[][]): V[][] => g.slice(0, B).map((row) => row.slice(0, T));
      const mask = r.lengths.slice(0, B).map((n) => Array.from({ length: T }, (_, t) => (t < n ? 1 : 0)));
      const logpRollout = cut(r.logpRollout);
      const logpOld = logpRollout.map((row, i) => row.map((v, t) => v + (r.dOld[i] as number[])[t]!));
      const logpTheta = logpOld.map((row, i) => row.map((v, t) => v + (r.dTheta[i] as number[])[t]!));
      const batch: BatchJson = {
        logpTheta,
        logpOld,
        logpRollout,
        mask,
        rewards: r.rewards.slice(0, B),
        groups: r.groups.slice(0, B),
      };
      if (options.withRef ?? true)
        batch.logpRef = logpOld.map((row, i) => row.map((v, t) => v + (r.dRef[i] as number[])[t]!));
      return batch;
    });
}

const correctionSpecs = [
  ...corrections,
  // the stacks' options
  { name: 'opsm', form: 'slime', delta: 0.001 },
  { name: 'rollout_rs', rollout_rs: 'token_k1,seq_max_k3', rollout_rs_threshold: '0.5_2.0,0.05' },
  { name: 'rejection_sampling', metric: 'kl_k3', level: 'sequence', agg: 'max', upper: 0.5 },
  { name: 'rejection_sampling', action: 'clamp', upper: 1.5 },
  { name: 'rejection_sampling', metric: 'binary_kl', upper: 0.02 },
  { name: 'batch-norm', level: 'slime-sequence' },
  { name: 'seq_logprob_error_threshold', threshold: 1.5 },
] as const;
const lossSpecs = [
  ...losses,
  { name: 'cispo', anchor: 'rollout' },
  { name: 'geo_mean' },
  { name: 'luspo' },
  { name: 'vespo' },
  { name: 'topr' },
] as const;

/** An `estimate` config: any advantage, correction stage, loss, aggregation and optional KL. */
export const estimatorConfigArb = (): fc.Arbitrary<Record<string, unknown>> =>
  fc.record({
    advantage: fc.constantFrom({ name: 'grpo' }, { name: 'drgrpo' }, { name: 'batch-std' }),
    correction: fc.constantFrom(...correctionSpecs),
    loss: fc.constantFrom(...lossSpecs),
    aggregation: fc.constantFrom(
      'token-mean',
      'seq-mean-token-sum',
      'seq-mean-token-mean',
      'seq-mean-token-sum-norm',
      'slime-per-token',
    ),
    kl: fc.constantFrom(
      null,
      { name: 'k1', coef: 0.01 },
      { name: 'k2', coef: 0.01 },
      { name: 'k3', coef: 0.01 },
      { name: 'k3+', coef: 0.01 },
    ),
  });

/** The params of the `quantize` check method: a preset, its block (when it has one) and a 2-D input with NaN as a string. */
export const quantizeParamsArb = (): fc.Arbitrary<{ preset: string; block?: number; input: (number | string)[][] }> =>
  fc.constantFrom(...Object.entries(quantPresets as Record<string, QuantPreset>)).chain(([preset, p]) => {
    const hasBlock = p.params.includes('block');
    const value = fc.oneof(
      { weight: 6, arbitrary: fc.double({ min: -100, max: 100, noNaN: true }).map(Math.fround) },
      { weight: 1, arbitrary: fc.constantFrom<number | string>(0, -0 as number, 8, -8, 448, 1e-7, 'NaN') },
    );
    return fc
      .record({
        block: fc.constantFrom(4, 8),
        rows: fc.integer({ min: 1, max: 9 }),
        cols: fc.integer({ min: 1, max: 19 }),
      })
      .chain(({ block, rows, cols }) =>
        fc
          .array(fc.array(value, { minLength: cols, maxLength: cols }), { minLength: rows, maxLength: rows })
          .map((input) => ({
            preset,
            ...(hasBlock ? { block } : {}),
            input: input.map((row) => row.map((v) => (Object.is(v, -0) ? '-0' : v))),
          })),
      );
  });

/** Any precision plan name. */
export const precisionPlanArb = (): fc.Arbitrary<string> => fc.constantFrom(...Object.keys(precisionPlans));
