// The numpy AR backend (python3 -m qrl_backend.numpy_ar) driven by RemoteBackend over stdio and HTTP:
// negotiation, generate/logprobs agreement, backward + step, the frozen reference, save/load, and the
// error a bad request gets.

import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { connectBackend, type RemoteBackend } from '../../src/protocol/remote.js';
import { computeLogprobs, readArWeights } from '../../src/policies/index.js';
import { numericsFor, precisionPlan } from '../../src/policies/plans.js';

const env = { ...process.env, PYTHONPATH: join(process.cwd(), 'python') };
const config = JSON.stringify({ vocabSize: 13, maxLen: 15, C: 16, H: 2, layers: 1, hidden: 32 });
const command = `python3 -m qrl_backend.numpy_ar --config '${config}' --max-new-tokens 6 --lr 0.01`;
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

async function exercise(backend: RemoteBackend): Promise<void> {
  const info = backend.lastInfo!;
  expect(info.backend.name).toBe('qrl_backend.numpy_ar');
  expect(info.policy).toBe('ar');
  expect(info.capabilities.warmStart).toBe(false);
  expect((await backend.sync()).weightVersion).toBe(0);
  const prompts = [[1, 7, 9, 3], [1, 7, 9, 3], [1, 5, 6, 3], [1, 5, 6, 3]];
  const batch = await backend.generate({ prompts, seed: '1/step/0/rollout' });
  expect(batch.weightVersion).toBe(0);
  expect([batch.B, batch.T]).toEqual([4, 6]);
  const again = await backend.generate({ prompts, seed: '1/step/0/rollout' });
  expect(again.responses).toEqual(batch.responses);
  await backend.setReference();
  const lp = await backend.logprobs({ batch, rows: [0, 1, 2, 3], policy: 'current', grad: true });
  for (let i = 0; i < lp.logp.length; i++) expect(Math.abs(lp.logp[i]! - batch.logpRollout[i]!)).toBeLessThan(1e-5);
  await backend.backward(lp.handle!, Float64Array.from(batch.mask, (m) => -m));
  const step = await backend.step({ maxGradNorm: 1 });
  expect(step.weightVersion).toBe(1);
  expect(step.gradNorm).toBeGreaterThan(0);
  const after = await backend.logprobs({ batch, rows: [0, 1, 2, 3], policy: 'current' });
  const ref = await backend.logprobs({ batch, rows: [0, 1, 2, 3], policy: 'reference' });
  expect(ref.logp).toEqual((await backend.logprobs({ batch, rows: [0, 1, 2, 3], policy: 'reference' })).logp);
  let sumBefore = 0;
  let sumAfter = 0;
  for (let i = 0; i < lp.logp.length; i++) {
    sumBefore += lp.logp[i]!;
    sumAfter += after.logp[i]!;
  }
  expect(sumAfter).toBeGreaterThan(sumBefore); // one step up the samples' likelihood
  expect(ref.logp).toEqual(lp.logp);
  expect((await backend.generate({ prompts, seed: 's' })).weightVersion).toBe(0); // not synced yet
  expect((await backend.sync()).weightVersion).toBe(1);
  const dir = mkdtempSync(join(tmpdir(), 'qrl-numpy-'));
  dirs.push(dir);
  await backend.save(dir);
  // The weights file the Python backend wrote is the TypeScript policy's: scoring the batch with
  // the TypeScript trainer on it gives the Python backend's ℓ (fp32 plan).
  const policy = readArWeights(join(dir, 'weights.safetensors'));
  const P = prompts[0]!.length;
  const tokens = new Int32Array(batch.B * (P + batch.T));
  for (let b = 0; b < batch.B; b++) {
    tokens.set(prompts[b]!, b * (P + batch.T));
    tokens.set(batch.responses.subarray(b * batch.T, (b + 1) * batch.T), b * (P + batch.T) + P);
  }
  const ts = computeLogprobs(policy, tokens, batch.B, P, batch.mask, { numerics: numericsFor(precisionPlan('fp32').trainer) });
  for (let i = 0; i < ts.logp.length; i++) expect(Math.abs(ts.logp[i]! - after.logp[i]!)).toBeLessThan(2e-5);
  // Σ_v π(v)² (veRL's sum_pi_squared, for the optimal token baseline) agrees with the TypeScript trainer's likewise
  expect(info.capabilities.probSqSum).toBe(true);
  const sq = (await backend.logprobs({ batch, rows: [0, 1, 2, 3], policy: 'current', probSqSum: true })).probSqSum!;
  const tsSq = computeLogprobs(policy, tokens, batch.B, P, batch.mask, { numerics: numericsFor(precisionPlan('fp32').trainer), probSqSum: true }).probSqSum!;
  expect(sq).toHaveLength(tsSq.length);
  for (let i = 0; i < tsSq.length; i++) expect(Math.abs(tsSq[i]! - sq[i]!)).toBeLessThan(2e-5);
  await backend.step({ maxGradNorm: 1 });
  await backend.load(dir);
  expect((await backend.logprobs({ batch, rows: [0, 1, 2, 3], policy: 'current' })).logp).toEqual(after.logp);
  await expect(backend.generate({ prompts: [[1, 2], [1]], seed: 's' })).rejects.toThrow(/generate failed: prompts\.1: .*\(field prompts\.1\)/);
  await expect(backend.backward('spent', new Float64Array(24))).rejects.toThrow(/unknown or spent handle/);
}

describe('numpy AR backend through RemoteBackend', () => {
  it('over stdio', async () => {
    const backend = await connectBackend({ command: `PYTHONPATH=python ${command}` }, { timeoutMs: 120_000, protocols: ['qrl-backend/1'] });
    try {
      await exercise(backend);
    } finally {
      await backend.close();
    }
  }, 180_000);

  it('over HTTP', async () => {
    const child = spawn('sh', ['-c', `exec ${command} --port 0 --state-root ${tmpdir()}`], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    const url = await new Promise<string>((resolve, reject) => {
      let text = '';
      child.stderr.setEncoding('utf8');
      child.stderr.on('data', (t: string) => {
        text += t;
        const m = /listening on (http:\/\/\S+)/.exec(text);
        if (m) resolve(m[1]!);
      });
      child.on('exit', (code) => reject(new Error(`numpy backend exited ${code}: ${text}`)));
    });
    const backend = await connectBackend({ url }, { timeoutMs: 120_000, shutdownOnClose: true }); // this test started it: close shuts it down
    await exercise(backend);
    await backend.close();
    await new Promise((resolve) => (child.exitCode !== null ? resolve(null) : child.on('exit', resolve)));
    expect(child.exitCode).toBe(0);
  }, 180_000);
});

describe('numpy AR backend: bad flags', () => {
  // Exit 2 and one line naming the flag and its value (no argparse usage block, no traceback).
  it.each([
    ['--config', '{bad'],
    ['--config', '{"vocabSize":13}'],
    ['--config', 'null'],
    ['--config', '{"vocabSize":13,"maxLen":15,"hidden":-1}'],
    ['--weights', '/nonexistent/weights.safetensors'],
    ['--weights', 'README.md'],
  ])('%s %s', (flag, value) => {
    const r = spawnSync('python3', ['-m', 'qrl_backend.numpy_ar', flag, value], { env, encoding: 'utf8', input: '' });
    expect(r.status, r.stderr).toBe(2);
    const lines = r.stderr.trimEnd().split('\n');
    expect(lines, r.stderr).toHaveLength(1);
    expect(lines[0]).toContain(`python3 -m qrl_backend.numpy_ar: ${flag} ${value}: `);
  }, 60_000);
});
