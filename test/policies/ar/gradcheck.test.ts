// Whole-model finite-difference check (float64) of the trainer's log-prob objective Σ g·ℓ: computeLogprobs
// forward, backwardLogprobs backward, over random configs, shapes, temperatures, masks and coefficients.

import { fc, test } from '@fast-check/vitest';
import { describe, expect } from 'vitest';
import { ParamLayout } from '../../../src/nn/index.js';
import {
  ArPolicy,
  arConfig,
  arParamSpecs,
  backwardLogprobs,
  computeLogprobs,
  fp32Numerics,
} from '../../../src/policies/index.js';
import { rngFor } from '../../nn/gradcheck.js';

const configArb = fc.record({
  seed: fc.integer({ min: 0, max: 1_000_000 }),
  norm: fc.constantFrom('layernorm' as const, 'rmsnorm' as const),
  mlp: fc.constantFrom('gelu' as const, 'swiglu' as const),
  positions: fc.constantFrom('rope' as const, 'learned' as const),
  tiedEmbeddings: fc.boolean(),
  bias: fc.boolean(),
  layers: fc.integer({ min: 1, max: 2 }),
  H: fc.constantFrom(1, 2),
  B: fc.integer({ min: 1, max: 2 }),
  P: fc.integer({ min: 1, max: 3 }),
  L: fc.integer({ min: 1, max: 3 }),
  temperature: fc.constantFrom(0.7, 1, 1.6),
  support: fc.boolean(),
});

describe('AR policy: gradient of the trainer log-prob objective', () => {
  test.prop([configArb], { numRuns: 12 })(
    'backwardLogprobs matches central differences of Σ g·ℓ in float64 (with and without a replayed support)',
    (c) => {
      const V = 7;
      const cfg = arConfig({
        vocabSize: V,
        maxLen: 8,
        C: 8,
        H: c.H,
        layers: c.layers,
        hidden: 12,
        norm: c.norm,
        mlp: c.mlp,
        bias: c.bias,
        positions: c.positions,
        tiedEmbeddings: c.tiedEmbeddings,
      });
      const layout = new ParamLayout(arParamSpecs(cfg));
      const rng = rngFor(c.seed, 'ar-gradcheck');
      const data = new Float64Array(layout.size);
      layout.initialize(data, rng.fork('init'));
      for (let i = 0; i < data.length; i++) data[i] = data[i]! + 0.3 * rng.normal(); // away from the tiny GPT-2 init
      const grads = new Float64Array(layout.size);
      const policy = new ArPolicy(cfg, { layout, data, grads });
      const { B, P, L } = c;
      const tokens = Array.from({ length: B * (P + L) }, () => rng.int(V));
      const mask = Array.from({ length: B * L }, () => (rng.uniform() < 0.75 ? 1 : 0));
      mask[0] = 1;
      const g = Array.from({ length: B * L }, () => rng.normal());
      // sampling-support replay: a random kept set per slot that holds the scored token
      const support = c.support ? new Uint8Array(B * L * V) : undefined;
      if (support !== undefined) {
        for (let b = 0; b < B; b++) {
          for (let k = 0; k < L; k++) {
            const o = (b * L + k) * V;
            for (let v = 0; v < V; v++) support[o + v] = rng.uniform() < 0.5 ? 1 : 0;
            support[o + tokens[b * (P + L) + P + k]!] = 1;
          }
        }
      }
      const opts = { numerics: fp32Numerics(), temperature: c.temperature, support };
      const objective = (): number => {
        const lp = computeLogprobs(policy, tokens, B, P, mask, opts);
        let s = 0;
        for (let i = 0; i < g.length; i++) s += g[i]! * lp.logp[i]!;
        return s;
      };
      const lp = computeLogprobs(policy, tokens, B, P, mask, opts);
      backwardLogprobs(policy, lp, g);
      // Check every parameter of small models, a seeded sample of 150 otherwise.
      const idx = Array.from({ length: layout.size }, (_, i) => i);
      const picked = layout.size <= 150 ? idx : rng.fork('pick').shuffle(idx).slice(0, 150);
      const h = 1e-5;
      let nonzero = 0;
      for (const i of picked) {
        const x0 = data[i]!;
        data[i] = x0 + h;
        const lp1 = objective();
        data[i] = x0 - h;
        const lm1 = objective();
        data[i] = x0;
        const num = (lp1 - lm1) / (2 * h);
        const a = grads[i]!;
        if (a !== 0) nonzero++;
        const tol = 1e-5 * Math.max(Math.abs(a), Math.abs(num)) + 1e-8;
        if (!(Math.abs(a - num) <= tol)) {
          const e = layout.entries.find((en) => i >= en.offset && i < en.offset + en.size)!;
          expect.fail(`${e.name}[${i - e.offset}]: analytic ${a} vs numeric ${num}`);
        }
      }
      expect(nonzero).toBeGreaterThan(picked.length / 4);
    },
  );
});
