// The conformance battery's MoE routing rows (`qrl-sim backend-check`) against a served MoE reference backend: they pass on the
// reference backend and fail on one whose returned routing is not the routing it used.

import { describe, expect, it } from 'vitest';
import { servedConformance } from './served.js';
import type { LogprobsRequest, LogprobsResult } from '../../src/core/backend-contract.js';
import { ReferenceBackend } from '../../src/backend/reference.js';
import { arPolicyFactory } from '../../src/policies/ar/engine.js';
import { resolveRunConfig } from '../../src/rl/index.js';
import { makeTask, type Task } from '../../src/tasks/index.js';

const config = resolveRunConfig({
  seed: 0,
  task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
  policy: { kind: 'ar', model: { C: 16, H: 2, layers: 2, hidden: 16, moe: { experts: 4, topK: 2, auxCoeff: 0.01 } } },
  plan: 'fp8-rollout',
});
const task = makeTask('reverse', { minLength: 3, maxLength: 4 });

/** Returns a routing other than the one it used: every expert index rotated by one. */
class MisreportedRouting extends ReferenceBackend {
  constructor(t: Task) {
    super(config, arPolicyFactory, t);
  }
  override async logprobs(request: LogprobsRequest): Promise<LogprobsResult> {
    const result = await super.logprobs(request);
    return result.routing === undefined
      ? result
      : { ...result, routing: result.routing.map((r) => Int32Array.from(r, (e) => (e + 1) % 4)) };
  }
}

describe('backend-check: MoE routing replay rows', () => {
  it('pass on the MoE reference backend, with a flip rate per layer and the R3 k3 reported', async () => {
    const rows = await servedConformance(new ReferenceBackend(config, arPolicyFactory, task));
    expect(
      rows.filter((r) => r.status === 'FAIL'),
      JSON.stringify(rows),
    ).toEqual([]);
    const byCheck = new Map(rows.map((r) => [r.check, r]));
    expect(byCheck.get('MoE: own routing returned')?.status).toBe('ok');
    expect(byCheck.get('MoE: flip rate per layer')?.detail).toMatch(/^l0 \d+\.\d\d %, l1 \d+\.\d\d %$/);
    expect(byCheck.get('MoE: replaying its own routing (R2) keeps ℓ')?.status).toBe('ok');
    expect(byCheck.get('MoE: rollout routing replay (R3)')?.detail).toMatch(/k3 .* → .* with the rollout's/);
  }, 60_000);

  it('fail when the returned routing is not the one used', async () => {
    const rows = await servedConformance(new MisreportedRouting(task));
    const failed = rows.filter((r) => r.status === 'FAIL').map((r) => r.check);
    expect(failed).toEqual(['MoE: replaying its own routing (R2) keeps ℓ']);
  }, 60_000);
});
