// `qrl-sim serve`: the in-process reference backend (AR or diffusion toy policy) answering
// qrl-backend/1 over stdio or HTTP. Not the protocol (src/protocol/serve.ts) nor the backend itself.

import { readFileSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { UsageError } from '../core/errors.js';
import { precisionPlans } from '../policies/plans.js';
import { isLoopbackHost } from '../protocol/http-guard.js';
import { watchDriver } from '../protocol/jsonrpc.js';
import { serveBackend } from '../protocol/serve.js';
import { ConfiguredReference } from '../runs/configured-backend.js';
import type { Command } from './command.js';
import { backendToken } from './input.js';
import { booleans, integerOption, parseCommandArgs, strings } from './parse.js';

const help = `usage: qrl-sim serve --policy ar|diffusion [--plan P] [--config FILE]
                     [--stdio | --port N [--host H] [--token-file FILE] [--state-root DIR]]

Serves the in-process reference backend (the toy policy, its plan, AdamW, checkpoints) over
qrl-backend/1 (docs/adapter.md): newline-delimited JSON-RPC on stdin/stdout (--stdio, the
default), or HTTP POST /rpc on a port. The policy is built from the run config the driver sends
with its first info (qrl-sim run --backend does), or from --config FILE, or else from the defaults
of the reverse task ({"task": {"name": "reverse"}, "policy": {"kind": P}, "plan": --plan}).

Options:
  --policy ar|diffusion   the policy kind this server accepts
  --plan P                only accept run configs with this precision plan: ${Object.keys(precisionPlans).join(', ')}
  --config FILE           build the policy from this run config at start
  --stdio                 serve on stdin/stdout (default)
  --port N                serve HTTP on port N (0 picks one; the address is printed on stderr)
  --host H                HTTP address (default 127.0.0.1); any address but loopback (127.0.0.0/8,
                          ::1, localhost) needs a token
  --token-file FILE       the shared token every HTTP request must carry as Authorization: Bearer
                          (default: the environment variable QRL_BACKEND_TOKEN; optional on
                          loopback, enforced whenever set); a refused request gets 401, runs nothing
  --state-root DIR        save and load only below DIR, symlinks followed (default: the working
                          directory); the driver's run directory (and warm-start cache) must be in it

Security (docs/adapter.md, "Security of the HTTP transport"): over HTTP anyone who reaches the port
can drive the backend, so binding beyond loopback without a token is refused (exit 2), and save/load
outside the state root are refused (-32602, field dir). Over stdio only the parent process speaks
to the server: no token, no state root.

examples:
  echo '{"jsonrpc":"2.0","id":1,"method":"shutdown","params":{}}' | qrl-sim serve --policy ar --stdio
  qrl-sim backend-check --backend "qrl-sim serve --policy ar --stdio" --batch 4`;

/** The `serve` subcommand. */
export const serveCommand: Command = {
  summary: 'serve the in-process reference backend over qrl-backend/1 (stdio or HTTP)',
  help,
  async run(args, io) {
    const { values } = parseCommandArgs(args, {
      ...strings('policy', 'plan', 'config', 'port', 'host', 'token-file', 'state-root'),
      ...booleans('stdio'),
    });
    const policy = values.policy;
    if (policy !== 'ar' && policy !== 'diffusion')
      throw new UsageError(
        `--policy: expected ar or diffusion, got ${policy === undefined ? 'nothing' : `'${policy}'`}`,
      );
    if (values.plan !== undefined && !Object.hasOwn(precisionPlans, values.plan))
      throw new UsageError(`--plan: expected one of ${Object.keys(precisionPlans).join(', ')}, got '${values.plan}'`);
    if (values.stdio && values.port !== undefined) throw new UsageError('--stdio and --port are exclusive');
    for (const flag of ['host', 'token-file', 'state-root'] as const) {
      if (values[flag] !== undefined && values.port === undefined)
        throw new UsageError(`--${flag}: not used without --port (it guards the HTTP server)`);
    }
    const port = values.port === undefined ? undefined : integerOption(values.port, 'port', 0, 0, 65535);
    const host = values.host ?? '127.0.0.1';
    const token = port === undefined ? undefined : backendToken(values['token-file']);
    // Refused before anything is built or bound: beyond loopback, anyone reaching the port could save and load.
    if (!isLoopbackHost(host) && token === undefined)
      throw new UsageError(
        `--host ${host}: not loopback, so a token is required: pass --token-file FILE or set QRL_BACKEND_TOKEN`,
      );
    const stateRoot = resolve(values['state-root'] ?? '.');
    if (port !== undefined && !statSync(stateRoot, { throwIfNoEntry: false })?.isDirectory())
      throw new UsageError(`--state-root: '${stateRoot}' is not a directory`);
    const backend = new ConfiguredReference(policy, values.plan);
    if (values.config !== undefined) {
      let raw: unknown;
      try {
        raw = JSON.parse(readFileSync(values.config, 'utf8'));
      } catch (error) {
        throw new UsageError(
          `--config: cannot read '${values.config}' (${error instanceof Error ? error.message : String(error)})`,
        );
      }
      try {
        backend.configure(raw);
      } catch (error) {
        throw new UsageError(`--config: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
    const onInfo = (p: { readonly run?: unknown }): void => {
      if (p.run !== undefined) backend.configure(p.run);
      // A client that sends no run config (backend-check, a third-party driver) gets the defaults.
      else if (!backend.configured)
        backend.configure({
          task: { name: 'reverse' },
          policy: { kind: policy },
          ...(values.plan !== undefined ? { plan: values.plan } : {}),
        });
    };
    const server =
      port !== undefined
        ? await serveBackend(backend, {
            port,
            host,
            ...(token === undefined ? {} : { token }),
            stateRoot,
            onRefused: (line) => io.err(line),
            onInfo,
          })
        : await serveBackend(backend, { stdio: true, onInfo });
    // spawned by a driver: end with it, even when it was killed with SIGKILL
    const unwatch = server.port === null ? watchDriver() : () => undefined;
    if (server.port !== null)
      io.err(
        `qrl-backend/1 listening on http://${host}:${server.port} (state root ${stateRoot}; ${token === undefined ? 'no token' : 'token required'})`,
      );
    await server.done;
    unwatch();
    return 0;
  },
};
