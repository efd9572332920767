// `qrl-sim backend-check`: parses its flags, connects to the backend, runs the qrl-backend/1
// conformance battery (src/testing/conformance.ts) and prints its rows (exit 1 on a violation, 2 when the backend cannot start).
// Not the battery itself, not the protocol (src/protocol) and not a backend.

import { connectBackend, type RemoteBackend } from '../protocol/remote.js';
import { resolveRunConfig } from '../rl/grpo/config.js';
import { backendSetup } from '../runs/backend-expect.js';
import { makeTaskFromConfig } from '../tasks/registry.js';
import { formatConformance, runConformance, type ConformanceRow } from '../testing/conformance.js';
import { killResumeCheck } from '../testing/kill-resume.js';
import type { Command } from './command.js';
import { UsageError } from '../core/errors.js';
import { backendToken, readJsonFile } from './input.js';
import {
  BACKEND_OPTIONS,
  backendTimeouts,
  booleans,
  integerOption,
  parseCommandArgs,
  required,
  strings,
} from './parse.js';
import { resolveBackendAddress } from './self-command.js';
import { exitOnStopSignal } from './stop.js';

const backendName = (a: { readonly command: string } | { readonly url: string }): string =>
  'command' in a ? a.command : a.url;

const help = `usage: qrl-sim backend-check --backend COMMAND|URL [--timeout MS] [--batch B] [--prompt-length P]
                             [--tolerance X] [--config FILE [--kill-resume]] [--token-file FILE] [--json]

Runs the qrl-backend/1 conformance battery against a backend: a shell command spoken to over
stdio, or an http(s):// URL (POST /rpc). Prints one row per check; exits 1 on a violation, 2 when the backend cannot start (its command fails, or its first info times out or is malformed).

Checks: protocol version (and refusal of an unknown one), info the same when asked twice, the plan
and vocabulary against --config, vocabulary, sync, generate shapes and masks, same seed ⇒ same
tokens, the entropy capability, generate's ℓroll vs the backend's own logprobs on the same weights
(the mismatch diagnostics of 'qrl-sim mismatch'; a violation only when the plan's two sides are
identical and max|δ| exceeds --tolerance), backward + step, a handle spent by its backward and
unspent ones retired by step, the weight version after step and sync, the gradient's direction (a
step descending −mean ℓ must raise mean ℓ: a finite difference), the reference frozen, save/load
restoring weights, reference and version, save → step → load → step reproducing the step (the
optimizer state), the errors bad requests get, and that the backend keeps serving after them.
A diffusion backend also gets its record, schedule (with --config), replay, estimator and
temperature rows (docs/adapter.md §4).
The backend takes optimizer steps: use a scratch instance.

Options:
  --backend B         a command (e.g. "PYTHONPATH=python python3 -m qrl_backend.numpy_ar --config '{...}'")
                      or a URL (http://127.0.0.1:8000)
  --timeout MS        request timeout in milliseconds (default 120000); on expiry the backend's
                      whole process group is killed
  --startup-timeout MS  timeout of the first info (default --timeout)
  --token-file FILE   the shared token of a URL backend, sent as Authorization: Bearer (default:
                      the environment variable QRL_BACKEND_TOKEN); save/load use a directory under
                      the system's temp dir, so the server's --state-root must hold it
  --batch B           sequences per generate (default 8)
  --prompt-length P   prompt tokens, BOS and SEP included (default 4)
  --tolerance X       largest |ℓroll − ℓ| when the plan's sides are identical (default 1e-4)
  --config FILE       a run config: sent with info (run and setup, as run --backend does) and the
                      backend's plan, vocabulary, special tokens and ℓroll modes checked against it;
                      its sampler is sent with the battery's generates (default: τ 1, no top-k/top-p)
  --kill-resume       with --config: run it (3 steps at most) uninterrupted, then again with the
                      backend's process group killed as step 2 starts and resumed on a fresh
                      instance; metrics.jsonl and eval.jsonl must be byte-identical
  --json              the rows as one JSON object

examples:
  qrl-sim backend-check --backend "qrl-sim serve --policy ar --stdio" --batch 4`;

/** The `backend-check` subcommand: parse, {@link runConformance} (and {@link killResumeCheck}), print. */
export const backendCheckCommand: Command = {
  summary:
    'conformance battery of a qrl-backend/1 backend (command or URL); exit 1 on a violation, 2 when it cannot start',
  help,
  async run(args, io) {
    const { values } = parseCommandArgs(args, {
      ...BACKEND_OPTIONS,
      ...strings('batch', 'prompt-length', 'tolerance', 'config'),
      ...booleans('json', 'kill-resume'),
    });
    if (values['kill-resume'] && values.config === undefined)
      throw new UsageError('--kill-resume: needs --config FILE (the run to kill and resume)');
    const config = values.config === undefined ? undefined : resolveRunConfig(readJsonFile(values.config, '--config'));
    const address = resolveBackendAddress(required(values.backend, 'backend'));
    const timeouts = backendTimeouts(values, 120_000);
    const token = backendToken(values['token-file']);
    const batch = integerOption(values.batch, 'batch', 8, 1);
    const promptLength = integerOption(values['prompt-length'], 'prompt-length', 4, 2);
    const tolerance = values.tolerance === undefined ? 1e-4 : Number(values.tolerance);
    if (!(tolerance >= 0)) throw new UsageError(`--tolerance: expected a number ≥ 0, got '${values.tolerance}'`);
    const onStderr = (t: string): void => io.err(t.replace(/\n$/, ''));
    const connect = (setup?: unknown): Promise<RemoteBackend> =>
      connectBackend(address, {
        ...timeouts,
        ...(token === undefined ? {} : { token }),
        ...(config === undefined ? {} : { run: config, setup }),
        onStderr,
      });
    // nothing to save: a signal ends the backend's process group and the check at once
    const unwatch = exitOnStopSignal(io, 'backend-check', `the backend (${backendName(address)})`);
    let rows: ConformanceRow[];
    let name: string;
    try {
      let backend: RemoteBackend;
      try {
        backend = await connect(
          config === undefined ? undefined : backendSetup(config, makeTaskFromConfig(config.task)),
        );
      } catch (error) {
        // a backend that cannot start (or answer its first info) is not a verdict on its behaviour: exit 2
        io.err(`qrl-sim backend-check: ${error instanceof Error ? error.message : String(error)}`);
        return 2;
      }
      name = backend.name;
      try {
        rows = await runConformance(backend, {
          batch,
          promptLength,
          tolerance,
          ...(config === undefined ? {} : { config }),
        });
      } finally {
        await backend.close();
      }
      if (values['kill-resume'] && config !== undefined) rows.push(await killResumeCheck(address, config, connect));
    } finally {
      unwatch();
    }
    const backend = { name };
    if (values.json) io.out(JSON.stringify({ backend: backend.name, rows }));
    else io.out(formatConformance(rows));
    return rows.some((r) => r.status === 'FAIL') ? 1 : 0;
  },
};
