import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    setupFiles: ['test/setup.ts'],
    // The JSON report lets .ci/run print one plain 'N passed, N failed' line.
    reporters: ['default', ['json', { outputFile: '.cache/vitest-report.json' }]],
  },
});
