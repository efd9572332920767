// Tests of the safetensors writer and reader: the byte layout against a hand-made file, round trips
// of every dtype, F8 codes, and errors naming the tensor. Not the golden suites.

import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import {
  decodeSafetensors,
  encodeSafetensors,
  openSafetensors,
  readSafetensors,
  writeSafetensors,
} from '../../src/protocol/safetensors.js';

describe('safetensors', () => {
  it('lays out header length, padded JSON header and little-endian data', () => {
    const bytes = encodeSafetensors({ x: { data: new Float32Array([1, -2]), shape: [2] } });
    const n = Number(new DataView(bytes.buffer).getBigUint64(0, true));
    expect(n % 8).toBe(0);
    const header = JSON.parse(Buffer.from(bytes.subarray(8, 8 + n)).toString());
    expect(header).toEqual({ x: { dtype: 'F32', shape: [2], data_offsets: [0, 8] } });
    expect(Array.from(bytes.subarray(8 + n))).toEqual([0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0]);
  });

  it('round-trips every dtype, F8 codes and metadata through a file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'qrl-st-'));
    const path = join(dir, 'a.safetensors');
    const f64 = new Float64Array([Math.PI, -0]);
    writeSafetensors(
      path,
      {
        f64: { data: f64, shape: [2, 1] },
        i32: { data: new Int32Array([-7]), shape: [1] },
        u16: { data: new Uint16Array([65535, 1]), shape: [2] },
        e4m3: { data: new Uint8Array([0x7e, 0xfe]), shape: [2], dtype: 'F8_E4M3' },
      },
      { format: 'pt' },
    );
    const { tensors, metadata } = readSafetensors(path);
    expect(metadata).toEqual({ format: 'pt' });
    expect(Object.is((tensors.f64!.data as Float64Array)[1], -0)).toBe(true);
    expect(tensors.f64!.shape).toEqual([2, 1]);
    expect(Array.from(tensors.i32!.data)).toEqual([-7]);
    expect(Array.from(tensors.u16!.data)).toEqual([65535, 1]);
    expect(tensors.e4m3!.dtype).toBe('F8_E4M3');
    expect(Array.from(tensors.e4m3!.data)).toEqual([0x7e, 0xfe]);
    expect(decodeSafetensors(new Uint8Array(readFileSync(path))).tensors.f64!.data).toEqual(f64);
  });

  it('stores BF16 bits from a Uint16Array and reads a file tensor by tensor by offset (openSafetensors)', () => {
    const path = join(mkdtempSync(join(tmpdir(), 'qrl-st-open-')), 'a.safetensors');
    writeSafetensors(path, {
      b: { data: new Uint16Array([0x3f80, 0xc000]), shape: [2], dtype: 'BF16' },
      a: { data: new Float32Array([1.5, -2, 3]), shape: [3, 1] },
    });
    expect(readSafetensors(path).tensors.b).toEqual({
      dtype: 'BF16',
      shape: [2],
      data: new Uint16Array([0x3f80, 0xc000]),
    });
    const file = openSafetensors(path);
    try {
      expect([...file.entries.keys()]).toEqual(['b', 'a']);
      expect(file.entries.get('a')).toMatchObject({ dtype: 'F32', shape: [3, 1] });
      expect(new Float32Array(file.readBytes('a').buffer)).toEqual(new Float32Array([1.5, -2, 3]));
      expect(new Uint16Array(file.readBytes('b').buffer)).toEqual(new Uint16Array([0x3f80, 0xc000]));
      expect(() => file.readBytes('c')).toThrow(/no tensor "c"/);
    } finally {
      file.close();
    }
    expect(() => encodeSafetensors({ x: { data: new Float32Array(2), shape: [2], dtype: 'BF16' } })).toThrow(
      /F32 array cannot be stored as BF16/,
    );
  });

  it('is read by an independent parser (Python and numpy)', () => {
    const probe = spawnSync('python3', ['-c', 'import numpy'], { encoding: 'utf8' });
    if (probe.status !== 0) return; // .ci/run checks python3 + numpy separately
    const dir = mkdtempSync(join(tmpdir(), 'qrl-st-'));
    const path = join(dir, 'b.safetensors');
    writeSafetensors(path, { w: { data: new Float32Array([0.1, 2.5, -3]), shape: [3] } });
    const script = [
      'import json, struct, sys, numpy as np',
      'b = open(sys.argv[1], "rb").read()',
      'n = struct.unpack("<Q", b[:8])[0]',
      'h = json.loads(b[8:8+n])',
      's, e = h["w"]["data_offsets"]',
      'print(json.dumps(np.frombuffer(b[8+n+s:8+n+e], dtype="<f4").astype(float).tolist()))',
    ].join('\n');
    const out = spawnSync('python3', ['-c', script, path], { encoding: 'utf8' });
    expect(out.stderr).toBe('');
    expect(JSON.parse(out.stdout)).toEqual([Math.fround(0.1), 2.5, -3]);
  });

  it('refuses inconsistent entries, naming the tensor', () => {
    expect(() => encodeSafetensors({ a: { data: new Float32Array(2), shape: [3] } })).toThrow(
      'a: shape [3] holds 3 elements, the array 2',
    );
    expect(() => encodeSafetensors({ a: { data: new Float32Array(1), shape: [1], dtype: 'F8_E4M3' } })).toThrow(
      'a: a F32 array cannot be stored as F8_E4M3',
    );
    expect(() => decodeSafetensors(new Uint8Array(4))).toThrow('shorter than its 8-byte header length');
  });
});
