// Tests of the precision seam's default: fp32Numerics hands out the NN core's sequential GEMMs and no KV-cache hook.
// Not a test of any quantized numerics (those come with the precision plans).

import { describe, expect, it } from 'vitest';
import { sequentialBlockGemms, sequentialLinearGemms } from '../../src/nn/index.js';
import { fp32Numerics } from '../../src/policies/numerics.js';

describe('fp32Numerics', () => {
  it('is the sequential GEMMs everywhere and no KV hook', () => {
    const n = fp32Numerics();
    expect(n.label).toBe('fp32');
    expect(n.block(0)).toBe(sequentialBlockGemms);
    expect(n.block(3)).toBe(sequentialBlockGemms);
    expect(n.lmHead()).toBe(sequentialLinearGemms);
    expect(n.kvHook(0)).toBeNull();
  });
});

