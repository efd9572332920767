import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const src = fileURLToPath(new URL('./src/', import.meta.url));

// The project's Python environment (scripts/python-env.sh, run by `npm test` before vitest): its
// python3 (torch 2.13, numpy, ml_dtypes, transformers, pytest) is the one every test spawns.
const venvBin = fileURLToPath(new URL('./.venv/bin', import.meta.url));
if (existsSync(venvBin)) {
  process.env['PATH'] = `${venvBin}:${process.env['PATH'] ?? ''}`;
  process.env['VIRTUAL_ENV'] = fileURLToPath(new URL('./.venv', import.meta.url));
}

export default defineConfig({
  // The package's own subpaths (`qrl-sim`, `qrl-sim/<layer>`) resolve to the sources, as tsconfig's
  // `paths` does for the type check; test/docs/examples.test.ts checks package.json `exports` agrees.
  resolve: {
    alias: [
      { find: /^qrl-sim$/, replacement: `${src}index.ts` },
      { find: /^qrl-sim\/([a-z]+)$/, replacement: `${src}$1/index.ts` },
    ],
  },
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // test/worker-timers.mjs: a worker whose event loop was busy past vitest's 60 s RPC timeout reads
    // the reply that waits for it before the timeout fires (else "Timeout calling onTaskUpdate" fails
    // a run whose tests all passed, on a loaded machine; docs/decisions.md, "Stopping and the first hour").
    poolOptions: {
      forks: {
        maxForks: 2,
        minForks: 1,
        execArgv: ['--import', fileURLToPath(new URL('./test/worker-timers.mjs', import.meta.url))],
      },
    },
    setupFiles: ['test/setup.ts'],
    // The JSON report lets .ci/run print one plain 'N passed, N failed' line.
    reporters: ['default', ['json', { outputFile: '.cache/vitest-report.json' }]],
  },
});
