// The `qrl-sim` dispatcher: finds the subcommand, maps usage errors to exit code 2.
// Not where commands live: each has its own file, listed in the table below.

import { readFileSync } from 'node:fs';
import type { CliIo, Command } from './command.js';
import { UsageError } from '../core/errors.js';
import { requestStop } from './stop.js';
import { packagePathsIn } from './bundled.js';
import { backendCheckCommand } from './backend-check.js';
import { castCommand } from './cast.js';
import { checkCommand } from './check.js';
import { demoCommand } from './demo.js';
import { divergeCommand } from './diverge.js';
import { estimateCommand } from './estimate.js';
import { goldenCommand } from './golden.js';
import { quantizeCommand } from './quantize.js';
import { refitCheckCommand } from './refit-check.js';
import { replayCommand } from './replay.js';
import { mismatchCommand } from './mismatch.js';
import { runCommand } from './run.js';
import { reportCommand } from './report.js';
import { serveCommand } from './serve.js';
import { sweepCommand } from './sweep.js';
import { labCommand } from './lab.js';

/** Every subcommand, by name. */
export const commands: Readonly<Record<string, Command>> = {
  'backend-check': backendCheckCommand,
  cast: castCommand,
  check: checkCommand,
  demo: demoCommand,
  diverge: divergeCommand,
  estimate: estimateCommand,
  golden: goldenCommand,
  quantize: quantizeCommand,
  'refit-check': refitCheckCommand,
  replay: replayCommand,
  mismatch: mismatchCommand,
  run: runCommand,
  report: reportCommand,
  serve: serveCommand,
  sweep: sweepCommand,
  lab: labCommand,
};

// A cut pipe (`qrl-sim … | head`) closes standard output: printing stops there, and long work is
// asked to stop cleanly (src/cli/stop.ts) instead of the process dying mid-way.
let stdoutOpen = true;
let stderrOpen = true;
function watchPipes(): void {
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
    stdoutOpen = false;
    requestStop('EPIPE');
  });
  process.stderr.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
    stderrOpen = false;
  });
}

const processIo: CliIo = {
  interactive: process.stdout.isTTY === true,
  out: (text) => {
    if (stdoutOpen) process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
  },
  err: (text) => {
    if (stderrOpen) process.stderr.write(text.endsWith('\n') ? text : `${text}\n`);
  },
  ...(process.stderr.isTTY === true
    ? {
        status: (text: string) => {
          if (stderrOpen)
            process.stderr.write(`\r\x1b[2K${text.slice(0, Math.max(10, (process.stderr.columns ?? 80) - 1))}`);
        },
      }
    : {}),
  readStdin: async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  },
};

/** The package version (package.json next to src/ and dist/). */
export function packageVersion(): string {
  const json = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return json.version;
}

function usage(): string {
  const width = Math.max(...Object.keys(commands).map((n) => n.length));
  const lines = Object.entries(commands).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`);
  return [
    'qrl-sim — reference simulator for RL with quantized rollouts',
    '',
    'usage: qrl-sim <command> [options]',
    '       qrl-sim --version',
    '',
    'commands:',
    ...lines,
    '',
    "Run 'qrl-sim <command> --help' for a command's options. Bad input exits with code 2.",
  ].join('\n');
}

/**
 * Runs the CLI with `argv` (without the node and script paths) and resolves to the exit code.
 * Usage errors print one line `qrl-sim: <reason>` on stderr and give 2.
 */
export async function main(argv: string[], io: CliIo = processIo): Promise<number> {
  if (io === processIo) watchPipes();
  const [name, ...rest] = argv;
  if (name === undefined) {
    // A usage error like any other: the text goes to standard error, with exit code 2.
    io.err(usage());
    return 2;
  }
  if (name === '--help' || name === '-h' || name === 'help') {
    io.out(usage());
    return 0;
  }
  if (name === '--version' || name === '-V') {
    io.out(packageVersion());
    return 0;
  }
  const command = commands[name];
  if (command === undefined) {
    io.err(`qrl-sim: unknown command '${name}' (known: ${Object.keys(commands).join(', ')})`);
    return 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    io.out(packagePathsIn(command.help));
    return 0;
  }
  try {
    return await command.run(rest, io);
  } catch (error) {
    if (error instanceof UsageError) {
      // Messages from shared code may start with the command's name already ('lab: …'): say it once.
      io.err(
        `qrl-sim ${name}: ${error.message.startsWith(`${name}: `) ? error.message.slice(name.length + 2) : error.message}`,
      );
      return 2;
    }
    throw error;
  }
}
