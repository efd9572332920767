// JSON-RPC 2.0 over newline-delimited JSON (one message per line): the framing of qrl-backend/1 and
// of `qrl-sim check`. A client that talks to a child process or any pair of streams, and a server
// loop that answers from a table of handlers. Not the method schemas (those belong to the callers).

import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { RpcCallError, RpcError, type RpcErrorObject } from './errors.js';

/** JSON-RPC 2.0 error codes used by qrl-backend/1 (the spec's reserved range plus two of ours). */
export const RPC_ERRORS = Object.freeze({
  /** The line is not JSON. */
  parseError: -32700,
  /** Valid JSON but not a JSON-RPC 2.0 request. */
  invalidRequest: -32600,
  methodNotFound: -32601,
  /** The params failed validation; `data.field` names the field. */
  invalidParams: -32602,
  internalError: -32603,
  /** The request was valid but the backend cannot do it now (e.g. an unknown handle, a missing capability). */
  failedPrecondition: -32000,
  /** HTTP only: the request carried no token or a wrong one (status 401); nothing was executed. */
  unauthorized: -32001,
} as const);

interface Pending {
  readonly method: string;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: Error) => void;
  readonly timer: NodeJS.Timeout | undefined;
}

/** Options of {@link NdjsonRpcClient}. */
export interface RpcClientOptions {
  /** How the peer is named in error messages, e.g. the backend command. */
  readonly name: string;
  /** Milliseconds a call may take before it fails with kind `timeout` (0 = no limit). @defaultValue 0 */
  readonly timeoutMs?: number;
  /** Awaited (up to one second) before pending calls fail on end of input, e.g. the child's exit. */
  readonly settleOnClose?: Promise<unknown>;
}

/**
 * A JSON-RPC 2.0 client over newline-delimited JSON. Requests get increasing integer ids; answers
 * are matched by id. When the input ends, a line is not a JSON-RPC response, or a call times out,
 * every pending call fails with an {@link RpcCallError} naming the peer and the method, and the
 * client refuses further calls.
 */
export class NdjsonRpcClient {
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private failure: RpcCallError | null = null;
  private readonly name: string;
  private readonly timeoutMs: number;
  /** Extra words for transport failures (e.g. the tail of the child's stderr). */
  private detail: () => string = () => '';
  /** Called once when the client fails (spawnRpcClient ends the child's process group). */
  private onFailure: (kind: RpcCallError['kind']) => void = () => undefined;
  private readonly settle: Promise<unknown>;

  constructor(
    input: Readable,
    private readonly output: Writable,
    options: RpcClientOptions,
  ) {
    this.name = options.name;
    this.timeoutMs = options.timeoutMs ?? 0;
    this.settle = options.settleOnClose ?? Promise.resolve();
    const lines = createInterface({ input, crlfDelay: Infinity });
    lines.on('line', (line) => this.onLine(line));
    lines.on('close', () => this.failAfterSettling(`${this.name}: the connection closed`));
  }

  /** Fails with kind `exit` once the peer's exit is known (at most one second later), so that the message carries its status. */
  private failAfterSettling(message: string): void {
    const limit = new Promise((resolve) => setTimeout(resolve, 1000).unref());
    void Promise.race([this.settle, limit]).then(() => this.fail('exit', message));
  }

  /** Sets what runs once when the client fails (used by {@link spawnRpcClient} to end the child). */
  setOnFailure(callback: (kind: RpcCallError['kind']) => void): void {
    this.onFailure = callback;
  }

  /** Sets what transport-failure messages append (used by {@link spawnRpcClient} for stderr). */
  setFailureDetail(detail: () => string): void {
    this.detail = detail;
  }

  /** Calls `method` with `params`; resolves with the result or rejects with an {@link RpcCallError}. */
  call(method: string, params?: unknown, options: { timeoutMs?: number } = {}): Promise<unknown> {
    if (this.failure !== null) {
      return Promise.reject(new RpcCallError(this.failure.kind, method, `${this.failure.message} (before ${method})`));
    }
    const id = this.nextId++;
    const timeoutMs = options.timeoutMs ?? this.timeoutMs;
    return new Promise((resolve, reject) => {
      const timer =
        timeoutMs > 0
          ? setTimeout(
              () => this.fail('timeout', `${this.name}: no answer to ${method} within ${timeoutMs} ms`),
              timeoutMs,
            )
          : undefined;
      this.pending.set(id, { method, resolve, reject, timer });
      const message = params === undefined ? { jsonrpc: '2.0', id, method } : { jsonrpc: '2.0', id, method, params };
      this.output.write(`${JSON.stringify(message)}\n`, (error) => {
        // EPIPE: the peer is gone (or never started); say why once its exit status is known
        if (error) this.failAfterSettling(`${this.name}: cannot send ${method}: ${error.message}`);
      });
    });
  }

  /** Sends a notification (no id, no answer). */
  notify(method: string, params?: unknown): void {
    if (this.failure !== null) return;
    this.output.write(
      `${JSON.stringify(params === undefined ? { jsonrpc: '2.0', method } : { jsonrpc: '2.0', method, params })}\n`,
    );
  }

  /** Fails every pending call (and all later ones) with `kind` and `message`. */
  fail(kind: RpcCallError['kind'], message: string): void {
    if (this.failure !== null) return;
    const detail = this.detail();
    const full = detail === '' ? message : `${message}; ${detail}`;
    this.failure = new RpcCallError(kind, '', full);
    for (const [id, p] of this.pending) {
      if (p.timer !== undefined) clearTimeout(p.timer);
      this.pending.delete(id);
      p.reject(new RpcCallError(kind, p.method, `${full} (during ${p.method})`));
    }
    this.onFailure(kind);
  }

  private onLine(line: string): void {
    if (this.failure !== null || line.trim() === '') return;
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch {
      this.fail('malformed', `${this.name}: sent a line that is not JSON: ${JSON.stringify(line.slice(0, 120))}`);
      return;
    }
    const quoted = JSON.stringify(line.slice(0, 120));
    // Anything but a JSON object (null, a number, a string, an array) is not a response: checked before any field is read.
    if (message === null || typeof message !== 'object' || Array.isArray(message)) {
      this.fail('malformed', `${this.name}: sent a message that is not a response to a pending request: ${quoted}`);
      return;
    }
    const m = message as { jsonrpc?: unknown; id?: unknown; result?: unknown; error?: unknown };
    const pending = typeof m.id === 'number' ? this.pending.get(m.id) : undefined;
    if (m.jsonrpc !== '2.0' || pending === undefined || 'result' in m === 'error' in m) {
      this.fail('malformed', `${this.name}: sent a message that is not a response to a pending request: ${quoted}`);
      return;
    }
    this.pending.delete(m.id as number);
    if (pending.timer !== undefined) clearTimeout(pending.timer);
    if ('error' in m) {
      const e = m.error as Partial<RpcErrorObject> | null;
      if (
        e === null ||
        typeof e !== 'object' ||
        Array.isArray(e) ||
        typeof e.code !== 'number' ||
        typeof e.message !== 'string'
      ) {
        const message = `${this.name}: ${pending.method} answered with a malformed error object: ${quoted}`;
        pending.reject(new RpcCallError('malformed', pending.method, `${message} (during ${pending.method})`));
        this.fail('malformed', message);
        return;
      }
      const data = e.data as { field?: unknown } | null | undefined;
      const field =
        data !== null && typeof data === 'object' && typeof data.field === 'string' ? ` (field ${data.field})` : '';
      pending.reject(
        new RpcCallError(
          'remote',
          pending.method,
          `${this.name}: ${pending.method} failed: ${e.message}${field}`,
          e as RpcErrorObject,
        ),
      );
      return;
    }
    pending.resolve(m.result);
  }

  /** Number of calls awaiting an answer. */
  get inFlight(): number {
    return this.pending.size;
  }
}

/** A client bound to a child process it spawned. */
export interface SpawnedRpc {
  readonly client: NdjsonRpcClient;
  readonly child: ChildProcessWithoutNullStreams;
  /** Ends stdin, waits for the child to exit (up to `graceMs`), then kills its whole process group. */
  close(graceMs?: number): Promise<void>;
  /** Kills the child's whole process group now (SIGKILL): a crash, for tests of recovery. */
  kill(): void;
}

/** The exit status of a POSIX shell whose command was not found (what `spawnRpcClient`'s shell exits with then). */
export const COMMAND_NOT_FOUND_EXIT = 127;

/** Process groups of spawned peers still alive: killed when the driver exits, however it exits. */
const liveGroups = new Set<number>();
let exitHookInstalled = false;

function killGroup(pid: number | undefined, signal: NodeJS.Signals = 'SIGKILL'): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // ESRCH: the group is already gone
  }
}

/** The environment variable that tells a spawned backend its driver's pid. */
export const DRIVER_PID_ENV = 'QRL_DRIVER_PID';

/**
 * Ends this process's group once the process `QRL_DRIVER_PID` names is gone (checked every
 * `everyMs`; unref'd, so it keeps nothing alive): what a backend spawned by a driver does so that
 * a driver killed with SIGKILL leaves nothing running. Returns the stop function; a no-op without
 * the variable.
 */
export function watchDriver(everyMs = 500): () => void {
  const driver = Number(process.env[DRIVER_PID_ENV]);
  if (!Number.isInteger(driver) || driver <= 1) return () => undefined;
  const timer = setInterval(() => {
    try {
      process.kill(driver, 0);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ESRCH') return; // EPERM: the pid exists
      try {
        process.kill(0, 'SIGTERM'); // pid 0: our whole process group
      } finally {
        process.exit(143);
      }
    }
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * Spawns `command` through the shell, in a process group of its own, and speaks newline-delimited
 * JSON-RPC 2.0 over its stdin and stdout. Its stderr is passed to `onStderr` one line at a time, newline
 * included (a last line without one when the stream closes), and its last lines are quoted when it dies.
 *
 * The own process group is what lets the caller end everything the command started (a shell's
 * children included) and keeps a terminal's Ctrl-C from reaching it: on a timeout or a malformed
 * message the whole group is killed and its output no longer read, `close` kills what is left of
 * the group after the grace period, and a driver that exits takes the group with it.
 */
export function spawnRpcClient(
  command: string,
  options: {
    readonly timeoutMs?: number;
    readonly cwd?: string;
    readonly env?: NodeJS.ProcessEnv;
    readonly onStderr?: (text: string) => void;
  } = {},
): SpawnedRpc {
  // QRL_DRIVER_PID: a backend that outlives a driver killed with SIGKILL (no exit hook runs) ends its own group (docs/adapter.md §1)
  const env = { ...(options.env ?? process.env), [DRIVER_PID_ENV]: String(process.pid) };
  const child = spawn(command, { shell: true, detached: true, cwd: options.cwd, env, stdio: ['pipe', 'pipe', 'pipe'] });
  const pid = child.pid;
  if (pid !== undefined) {
    liveGroups.add(pid);
    if (!exitHookInstalled) {
      exitHookInstalled = true;
      process.on('exit', () => {
        for (const g of liveGroups) killGroup(g);
      });
    }
  }
  let exitCode: number | null = null;
  let exitSignal: NodeJS.Signals | null = null;
  let client: NdjsonRpcClient | undefined;
  const exited = new Promise<void>((resolve) => {
    child.on('exit', (code, signal) => {
      exitCode = code;
      exitSignal = signal;
      resolve();
    });
    child.on('error', (error) => {
      client?.fail('exit', `backend '${command}': cannot start: ${error.message}`);
      resolve();
    });
  });
  const end = (): void => {
    killGroup(pid);
    if (pid !== undefined) liveGroups.delete(pid);
    // a grandchild may hold the pipes open after the group is signalled: stop waiting on them
    child.stdout.destroy();
    child.stderr.destroy();
    child.stdin.destroy();
  };
  client = new NdjsonRpcClient(child.stdout, child.stdin, {
    name: `backend '${command}'`,
    timeoutMs: options.timeoutMs ?? 0,
    settleOnClose: exited,
  });
  let stderrTail = '';
  child.stderr.setEncoding('utf8');
  // Relayed one whole line at a time: a line written in two pieces is not interleaved with the driver's output.
  let partial = '';
  child.stderr.on('data', (text: string) => {
    stderrTail = (stderrTail + text).slice(-2000);
    if (options.onStderr === undefined) return;
    const lines = (partial + text).split('\n');
    partial = lines.pop()!;
    for (const line of lines) options.onStderr(`${line}\n`);
  });
  child.stderr.on('close', () => {
    if (partial !== '') options.onStderr?.(partial);
    partial = '';
  });
  client.setFailureDetail(() => {
    const status =
      exitSignal !== null
        ? `killed by ${exitSignal}`
        : exitCode === COMMAND_NOT_FOUND_EXIT
          ? 'exit code 127 (command not found)'
          : exitCode !== null
            ? `exit code ${exitCode}`
            : 'still running';
    const last = stderrTail.trim().split('\n').slice(-3).join(' | ');
    return last === '' ? status : `${status}; stderr: ${last}`;
  });
  // A hung or babbling peer is ended at once, with everything it started.
  client.setOnFailure((kind) => {
    end();
  });
  child.stdin.on('error', () => undefined); // EPIPE after the child died: reported through the pending calls.
  return {
    client,
    child,
    async close(graceMs = 5000) {
      child.stdin.end();
      const timer = setTimeout(end, graceMs);
      await exited;
      clearTimeout(timer);
      end(); // whatever the command left running in its group
    },
    kill() {
      killGroup(pid);
    },
  };
}

/** A server-side method: takes the raw params, returns the result (or throws {@link RpcError}). */
export type RpcHandler = (params: unknown) => unknown;

/**
 * Answers newline-delimited JSON-RPC 2.0 requests read from `input` on `output`, one at a time and
 * in order, until the input ends or a handler asks to stop (`stop()` from the context). Malformed
 * lines get the spec's error answers; a handler's {@link RpcError} becomes its error object; any
 * other exception becomes an internal error with its message.
 */
export async function serveNdjsonRpc(
  handlers: Readonly<Record<string, RpcHandler>>,
  input: Readable,
  output: Writable,
): Promise<void> {
  const lines = createInterface({ input, crlfDelay: Infinity });
  const send = (message: unknown): Promise<void> =>
    new Promise((resolve) => {
      if (!output.write(`${JSON.stringify(message)}\n`)) output.once('drain', resolve);
      else resolve();
    });
  for await (const line of lines) {
    if (line.trim() === '') continue;
    const answer = await answerRpcLine(handlers, line);
    if (answer !== null) await send(answer);
  }
}

/** The answer to one request line (null for a notification). Exposed for transports other than streams (HTTP). */
export async function answerRpcLine(handlers: Readonly<Record<string, RpcHandler>>, line: string): Promise<unknown> {
  let message: unknown;
  try {
    message = JSON.parse(line);
  } catch {
    return {
      jsonrpc: '2.0',
      id: null,
      error: { code: RPC_ERRORS.parseError, message: 'parse error: the line is not JSON' },
    };
  }
  const m = message as { jsonrpc?: unknown; id?: unknown; method?: unknown; params?: unknown };
  const idOk =
    m !== null && typeof m === 'object' && (m.id === undefined || typeof m.id === 'number' || typeof m.id === 'string');
  if (!idOk || m.jsonrpc !== '2.0' || typeof m.method !== 'string') {
    const id = idOk && m.id !== undefined ? m.id : null;
    return {
      jsonrpc: '2.0',
      id,
      error: {
        code: RPC_ERRORS.invalidRequest,
        message: 'invalid request: expected {"jsonrpc":"2.0","id","method","params"}',
      },
    };
  }
  const isNotification = m.id === undefined;
  const handler = Object.hasOwn(handlers, m.method) ? handlers[m.method] : undefined;
  if (handler === undefined) {
    if (isNotification) return null;
    return {
      jsonrpc: '2.0',
      id: m.id,
      error: { code: RPC_ERRORS.methodNotFound, message: `method not found: ${m.method}` },
    };
  }
  try {
    const result = await handler(m.params);
    return isNotification ? null : { jsonrpc: '2.0', id: m.id, result: result === undefined ? null : result };
  } catch (error) {
    if (isNotification) return null;
    const e =
      error instanceof RpcError
        ? error
        : new RpcError(RPC_ERRORS.internalError, error instanceof Error ? error.message : String(error));
    const err: RpcErrorObject =
      e.data === undefined ? { code: e.code, message: e.message } : { code: e.code, message: e.message, data: e.data };
    return { jsonrpc: '2.0', id: m.id, error: err };
  }
}
