// RemoteBackend: a PolicyBackend whose operations are qrl-backend/1 calls to another process (a spawned
// command over stdio, or an HTTP server), every answer validated. Not a backend itself, not the server.

import { resolve } from 'node:path';
import type {
  BackendInfo,
  EngineDump,
  GenerateRequest,
  LogprobsRequest,
  LogprobsResult,
  PolicyBackend,
  RolloutBatch,
  StepRequest,
  StepResult,
  SupervisedPair,
  WarmStartRequest,
} from '../core/backend-contract.js';
import { BackendCallError, BackendCommandNotFound, ProtocolError, RpcCallError } from './errors.js';
import { COMMAND_NOT_FOUND_EXIT, RPC_ERRORS, spawnRpcClient, type SpawnedRpc } from './jsonrpc.js';
import {
  batchFromJson,
  generateToJson,
  logprobsToJson,
  NEWEST_REVISION,
  olderRevision,
  parseMessage,
  PROTOCOL_VERSIONS,
  takesField,
  type BackendMethod,
} from './schema.js';
import { encodeTensor, type WireTensor } from './tensor.js';
import { logprobsResultFromJson } from './logprobs-json.js';

/** Where the backend is: a shell command to spawn (stdio) or the base URL of an HTTP server. */
export type BackendAddress = { readonly command: string } | { readonly url: string };

/** Options of {@link connectBackend}. */
export interface RemoteBackendOptions {
  /** Milliseconds any call may take (0 = no limit). @defaultValue 600000 */
  readonly timeoutMs?: number;
  /** Milliseconds the first `info` may take (a backend loading a model starts slowly; 0 = no limit). @defaultValue `timeoutMs` */
  readonly startupTimeoutMs?: number;
  /** Protocol versions offered in `info`, most preferred first. @defaultValue {@link PROTOCOL_VERSIONS} */
  readonly protocols?: readonly string[];
  /** The driver's resolved run config, sent with `info` for backends that build their policy from it (`qrl-sim serve`). */
  readonly run?: unknown;
  /**
   * What the run asks of the backend in the protocol's terms (vocabulary, plan, sampler, lengths,
   * optimizer, model shape), sent with `info` as `setup` so that a backend can build itself from the
   * run (docs/adapter.md §5).
   */
  readonly setup?: unknown;
  /** The shared token of an HTTP backend, sent as `Authorization: Bearer <token>` (unused over stdio). */
  readonly token?: string;
  /**
   * Whether {@link RemoteBackend.close} asks the backend to `shutdown`. A spawned backend is this
   * client's and is shut down; an HTTP backend was started by someone else, may serve others, and is
   * left running. @defaultValue true for a command, false for a URL
   */
  readonly shutdownOnClose?: boolean;
  /** Working directory of a spawned command. */
  readonly cwd?: string;
  /** Receives the spawned command's stderr one whole line at a time, newline included (default: discarded, its tail is quoted on failure). */
  readonly onStderr?: (text: string) => void;
}

interface Transport {
  call(method: string, params: unknown, timeoutMs: number): Promise<unknown>;
  close(): Promise<void>;
  kill?(): void;
  /** True once a spawned command's shell exited with 127 (command not found). */
  notFound?(): boolean;
}

function stdioTransport(command: string, options: RemoteBackendOptions): Transport {
  const spawned: SpawnedRpc = spawnRpcClient(command, {
    ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
    ...(options.onStderr !== undefined ? { onStderr: options.onStderr } : {}),
  });
  return {
    call: (method, params, timeoutMs) => spawned.client.call(method, params, { timeoutMs }),
    close: () => spawned.close(),
    kill: () => spawned.kill(),
    notFound: () => spawned.child.exitCode === COMMAND_NOT_FOUND_EXIT,
  };
}

function httpTransport(url: string, token: string | undefined): Transport {
  const endpoint = new URL('rpc', url.endsWith('/') ? url : `${url}/`).toString();
  let nextId = 1;
  const name = `backend ${url}`;
  return {
    async call(method, params, timeoutMs) {
      const id = nextId++;
      let text: string;
      let status: number;
      try {
        const response = await fetch(endpoint, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
          },
          body: JSON.stringify({ jsonrpc: '2.0', id, method, params }),
          ...(timeoutMs > 0 ? { signal: AbortSignal.timeout(timeoutMs) } : {}),
        });
        text = await response.text();
        status = response.status;
      } catch (error) {
        const e = error as Error;
        if (e.name === 'TimeoutError' || e.name === 'AbortError')
          throw new RpcCallError('timeout', method, `${name}: no answer to ${method} within ${timeoutMs} ms`);
        const cause = (e as { cause?: { code?: string; message?: string } }).cause;
        throw new RpcCallError(
          'exit',
          method,
          `${name}: cannot reach ${endpoint}: ${cause?.code ?? cause?.message ?? e.message}`,
        );
      }
      let m: {
        jsonrpc?: unknown;
        id?: unknown;
        result?: unknown;
        error?: { code?: unknown; message?: unknown; data?: { field?: unknown } };
      };
      try {
        m = JSON.parse(text) as typeof m;
      } catch {
        throw new RpcCallError(
          'malformed',
          method,
          `${name}: answered ${method} with a body that is not JSON: ${JSON.stringify(text.slice(0, 120))}`,
        );
      }
      if (status === 401) {
        // The server refused the token (its answer has id null: the request was not read).
        const said = typeof m?.error?.message === 'string' ? m.error.message : 'unauthorized';
        const hint =
          token === undefined ? 'set QRL_BACKEND_TOKEN or pass --token-file' : "the token sent is not the server's";
        throw new RpcCallError('remote', method, `${name}: ${method} refused: ${said}; ${hint}`, {
          code: RPC_ERRORS.unauthorized,
          message: said,
        });
      }
      if (m === null || typeof m !== 'object' || m.jsonrpc !== '2.0' || m.id !== id || 'result' in m === 'error' in m) {
        throw new RpcCallError(
          'malformed',
          method,
          `${name}: answered ${method} with a message that is not its JSON-RPC response: ${JSON.stringify(text.slice(0, 120))}`,
        );
      }
      if ('error' in m) {
        const e = m.error;
        if (e === null || typeof e !== 'object' || typeof e.code !== 'number' || typeof e.message !== 'string') {
          throw new RpcCallError('malformed', method, `${name}: ${method} answered with a malformed error object`);
        }
        const field = typeof e.data?.field === 'string' ? ` (field ${e.data.field})` : '';
        throw new RpcCallError('remote', method, `${name}: ${method} failed: ${e.message}${field}`, e as never);
      }
      return m.result;
    },
    async close() {},
  };
}

/**
 * A {@link PolicyBackend} in another process. Every call is validated on the way out and on the way
 * back; any failure is a {@link BackendCallError} naming the backend and the method. Create one with
 * {@link connectBackend}, which negotiates the protocol version.
 */
export class RemoteBackend implements PolicyBackend {
  /** The command or URL, as named in errors. */
  readonly name: string;
  private readonly transport: Transport;
  private readonly timeoutMs: number;
  private readonly startupTimeoutMs: number;
  private started = false;
  private readonly protocols: readonly string[];
  private readonly run: unknown;
  private readonly setup: unknown;
  private closed = false;
  private readonly shutdownOnClose: boolean;
  private described: BackendInfo | null = null;
  /** The spec revision whose params fields the backend takes (docs/adapter.md §12): the newest until its `info` refuses one. */
  private revision = NEWEST_REVISION;

  /** Wraps a transport; prefer {@link connectBackend}. */
  constructor(address: BackendAddress, options: RemoteBackendOptions = {}) {
    this.name = 'command' in address ? address.command : address.url;
    this.timeoutMs = options.timeoutMs ?? 600_000;
    this.startupTimeoutMs = options.startupTimeoutMs ?? this.timeoutMs;
    for (const [k, v] of [
      ['timeoutMs', this.timeoutMs],
      ['startupTimeoutMs', this.startupTimeoutMs],
    ] as const) {
      if (!Number.isInteger(v) || v < 0)
        throw new Error(`remote backend: ${k} must be a non-negative integer, got ${v}`);
    }
    this.protocols = options.protocols ?? PROTOCOL_VERSIONS;
    this.run = options.run;
    this.setup = options.setup;
    this.shutdownOnClose = options.shutdownOnClose ?? 'command' in address;
    this.transport =
      'command' in address ? stdioTransport(address.command, options) : httpTransport(address.url, options.token);
  }

  private async call<M extends BackendMethod>(method: M, params: unknown): Promise<unknown> {
    if (this.closed)
      throw new BackendCallError(this.name, method, 'exit', `backend '${this.name}': ${method} after close`);
    let raw: unknown;
    try {
      raw = await this.transport.call(method, params, this.started ? this.timeoutMs : this.startupTimeoutMs);
      this.started = true;
    } catch (error) {
      if (error instanceof RpcCallError && this.transport.notFound?.() === true)
        throw new BackendCommandNotFound(this.name, method, error.message);
      if (error instanceof RpcCallError) {
        const field = error.error?.data?.field;
        throw new BackendCallError(this.name, method, error.kind, error.message, {
          ...(error.error !== undefined ? { code: error.error.code } : {}),
          ...(typeof field === 'string' ? { field } : {}),
        });
      }
      throw error;
    }
    return raw;
  }

  private fail(method: string, error: unknown): never {
    if (error instanceof ProtocolError) {
      throw new BackendCallError(
        this.name,
        method,
        'malformed',
        `backend '${this.name}': malformed answer to ${error.message}`,
        { field: error.field },
      );
    }
    throw error;
  }

  private async invoke<M extends BackendMethod>(
    method: M,
    params: unknown,
  ): Promise<ReturnType<typeof parseMessage<M, 'result'>>> {
    const raw = await this.call(method, params);
    try {
      return parseMessage(method, 'result', raw);
    } catch (error) {
      return this.fail(method, error);
    }
  }

  /**
   * The backend's self-description; checks the protocol it chose is one offered. Sends `run` and
   * `setup` when given, unless the backend was written to a revision without them: a −32602 naming
   * one of them (an unknown field) makes it ask again without that field and the later ones, and the
   * later calls leave out every field of those revisions (docs/adapter.md §12).
   */
  async info(): Promise<BackendInfo> {
    let info: BackendInfo;
    for (;;) {
      const params = {
        protocols: [...this.protocols],
        ...(this.run === undefined || !takesField(this.revision, 'info', 'run') ? {} : { run: this.run }),
        ...(this.setup === undefined || !takesField(this.revision, 'info', 'setup') ? {} : { setup: this.setup }),
      };
      try {
        info = (await this.invoke('info', params)) as BackendInfo;
        break;
      } catch (error) {
        const older =
          error instanceof BackendCallError && error.kind === 'remote'
            ? olderRevision(this.revision, error.code, error.field)
            : undefined;
        if (older === undefined) throw error;
        this.revision = older;
      }
    }
    if (!this.protocols.includes(info.protocol)) {
      throw new BackendCallError(
        this.name,
        'info',
        'malformed',
        `backend '${this.name}': speaks protocol ${JSON.stringify(info.protocol)}, this client speaks ${this.protocols.join(', ')}`,
        { field: 'result.protocol' },
      );
    }
    this.described = info;
    return info;
  }

  /** The spec revision whose params fields the backend takes, as negotiated by {@link RemoteBackend.info} (docs/adapter.md §12). */
  get paramsRevision(): number {
    return this.revision;
  }

  /** The last {@link RemoteBackend.info} answer (null before the first). */
  get lastInfo(): BackendInfo | null {
    return this.described;
  }

  async sync(): Promise<{ readonly weightVersion: number }> {
    return this.invoke('sync', {});
  }

  /** Refuses, without a call, a top-k field to a backend that did not declare `capabilities.topkLogprobs`. */
  private requireTopk(method: BackendMethod, field: string): void {
    if (this.described?.capabilities.topkLogprobs !== true)
      throw new ProtocolError(
        method,
        field,
        `${method}: ${field} needs capabilities.topkLogprobs, which the backend ${this.described?.backend.name ?? '(not described yet)'} does not declare`,
      );
  }

  async generate(request: GenerateRequest): Promise<RolloutBatch> {
    const K = request.topkLogprobs ?? 0;
    if (K > 0) this.requireTopk('generate', 'topkLogprobs');
    // the field left out for a backend of an earlier revision; otherwise the params keep their key order (recorded exchanges compare bytes)
    const full = generateToJson(request);
    const { maxNewTokens: _dropped, ...rest } = full;
    const params = takesField(this.revision, 'generate', 'maxNewTokens') ? full : rest;
    const json = await this.invoke('generate', params);
    try {
      const batch = batchFromJson(json, 'generate', 'result');
      if (batch.B !== request.prompts.length)
        throw new ProtocolError(
          'generate',
          'result.B',
          `generate: result.B must equal the number of prompts ${request.prompts.length}, got ${batch.B}`,
        );
      if (K > 0 && request.greedy !== true && batch.topk?.K !== K)
        throw new ProtocolError(
          'generate',
          'result.topk',
          `generate: result.topk with K = ${K} is required when the request sets topkLogprobs, got ${batch.topk === undefined ? 'none' : `K = ${batch.topk.K}`}`,
        );
      return batch;
    } catch (error) {
      return this.fail('generate', error);
    }
  }

  async logprobs(request: LogprobsRequest): Promise<LogprobsResult> {
    if (request.topk === true) this.requireTopk('logprobs', 'topk');
    const json = await this.invoke('logprobs', logprobsToJson(request));
    try {
      return logprobsResultFromJson(json, {
        rows: request.rows.length,
        T: request.batch.T,
        grad: request.grad === true,
        entropyRequired: this.described?.capabilities.entropy !== false,
        probSqSumAsked: request.probSqSum === true,
        topkK: request.topk === true ? (request.batch.topk?.K ?? 0) : 0,
      });
    } catch (error) {
      return this.fail('logprobs', error);
    }
  }

  async backward(handle: string, gradLogp: Float64Array, gradTopk?: Float64Array): Promise<void> {
    if (gradTopk === undefined) {
      await this.invoke('backward', { handle, gradLogp: encodeTensor(gradLogp) });
      return;
    }
    this.requireTopk('backward', 'gradTopk');
    await this.invoke('backward', { handle, gradLogp: encodeTensor(gradLogp), gradTopk: encodeTensor(gradTopk) });
  }

  async step(request: StepRequest): Promise<StepResult> {
    return this.invoke('step', { maxGradNorm: request.maxGradNorm });
  }

  async setReference(): Promise<void> {
    await this.invoke('setReference', {});
  }

  /**
   * Sends `examples` (as three I32 tensors: prompts, PAD-padded responses, lengths) only with
   * `capabilities.sftExamples`; refused here, without a call, when the backend did not declare it.
   */
  async warmStart(request: WarmStartRequest): Promise<Record<string, number>> {
    const params = {
      task: request.task,
      steps: request.steps,
      batchSize: request.batchSize,
      lr: request.lr,
      seed: request.seed,
    };
    if (request.examples === undefined) return this.invoke('warmStart', params);
    const info = this.described ?? (await this.info());
    if (info.capabilities.sftExamples !== true)
      throw new ProtocolError(
        'warmStart',
        'capabilities.sftExamples',
        `warmStart: the backend ${info.backend.name} does not declare capabilities.sftExamples, so it takes no examples`,
      );
    return this.invoke('warmStart', { ...params, examples: encodeSupervisedPairs(request.examples) });
  }

  /** Sends `dir` as an absolute path (the backend's working directory is not the driver's). */
  async save(dir: string): Promise<void> {
    await this.invoke('save', { dir: resolve(dir) });
  }

  /** Sends `dir` as an absolute path. */
  async load(dir: string): Promise<void> {
    await this.invoke('load', { dir: resolve(dir) });
  }

  /**
   * Asks the backend to write its engine and trainer tensors under `dir` (sent absolute) for
   * refit-check; refused here, without a call, when the backend did not declare `capabilities.dumpEngine`.
   */
  async dumpEngine(dir: string): Promise<EngineDump> {
    const info = this.described ?? (await this.info());
    if (info.capabilities.dumpEngine !== true)
      throw new ProtocolError(
        'dumpEngine',
        'capabilities.dumpEngine',
        `dumpEngine: the backend ${info.backend.name} does not declare capabilities.dumpEngine`,
      );
    return this.invoke('dumpEngine', { dir: resolve(dir) });
  }

  /** Asks a spawned backend to shut down (an HTTP one only with `shutdownOnClose`), then ends the transport (a spawned process is killed if it lingers). */
  async close(): Promise<void> {
    if (this.closed) return;
    if (this.shutdownOnClose) {
      try {
        await this.call('shutdown', {});
      } catch {
        // A backend that is already gone is closed.
      }
    }
    this.closed = true;
    await this.transport.close();
  }

  /**
   * Kills a spawned backend's whole process group at once (SIGKILL), as a crash would; the next call
   * fails with kind `exit`. Returns false for an HTTP backend (nothing to kill).
   */
  kill(): boolean {
    if (this.transport.kill === undefined) return false;
    this.transport.kill();
    return true;
  }

  /** Sends a raw request (for the conformance check's bad-request probes); the answer is not validated. */
  async raw(method: string, params: unknown): Promise<unknown> {
    return this.call(method as BackendMethod, params);
  }
}

/**
 * Connects to a backend (spawns the command or reaches the URL) and negotiates the protocol with
 * `info`; closes it again if that fails.
 *
 * @example
 * ```ts
 * const backend = await connectBackend({ command: 'python3 -m qrl_backend.numpy_ar --task reverse' });
 * const info = backend.lastInfo!;
 * ```
 */
export async function connectBackend(
  address: BackendAddress,
  options: RemoteBackendOptions = {},
): Promise<RemoteBackend> {
  const backend = new RemoteBackend(address, options);
  try {
    await backend.info();
  } catch (error) {
    await backend.close().catch(() => undefined);
    throw error;
  }
  return backend;
}

/** Parses a `--backend` value: an `http://` or `https://` URL, else a shell command. */
export function parseBackendAddress(value: string): BackendAddress {
  const v = value.trim();
  if (v === '') throw new Error('backend: expected a command or an http:// URL, got an empty string');
  return /^https?:\/\//.test(v) ? { url: v } : { command: v };
}

/**
 * `warmStart.examples` on the wire: prompts (N, P), responses right-padded with PAD (0) to the longest
 * (N, L) and each response's length (N), all I32. Every prompt must have the first one's length.
 */
export function encodeSupervisedPairs(pairs: readonly SupervisedPair[]): {
  prompts: WireTensor;
  responses: WireTensor;
  lengths: WireTensor;
} {
  const N = pairs.length;
  const P = N === 0 ? 0 : pairs[0]!.prompt.length;
  const L = pairs.reduce((m, e) => Math.max(m, e.response.length), 0);
  const prompts = new Int32Array(N * P);
  const responses = new Int32Array(N * L); // PAD = 0
  const lengths = new Int32Array(N);
  pairs.forEach((e, i) => {
    if (e.prompt.length !== P)
      throw new Error(`warmStart.examples: every prompt must have length ${P}, example ${i} has ${e.prompt.length}`);
    prompts.set(e.prompt, i * P);
    responses.set(e.response, i * L);
    lengths[i] = e.response.length;
  });
  return {
    prompts: encodeTensor(prompts, [N, P]),
    responses: encodeTensor(responses, [N, L]),
    lengths: encodeTensor(lengths, [N]),
  };
}
