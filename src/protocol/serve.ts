// serveBackend: answers qrl-backend/1 for any PolicyBackend, over stdio (newline-delimited JSON-RPC)
// or HTTP (POST one JSON-RPC message to /rpc; a bearer token and a state root guard it, http-guard.ts).
// Params are validated before the backend sees them. Not a backend and not the client (remote.ts).

import { realpathSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { Readable, Writable } from 'node:stream';
import type { BackendInfo, PolicyBackend } from '../core/backend-contract.js';
import { ProtocolError, RpcError } from './errors.js';
import { isLoopbackHost, refuseOutsideRoot, tokenProblem } from './http-guard.js';
import { answerRpcLine, RPC_ERRORS, serveNdjsonRpc, type RpcHandler } from './jsonrpc.js';
import {
  batchToJson,
  logprobsFromJson,
  parseMessage,
  PROTOCOL_VERSIONS,
  tensorFromJson,
  type BackendMethod,
} from './schema.js';
import { logprobsResultToJson } from './logprobs-json.js';

/** Where {@link serveBackend} listens. */
export type ServeOptions = (
  | { readonly stdio: true; readonly input?: Readable; readonly output?: Writable }
  | {
      readonly port: number;
      /** The address to bind; anything but loopback (127.0.0.0/8, ::1, localhost) needs `token`. @defaultValue `'127.0.0.1'` */
      readonly host?: string;
      /** The shared token every request must carry as `Authorization: Bearer <token>` (else 401, nothing executed). */
      readonly token?: string;
      /** The directory `save` and `load` are confined to (symlinks followed). @defaultValue the working directory */
      readonly stateRoot?: string;
      /** Receives the one line of each refused request. @defaultValue a line on stderr */
      readonly onRefused?: (line: string) => void;
    }
) & {
  /** Called with every `info` request's params before the backend answers (e.g. to build it from `run`). */
  readonly onInfo?: (params: { readonly protocols: readonly string[]; readonly run?: unknown }) => void | Promise<void>;
};

/** A running server. */
export interface BackendServer {
  /** The HTTP port actually bound (port 0 picks one), or null for stdio. */
  readonly port: number | null;
  /** Resolves when the server has stopped (input ended, or `shutdown` was answered). */
  readonly done: Promise<void>;
  /** Stops serving and closes the backend. */
  close(): Promise<void>;
}

function invalid(error: unknown): never {
  if (error instanceof ProtocolError)
    throw new RpcError(RPC_ERRORS.invalidParams, error.message, { field: error.field });
  throw error;
}

/**
 * The JSON-RPC handlers of qrl-backend/1 for `backend`: every params object is validated (an
 * invalid one is answered with error −32602 and `data.field`), typed arrays are decoded, and the
 * backend's answers are encoded. `onShutdown` runs after `shutdown` is answered.
 */
export function backendHandlers(
  backend: PolicyBackend,
  onShutdown: () => void,
  onInfo?: ServeOptions['onInfo'],
): Record<BackendMethod, RpcHandler> {
  const params = <M extends BackendMethod>(method: M, raw: unknown) => {
    try {
      return parseMessage(method, 'params', raw);
    } catch (error) {
      return invalid(error);
    }
  };
  let info: BackendInfo | null = null;
  return {
    async info(raw) {
      const p = params('info', raw);
      if (onInfo !== undefined) {
        try {
          await onInfo(p);
        } catch (error) {
          throw new RpcError(RPC_ERRORS.failedPrecondition, error instanceof Error ? error.message : String(error), {
            field: 'run',
          });
        }
      }
      info ??= await backend.info();
      const chosen = p.protocols.find((v) => PROTOCOL_VERSIONS.includes(v) && v === info!.protocol);
      if (chosen === undefined) {
        throw new RpcError(
          RPC_ERRORS.failedPrecondition,
          `no common protocol version: the client speaks ${p.protocols.join(', ')}, this backend ${info.protocol}`,
          { field: 'protocols' },
        );
      }
      return { ...info, protocol: chosen };
    },
    async sync(raw) {
      params('sync', raw);
      return backend.sync();
    },
    async generate(raw) {
      const p = params('generate', raw);
      const batch = await backend.generate(p);
      return batchToJson(batch);
    },
    async logprobs(raw) {
      const p = params('logprobs', raw);
      let request;
      try {
        request = logprobsFromJson(p);
      } catch (error) {
        return invalid(error);
      }
      const result = await backend.logprobs(request);
      return logprobsResultToJson(result, request.rows.length, request.batch.T);
    },
    async backward(raw) {
      const p = params('backward', raw);
      let grad: Float64Array;
      let gradTopk: Float64Array | undefined;
      try {
        grad = tensorFromJson(p.gradLogp, 'backward', 'gradLogp', { dtypes: ['F64'] }) as Float64Array;
        if (p.gradTopk !== undefined)
          gradTopk = tensorFromJson(p.gradTopk, 'backward', 'gradTopk', { dtypes: ['F64'] }) as Float64Array;
      } catch (error) {
        return invalid(error);
      }
      if (gradTopk !== undefined) await backend.backward(p.handle, grad, gradTopk);
      else await backend.backward(p.handle, grad);
      return null;
    },
    async step(raw) {
      return backend.step(params('step', raw));
    },
    async setReference(raw) {
      params('setReference', raw);
      await backend.setReference();
      return null;
    },
    async warmStart(raw) {
      const { examples, ...p } = params('warmStart', raw);
      // the served backends warm-start on their own task and do not declare capabilities.sftExamples
      if (examples !== undefined)
        throw new RpcError(
          RPC_ERRORS.invalidParams,
          'warmStart: unknown field examples (no capabilities.sftExamples)',
          {
            field: 'examples',
          },
        );
      return backend.warmStart({ ...p, task: { name: p.task.name, options: p.task.options as never } });
    },
    async save(raw) {
      await backend.save(params('save', raw).dir);
      return null;
    },
    async load(raw) {
      await backend.load(params('load', raw).dir);
      return null;
    },
    async dumpEngine(raw) {
      const p = params('dumpEngine', raw);
      if (backend.dumpEngine === undefined)
        throw new RpcError(
          RPC_ERRORS.failedPrecondition,
          'dumpEngine: this backend has no engine dump (capabilities.dumpEngine is false)',
          { field: 'method' },
        );
      return backend.dumpEngine(p.dir);
    },
    async shutdown(raw) {
      params('shutdown', raw);
      setImmediate(onShutdown);
      return null;
    },
  };
}

/**
 * Serves `backend` over stdio or HTTP until the input ends, `shutdown` is called, or
 * {@link BackendServer.close}. The backend is closed when serving stops. Over HTTP every request is
 * one JSON-RPC message POSTed to `/rpc`; requests are answered one at a time, in arrival order.
 *
 * @example
 * ```ts
 * const server = await serveBackend(myBackend, { port: 0, host: '127.0.0.1' });
 * const remote = await connectBackend({ url: `http://127.0.0.1:${server.port}` });
 * ```
 */
export async function serveBackend(backend: PolicyBackend, options: ServeOptions): Promise<BackendServer> {
  let stop: () => void = () => undefined;
  const stopped = new Promise<void>((resolve) => {
    stop = resolve;
  });
  let closedBackend = false;
  const closeBackend = async (): Promise<void> => {
    if (closedBackend) return;
    closedBackend = true;
    await backend.close();
  };
  const handlers = backendHandlers(backend, () => stop(), options.onInfo);
  if ('stdio' in options) {
    const input = options.input ?? process.stdin;
    const output = options.output ?? process.stdout;
    const served = serveNdjsonRpc(handlers, input, output);
    const done = Promise.race([served, stopped]).then(closeBackend);
    return {
      port: null,
      done,
      async close() {
        stop();
        await done;
      },
    };
  }
  const host = options.host ?? '127.0.0.1';
  if (!isLoopbackHost(host) && options.token === undefined)
    throw new Error(`serveBackend: host ${host} is not loopback: a token is required`);
  const stateRoot = realpathSync(options.stateRoot ?? process.cwd());
  const inRoot =
    (method: 'save' | 'load' | 'dumpEngine'): RpcHandler =>
    (raw) => {
      const dir = (raw as { dir?: unknown } | null)?.dir;
      if (typeof dir === 'string') {
        try {
          refuseOutsideRoot(stateRoot, method, dir);
        } catch (error) {
          invalid(error);
        }
      }
      return handlers[method](raw);
    };
  const guarded = { ...handlers, save: inRoot('save'), load: inRoot('load'), dumpEngine: inRoot('dumpEngine') };
  const onRefused = options.onRefused ?? ((line: string) => process.stderr.write(`${line}\n`));
  // HTTP: one queue so that requests reach the backend one at a time, like the stdio loop.
  let queue: Promise<unknown> = Promise.resolve();
  const server: Server = createServer((req, res) => {
    if (req.method !== 'POST' || req.url !== '/rpc') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('qrl-backend/1: POST one JSON-RPC message to /rpc\n');
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const problem = options.token === undefined ? null : tokenProblem(req.headers.authorization, options.token);
      if (problem !== null) {
        // Refused before the body is parsed: nothing of it is executed (id null: it was not read).
        onRefused(`refused request from ${req.socket.remoteAddress ?? 'unknown address'}: ${problem}`);
        const error = {
          code: RPC_ERRORS.unauthorized,
          message: `unauthorized: ${problem} (send Authorization: Bearer <the server's token>)`,
        };
        res
          .writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer' })
          .end(JSON.stringify({ jsonrpc: '2.0', id: null, error }));
        return;
      }
      const body = Buffer.concat(chunks).toString('utf8');
      const answer = queue.then(() => answerRpcLine(guarded, body));
      queue = answer.catch(() => undefined);
      void answer.then((a) => {
        if (a === null) res.writeHead(204).end();
        else res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(a));
      });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, host, () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : options.port;
  const done = stopped
    .then(
      () =>
        new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeIdleConnections();
          setTimeout(() => server.closeAllConnections(), 1000).unref();
        }),
    )
    .then(closeBackend);
  return {
    port,
    done,
    async close() {
      stop();
      await done;
    },
  };
}
