// Tests of the wire tensor codec: exact round trips (float64 bits, NaN payloads, −0) and errors
// that name the field. Not the schemas that use it.

import { describe, expect, it } from 'vitest';
import { decodeTensor, encodeTensor } from '../../src/protocol/tensor.js';

describe('wire tensors', () => {
  it('round-trips every bit of float64, including −0, NaN payloads and subnormals', () => {
    const bits = new BigUint64Array([
      0x8000000000000000n,
      0x7ff8000000000001n,
      0x0000000000000001n,
      0x3fd5555555555555n,
      0xfff0000000000000n,
    ]);
    const x = new Float64Array(bits.buffer);
    const wire = encodeTensor(x, [5]);
    expect(wire.dtype).toBe('F64');
    const back = decodeTensor(JSON.parse(JSON.stringify(wire)));
    expect(new BigUint64Array((back as Float64Array).buffer)).toEqual(bits);
  });

  it('encodes little-endian bytes (a known vector)', () => {
    expect(encodeTensor(new Float64Array([-0.5])).data).toBe('AAAAAAAA4L8=');
    expect(encodeTensor(new Int32Array([1, -1]), [1, 2])).toEqual({
      dtype: 'I32',
      shape: [1, 2],
      data: 'AQAAAP////8=',
    });
  });

  it('rejects inconsistent tensors with a message naming the field', () => {
    expect(() => encodeTensor(new Float32Array(3), [2, 2])).toThrow('shape [2, 2] holds 4 elements, the array 3');
    expect(() => decodeTensor({ dtype: 'F16' as never, shape: [1], data: 'AAA=' }, 'params.gradLogp')).toThrow(
      'params.gradLogp.dtype: unknown dtype "F16"',
    );
    expect(() => decodeTensor({ dtype: 'F32', shape: [2], data: 'AAAAAA==' }, 'x')).toThrow(
      'x.data: 4 bytes for shape [2] of F32 (expected 8)',
    );
    expect(() => decodeTensor({ dtype: 'F32', shape: [-1], data: '' }, 'x')).toThrow('x.shape');
    expect(() => decodeTensor({ dtype: 'F32', shape: [1], data: '!!!!' }, 'x')).toThrow('x.data: not standard base64');
  });
});
