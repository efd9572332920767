// Example (docs/library.md): fake-quantize a tensor to FP8 E4M3 elementwise and with a vLLM quantizer preset.
// Not a test of the casts themselves (test/numerics/ is); test/docs/examples.test.ts runs this file.

import { fakeQuant, quantPreset, quantize, dequantize } from 'qrl-sim/numerics';

/** Rounds four values to e4m3fn (round to nearest even, saturating) and through vLLM's per-token FP8 quantizer. */
export function fakeQuantExample(): { elementwise: number[]; perToken: number[] } {
  const x = new Float32Array([0.1, -1.3, 3.14159, 500]);
  // Elementwise cast and back: 500 saturates to 448, the largest finite e4m3fn value.
  const elementwise = fakeQuant('e4m3fn', x, { mode: 'rne', profile: 'satfinite' });
  // A scaled quantizer: per-token amax scale (one row of 4 here), then the e4m3fn cast.
  const q = quantize(quantPreset('vllm-fp8-token'), x, [1, 4]);
  const perToken = dequantize(q);
  return { elementwise: Array.from(elementwise), perToken: Array.from(perToken) };
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(fakeQuantExample());
