// `qrl-sim serve`: the in-process reference backend (AR or diffusion toy policy) answering
// qrl-backend/1 over stdio or HTTP. Not the protocol (src/protocol/serve.ts) nor the backend itself.

import { readFileSync } from 'node:fs';
import type { PolicyBackend } from '../backend/contract.js';
import { ReferenceBackend } from '../backend/reference.js';
import { UsageError } from '../errors.js';
import { precisionPlans } from '../policies/plans.js';
import { serveBackend } from '../protocol/serve.js';
import { resolveRunConfig, type RunConfig } from '../rl/grpo/config.js';
import { policyFactory } from '../runs/policies.js';
import { makeTaskFromConfig } from '../tasks/registry.js';
import type { Command } from './command.js';
import { integerOption, parseCommandArgs } from './parse.js';

/**
 * A {@link ReferenceBackend} built from a run config: given up front (`--config`) or by the driver in
 * its first `info` (`params.run`). `--policy` and `--plan` constrain which configs it accepts.
 */
class ConfiguredReference implements PolicyBackend {
  private inner: ReferenceBackend | null = null;
  private config: RunConfig | null = null;
  constructor(
    private readonly policy: string,
    private readonly plan: string | undefined,
  ) {}

  configure(raw: unknown): void {
    const config = resolveRunConfig(raw);
    if (config.policy.kind !== this.policy) throw new Error(`run.policy.kind: this server serves --policy ${this.policy}, the run config asks for ${config.policy.kind}`);
    if (this.plan !== undefined && config.plan !== this.plan) throw new Error(`run.plan: this server serves --plan ${this.plan}, the run config asks for ${typeof config.plan === 'string' ? config.plan : JSON.stringify(config.plan)}`);
    if (this.config !== null) {
      if (JSON.stringify(this.config) !== JSON.stringify(config)) throw new Error('run: this server was already configured with another run config');
      return;
    }
    const factory = policyFactory(config.policy.kind);
    factory.validate(config);
    const task = makeTaskFromConfig(config.task);
    this.config = config;
    this.inner = new ReferenceBackend(config, factory, task);
  }

  /** True once a run config built the backend. */
  get configured(): boolean {
    return this.inner !== null;
  }

  private get backend(): ReferenceBackend {
    if (this.inner === null) throw new Error('no run config yet: send info with params.run (or start the server with --config FILE)');
    return this.inner;
  }

  // Every operation is the configured backend's, typed by the contract.
  readonly info: PolicyBackend['info'] = () => this.backend.info();
  readonly sync: PolicyBackend['sync'] = () => this.backend.sync();
  readonly generate: PolicyBackend['generate'] = (request) => this.backend.generate(request);
  readonly logprobs: PolicyBackend['logprobs'] = (request) => this.backend.logprobs(request);
  readonly backward: PolicyBackend['backward'] = (handle, gradLogp) => this.backend.backward(handle, gradLogp);
  readonly step: PolicyBackend['step'] = (request) => this.backend.step(request);
  readonly setReference: PolicyBackend['setReference'] = () => this.backend.setReference();
  readonly warmStart: PolicyBackend['warmStart'] = (request) => this.backend.warmStart(request);
  readonly save: PolicyBackend['save'] = (dir) => this.backend.save(dir);
  readonly load: PolicyBackend['load'] = (dir) => this.backend.load(dir);
  async close(): Promise<void> {
    if (this.inner !== null) await this.inner.close();
  }
}

const help = `usage: qrl-sim serve --policy ar|diffusion [--plan P] [--config FILE] [--stdio | --port N [--host H]]

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
  --host H                HTTP address (default 127.0.0.1)

examples:
  echo '{"jsonrpc":"2.0","id":1,"method":"shutdown","params":{}}' | qrl-sim serve --policy ar --stdio
  qrl-sim backend-check --backend "qrl-sim serve --policy ar --stdio" --batch 4`;

/** The `serve` subcommand. */
export const serveCommand: Command = {
  summary: 'serve the in-process reference backend over qrl-backend/1 (stdio or HTTP)',
  help,
  async run(args, io) {
    const { values } = parseCommandArgs(args, {
      policy: { type: 'string' },
      plan: { type: 'string' },
      config: { type: 'string' },
      stdio: { type: 'boolean' },
      port: { type: 'string' },
      host: { type: 'string' },
    });
    const policy = values.policy;
    if (policy !== 'ar' && policy !== 'diffusion') throw new UsageError(`--policy: expected ar or diffusion, got ${policy === undefined ? 'nothing' : `'${policy}'`}`);
    if (values.plan !== undefined && !Object.hasOwn(precisionPlans, values.plan)) throw new UsageError(`--plan: expected one of ${Object.keys(precisionPlans).join(', ')}, got '${values.plan}'`);
    if (values.stdio && values.port !== undefined) throw new UsageError('--stdio and --port are exclusive');
    if (values.host !== undefined && values.port === undefined) throw new UsageError('--host: not used without --port (it is the HTTP address)');
    const port = values.port === undefined ? undefined : integerOption(values.port, 'port', 0, 0, 65535);
    const backend = new ConfiguredReference(policy, values.plan);
    if (values.config !== undefined) {
      let raw: unknown;
      try {
        raw = JSON.parse(readFileSync(values.config, 'utf8'));
      } catch (error) {
        throw new UsageError(`--config: cannot read '${values.config}' (${error instanceof Error ? error.message : String(error)})`);
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
      else if (!backend.configured) backend.configure({ task: { name: 'reverse' }, policy: { kind: policy }, ...(values.plan !== undefined ? { plan: values.plan } : {}) });
    };
    const server =
      port !== undefined
        ? await serveBackend(backend, { port, host: values.host ?? '127.0.0.1', onInfo })
        : await serveBackend(backend, { stdio: true, onInfo });
    if (server.port !== null) io.err(`qrl-backend/1 listening on http://${values.host ?? '127.0.0.1'}:${server.port}`);
    await server.done;
    return 0;
  },
};
