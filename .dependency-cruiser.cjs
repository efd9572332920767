// The layer table of src/ (README "Layout of the sources", docs/decisions.md "Layer table"), bottom to top:
// every file of src/ belongs to exactly one row (test/layers.test.ts checks it), and a row imports only
// rows below it; a row with `only` imports just those rows. cli/ is the top row, so nothing imports it.
// src/ never imports through a package entry (src/index.ts, src/<layer>/index.ts): those are for users.
// Outside src/policies/, src/policies/ar/ is reached only through its façade src/policies/ar-api.ts.
// `npm run lint:deps` checks it; test/layers.test.ts runs it on the sources and on planted violations.

/** @type {{ layer: string, path: string, only?: string[] }[]} */
const layers = [
  { layer: 'ground', path: '^src/core/' },
  { layer: 'numerics', path: '^src/numerics/' },
  { layer: 'nn', path: '^src/nn/' },
  { layer: 'tasks', path: '^src/tasks/' },
  { layer: 'rl', path: '^src/rl/' },
  // qrl-backend/1 (framing, tensors, schemas, client, server) needs only the contract.
  { layer: 'protocol', path: '^src/protocol/', only: ['ground'] },
  { layer: 'policies', path: '^src/policies/' },
  { layer: 'backend', path: '^src/backend/' },
  // Reads run directories and renders them: it knows the files, not the code that wrote them.
  { layer: 'report', path: '^src/report/', only: ['ground'] },
  { layer: 'runs', path: '^src/runs/' },
  { layer: 'golden', path: '^src/golden/' },
  { layer: 'testing', path: '^src/testing/' },
  { layer: 'entry', path: '^src/index\\.ts$' },
  { layer: 'cli', path: '^src/cli/' },
];

module.exports = {
  forbidden: [
    ...layers.flatMap(({ layer, path, only }, i) => {
      const above = layers.slice(i + 1);
      const rules = [];
      if (above.length > 0) {
        rules.push({
          name: `${layer}-no-upward-imports`,
          comment: `${layer} (${path}) may not import ${above.map((l) => l.layer).join(', ')}`,
          severity: 'error',
          from: { path },
          to: { path: above.map((l) => l.path) },
        });
      }
      if (only !== undefined) {
        const beside = layers.slice(0, i).filter((l) => !only.includes(l.layer));
        rules.push({
          name: `${layer}-no-imports-beyond-${only.join('-')}`,
          comment: `${layer} (${path}) imports only ${only.join(', ')}, not ${beside.map((l) => l.layer).join(', ')}`,
          severity: 'error',
          from: { path },
          to: { path: beside.map((l) => l.path) },
        });
      }
      return rules;
    }),
    {
      name: 'no-import-through-entry',
      comment: 'package entries (src/index.ts, src/<layer>/index.ts) are for users; src/ imports the module itself',
      severity: 'error',
      from: { path: '^src/', pathNot: ['^src/index\\.ts$', '^src/[a-z]+/index\\.ts$'] },
      to: { path: ['^src/index\\.ts$', '^src/[a-z]+/index\\.ts$'] },
    },
    {
      name: 'ar-only-through-facade',
      comment:
        'outside src/policies/, the autoregressive policy (src/policies/ar/) is reached only through src/policies/ar-api.ts',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/policies/' },
      to: { path: '^src/policies/ar/' },
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
