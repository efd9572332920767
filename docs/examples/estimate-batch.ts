// Example (docs/library.md): TIS-corrected PPO loss and its gradient for a two-sequence batch via `estimate`.
// Not the JSON command (`qrl-sim estimate`, docs/estimators.md); test/docs/examples.test.ts runs this file.

import { estimate, resolveConfig } from 'qrl-sim/rl';

/** Loss, d loss / d ℓθ and two metrics of a B=2, T=3 batch (flat row-major arrays, plain numbers). */
export function estimateExample(): {
  loss: number;
  grad: number[];
  clipFrac: number | undefined;
  meanWeight: number | undefined;
} {
  const config = resolveConfig({
    advantage: { name: 'grpo' },
    correction: { name: 'tis', C: 2 },
    loss: { name: 'ppo-clip' },
    aggregation: 'token-mean',
  });
  const r = estimate(
    {
      shape: { B: 2, T: 3 },
      logpTheta: [-1.0, -0.5, -2.0, -0.3, -1.2, 0.0],
      logpOld: [-1.1, -0.5, -2.1, -0.3, -1.0, 0.0],
      logpRollout: [-1.2, -0.4, -2.0, -0.35, -1.1, 0.0],
      mask: [1, 1, 1, 1, 1, 0],
      rewards: [1, 0],
    },
    config,
  );
  return {
    loss: r.loss,
    grad: Array.from(r.gradLogpTheta),
    clipFrac: r.metrics['actor/pg_clipfrac'],
    meanWeight: r.metrics['rollout_corr/weights_mean'],
  };
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(estimateExample());
