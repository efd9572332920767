#!/usr/bin/env node
// Entry point of the `qrl-sim` command: loads the compiled CLI (built by `npm run build`,
// which `npm ci` runs through `prepare`). It holds no logic of its own.
import { main } from '../dist/cli/main.js';

// `qrl-sim … | head` closes the pipe early: stop quietly instead of crashing on EPIPE.
process.stdout.on('error', (error) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});

main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (err) => { console.error(`qrl-sim: ${err instanceof Error ? err.message : String(err)}`); process.exitCode = 1; },
);
