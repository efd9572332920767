// Tests of rollout-correction stages and their composition: hand vectors, AIS against an independent computation, properties.
// Not a source of expected numbers: every expected value is derived in the test itself.

import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import type { CorrectionSpec } from '../../src/rl/index.js';
import { applyCorrection, corrections, resolveConfig } from '../../src/rl/index.js';
import { rsK1 } from '../../src/rl/correction/rejection.js';
import { ais } from '../../src/rl/correction/weights.js';
import { batchArb, corrInput, flat, toBatch } from './helpers.js';

// δ = ℓold − ℓroll: row 0 [0.5, −0.1, 0], row 1 [−0.5, 0, −14.9 (padding)]
const OLD = [
  [-1.0, -2.0, -0.5],
  [-1.5, -0.2, -15],
];
const ROLL = [
  [-1.5, -1.9, -0.5],
  [-1.0, -0.2, -0.1],
];
const MASK = [
  [1, 1, 1],
  [1, 1, 0],
];
const ADV = [
  [1, 1, 1],
  [-1, -1, 0],
];
const input = corrInput(OLD, ROLL, MASK, ADV);
const E = Math.exp;
const d = [0.5, -0.1, 0, -0.5, 0]; // valid tokens, row-major

/** Resolves one stage through the schema so that defaults are the documented ones. */
function spec(s: object): CorrectionSpec {
  return resolveConfig({ correction: s }).correction[0]!;
}
function run(s: object | object[]) {
  const specs = Array.isArray(s) ? s.map(spec) : [spec(s)];
  return applyCorrection(input, specs);
}
function close(actual: Float64Array, expected: number[], digits = 14): void {
  expect(actual.length).toBe(expected.length);
  expected.forEach((e, k) => expect(actual[k], `index ${k}`).toBeCloseTo(e, digits));
}

describe('correction: hand-computed vectors', () => {
  it('none is the identity', () => {
    const r = run({ name: 'none' }).value;
    expect(Array.from(r.weights)).toEqual([1, 1, 1, 1, 1, 0]);
    expect(Array.from(r.lossMask)).toEqual([1, 1, 1, 1, 1, 0]);
  });

  it('token-is: ρ_t', () => {
    close(run({ name: 'token-is' }).value.weights, [E(0.5), E(-0.1), 1, E(-0.5), 1, 0]);
  });

  it('tis: min(ρ_t, C) and its truncated fraction', () => {
    const r = run({ name: 'tis', C: 1.2 });
    close(r.value.weights, [1.2, E(-0.1), 1, E(-0.5), 1, 0]);
    expect(r.metrics['rollout_corr/tis/truncated_fraction']).toBe(1 / 5);
    expect(Array.from(r.value.lossMask)).toEqual([1, 1, 1, 1, 1, 0]);
  });

  it('tis default C = 2', () => {
    close(run({ name: 'tis' }).value.weights, [E(0.5), E(-0.1), 1, E(-0.5), 1, 0]);
  });

  it('seq-tis: min(exp(Σδ), C) broadcast', () => {
    const r = run({ name: 'seq-tis', C: 1.4 }).value; // row sums 0.4, −0.5
    close(r.weights, [1.4, 1.4, 1.4, E(-0.5), E(-0.5), 0]);
  });

  it('icepop token: ρ·1[lo ≤ ρ ≤ hi], rejected tokens stay in the denominator by default', () => {
    const r = run({ name: 'icepop', lo: 0.7, hi: 1.5 });
    close(r.value.weights, [0, E(-0.1), 1, 0, 1, 0]);
    expect(Array.from(r.value.lossMask)).toEqual([0, 1, 1, 0, 1, 0]);
    expect(Array.from(r.value.denominatorMask)).toEqual([1, 1, 1, 1, 1, 0]);
    expect(r.metrics['rollout_corr/icepop/oob_fraction']).toBe(2 / 5);
    expect(r.metrics['rollout_corr/icepop/low_fraction']).toBe(1 / 5);
  });

  it('icepop sequence: the sequence product decides for the whole row', () => {
    const r = run({ name: 'icepop', lo: 0.7, hi: 1.5, level: 'sequence', denominator: 'kept' }).value;
    close(r.weights, [E(0.4), E(0.4), E(0.4), 0, 0, 0]);
    expect(Array.from(r.denominatorMask)).toEqual([1, 1, 1, 0, 0, 0]);
  });

  it('mis-token and mis-seq reject instead of truncating', () => {
    const t = run({ name: 'mis-token', C: 1.5 }).value;
    close(t.weights, [0, E(-0.1), 1, E(-0.5), 1, 0]);
    expect(Array.from(t.denominatorMask)).toEqual([0, 1, 1, 1, 1, 0]);
    const s = run({ name: 'mis-seq', C: 1.2 }).value;
    close(s.weights, [0, 0, 0, E(-0.5), E(-0.5), 0]);
  });

  it('geo-rs keeps a row iff lo ≤ exp(mean δ) ≤ hi', () => {
    // exp(0.4/3) = 1.1426, exp(−0.25) = 0.7788
    const r = run({ name: 'geo-rs', lo: 0.8, hi: 1.2 });
    expect(Array.from(r.value.lossMask)).toEqual([1, 1, 1, 0, 0, 0]);
    expect(Array.from(r.value.weights)).toEqual([1, 1, 1, 0, 0, 0]);
    expect(r.metrics['rollout_corr/geo-rs/seq_masked_fraction']).toBe(1 / 2);
    expect(run({ name: 'geo-rs' }).value.lossMask.reduce((a, b) => a + b)).toBe(0); // default band 0.999–1.001
  });

  it('rs-k1 token: documented band [lo, hi] versus verl band [1/hi, 1/lo]', () => {
    const doc = run({ name: 'rs-k1', level: 'token', lo: 0.6, hi: 1.4 }).value.lossMask;
    expect(Array.from(doc)).toEqual([0, 1, 1, 1, 1, 0]); // ρ = 1.6487 > 1.4 rejected
    const verl = run({ name: 'rs-k1', level: 'token', lo: 0.6, hi: 1.4, verlBand: true }).value.lossMask;
    expect(Array.from(verl)).toEqual([1, 1, 1, 0, 1, 0]); // band [0.714, 1.667]: ρ = 0.6065 rejected
  });

  it('rs-k1 with only hi uses lo = 1/hi (verl threshold parsing)', () => {
    const s = spec({ name: 'rs-k1', hi: 4 });
    expect(s).toMatchObject({ lo: 0.25, hi: 4, level: 'seq-sum' });
  });

  it('rs-k2 at every level', () => {
    // k2 = ½lr²: row 0 [0.125, 0.005, 0], row 1 [0.125, 0]
    expect(Array.from(run({ name: 'rs-k2', level: 'token', hi: 0.1 }).value.lossMask)).toEqual([0, 1, 1, 0, 1, 0]);
    expect(Array.from(run({ name: 'rs-k2', level: 'seq-max', hi: 0.1 }).value.lossMask)).toEqual([0, 0, 0, 0, 0, 0]);
    expect(Array.from(run({ name: 'rs-k2', level: 'seq-sum', hi: 0.129 }).value.lossMask)).toEqual([0, 0, 0, 1, 1, 0]);
    expect(Array.from(run({ name: 'rs-k2', level: 'seq-mean', hi: 0.05 }).value.lossMask)).toEqual([1, 1, 1, 0, 0, 0]);
  });

  it('rs-k3 at token and seq-mean level', () => {
    const k3 = (x: number) => E(x) - 1 - x;
    expect(Array.from(run({ name: 'rs-k3', level: 'token', hi: 0.1 }).value.lossMask)).toEqual([0, 1, 1, 0, 1, 0]);
    const r = run({ name: 'rs-k3', level: 'seq-mean', hi: 0.052 });
    expect((k3(0.5) + k3(-0.1)) / 3).toBeLessThan(0.052);
    expect(k3(-0.5) / 2).toBeGreaterThan(0.052);
    expect(Array.from(r.value.lossMask)).toEqual([1, 1, 1, 0, 0, 0]);
    expect(r.metrics['rollout_corr/rs-k3-seq-mean/stat_mean']).toBeCloseTo(
      ((3 * (k3(0.5) + k3(-0.1))) / 3 + 2 * (k3(-0.5) / 2)) / 5,
      14,
    );
  });

  it('veto rejects a row with any valid ρ_t < v and ignores padding', () => {
    expect(Array.from(run({ name: 'veto', v: 0.65 }).value.lossMask)).toEqual([1, 1, 1, 0, 0, 0]);
    // the padded token has ρ = e^−14.9 < 1e-4 but must not veto row 1
    expect(Array.from(run({ name: 'veto' }).value.lossMask)).toEqual([1, 1, 1, 1, 1, 0]);
  });

  it('batch-norm divides by the masked mean of the weights so far', () => {
    const w = [1.2, E(-0.1), 1, E(-0.5), 1];
    const mu = w.reduce((a, b) => a + b) / 5;
    const r = run([{ name: 'tis', C: 1.2 }, { name: 'batch-norm' }]);
    close(r.value.weights, [...w.map((x) => x / mu), 0], 14);
    expect(r.metrics['rollout_corr/batch-norm/factor']).toBeCloseTo(mu, 15);
    const muSeq = ((1.2 + E(-0.1) + 1) / 3 + (E(-0.5) + 1) / 2) / 2;
    close(
      run([
        { name: 'tis', C: 1.2 },
        { name: 'batch-norm', level: 'sequence' },
      ]).value.weights,
      [...w.map((x) => x / muSeq), 0],
      14,
    );
  });

  it('composition tis + geo-rs + veto: factors multiply, masks AND, denominator per stage', () => {
    const stages = [
      { name: 'tis', C: 1.2 },
      { name: 'geo-rs', lo: 0.8, hi: 1.2 },
      { name: 'veto', v: 0.65 },
    ];
    const r = run(stages).value;
    close(r.weights, [1.2, E(-0.1), 1, 0, 0, 0]);
    expect(Array.from(r.lossMask)).toEqual([1, 1, 1, 0, 0, 0]);
    expect(Array.from(r.denominatorMask)).toEqual([1, 1, 1, 0, 0, 0]);
    const numeratorOnly = run(stages.map((s) => (s.name === 'tis' ? s : { ...s, denominator: 'original' }))).value;
    expect(Array.from(numeratorOnly.lossMask)).toEqual([1, 1, 1, 0, 0, 0]);
    expect(Array.from(numeratorOnly.denominatorMask)).toEqual([1, 1, 1, 1, 1, 0]);
  });
});

/** Independent AIS (paper Eq. 12–18) over the valid tokens of the fixture. */
function aisReference(C: number, delta: number, gamma: number, beta: number, eps: number) {
  const rho = d.map(Math.exp);
  const wbar = rho.map((r) => Math.min(r, C));
  const A = [1, 1, 1, -1, -1];
  const n = wbar.length;
  const mean = (x: number[]) => x.reduce((a, b) => a + b, 0) / x.length;
  const sstd = (x: number[]) => {
    const m = mean(x);
    return Math.sqrt(x.reduce((a, b) => a + (b - m) ** 2, 0) / (x.length - 1));
  };
  const cv = sstd(wbar) / mean(wbar);
  const aEss = Math.pow(1 + cv * cv, -0.5);
  const dbar = mean(d.map(Math.abs));
  const aMis = Math.min(1, dbar / delta);
  const ds = sstd(A.map((a, i) => a * wbar[i]!)) / (sstd(A) + eps);
  const aVar = Math.max(0, (ds - gamma) / gamma);
  const alpha = Math.min(1, Math.max(0, aEss - beta * aVar)) * aMis;
  const w = wbar.map((x) => 1 + alpha * (x - 1));
  expect(n).toBe(5);
  return { cv, aEss, dbar, aMis, ds, aVar, alpha, w, adv: w.map((x, i) => x * A[i]!) };
}

describe('ais', () => {
  it('matches an independent computation with the paper hyper-parameters (C 5, δ 0.02, γ 1.2, β 1, ε 1e-6)', () => {
    const ref = aisReference(5, 0.02, 1.2, 1, 1e-6);
    const r = run({ name: 'ais' });
    expect(r.metrics['rollout_corr/ais/alpha_mis']).toBe(1); // d̄ = 0.22 > δ
    expect(r.metrics['rollout_corr/ais/cv']).toBeCloseTo(ref.cv, 14);
    expect(r.metrics['rollout_corr/ais/alpha_ess']).toBeCloseTo(ref.aEss, 14);
    expect(r.metrics['rollout_corr/ais/delta_sigma']).toBeCloseTo(ref.ds, 14);
    expect(r.metrics['rollout_corr/ais/alpha_var']).toBe(0);
    expect(r.metrics['rollout_corr/ais/alpha']).toBeCloseTo(ref.alpha, 14);
    expect(r.metrics['rollout_corr/ais/mean_abs_logp_diff']).toBeCloseTo(0.22, 15);
    close(r.value.weights, [...ref.w, 0]);
    close(r.value.advantages, [...ref.adv, 0]);
  });

  it('engages α_var and α_mis saturation with other hyper-parameters', () => {
    const ref = aisReference(1.3, 0.5, 0.5, 0.7, 1e-6);
    expect(ref.aVar).toBeGreaterThan(0);
    const r = run({ name: 'ais', C: 1.3, delta: 0.5, gamma: 0.5, betaVar: 0.7 });
    expect(r.metrics['rollout_corr/ais/alpha_var']).toBeCloseTo(ref.aVar, 14);
    expect(r.metrics['rollout_corr/ais/alpha_mis']).toBeCloseTo(0.44, 14);
    expect(r.metrics['rollout_corr/ais/alpha']).toBeCloseTo(ref.alpha, 14);
    close(r.value.weights, [...ref.w, 0]);
  });

  it('one valid token: CV = 0, stds 0', () => {
    const one = corrInput([[-1, -1]], [[-1.5, 0]], [[1, 0]], [[1, 0]]);
    const r = ais(one, { C: 5, delta: 0.02, gamma: 1.2, betaVar: 1, eps: 1e-6 }, new Float64Array(2));
    expect(r.metrics['cv']).toBe(0);
    expect(r.metrics['alpha']).toBe(1);
    expect(r.value.factor[0]).toBeCloseTo(E(0.5), 15);
  });
});

// ---------------------------------------------------------------------------------------------
// properties

/** Every stage with its schema defaults, plus a few non-default variants. */
const ALL_STAGES: object[] = [
  ...Object.keys(corrections).map((name) => ({ name })),
  { name: 'icepop', level: 'sequence' },
  { name: 'rs-k1', level: 'token' },
  { name: 'rs-k1', level: 'seq-mean', verlBand: true },
  { name: 'rs-k2', level: 'seq-max' },
  { name: 'rs-k3', level: 'token' },
  { name: 'batch-norm', level: 'sequence' },
];

function inputFrom(raw: ReturnType<typeof toBatch>, rollout: Float64Array) {
  return {
    shape: raw.shape,
    logpOld: raw.logpOld,
    logpRollout: rollout,
    responseMask: raw.mask,
    advantages: raw.logpRef!,
  };
}

describe('correction: properties', () => {
  test.prop([batchArb()])('ρ ≡ 1 ⇒ every stage is the identity', (raw) => {
    const b = toBatch(raw);
    const x = inputFrom(b, b.logpOld);
    for (const s of ALL_STAGES) {
      const r = applyCorrection(x, [spec(s)]).value;
      expect(Array.from(r.weights), JSON.stringify(s)).toEqual(Array.from(b.mask));
      expect(Array.from(r.lossMask)).toEqual(Array.from(b.mask));
      expect(Array.from(r.denominatorMask)).toEqual(Array.from(b.mask));
    }
  });

  test.prop([batchArb(3), fc.double({ min: 0.01, max: 10, noNaN: true })])('0 ≤ tis weight ≤ C', (raw, C) => {
    const b = toBatch(raw);
    const w = applyCorrection(inputFrom(b, b.logpRollout), [{ name: 'tis', C }]).value.weights;
    for (const v of w) {
      expect(v).toBeGreaterThanOrEqual(0);
      expect(v).toBeLessThanOrEqual(C);
    }
  });

  test.prop([
    batchArb(2),
    fc.record({
      C: fc.double({ min: 1, max: 10, noNaN: true }),
      delta: fc.double({ min: 1e-4, max: 1, noNaN: true }),
      gamma: fc.double({ min: 0.1, max: 3, noNaN: true }),
      betaVar: fc.double({ min: 0, max: 3, noNaN: true }),
      eps: fc.constant(1e-6),
    }),
  ])('AIS: α ∈ [0, 1] and 0 ≤ w̃ ≤ 1 + α(C − 1)', (raw, p) => {
    const b = toBatch(raw);
    const r = ais(inputFrom(b, b.logpRollout), p, b.mask);
    const alpha = r.metrics['alpha']!;
    expect(alpha).toBeGreaterThanOrEqual(0);
    expect(alpha).toBeLessThanOrEqual(1);
    for (let k = 0; k < b.mask.length; k++) {
      if (b.mask[k] !== 1) continue;
      expect(r.value.factor[k]).toBeGreaterThanOrEqual(0);
      expect(r.value.factor[k]).toBeLessThanOrEqual(1 + alpha * (p.C - 1));
    }
  });

  test.prop([batchArb()])('AIS: α = 0 when ℓold = ℓroll', (raw) => {
    const b = toBatch(raw);
    const r = ais(
      inputFrom(b, Float64Array.from(b.logpOld)),
      { C: 5, delta: 0.02, gamma: 1.2, betaVar: 1, eps: 1e-6 },
      b.mask,
    );
    expect(r.metrics['alpha']).toBe(0);
  });

  test.prop([
    fc.double({ min: 0.05, max: 0.99, noNaN: true }),
    fc.double({ min: 1.01, max: 20, noNaN: true }),
    fc.array(fc.double({ min: -3, max: 3, noNaN: true }), { minLength: 1, maxLength: 30 }),
  ])('verl k1 band equals the documented band when hi = 1/lo, and differs somewhere when not', (lo, hi, logRatios) => {
    const mk = (lr: number[]) => corrInput([lr], [lr.map(() => 0)], [lr.map(() => 1)]);
    const keep = (l: number, h: number, verlBand: boolean, lr: number[]) =>
      Array.from(rsK1(mk(lr), { level: 'token', lo: l, hi: h, verlBand }, new Float64Array(lr.length)).value.keep);
    // reciprocal bounds (lo = 1/hi): identical masks away from the band edges (1-ulp log rounding)
    const away = logRatios.filter((x) => Math.abs(Math.abs(x) - Math.log(hi)) > 1e-9);
    fc.pre(away.length > 0);
    expect(keep(1 / hi, hi, true, away)).toEqual(keep(1 / hi, hi, false, away));
    // non-reciprocal: a witness ratio inside one band and outside the other
    fc.pre(Math.abs(Math.log(lo) + Math.log(hi)) > 1e-6);
    const a = Math.log(lo);
    const b = Math.log(hi);
    // documented band [a, b] in log ρ, verl band [−b, −a]
    const witness = a + b > 0 ? (Math.max(a, -a) + b) / 2 : (a + Math.min(b, -b)) / 2;
    expect(keep(lo, hi, true, [witness])).not.toEqual(keep(lo, hi, false, [witness]));
  });

  test.prop([batchArb(0.5, 2), fc.integer({ min: 0, max: 999 })])(
    'permuting sequences permutes weights, masks and advantages',
    (raw, seed) => {
      const b = toBatch(raw);
      const { B, T } = b.shape;
      const perm = Array.from({ length: B }, (_, i) => i).sort(
        (i, j) => ((i * 31 + seed) % 7) - ((j * 31 + seed) % 7) || i - j,
      );
      const permute = (x: Float64Array) => flat(perm.map((p) => Array.from(x.subarray(p * T, p * T + T))));
      const stages = [
        { name: 'tis', C: 1.5 },
        { name: 'rs-k3', hi: 0.05 },
        { name: 'ais', C: 3 },
        { name: 'batch-norm', level: 'sequence' },
      ].map(spec);
      const x = inputFrom(b, b.logpRollout);
      const y = {
        shape: b.shape,
        logpOld: permute(b.logpOld),
        logpRollout: permute(b.logpRollout),
        responseMask: permute(b.mask),
        advantages: permute(b.logpRef!),
      };
      const rx = applyCorrection(x, stages).value;
      const ry = applyCorrection(y, stages).value;
      expect(Array.from(ry.lossMask)).toEqual(Array.from(permute(rx.lossMask)));
      const px = permute(rx.weights);
      ry.weights.forEach((v, k) => expect(v).toBeCloseTo(px[k]!, 12));
      const pa = permute(rx.advantages);
      ry.advantages.forEach((v, k) => expect(v).toBeCloseTo(pa[k]!, 12));
    },
  );
});

it('the correction table is frozen-typed and complete', () => {
  expect(Object.keys(corrections).sort()).toEqual([
    'ais',
    'batch-norm',
    'dp-filter',
    'geo-rs',
    'icepop',
    'm2po',
    'mis-seq',
    'mis-token',
    'none',
    'opsm',
    'outlier-veto',
    'rejection_sampling',
    'rollout_rs',
    'rs-k1',
    'rs-k2',
    'rs-k3',
    'seq-tis',
    'seq_logprob_error_threshold',
    'tis',
    'token-is',
    'veto',
  ]);
});
