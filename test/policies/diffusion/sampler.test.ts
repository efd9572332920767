// Tests of the LLaDA sampler: schedule, per-step commit counts inside the current block, committed tokens final, seeds, remasking modes, temperature 0, CFG, Gumbel-max frequencies.
// Not the estimators (estimators.test.ts); the model is a small random one, so only the mechanics are tested, not sample quality.

import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { createRng, Rng } from '../../../src/core/rng.js';
import { MASK, makeTask } from '../../../src/tasks/index.js';
import { fp32Numerics } from '../../../src/policies/numerics.js';
import { diffusionForward } from '../../../src/policies/diffusion/model.js';
import { rowLogProb } from '../../../src/nn/row-logprob.js';
import { argmaxRow, gumbelArgmax, tokenProb } from '../../../src/policies/diffusion/logprob.js';
import { truncatedSupport } from '../../../src/policies/truncation.js';
import {
  diffusionSamplerDefaults,
  diffusionSchedule,
  diffusionStateAt,
  sampleDiffusion,
  type DiffusionSamplerConfig,
} from '../../../src/policies/diffusion/sampler.js';
import { randomParams32, smallModel } from './helpers.js';

/** An Rng whose every draw throws: proves that a code path makes no random draws. */
class NoDrawRng extends Rng {
  constructor(path = 'no-draw') {
    super(path);
  }
  override fork(name: string): Rng {
    return new NoDrawRng(`${this.path}/${name}`);
  }
  override uniform(): number {
    throw new Error(`unexpected draw from ${this.path}`);
  }
  override uniformOpen(): number {
    throw new Error(`unexpected draw from ${this.path}`);
  }
  override uint32(): number {
    throw new Error(`unexpected draw from ${this.path}`);
  }
}

const task = makeTask('reverse');
const model = smallModel(task.vocabSize);
const params = randomParams32(model, 11);
const prompts = task.trainProblems(4, 5).map((p) => p.prompt);
const P = task.promptLength;
const base: Partial<DiffusionSamplerConfig> = { genLength: 12, blockLength: 4, steps: 9 }; // 3 blocks × 3 steps: 2, 1, 1 tokens
const numerics = fp32Numerics();

describe('diffusionSchedule', () => {
  test.prop([fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 3 })])(
    'transfer[i] = ⌊L/s⌋ + [i < L mod s], sums to the block length',
    (L, s0, blocks) => {
      const s = Math.min(s0, L);
      const sch = diffusionSchedule({
        ...diffusionSamplerDefaults,
        genLength: L * blocks,
        blockLength: L,
        steps: s * blocks,
      });
      expect(sch.blocks).toBe(blocks);
      expect(sch.stepsPerBlock).toBe(s);
      expect(sch.transfer.reduce((a, b) => a + b, 0)).toBe(L);
      sch.transfer.forEach((k, i) => expect(k).toBe(Math.floor(L / s) + (i < L % s ? 1 : 0)));
    },
  );

  it('defaults: 3 blocks of 8, two tokens per step', () => {
    expect(diffusionSchedule(diffusionSamplerDefaults)).toEqual({
      blocks: 3,
      stepsPerBlock: 4,
      transfer: [2, 2, 2, 2],
    });
  });

  it('rejects configs that do not divide, naming the field and value', () => {
    const d = diffusionSamplerDefaults;
    expect(() => diffusionSchedule({ ...d, genLength: 20 })).toThrow(
      /genLength \(20\) must be a multiple of blockLength \(8\)/,
    );
    expect(() => diffusionSchedule({ ...d, steps: 10 })).toThrow(
      /steps \(10\) must be a multiple of the number of blocks \(3/,
    );
    expect(() => diffusionSchedule({ ...d, steps: 27 })).toThrow(/steps per block \(9\) must be ≤ blockLength \(8\)/);
    expect(() => diffusionSchedule({ ...d, temperature: -1 })).toThrow(/temperature must be finite and ≥ 0, got -1/);
    expect(() => diffusionSchedule({ ...d, cfgScale: NaN })).toThrow(/cfgScale/);
    expect(() => diffusionSchedule({ ...d, remasking: 'top_k' as never })).toThrow(
      /remasking must be low_confidence or random, got top_k/,
    );
    expect(() => diffusionSchedule({ ...d, blockLength: 0 })).toThrow(/blockLength must be a positive integer, got 0/);
    expect(() => diffusionSchedule({ ...d, topK: 1.5 })).toThrow(
      /topK must be a non-negative integer \(0 = off\), got 1.5/,
    );
    expect(() => diffusionSchedule({ ...d, topP: 0 })).toThrow(/topP must be in \(0, 1\] \(1 = off\), got 0/);
  });
});

describe('sampleDiffusion', () => {
  test.prop(
    [
      fc.integer({ min: 0, max: 1000 }),
      fc.constantFrom<('low_confidence' | 'random')[]>('low_confidence', 'random'),
      fc.constantFrom(0, 0.7, 1.5),
    ],
    { numRuns: 12 },
  )(
    'commits exactly the scheduled tokens per step, only inside the current block, and never changes them',
    (seed, remasking, temperature) => {
      const r = sampleDiffusion(
        { model, params, numerics },
        prompts,
        { ...base, remasking, temperature },
        createRng(seed),
        { recordStates: true },
      );
      const { transfer, stepsPerBlock } = r.schedule;
      const T = P + 12;
      const states = [...r.states!];
      const final = new Int32Array(prompts.length * T);
      r.sequences.forEach((s, i) => {
        final.set(s.prompt, i * T);
        final.set(s.response, i * T + P);
      });
      states.push(final);
      expect(states.length).toBe(10);
      for (let k = 0; k < 9; k++) {
        const block = Math.floor(k / stepsPerBlock);
        const lo = P + block * 4;
        for (let i = 0; i < prompts.length; i++) {
          let changed = 0;
          for (let t = 0; t < T; t++) {
            const before = states[k]![i * T + t]!;
            const after = states[k + 1]![i * T + t]!;
            if (before !== MASK) expect(after).toBe(before); // committed (and prompt) tokens are final
            if (before !== after) {
              changed += 1;
              expect(t >= lo && t < lo + 4, `step ${k} committed position ${t} outside block [${lo}, ${lo + 4})`).toBe(
                true,
              );
              expect(after).not.toBe(MASK);
              expect(r.sequences[i]!.commitStep![t - P]).toBe(k);
            }
          }
          expect(changed).toBe(transfer[k % stepsPerBlock]);
          // the recorded commit steps reproduce the state the model saw
          expect(Array.from(diffusionStateAt(r.sequences[i]!, k))).toEqual(
            Array.from(states[k]!.subarray(i * T, (i + 1) * T)),
          );
        }
      }
      for (const s of r.sequences) expect(s.response).not.toContain(MASK);
    },
  );

  it('is reproducible from the seed and changes with it', () => {
    const a = sampleDiffusion({ model, params, numerics }, prompts, base, createRng(3).fork('rollout'));
    const b = sampleDiffusion({ model, params, numerics }, prompts, base, createRng(3).fork('rollout'));
    const c = sampleDiffusion({ model, params, numerics }, prompts, base, createRng(4).fork('rollout'));
    expect(b.sequences).toEqual(a.sequences);
    a.logpRollout.forEach((x, i) => expect(Object.is(x, b.logpRollout[i])).toBe(true));
    expect(c.sequences.map((s) => s.response)).not.toEqual(a.sequences.map((s) => s.response));
    expect(a.sequences[0]!.id).toBe('3/rollout/row-0');
  });

  it("a row's sample depends only on its own stream, not on the other rows; ids are recorded", () => {
    const all = sampleDiffusion({ model, params, numerics }, prompts, base, createRng(6), {
      ids: ['a', 'b', 'c', 'd'],
    });
    const first = sampleDiffusion({ model, params, numerics }, prompts.slice(0, 1), base, createRng(6));
    expect(first.sequences[0]!.response).toEqual(all.sequences[0]!.response);
    expect(Array.from(first.sequences[0]!.commitStep!)).toEqual(Array.from(all.sequences[0]!.commitStep!));
    expect(all.sequences.map((s) => s.id)).toEqual(['a', 'b', 'c', 'd']);
    expect(first.sequences[0]!.id).toBe('6/row-0');
  });

  it('random and low-confidence remasking commit in different orders', () => {
    const low = sampleDiffusion(
      { model, params, numerics },
      prompts,
      { ...base, remasking: 'low_confidence' },
      createRng(8),
    );
    const rnd = sampleDiffusion({ model, params, numerics }, prompts, { ...base, remasking: 'random' }, createRng(8));
    expect(rnd.sequences.map((s) => Array.from(s.commitStep!))).not.toEqual(
      low.sequences.map((s) => Array.from(s.commitStep!)),
    );
  });

  it('temperature 0 with low-confidence remasking draws nothing and commits the most confident argmax tokens', () => {
    const cfg = { ...base, temperature: 0 };
    const r = sampleDiffusion({ model, params, numerics }, prompts, cfg, new NoDrawRng(), { recordStates: true });
    const again = sampleDiffusion({ model, params, numerics }, prompts, cfg, createRng(99), { recordStates: true });
    expect(again.sequences.map((s) => s.response)).toEqual(r.sequences.map((s) => s.response));
    const T = P + 12;
    const V = model.config.vocabSize;
    r.states!.forEach((state, k) => {
      const z = diffusionForward(model, params, state, prompts.length, T, numerics).logits;
      const lo = P + Math.floor(k / 3) * 4;
      r.sequences.forEach((s, i) => {
        let minCommitted = Infinity;
        let maxOther = -Infinity;
        for (let t = lo; t < lo + 4; t++) {
          if (state[i * T + t] !== MASK) continue;
          const off = (i * T + t) * V;
          const x0 = argmaxRow(z, off, V, MASK);
          const c = tokenProb(z, off, V, x0, MASK);
          if (s.commitStep![t - P] === k) {
            expect(s.response[t - P]).toBe(x0);
            minCommitted = Math.min(minCommitted, c);
          } else maxOther = Math.max(maxOther, c);
        }
        expect(minCommitted).toBeGreaterThanOrEqual(maxOther);
      });
    });
  });

  it('classifier-free guidance commits argmax of zu + (w+1)(zc − zu) with the prompt masked for zu', () => {
    const w = 1.5;
    const r = sampleDiffusion(
      { model, params, numerics },
      prompts.slice(0, 2),
      { ...base, temperature: 0, cfgScale: w },
      new NoDrawRng(),
      { recordStates: true },
    );
    const plain = sampleDiffusion(
      { model, params, numerics },
      prompts.slice(0, 2),
      { ...base, temperature: 0 },
      new NoDrawRng(),
    );
    expect(r.sequences.map((s) => s.response)).not.toEqual(plain.sequences.map((s) => s.response));
    const T = P + 12;
    const V = model.config.vocabSize;
    const state = r.states![0]!;
    const un = state.slice();
    for (let i = 0; i < 2; i++) un.fill(MASK, i * T, i * T + P);
    const zc = diffusionForward(model, params, state, 2, T, numerics).logits;
    const zu = diffusionForward(model, params, un, 2, T, numerics).logits;
    for (let i = 0; i < 2; i++) {
      for (let j = 0; j < 12; j++) {
        if (r.sequences[i]!.commitStep![j] !== 0) continue;
        const off = (i * T + P + j) * V;
        const g = Array.from({ length: V }, (_, v) => zu[off + v]! + (w + 1) * (zc[off + v]! - zu[off + v]!));
        expect(r.sequences[i]!.response[j]).toBe(argmaxRow(g, 0, V, MASK));
      }
    }
  });

  it('rejects bad prompts naming the index and value', () => {
    expect(() => sampleDiffusion({ model, params, numerics }, [[1, MASK, 3]], base, createRng(1))).toThrow(
      /prompts\[0\]\[1\] must be a non-MASK id/,
    );
    expect(() =>
      sampleDiffusion(
        { model, params, numerics },
        [
          [1, 5, 3],
          [1, 3],
        ],
        base,
        createRng(1),
      ),
    ).toThrow(/prompts\[1\] has length 2, expected 3/);
    expect(() =>
      sampleDiffusion({ model, params, numerics }, [new Array<number>(40).fill(5)], base, createRng(1)),
    ).toThrow(/maxLen 48/);
  });
});

describe('sampleDiffusion with top-k / top-p', () => {
  const V = task.vocabSize;
  it('top-k = 0 / top-p = 1, or a top-k that keeps every id, is bit-identical to the untruncated sampler and records no kept sets', () => {
    const plain = sampleDiffusion({ model, params, numerics }, prompts, base, createRng(8));
    expect(plain.support).toBeNull();
    for (const cfg of [{ topK: 0, topP: 1 }, { topK: V - 1 }, { topK: V + 3 }]) {
      const r = sampleDiffusion({ model, params, numerics }, prompts, { ...base, ...cfg }, createRng(8));
      expect(r.sequences).toEqual(plain.sequences);
      r.logpRollout.forEach((x, i) => expect(Object.is(x, plain.logpRollout[i])).toBe(true));
      expect(r.support).toBeNull();
    }
  });

  it('every committed token lies in its recorded kept set (top-k: exactly k ids, MASK never), ℓroll is renormalised over it', () => {
    for (const cfg of [{ topK: 3 }, { topP: 0.5 }, { topK: 4, topP: 0.7 }]) {
      const r = sampleDiffusion(
        { model, params, numerics },
        prompts,
        { ...base, temperature: 0.9, ...cfg },
        createRng(12),
        { recordStates: true },
      );
      const N = 12;
      const T = P + N;
      expect(r.support!.length).toBe(prompts.length * N * V);
      let narrowed = 0;
      r.sequences.forEach((s, i) => {
        for (let j = 0; j < N; j++) {
          const keep = r.support!.subarray((i * N + j) * V, (i * N + j + 1) * V);
          const size = keep.reduce((a, b) => a + b, 0);
          expect(keep[s.response[j]!]).toBe(1);
          expect(keep[MASK]).toBe(0);
          if ('topK' in cfg && !('topP' in cfg)) expect(size).toBe(cfg.topK);
          if (size < V - 1) narrowed += 1;
          // recompute the draw's kept set and ℓroll from the logits of the state that committed slot j
          const k = s.commitStep![j]!;
          const logits = diffusionForward(
            model,
            params,
            r.states![k]!.subarray(i * T, (i + 1) * T),
            1,
            T,
            numerics,
          ).logits;
          const expected = new Uint8Array(V);
          truncatedSupport(logits, (P + j) * V, V, 0.9, cfg.topK ?? 0, cfg.topP ?? 1, expected, MASK);
          expect(Array.from(keep)).toEqual(Array.from(expected));
          expect(
            Object.is(r.logpRollout[i * N + j], rowLogProb(logits, (P + j) * V, V, s.response[j]!, 0.9, keep, MASK)),
          ).toBe(true);
        }
      });
      expect(narrowed).toBeGreaterThan(0);
    }
  });

  it('greedy (temperature 0) ignores top-k / top-p and records nothing', () => {
    const g = sampleDiffusion({ model, params, numerics }, prompts, { ...base, temperature: 0 }, new NoDrawRng());
    const t = sampleDiffusion(
      { model, params, numerics },
      prompts,
      { ...base, temperature: 0, topK: 2, topP: 0.3 },
      new NoDrawRng(),
    );
    expect(t.sequences).toEqual(g.sequences);
    expect(t.support).toBeNull();
  });
});

describe('gumbelArgmax', () => {
  const softmax = (z: number[], tau: number): number[] => {
    const m = Math.max(...z.map((x) => x / tau));
    const e = z.map((x) => Math.exp(x / tau - m));
    const s = e.reduce((a, b) => a + b, 0);
    return e.map((x) => x / s);
  };

  it('matches softmax(z/T) frequencies (chi-square, 40 000 draws, fixed seed)', () => {
    const z = [1, 0.2, -0.5, 2, 0.7];
    for (const tau of [0.5, 1, 2]) {
      const rng = createRng(2026).fork(`gumbel-${tau}`);
      const N = 40_000;
      const counts = new Array<number>(z.length).fill(0);
      for (let n = 0; n < N; n++) counts[gumbelArgmax(z, 0, z.length, tau, rng)]! += 1;
      const p = softmax(z, tau);
      const chi2 = counts.reduce((a, c, v) => a + (c - N * p[v]!) ** 2 / (N * p[v]!), 0);
      expect(chi2, `τ = ${tau}: counts ${counts.join(', ')}`).toBeLessThan(18.47); // df 4, p = 0.001
    }
  });

  it('never picks the excluded id and renormalizes over the others', () => {
    const z = [0.3, -1, 0.9, 0.1, 5];
    const rng = createRng(7).fork('gumbel-exclude');
    const N = 20_000;
    const counts = new Array<number>(5).fill(0);
    for (let n = 0; n < N; n++) counts[gumbelArgmax(z, 0, 5, 1, rng, 4)]! += 1;
    expect(counts[4]).toBe(0);
    const p = softmax(z.slice(0, 4), 1);
    const chi2 = p.reduce((a, pv, v) => a + (counts[v]! - N * pv) ** 2 / (N * pv), 0);
    expect(chi2).toBeLessThan(16.27); // df 3, p = 0.001
  });

  it('over a kept set: never picks an id outside it, renormalises over it, and still draws V uniforms', () => {
    const z = [0.3, -1, 0.9, 0.1, 5];
    const keep = Uint8Array.of(1, 0, 1, 1, 0);
    const rng = createRng(9).fork('gumbel-keep');
    const N = 20_000;
    const counts = new Array<number>(5).fill(0);
    for (let n = 0; n < N; n++) counts[gumbelArgmax(z, 0, 5, 1, rng, -1, keep)]! += 1;
    expect([counts[1], counts[4]]).toEqual([0, 0]);
    const p = softmax([z[0]!, z[2]!, z[3]!], 1);
    const kept = [counts[0]!, counts[2]!, counts[3]!];
    const chi2 = p.reduce((a, pv, i) => a + (kept[i]! - N * pv) ** 2 / (N * pv), 0);
    expect(chi2).toBeLessThan(13.82); // df 2, p = 0.001
    const a = createRng(1);
    gumbelArgmax(z, 0, 5, 1, a, -1, keep);
    const b = createRng(1);
    for (let v = 0; v < 5; v++) b.uniformOpen();
    expect(a.uniform()).toBe(b.uniform());
  });

  it('draws exactly V uniforms per call, and none at temperature 0 (first maximum on ties)', () => {
    const z = [0.5, 2, 2, -1];
    const a = createRng(1);
    gumbelArgmax(z, 0, 4, 1, a);
    const b = createRng(1);
    for (let v = 0; v < 4; v++) b.uniformOpen();
    expect(a.uniform()).toBe(b.uniform());
    expect(gumbelArgmax(z, 0, 4, 0, new NoDrawRng())).toBe(1);
  });
});
