// A backend command that starts with the word `qrl-sim` runs the CLI that is running now
// (docs/decisions.md, "A backend command's leading qrl-sim is this CLI").
import { fileURLToPath } from 'node:url';
import { parseBackendAddress, type BackendAddress } from '../protocol/remote.js';

/** The entry point of this CLI (bin/qrl-sim.js), from both dist/cli and src/cli. */
export const SELF_BIN = fileURLToPath(new URL('../../bin/qrl-sim.js', import.meta.url));

function shellQuote(s: string): string {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/**
 * Resolves a `--backend` value: a command whose first word is `qrl-sim` gets that word replaced by
 * this process's node and bin/qrl-sim.js, so `node bin/qrl-sim.js run --backend "qrl-sim serve …"`
 * works without `qrl-sim` on PATH and the served side is the same build as the driver. Every other
 * command, and a URL, is returned as parsed. The recorded address (config.json) keeps the value as given.
 */
export function resolveBackendAddress(
  value: string,
  execPath: string = process.execPath,
  bin: string = SELF_BIN,
): BackendAddress {
  const address = parseBackendAddress(value);
  if (!('command' in address)) return address;
  const m = /^qrl-sim(?=\s|$)/.exec(address.command);
  if (m === null) return address;
  return { command: `${shellQuote(execPath)} ${shellQuote(bin)}${address.command.slice(m[0].length)}` };
}
