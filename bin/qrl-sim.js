#!/usr/bin/env node
// Entry point of the `qrl-sim` command: loads the compiled CLI (dist/, shipped in the package; in a
// checkout built by `npm run build`, which `npm start`, `npm test` and `npm pack` run). No logic of its own.
let main;
try {
  ({ main } = await import('../dist/cli/main.js'));
} catch (err) {
  if (err?.code !== 'ERR_MODULE_NOT_FOUND' || !String(err.message).includes('dist/cli/main.js')) throw err;
  console.error('qrl-sim: dist/ is not built (a checkout after npm ci): run `npm run build` first');
  process.exit(1);
}

// A pipe closed early (`qrl-sim … | head`) is handled by main: printing stops and long work stops
// cleanly at its next safe point, resumable (src/cli/stop.ts).
main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    console.error(`qrl-sim: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
  },
);
