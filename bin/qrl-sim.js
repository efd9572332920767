#!/usr/bin/env node
// Entry point of the `qrl-sim` command: loads the compiled CLI (built by `npm run build`,
// which `npm ci` runs through `prepare`). It holds no logic of its own.
import { main } from '../dist/cli/main.js';

// A pipe closed early (`qrl-sim … | head`) is handled by main: printing stops and long work stops
// cleanly at its next safe point, resumable (src/cli/stop.ts).
main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (err) => { console.error(`qrl-sim: ${err instanceof Error ? err.message : String(err)}`); process.exitCode = 1; },
);
