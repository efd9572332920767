// Test helper: an in-memory CliIo that captures what a command prints.
// Not a test file itself.

import type { CliIo } from '../../src/cli/command.js';
import { main } from '../../src/cli/main.js';

export interface Captured {
  code: number;
  out: string;
  err: string;
}

/** Runs `qrl-sim argv` in-process and captures its output and exit code. */
export async function runCli(argv: string[], stdin = ''): Promise<Captured> {
  let out = '';
  let err = '';
  const io: CliIo = {
    out: (t) => {
      out += t.endsWith('\n') ? t : `${t}\n`;
    },
    err: (t) => {
      err += t.endsWith('\n') ? t : `${t}\n`;
    },
    readStdin: async () => stdin,
  };
  const code = await main(argv, io);
  return { code, out, err };
}
