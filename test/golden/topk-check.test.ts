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

describe('check with DPPO top-k and the top-k KL', () => {
  const topkImpl = 'python3 python/examples/numpy_topk_estimators.py --serve';
  const check = (cfg: string, runs: number) =>
    runCli(['check', '--impl', topkImpl, '--suite', 'estimators', '--config', cfg, '--runs', String(runs)]);
  it.runIf(hasNumpy)(
    'passes an independent numpy DPPO top-k and top-k KL; each planted bug gives a counterexample',
    async () => {
      const cases: [string, string][] = [
        ['python/examples/configs/dppo-topk-tv.json', 'no-slot'],
        ['python/examples/configs/dppo-topk-kl.json', 'no-slot'],
        ['python/examples/configs/tis-ppo-topk-kl.json', 'no-tail'],
        ['python/examples/configs/tis-ppo-topk-kl-forward.json', 'no-tail'],
        ['python/examples/configs/tis-ppo-topk-kl-iwclip.json', 'no-iw-clip'],
      ];
      for (const [cfg, bug] of cases) {
        const ok = await check(cfg, 30);
        expect(ok.code, `${cfg}: ${ok.err}`).toBe(0);
        expect(ok.out).toMatch(/30 cases passed .*fields compared: .*gradTopkLogpTheta/);
        process.env.QRL_BUG = bug;
        try {
          const bad = await check(cfg, 60);
          expect(bad.code, `${cfg} with QRL_BUG=${bug}`).toBe(1);
          expect(bad.out).toMatch(/first difference: (gradTopkLogpTheta|gradLogpTheta|loss|tokenLoss)/);
        } finally {
          delete process.env.QRL_BUG;
        }
      }
    },
    300_000,
  );
});
