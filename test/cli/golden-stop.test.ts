// golden's stopping discipline: SIGTERM/SIGINT stop after the current case file; manifest.json then
// lists only the suites finished whole, every file is whole, no temp file is left, exit 128 + signal.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readSafetensors } from '../../src/protocol/safetensors.js';

const repo = resolve(__dirname, '..', '..');
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function walk(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? walk(join(dir, e.name)) : [join(dir, e.name)],
  );
}

describe('golden stops on a signal', () => {
  it.each([
    ['SIGTERM', 143],
    ['SIGINT', 130],
  ] as const)(
    '%s after the first suite: exit %i, manifest lists it alone, files whole, no temp files',
    async (signal, code) => {
      const out = mkdtempSync(join(tmpdir(), 'qrl-golden-stop-'));
      dirs.push(out);
      const child = spawn(
        process.execPath,
        [join(repo, 'bin', 'qrl-sim.js'), 'golden', '--suite', 'gemm,casts', '--out', out],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let stderr = '';
      let sent = false;
      child.stderr.setEncoding('utf8');
      child.stderr.on('data', (t: string) => {
        stderr += t;
        // progress marker: the gemm suite is finished, casts is being generated
        if (!sent && /^gemm: \d+ cases/m.test(stderr)) {
          sent = true;
          child.kill(signal);
        }
      });
      const status = await new Promise<number | null>((res) => child.on('exit', (c) => res(c)));
      expect(sent, stderr).toBe(true);
      expect(status, stderr).toBe(code);
      expect(stderr).toMatch(/stopped \(SIG(TERM|INT)\): .*manifest\.json lists 1 of 2 suites \(gemm\)/);
      const manifest = JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8')) as {
        suites: Record<string, { cases: { file: string }[] }>;
      };
      expect(Object.keys(manifest.suites)).toEqual(['gemm']);
      const files = walk(out);
      expect(files.filter((f) => /\.tmp-/.test(f))).toEqual([]);
      for (const f of files.filter((f) => f.endsWith('.safetensors')))
        expect(() => readSafetensors(f), f).not.toThrow();
      for (const c of manifest.suites.gemm!.cases) expect(files).toContain(join(out, c.file));
      // fewer casts files than the suite has: it stopped inside casts, not after it
      expect(files.filter((f) => f.includes(`${join(out, 'casts')}/`)).length).toBeLessThan(244);
    },
    180_000,
  );
});
