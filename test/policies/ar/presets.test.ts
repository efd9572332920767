// AR model presets: the table resolves with overrides, RoPE incremental decode equals the full forward at a
// preset's shape, and every preset runs one rollout under every precision plan (smoke, tiny length).

import { describe, expect, it } from 'vitest';
import {
  arConfig,
  arModelOptions,
  arModelPresetNames,
  arModelPresets,
  computeLogprobs,
  createArPolicy,
  linearInputChannelStats,
  numericsFor,
  precisionPlans,
  rollout,
} from '../../../src/policies/index.js';
import { outlierChannels } from '../../../src/nn/index.js';
import { createRng } from '../../../src/core/rng.js';
import { makeTask } from '../../../src/tasks/index.js';

const task = makeTask('fibonacci', { minLength: 4, maxLength: 6 });
const P = task.promptLength;
const prompts = task.trainProblems(2, 5).map((p) => [...p.prompt]);

describe('AR model presets', () => {
  it('tiny sets nothing; small and medium use RoPE; overrides win; unknown names are named', () => {
    expect(arModelPresetNames).toEqual(['tiny', 'small', 'medium']);
    expect(arModelOptions({ preset: 'tiny' })).toEqual({});
    expect(arModelOptions({})).toEqual({});
    expect(arModelOptions({ preset: 'small', layers: 2, hidden: undefined })).toEqual({
      C: 64,
      layers: 2,
      H: 4,
      hidden: 256,
      positions: 'rope',
      outliers: 2,
      outlierMagnitude: 20,
    });
    expect(arModelPresets.medium).toEqual({
      C: 128,
      layers: 4,
      H: 8,
      hidden: 512,
      positions: 'rope',
      outliers: 2,
      outlierMagnitude: 20,
    });
    expect(Object.isFrozen(arModelPresets.small)).toBe(true);
    expect(() => arModelOptions({ preset: 'huge' })).toThrow(/preset must be one of tiny, small, medium, got "huge"/);
  });

  it('small: RoPE incremental (KV-cache) decode equals the full-forward recompute bit for bit', () => {
    const policy = createArPolicy(
      arConfig({ ...arModelOptions({ preset: 'small' }), vocabSize: task.vocabSize, maxLen: P + 12 }),
      7,
    );
    const d = policy.params.data;
    for (let i = 0; i < d.length; i++) d[i] = d[i]! * 8; // sharper than the init, so tokens vary
    const numerics = numericsFor(precisionPlans.fp32.rollout);
    const run = (decode: 'incremental' | 'recompute') =>
      rollout(policy, prompts, { maxNewTokens: 12, numerics, rng: createRng(3), decode, eos: null });
    const a = run('incremental');
    const b = run('recompute');
    expect(Array.from(a.tokens)).toEqual(Array.from(b.tokens));
    expect(a.logpRollout.every((x, i) => Object.is(x, b.logpRollout[i]))).toBe(true);
    expect(a.responseMask.reduce((s, x) => s + x)).toBe(24);
  });

  for (const preset of arModelPresetNames) {
    it(`${preset}: one rollout and the trainer's log-probs under every precision plan`, () => {
      const policy = createArPolicy(
        arConfig({ ...arModelOptions({ preset }), vocabSize: task.vocabSize, maxLen: P + 3 }),
        1,
      );
      for (const plan of Object.values(precisionPlans)) {
        const r = rollout(policy, prompts, { maxNewTokens: 3, numerics: numericsFor(plan.rollout), rng: createRng(2) });
        const lp = computeLogprobs(policy, r.tokens, r.B, P, r.responseMask, { numerics: numericsFor(plan.trainer) });
        for (let i = 0; i < lp.logp.length; i++) {
          if (!r.responseMask[i]) continue;
          expect(Number.isFinite(lp.logp[i]!) && Number.isFinite(r.logpRollout[i]!), `${plan.name} ${i}`).toBe(true);
        }
      }
    });
  }
});

describe('outlier residual channels', () => {
  const tokens = task.trainProblems(4, 9).flatMap((p) => [...task.goldResponse(p).slice(0, 3), ...p.prompt]);
  const T = P + 3;
  const make = (outliers: number) =>
    createArPolicy(
      arConfig({ ...arModelOptions({ preset: 'small', outliers }), vocabSize: task.vocabSize, maxLen: T }),
      4,
    );

  it('outlierChannels spreads count channels over the width; a bad count is refused', () => {
    expect(outlierChannels(8, 2)).toEqual([2, 6]);
    expect(outlierChannels(64, 2)).toEqual([16, 48]);
    expect(outlierChannels(4, 0)).toEqual([]);
    expect(() => outlierChannels(4, 5)).toThrow(/count must be an integer in \[0, C=4\], got 5/);
    expect(() => arConfig({ vocabSize: 13, maxLen: 8, outliers: -1 })).toThrow(
      /outliers must be an integer in \[0, C=32\], got -1/,
    );
  });

  it('show at every linear-layer input as two channels ≈ magnitude × the median, and not without them', () => {
    const on = linearInputChannelStats(make(2), tokens, 4, T, 2);
    const off = linearInputChannelStats(make(0), tokens, 4, T, 2);
    expect(on.map((s) => s.name)).toEqual([
      'h0.attn',
      'h0.mlp',
      'h1.attn',
      'h1.mlp',
      'h2.attn',
      'h2.mlp',
      'h3.attn',
      'h3.mlp',
      'lmHead',
    ]);
    for (const s of on) {
      expect(s.top.map((t) => t.channel).sort((a, b) => a - b)).toEqual([16, 48]);
      for (const t of s.top) {
        expect(t.ratio).toBeGreaterThan(8);
        expect(t.ratio).toBeLessThan(50);
      }
    }
    for (const s of off) expect(s.top[0]!.ratio).toBeLessThan(5);
  });

  it('set the outlier gains of every norm and nothing else; none without them', () => {
    const on = make(2);
    const off = make(0);
    const w = on.weights;
    for (const g of [...w.blocks.flatMap((b) => [b.ln1, b.ln2]), w.lnf]) {
      expect(Array.from(g).filter((v, c) => (c === 16 || c === 48 ? v !== 20 : v !== 1))).toEqual([]);
    }
    const differ = Array.from(on.params.data).flatMap((v, i) => (v !== off.params.data[i] ? [i] : []));
    expect(differ).toHaveLength(2 * (2 * 4 + 1));
    expect(outlierChannels(64, 2)).toEqual([16, 48]);
  });
});
