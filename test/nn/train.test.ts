// Training sanity check of the nn core: AdamW with clipping drives down the loss of a 1-layer
// transformer on a deterministic next-token task. Not the policy training smoke test (issue 4, item 3).

import { describe, expect, it } from 'vitest';
import { AdamW, clipGradNorm, ParamStore, type BlockConfig } from '../../src/nn/index.js';
import { tinyModel } from './tiny-model.js';
import { createRng } from '../../src/core/rng.js';

describe('training sanity', () => {
  it('AdamW on a copy-the-previous-token task drives the loss from ≈ log V to below 0.1', () => {
    const cfg: BlockConfig = {
      C: 16,
      H: 2,
      hidden: 32,
      norm: 'rmsnorm',
      mlp: 'swiglu',
      bias: false,
      causal: true,
      rope: true,
    };
    const V = 6;
    const T = 8;
    const B = 8;
    const { layout, run } = tinyModel(cfg, V, T);
    const store = new ParamStore(layout);
    layout.initialize(store.data, createRng(5).fork('init'));
    const opt = new AdamW(store, { lr: 1e-2, weightDecay: 0.01 });
    const data = createRng(5).fork('data');
    // Target at position t is the token at t − 1 (position 0 predicts token 0).
    const batch = () => {
      const tokens = Array.from({ length: B * T }, () => data.int(V));
      const targets = tokens.map((_, i) => (i % T === 0 ? 0 : tokens[i - 1]!));
      return { tokens, targets };
    };
    const losses: number[] = [];
    for (let step = 0; step < 120; step++) {
      const { tokens, targets } = batch();
      store.zeroGrad();
      losses.push(run(store.data, tokens, targets, B, store.grads));
      const norm = clipGradNorm(store.grads, 1.0);
      expect(Number.isFinite(norm)).toBe(true);
      opt.step();
    }
    const first = losses.slice(0, 5).reduce((a, b) => a + b) / 5;
    const last = losses.slice(-5).reduce((a, b) => a + b) / 5;
    expect(first).toBeGreaterThan(Math.log(V) * 0.9);
    expect(last).toBeLessThan(Math.min(first / 2, 0.1));
  });
});
