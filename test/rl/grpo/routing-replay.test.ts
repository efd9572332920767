// MoE routing replay (policy.routingReplay R2/R3) end to end: R3 under identical plans is no replay
// bit for bit; the backend's replay, returned routing and flip rate on small hand-checked cases; config errors.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ReferenceBackend } from '../../../src/backend/index.js';
import { UsageError } from '../../../src/core/errors.js';
import { arPolicyFactory } from '../../../src/policies/index.js';
import { flipRatesAt } from '../../../src/policies/moe-replay.js';
import { resolveRunConfig } from '../../../src/rl/index.js';
import { runGrpo } from '../../../src/runs/index.js';

const root = mkdtempSync(join(tmpdir(), 'qrl-moe-replay-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const moeModel = { C: 16, H: 2, layers: 2, hidden: 16, moe: { experts: 4, topK: 2, auxCoeff: 0.01 } };

function moeConfig(extra: Record<string, unknown> = {}) {
  return resolveRunConfig({
    seed: 5,
    steps: 2,
    task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
    policy: { kind: 'ar', model: moeModel },
    plan: 'bf16',
    sft: { steps: 4, batchSize: 8, cache: false },
    rollout: { prompts: 2, groupSize: 4 },
    // one update per step: with more, the later mini-batches score at moved weights whose own routing
    // may differ from θ_old's, which R3 (like R2) keeps replaying — a real difference, not a bug
    optim: { miniBatches: 1 },
    estimators: { correction: { name: 'tis' } },
    eval: { every: 0, problems: 4 },
    ...extra,
  });
}

describe('routing replay in the GRPO loop', () => {
  it('R3 (and R2) with identical plans (bf16 rollout and trainer) ≡ no replay: metrics and final weights bit for bit', async () => {
    const out: { lines: Record<string, number>[]; weights: Float32Array }[] = [];
    for (const mode of ['none', 'R3', 'R2'] as const) {
      const config = moeConfig({ policy: { kind: 'ar', model: moeModel, routingReplay: mode } });
      const backend = new ReferenceBackend(config, arPolicyFactory);
      await runGrpo({ config, outDir: join(root, mode), backend, cacheDir: join(root, 'cache') });
      const lines = readFileSync(join(root, mode, 'metrics.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, number>);
      out.push({ lines, weights: Float32Array.from(backend.weights) });
      await backend.close();
    }
    const [none, r3, r2] = out as [(typeof out)[0], (typeof out)[0], (typeof out)[0]];
    expect(none.lines).toHaveLength(2);
    expect(r2.lines).toEqual(r3.lines); // one update per step: R2's ℓold routing is the own routing at θ_old
    expect(Array.from(r2.weights).every((w, i) => Object.is(w, none.weights[i]))).toBe(true);
    none.lines.forEach((line, i) => {
      const other = r3.lines[i] as Record<string, number>;
      for (const [key, value] of Object.entries(line)) expect([key, other[key]]).toEqual([key, value]);
      // R3 adds only the with/without-replay mismatch pair, equal here; the flip rates are 0
      expect(
        Object.keys(other)
          .filter((k) => !(k in line))
          .sort(),
      ).toEqual(['moe/k3_kl_own_routing', 'moe/k3_kl_rollout_routing']);
      expect(other['moe/k3_kl_own_routing']).toBe(other['moe/k3_kl_rollout_routing']);
      expect(line['moe/flip_rate/l0']).toBe(0);
      expect(line['moe/flip_rate/l1']).toBe(0);
    });
    expect(Array.from(r3.weights).every((w, i) => Object.is(w, none.weights[i]))).toBe(true);
  });
});

describe('routing replay in the reference backend', () => {
  /** An MoE backend whose router logits are scaled up, so that a quantized rollout flips some decisions. */
  async function flipping(plan: string) {
    const config = moeConfig({ plan });
    const backend = new ReferenceBackend(config, arPolicyFactory);
    const w = backend.weights;
    for (let i = 0; i < w.length; i++) w[i] = Math.fround(w[i]! * 8);
    await backend.sync();
    const prompts = backend.task.trainProblems(6, 'moe-replay').map((p) => [...p.prompt]);
    const batch = await backend.generate({ prompts, seed: 'moe/replay' });
    return { backend, batch, rows: prompts.map((_, i) => i) };
  }

  it('R2: replaying the routing the ℓold pass returned reproduces ℓold; a changed routing is used', async () => {
    const { backend, batch, rows } = await flipping('int8-rollout');
    const old = await backend.logprobs({ batch, rows, policy: 'current', returnRouting: true });
    expect(old.routing).toHaveLength(2);
    const again = await backend.logprobs({
      batch,
      rows,
      policy: 'current',
      routing: old.routing!,
      returnRouting: true,
    });
    expect(Array.from(again.logp).every((x, i) => Object.is(x, old.logp[i]))).toBe(true);
    // change the experts at the position scoring row 0's first response token (P − 1), layer 0
    const P = batch.record.promptLength as number;
    const S = batch.T + P;
    const changed = old.routing!.map((r) => Int32Array.from(r));
    const at = (P - 1) * 2;
    const used = [changed[0]![at]!, changed[0]![at + 1]!];
    const fresh = [0, 1, 2, 3].filter((e) => !used.includes(e));
    changed[0]!.set(fresh, at);
    const replayed = await backend.logprobs({ batch, rows, policy: 'current', routing: changed, returnRouting: true });
    expect(Array.from(replayed.routing![0]!.subarray(at, at + 2))).toEqual(fresh);
    expect(replayed.logp[0]).not.toBe(old.logp[0]);
    expect(Array.from(replayed.logp.subarray(batch.T))).toEqual(Array.from(old.logp.subarray(batch.T))); // other rows untouched
    expect(changed[0]!.length).toBe(rows.length * S * 2);
    await backend.close();
  });

  it('R3: the rollout routing is replayed (flip rate 0) and changes ℓ where the own routing flipped', async () => {
    const { backend, batch, rows } = await flipping('int8-rollout');
    const own = await backend.logprobs({ batch, rows, policy: 'current' });
    const r3 = await backend.logprobs({ batch, rows, policy: 'current', routing: 'rollout' });
    expect(own.routingFlipRate!.some((f) => f > 0)).toBe(true);
    expect(r3.routingFlipRate).toEqual([0, 0]);
    expect(Array.from(r3.logp)).not.toEqual(Array.from(own.logp));
    await backend.close();
  });

  it('flip rate: hand-built routings, and only the positions that score a response token count', async () => {
    // (token, expert) pairs of `recorded` missing from `used`: position 0 none, position 1 one of 2, position 2 two of 2
    const recorded = [Int32Array.from([0, 1, 2, 3, 1, 2])];
    const used = [Int32Array.from([1, 0, 2, 0, 0, 3])];
    expect(flipRatesAt(recorded, used, 2, [0, 1, 2])).toEqual([3 / 6]);
    expect(flipRatesAt(recorded, used, 2, [1])).toEqual([1 / 2]);
    expect(flipRatesAt(recorded, used, 2, [])).toEqual([0]);

    const { backend, batch } = await flipping('bf16');
    const P = batch.record.promptLength as number;
    const S = P + batch.T;
    const base = await backend.logprobs({ batch, rows: [0], policy: 'current' });
    expect(base.routingFlipRate).toEqual([0, 0]);
    const scored = Array.from(batch.mask.subarray(0, batch.T)).filter((m) => m === 1).length;
    const edit = (pos: number) => {
      const routing = (batch.record.moeRouting as Int32Array[]).map((r) => Int32Array.from(r));
      const [a, b] = [routing[1]![pos * 2]!, routing[1]![pos * 2 + 1]!];
      routing[1]!.set(
        [0, 1, 2, 3].filter((e) => e !== a && e !== b),
        pos * 2,
      ); // both experts of layer 1 flipped
      return { ...batch, record: { ...batch.record, moeRouting: routing } };
    };
    const prompt0 = await backend.logprobs({ batch: edit(0), rows: [0], policy: 'current' });
    expect(prompt0.routingFlipRate).toEqual([0, 0]); // a prompt position does not score a response token
    const first = await backend.logprobs({ batch: edit(P - 1), rows: [0], policy: 'current' });
    expect(first.routingFlipRate).toEqual([0, 2 / (2 * scored)]);
    expect(S).toBeGreaterThan(P);
    await backend.close();
  });

  it('refuses a routing for the reference policy, "rollout" for a dense batch, and wrong shapes', async () => {
    const { backend, batch, rows } = await flipping('bf16');
    await backend.setReference();
    await expect(backend.logprobs({ batch, rows, policy: 'reference', routing: 'rollout' })).rejects.toThrow(
      "logprobs.routing: only the 'current' policy replays a routing, got policy 'reference'",
    );
    await expect(backend.logprobs({ batch, rows, policy: 'current', routing: [new Int32Array(3)] })).rejects.toThrow(
      'logprobs.routing: must be',
    );
    const { moeRouting: _drop, ...record } = batch.record;
    await expect(
      backend.logprobs({
        batch: { ...batch, record: record as typeof batch.record },
        rows,
        policy: 'current',
        routing: 'rollout',
      }),
    ).rejects.toThrow('carries no moeRouting');
    await backend.close();
  });
});

describe('policy.routingReplay config', () => {
  const base = { task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } } };
  it('defaults to none, accepts R2/R3 with an MoE model, refuses them for a dense one, an unknown mode and R2 in bypass', () => {
    expect(resolveRunConfig(base).policy.routingReplay).toBe('none');
    expect(resolveRunConfig({ ...base, policy: { model: moeModel, routingReplay: 'R3' } }).policy.routingReplay).toBe(
      'R3',
    );
    expect(() => resolveRunConfig({ ...base, policy: { routingReplay: 'R3' } })).toThrow(
      "config.policy.routingReplay: 'R3' replays an MoE router's choices and needs an MoE model (policy.model.moe), got a dense model",
    );
    expect(() => resolveRunConfig({ ...base, policy: { model: moeModel, routingReplay: 'R4' } })).toThrow(UsageError);
    expect(() => resolveRunConfig({ ...base, policy: { model: moeModel, routingReplay: 'R4' } })).toThrow(
      'policy.routingReplay',
    );
    expect(() =>
      resolveRunConfig({ ...base, policy: { model: moeModel, routingReplay: 'R2' }, estimators: { mode: 'bypass' } }),
    ).toThrow("'R2' replays the routing of the ℓold recompute");
  });
});
