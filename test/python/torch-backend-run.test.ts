// `qrl-sim run --backend "python3 -m qrl_backend.torch_ar"` with no other flag: the PyTorch backend builds
// its model, plan and optimizer from the run's setup (as numpy_ar does), the run finishes on it, and
// a plan it does not run is refused in one line naming setup.plan.name. Needs torch (.venv/).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/io.js';

const hasTorch = spawnSync('python3', ['-c', 'import torch'], { encoding: 'utf8' }).status === 0;
const root = mkdtempSync(join(tmpdir(), 'qrl-torch-run-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const backend = `PYTHONPATH=${join(process.cwd(), 'python')} python3 -m qrl_backend.torch_ar --device cpu`;

function config(name: string, extra: Record<string, unknown>): string {
  const path = join(root, `${name}.json`);
  writeFileSync(path, JSON.stringify({
    steps: 2,
    task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
    policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 } },
    sft: { steps: 2, batchSize: 8, cache: false },
    rollout: { prompts: 2, groupSize: 4 },
    optim: { lr: 0.003 },
    ...extra,
  }));
  return path;
}

describe.skipIf(!hasTorch)(`qrl_backend.torch_ar from the run config${hasTorch ? '' : ' (skipped: torch is not importable by python3)'}`, () => {
  it('serves run --backend with no flags: the model and the plan (bf16) come from the run', async () => {
    const out = join(root, 'bf16');
    const r = await runCli(['run', '--config', config('bf16', { plan: 'bf16' }), '--out', out, '--backend', backend]);
    expect(r.code, r.err).toBe(0);
    const written = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8')) as { backend: { name: string; plan: string } };
    expect(written.backend.name).toBe('qrl_backend.torch_ar');
    expect(written.backend.plan).toBe('bf16');
    expect(readFileSync(join(out, 'metrics.jsonl'), 'utf8').trim().split('\n')).toHaveLength(2);
  }, 180_000);

  it("AdamW's lr and weight decay come from setup.optim, and a flag overrides the run", () => {
    const script = [
      'import json, sys',
      'from qrl_backend.torch_ar.backend import build',
      'setup = {"policy": "ar", "model": {"vocabSize": 13, "maxLen": 15, "C": 16, "H": 2, "layers": 1, "hidden": 32}, "plan": {"name": "bf16"}, "optim": {"lr": 0.003, "weightDecay": 0.1}}',
      'out = []',
      'for argv in (["--device", "cpu"], ["--device", "cpu", "--lr", "0.5", "--plan", "fp32"]):',
      '    be = build(argv); be.configure(None, setup)',
      '    out.append([be.inner.plan_name] + [g[k] for g in be.inner.opt.param_groups for k in ("lr", "weight_decay")])',
      'print(json.dumps(out))',
    ].join('\n');
    const r = spawnSync('python3', ['-c', script], { encoding: 'utf8', env: { ...process.env, PYTHONPATH: join(process.cwd(), 'python') } });
    expect(r.status, r.stderr).toBe(0);
    // param groups: the matrices (weight decay) and the rest (none)
    expect(JSON.parse(r.stdout)).toEqual([['bf16', 0.003, 0.1, 0.003, 0], ['fp32', 0.5, 0.1, 0.5, 0]]);
  }, 60_000);

  it('replays a top-k support (capabilities.supportReplay): on fp32 sides ℓold is ℓroll, so the sequence log-ratio stays 0', async () => {
    const out = join(root, 'replay');
    const path = config('replay', { plan: 'fp32', policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 }, sampler: { topK: 4, supportReplay: true } } });
    const r = await runCli(['run', '--config', path, '--out', out, '--backend', backend, '--no-report']);
    expect(r.code, r.err).toBe(0);
    const steps = readFileSync(join(out, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, number>);
    expect(steps).toHaveLength(2);
    for (const m of steps) expect(m['mismatch/seq_log_ratio_abs_max']!).toBeLessThan(1e-6);
  }, 180_000);

  it('refuses a plan it does not run, in one line naming setup.plan.name', async () => {
    const r = await runCli(['run', '--config', config('nvfp4', { plan: 'nvfp4-rollout' }), '--out', join(root, 'nvfp4'), '--backend', backend]);
    expect(r.code).not.toBe(0);
    expect(r.err).toMatch(/setup\.plan\.name.*this backend runs plans fp32, bf16, fp8-tensor-rollout, the run asks for 'nvfp4-rollout'|this backend runs plans fp32, bf16, fp8-tensor-rollout, the run asks for 'nvfp4-rollout'.*setup\.plan\.name/);
  }, 180_000);
});
