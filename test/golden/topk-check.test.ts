// `qrl-sim check` with a fixed config that reads the sampler's distribution: the generated cases carry
// `topk`; an independent numpy score centering passes, its planted bug (ρ taken as 1) is caught on
// gradTopkLogpTheta.

import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { runCli } from '../cli/io.js';

const impl = 'python3 python/examples/numpy_score_centering.py --serve';
const config = 'python/examples/configs/tis-ppo-score-centering.json';
const hasNumpy = spawnSync('python3', ['-c', 'import numpy'], { encoding: 'utf8' }).status === 0;

describe('check with score centering', () => {
  it.runIf(hasNumpy)(
    'passes the numpy implementation, comparing gradTopkLogpTheta; the planted bug gives a counterexample',
    async () => {
      const ok = await runCli(['check', '--impl', impl, '--suite', 'estimators', '--config', config, '--runs', '30']);
      expect(ok.code, ok.err).toBe(0);
      expect(ok.out).toMatch(/30 cases passed .*fields compared: .*gradTopkLogpTheta/);
      process.env.QRL_BUG = 'no-tail';
      try {
        const bad = await runCli([
          'check',
          '--impl',
          impl,
          '--suite',
          'estimators',
          '--config',
          config,
          '--runs',
          '60',
        ]);
        expect(bad.code).toBe(1);
        expect(bad.out).toMatch(/first difference: (gradTopkLogpTheta|loss|tokenLoss)/);
      } finally {
        delete process.env.QRL_BUG;
      }
    },
    120_000,
  );
});
