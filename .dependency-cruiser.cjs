// Import direction of src/ (docs/decisions.md "Layers"): each layer imports only the layers below it.
//   ground (errors, rng, files, backend/contract) → numerics → nn → tasks → rl → policies
//   → backend (reference) → runs → report (reads and renders) … → cli; protocol sits on the contract alone
// src/ never imports through a package entry (src/index.ts, src/<layer>/index.ts): those are for users.
// `npm run lint:deps` checks it; test/layers.test.ts runs it on the sources and on a violating file.

const above = {
  numerics: ['nn', 'tasks', 'rl', 'policies', 'backend', 'runs', 'report', 'cli'],
  nn: ['tasks', 'rl', 'policies', 'backend', 'runs', 'report', 'cli'],
  tasks: ['rl', 'policies', 'backend', 'runs', 'report', 'cli'],
  rl: ['policies', 'backend', 'runs', 'report', 'cli'],
  policies: ['backend', 'runs', 'report', 'cli'],
  backend: ['runs', 'report', 'cli'],
  runs: ['cli'],
  report: ['runs', 'cli', 'policies', 'backend'],
  // qrl-backend/1 (framing, tensors, schemas, client, server) needs only the contract.
  protocol: ['numerics', 'nn', 'tasks', 'rl', 'policies', 'backend', 'runs', 'report', 'cli'],
};

// The backend contract is types only and sits on the ground floor with errors, rng and files.
const contract = 'src/backend/contract\\.ts$';

module.exports = {
  forbidden: [
    ...Object.entries(above).map(([layer, targets]) => ({
      name: `${layer}-imports-downward`,
      comment: `src/${layer}/ may not import ${targets.join(', ')}`,
      severity: 'error',
      from: { path: `^src/${layer}/` },
      to: { path: `^src/(${targets.join('|')})/`, pathNot: contract },
    })),
    {
      name: 'ground-floor',
      comment: 'errors, rng, files and the backend contract import no other project module',
      severity: 'error',
      from: { path: ['^src/(errors|rng|files)\\.ts$', contract] },
      to: { path: '^src/', pathNot: ['^src/(errors|rng|files)\\.ts$', contract] },
    },
    {
      name: 'no-import-through-entry',
      comment: 'package entries (src/index.ts, src/<layer>/index.ts) are for users; src/ imports the module itself',
      severity: 'error',
      from: { path: '^src/', pathNot: ['^src/index\\.ts$', '^src/[a-z]+/index\\.ts$'] },
      to: { path: ['^src/index\\.ts$', '^src/[a-z]+/index\\.ts$'] },
    },
    { name: 'no-circular', severity: 'error', from: { path: '^src/' }, to: { circular: true } },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    exclude: { path: '^(dist|node_modules)/' },
  },
};
