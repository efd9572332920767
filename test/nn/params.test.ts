// Parameter store tests: layout and views, seeded GPT-2 initialization, JSON round trip, 2-D list.
// Not optimizer tests (adamw.test.ts).

import { describe, expect, it } from 'vitest';
import { fc, test } from '@fast-check/vitest';
import {
  blockParamSpecs,
  createParamStore,
  GPT2_INIT,
  ParamLayout,
  ParamStore,
  type BlockConfig,
  type ParamSpec,
} from '../../src/nn/index.js';

const cfg: BlockConfig = {
  C: 16,
  H: 2,
  hidden: 64,
  norm: 'layernorm',
  mlp: 'gelu',
  bias: true,
  causal: true,
  rope: false,
};
const specs: ParamSpec[] = [
  { name: 'wte', shape: [20, 16], init: { kind: 'normal', std: GPT2_INIT.std } },
  ...blockParamSpecs('h0', cfg, 2),
  ...blockParamSpecs('h1', cfg, 2),
];

function std(a: Float32Array): number {
  let s = 0;
  for (const x of a) s += x * x;
  return Math.sqrt(s / a.length);
}

describe('ParamStore', () => {
  it('lays out named views contiguously, with gradient views of the same layout', () => {
    const store = createParamStore(specs, 1);
    let offset = 0;
    for (const e of store.layout.entries) {
      expect(e.offset).toBe(offset);
      offset += e.size;
    }
    expect(store.data.length).toBe(offset);
    const w = store.param('h0.attn.wq');
    w[3] = 7;
    expect(store.data[store.layout.entry('h0.attn.wq').offset + 3]).toBe(7);
    store.grad('h1.mlp.down')[0] = 2;
    expect(store.grads[store.layout.entry('h1.mlp.down').offset]).toBe(2);
    store.zeroGrad();
    expect(store.grads.every((g) => g === 0)).toBe(true);
  });

  it('initializes GPT-2 style: normal(0, 0.02), residual projections scaled, norms 1, biases 0', () => {
    const store = createParamStore(specs, 7);
    expect(std(store.param('wte'))).toBeGreaterThan(0.017);
    expect(std(store.param('wte'))).toBeLessThan(0.023);
    const mlpUp = std(store.param('h0.mlp.up'));
    expect(Math.abs(mlpUp - 0.02)).toBeLessThan(0.002);
    const down = std(store.param('h0.mlp.down'));
    expect(Math.abs(down - 0.02 / Math.sqrt(4))).toBeLessThan(0.0015);
    expect(store.param('h0.ln1.weight').every((x) => x === 1)).toBe(true);
    expect(store.param('h1.ln2.bias').every((x) => x === 0)).toBe(true);
    expect(store.param('h0.attn.bq').every((x) => x === 0)).toBe(true);
  });

  test.prop([fc.nat(), fc.nat()], { numRuns: 5 })(
    'initialization depends only on the seed and the tensor name',
    (s1, s2) => {
      const a = createParamStore(specs, s1);
      const b = createParamStore(specs, s1);
      expect(a.data).toEqual(b.data);
      const c = createParamStore(specs, s1 === s2 ? s2 + 1 : s2);
      expect(c.param('wte')).not.toEqual(a.param('wte'));
      // Adding a tensor in front does not change the values of the others.
      const d = createParamStore([{ name: 'extra', shape: [3], init: { kind: 'normal', std: 1 } }, ...specs], s1);
      expect(d.param('h1.attn.wk')).toEqual(a.param('h1.attn.wk'));
    },
  );

  it('round-trips through JSON bit for bit', () => {
    const store = createParamStore(specs, 3);
    const back = ParamStore.fromJSON(JSON.parse(JSON.stringify(store.toJSON())));
    expect(back.layout.entries).toEqual(store.layout.entries);
    for (let i = 0; i < store.data.length; i++) expect(Object.is(back.data[i], store.data[i])).toBe(true);
  });

  it('lists the 2-D weights and rejects bad layouts by name', () => {
    const layout = new ParamLayout(specs);
    const w2 = layout.weights2d();
    expect(w2).toContain('wte');
    expect(w2).toContain('h1.mlp.down');
    expect(w2).not.toContain('h0.ln1.weight');
    expect(w2).not.toContain('h0.attn.bq');
    expect(() => new ParamLayout([specs[0]!, specs[0]!])).toThrow(/duplicate name "wte"/);
    expect(() => new ParamLayout([{ name: 'x', shape: [2, 0], init: { kind: 'constant', value: 0 } }])).toThrow(
      /shape of x/,
    );
    expect(() => layout.entry('nope')).toThrow(/"nope"/);
  });
});
