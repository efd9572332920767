// TRL 1.13's own GRPOTrainer, captured by `python -m qrl_golden.capture trl --grid` (two steps of each
// option set, num_iterations 2 so the second step clips) and replayed by `qrl-sim replay`: every stage of
// every option set agrees; each planted bug (a patched TRL that does not do what its config says) is
// caught at its stage; a flipped byte is refused by its hash, in TypeScript and in Python alike.

import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stepFields } from '../../src/golden/step-bundle.js';
import { runCli } from '../cli/io.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-replay-trl-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const python = existsSync('.venv/bin/python') ? '.venv/bin/python' : 'python3';
const env = { ...process.env, PYTHONPATH: ['python', process.env.PYTHONPATH].filter(Boolean).join(':') };
const grid = join(root, 'grid');

/** The stage each planted bug must be caught at (what the bug breaks first, worked out from the patch). */
const PLANTED: Record<string, string> = {
  'advantage-no-std': 'advantages',
  'epsilon-high-ignored': 'token-loss',
  'bnpo-aggregation': 'aggregation',
  'kl-doubled': 'token-loss',
  'is-cap-ignored': 'correction',
};

interface Stage { name: string; status: string; maxDiff: number | null; bound: number | null }
interface Replay { step: number; stages: Stage[]; firstDifference: string | null; config: { loss: { name: string } } }

beforeAll(() => {
  const r = spawnSync(python, ['-m', 'qrl_golden.capture', 'trl', '--grid', '--out', grid, '--steps', '2'], { encoding: 'utf8', env, timeout: 400_000 });
  if (r.error) throw new Error(`cannot run ${python}: ${r.error.message}`);
  expect(r.status, r.stderr.slice(-2000)).toBe(0);
}, 420_000);

async function replay(dir: string): Promise<{ code: number; bundles: Replay[]; err: string }> {
  const out = await runCli(['replay', dir, '--json']);
  return { code: out.code, bundles: out.code === 2 ? [] : (JSON.parse(out.out) as { bundles: Replay[] }).bundles, err: out.err };
}

describe('TRL 1.13 GRPOTrainer steps replayed stage by stage', () => {
  it('every option set of the grid agrees at every stage, on both steps', async () => {
    const names = readdirSync(grid).filter((n) => !n.startsWith('plant-')).sort();
    expect(names).toEqual(['bnpo', 'cispo', 'dapo', 'dapo-kl-plain', 'dr_grpo', 'grpo', 'grpo-delta', 'grpo-kl', 'gspo', 'luspo', 'sapo', 'vespo', 'vllm-sequence-mask', 'vllm-sequence-truncate', 'vllm-token-mask', 'vllm-token-truncate']);
    for (const name of names) {
      const r = await replay(join(grid, name));
      expect(r.code, `${name}: ${r.err}`).toBe(0);
      expect(r.bundles.map((b) => b.step), name).toEqual([0, 1]);
      for (const b of r.bundles) {
        expect(b.firstDifference, name).toBeNull();
        const by = Object.fromEntries(b.stages.map((s) => [s.name, s]));
        for (const stage of ['advantages', 'token-loss', 'aggregation', 'loss', 'gradient']) expect(by[stage]!.status, `${name} step ${b.step} ${stage}`).toBe('agree');
        expect(by.correction!.status, `${name} step ${b.step} correction`).toBe(name.startsWith('vllm-') ? 'agree' : 'not-applicable');
      }
    }
  }, 120_000);

  it('the second step is off-policy: the ratio clips somewhere in each clipped loss (the stage is exercised)', () => {
    for (const name of ['grpo', 'dapo', 'bnpo', 'dr_grpo', 'grpo-kl']) {
      const m = JSON.parse(readFileSync(join(grid, name, '1', 'manifest.json'), 'utf8')) as { metrics: Record<string, number> };
      expect(m.metrics['clip_ratio/region_mean'], name).toBeGreaterThan(0);
    }
  });

  it("the FP8 engine's log-probs differ from the trainer's, and every vLLM correction band changes some weight", () => {
    const script = `
import sys, numpy as np
from qrl_golden import bundle
for name in sys.argv[2:]:
    m, a = bundle.read(f"{sys.argv[1]}/{name}/0")
    on = a["completion_mask"] == 1
    d = (a["logp_old"] - a["logp_rollout"]) * on
    w = a["is_weight"]
    rho = np.exp(d) if w.shape[1] > 1 else np.exp(d.sum(1, keepdims=True))
    sel = on if w.shape[1] > 1 else np.ones_like(w, bool)
    print(name, float(np.abs(d).max()), int((np.abs(w - rho)[sel] > 1e-6).sum()))
`;
    const names = ['vllm-token-truncate', 'vllm-token-mask', 'vllm-sequence-truncate', 'vllm-sequence-mask'];
    const r = spawnSync(python, ['-c', script, grid, ...names], { encoding: 'utf8', env });
    expect(r.status, r.stderr).toBe(0);
    for (const line of r.stdout.trim().split('\n')) {
      const [name, maxDelta, changed] = line.split(' ');
      expect(Number(maxDelta), name).toBeGreaterThan(1e-4);
      expect(Number(changed), name).toBeGreaterThan(0);
    }
  });

  it('each planted bug is caught at its stage', async () => {
    for (const [plant, stage] of Object.entries(PLANTED)) {
      const r = await replay(join(grid, `plant-${plant}`));
      expect(r.code, plant).toBe(1);
      const caught = r.bundles.map((b) => b.firstDifference).filter((f) => f !== null);
      expect(caught.length, plant).toBeGreaterThan(0);
      expect(new Set(caught), plant).toEqual(new Set([stage]));
    }
  }, 60_000);

  it('a flipped byte is refused by its hash (exit 2, one line naming the field), in TypeScript and Python', async () => {
    const dir = join(root, 'flipped');
    cpSync(join(grid, 'grpo', '1'), dir, { recursive: true });
    const file = join(dir, 'tensors.safetensors');
    const bytes = readFileSync(file);
    const headerLength = Number(bytes.readBigUInt64LE(0));
    bytes[8 + headerLength + 3]! ^= 0x01; // a byte of the first tensor in the data (advantages, sorted first)
    writeFileSync(file, bytes);
    const out = await runCli(['replay', dir]);
    expect(out.code).toBe(2);
    expect(out.err.trim().split('\n')).toHaveLength(1);
    expect(out.err).toMatch(/advantages: sha256 .* does not match manifest\.json/);
    const py = spawnSync(python, ['-c', 'import sys; from qrl_golden import bundle; bundle.read(sys.argv[1])', dir], { encoding: 'utf8', env });
    expect(py.status).not.toBe(0);
    expect(py.stderr).toMatch(/BundleError: advantages: sha256 does not match/);
  });

  it("docs/replay.md lists every option set and planted bug the grid captured", () => {
    const doc = readFileSync('docs/replay.md', 'utf8');
    for (const name of readdirSync(grid)) expect(doc, name).toContain(name.startsWith('plant-') ? `| \`${name.slice(6)}\` |` : `| \`${name}\` |`);
  });

  it('the field table of qrl_golden.bundle is the TypeScript one', () => {
    const py = spawnSync(python, ['-c', 'import json; from qrl_golden import bundle; print(json.dumps({k: [s, kind, req] for k, (s, kind, req, _) in bundle.FIELDS.items()}))'], { encoding: 'utf8', env });
    expect(py.status, py.stderr).toBe(0);
    const ts = Object.fromEntries(Object.entries(stepFields).map(([k, f]) => [k, [f.shape, f.kind, f.required]]));
    expect(JSON.parse(py.stdout)).toEqual(ts);
  });

  it('the capture refuses bad input with one line and exit 2', () => {
    for (const [args, pattern] of [
      [['--options', '{"loss_type": "grpo"'], /--options: not JSON/],
      [['--options', '{"logging_steps": 5}'], /--options: logging_steps is set by the capture/],
      [['--options', '{"gradient_accumulation_steps": 2}'], /gradient_accumulation_steps and steps_per_generation must be 1/],
      [['--plant', 'nope'], /--plant: unknown bug 'nope'/],
    ] as const) {
      const r = spawnSync(python, ['-m', 'qrl_golden.capture', 'trl', '--out', join(root, 'bad'), '--steps', '1', ...args], { encoding: 'utf8', env, timeout: 120_000 });
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr.trim().split('\n').at(-1)).toMatch(pattern);
    }
  }, 240_000);
});
