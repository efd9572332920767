// Regenerates the quantizer agreement table of docs/quantization.md: writes the `quantizers` golden suite
// (seed 0) to a temporary directory and runs the torch transcriptions (python -m qrl_golden.torch_quantizers).
// Usage: npx tsx scripts/quantizer-agreement.ts [--check]; test/python/torch-quantizers.test.ts runs the check.

import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { goldenSuites } from '../src/golden/suites/index.js';
import { writeGolden } from '../src/golden/write.js';
import { fillMarkers } from './doc-tables.js';

/** The document and marker the table lives in. */
export const AGREEMENT_DOC = 'docs/quantization.md';
export const AGREEMENT_MARKER = 'quantizer-agreement';

/** The Python that has torch: the project's venv when it exists, else `python3` on PATH. */
export function torchPython(): string {
  return existsSync('.venv/bin/python3') ? '.venv/bin/python3' : 'python3';
}

/** Writes the quantizers golden suite (seed 0) to a fresh temporary directory and returns it. */
export function writeQuantizerGolden(): string {
  const dir = mkdtempSync(join(tmpdir(), 'qrl-quant-agree-'));
  writeGolden(dir, [goldenSuites.quantizers!], { seed: 0, command: 'qrl-sim golden --suite quantizers --seed 0' });
  return dir;
}

/** Runs `python -m qrl_golden.torch_quantizers DIR …args` and returns its stdout; throws with its output on failure. */
export function runTorchQuantizers(
  dir: string,
  args: readonly string[],
  device = 'cpu',
): { status: number; stdout: string; stderr: string } {
  const r = spawnSync(torchPython(), ['-m', 'qrl_golden.torch_quantizers', dir, '--device', device, ...args], {
    encoding: 'utf8',
    env: { ...process.env, PYTHONPATH: ['python', process.env.PYTHONPATH].filter(Boolean).join(':') },
    timeout: 600_000,
  });
  if (r.error) throw new Error(`cannot run ${torchPython()}: ${r.error.message}`);
  return { status: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

/** The agreement table as the torch transcriptions measure it now. */
export function agreementTable(): string {
  const dir = writeQuantizerGolden();
  try {
    const r = runTorchQuantizers(dir, ['--markdown']);
    if (r.stdout.trim() === '') throw new Error(`torch_quantizers printed no table (exit ${r.status}):\n${r.stderr}`);
    return r.stdout.trimEnd();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const isMain =
  process.argv[1] !== undefined && import.meta.url.endsWith(process.argv[1].replace(/\\/g, '/').split('/').pop() ?? '');
if (isMain) {
  const before = readFileSync(AGREEMENT_DOC, 'utf8');
  const after = fillMarkers(before, { [AGREEMENT_MARKER]: agreementTable() });
  if (process.argv.includes('--check')) {
    if (before !== after) {
      console.error(`${AGREEMENT_DOC} is out of date: run npx tsx scripts/quantizer-agreement.ts`);
      process.exitCode = 1;
    }
  } else writeFileSync(AGREEMENT_DOC, after);
}
