// The machine a bench ran on, printed first: the ratios against onnxruntime move with the CPU's
// vector units (onnxruntime picks AVX2 or AVX-512 kernels at run time), so every figure says where it was measured.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus } from 'node:os';

/** The widest x86 vector extension /proc/cpuinfo lists ('avx512' with its sub-features, 'avx2', …), or the architecture. */
export function vectorUnits(): string {
  let flags: string[] = [];
  try {
    const line = readFileSync('/proc/cpuinfo', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('flags'));
    flags = line ? (line.split(':')[1] ?? '').trim().split(/\s+/) : [];
  } catch {
    return process.arch;
  }
  const has = (f: string): boolean => flags.includes(f);
  if (has('avx512f')) {
    const extra = ['avx512_vnni', 'avx512_bf16', 'avx512_fp16', 'amx_bf16', 'amx_int8']
      .filter(has)
      .map((f) => f.replace('avx512_', ''));
    return `AVX-512${extra.length ? ` (${extra.join(', ')})` : ''}`;
  }
  if (has('avx2')) return 'AVX2';
  return flags.length ? 'SSE/AVX' : process.arch;
}

/** One line: CPU model, cores, vector units, Node and onnxruntime versions. */
export function machineLine(): string {
  const cpu = cpus();
  let ort = '?';
  try {
    ort = (createRequire(import.meta.url)('onnxruntime-node/package.json') as { version: string }).version;
  } catch {
    // onnxruntime-node not installed: the ratios against it are not printed either
  }
  return `machine: ${cpu[0]?.model.trim() ?? '?'}, ${cpu.length} cores, ${vectorUnits()}; node ${process.version}; onnxruntime-node ${ort}`;
}
