// The errors of the protocol layer (qrl-backend/1 and its JSON-RPC framing): one base class, one
// subclass per situation, a `kind` on each. Not the usage error the CLI maps to exit 2 (src/core/errors.ts).
//
// | class              | thrown by                          | kind                                     |
// | ------------------ | ---------------------------------- | ---------------------------------------- |
// | `ProtocolError`    | the schemas (either side)          | `malformed`                              |
// | `RpcError`         | a server handler, to answer        | `refused`                                |
// | `RpcCallError`     | the JSON-RPC client                | `remote`, `exit`, `malformed`, `timeout` |
// | `BackendCallError` | `RemoteBackend` (an RpcCallError)  | `remote`, `exit`, `malformed`, `timeout` |

/**
 * What went wrong, whichever {@link BackendProtocolError} says it:
 * - `malformed`: a message (params, result, a JSON-RPC frame) is not what the protocol defines;
 * - `refused`: a server handler answers the request with a JSON-RPC error;
 * - `remote`: the peer answered a call with a JSON-RPC error;
 * - `exit`: the peer's process ended, or it could not be reached;
 * - `timeout`: the peer did not answer in time.
 */
export type ProtocolErrorKind = 'malformed' | 'refused' | 'remote' | 'exit' | 'timeout';

/** A JSON-RPC 2.0 error object. `data.field` names the offending field where there is one. */
export interface RpcErrorObject {
  readonly code: number;
  readonly message: string;
  readonly data?: { readonly field?: string; readonly [key: string]: unknown };
}

/**
 * The base of every error the protocol layer throws (docs/adapter.md "Errors"): it names the
 * method (`''` when the error concerns no single method) and, where one is known, the offending
 * field as a dotted path. Catch it to handle any protocol failure; tell them apart by subclass or
 * by {@link BackendProtocolError.kind}.
 */
export abstract class BackendProtocolError extends Error {
  /** What went wrong (the subclass narrows it). */
  abstract readonly kind: ProtocolErrorKind;
  /** The qrl-backend/1 (or JSON-RPC) method concerned, `''` when none. */
  readonly method: string;
  /** Dotted path of the offending field, when one is known (`''`: the whole message). */
  readonly field: string | undefined;
  constructor(method: string, field: string | undefined, message: string) {
    super(message);
    this.method = method;
    this.field = field;
  }
}

/**
 * A malformed message: the params or result of `method` failed the qrl-backend/1 schema. Names the
 * method and the field (dotted path); thrown on either side (a server checking params, a client
 * checking a result).
 */
export class ProtocolError extends BackendProtocolError {
  /** Always `malformed`. */
  readonly kind = 'malformed';
  /** Dotted path of the first bad field (`''` for the whole message). */
  declare readonly field: string;
  constructor(method: string, field: string, message: string) {
    super(method, field, message);
    this.name = 'ProtocolError';
  }
}

/**
 * An error a server handler throws to answer the request with a specific JSON-RPC error (any
 * other error answers `internalError`). `data.field` names the offending field where there is one.
 */
export class RpcError extends BackendProtocolError {
  /** Always `refused`. */
  readonly kind = 'refused';
  /** The JSON-RPC error code (`RPC_ERRORS` in jsonrpc.ts). */
  readonly code: number;
  /** The JSON-RPC error's `data`. */
  readonly data?: RpcErrorObject['data'];
  constructor(code: number, message: string, data?: RpcErrorObject['data']) {
    super('', typeof data?.field === 'string' ? data.field : undefined, message);
    this.name = 'RpcError';
    this.code = code;
    if (data !== undefined) this.data = data;
  }
}

/**
 * Why a call to a remote process failed: the remote answered with an error (`remote`), the process
 * exited or could not be reached (`exit`), it sent a malformed message (`malformed`), or it did not
 * answer in time (`timeout`). The message names the peer and the method.
 */
export class RpcCallError extends BackendProtocolError {
  readonly kind: 'remote' | 'exit' | 'malformed' | 'timeout';
  /** The remote's error object (kind `remote`). */
  readonly error?: RpcErrorObject;
  /** The JSON-RPC error code when `kind` is `remote`. */
  readonly code?: number;
  /**
   * @param error - the remote's error object (kind `remote`); its `code` and `data.field` are the
   *   defaults of `detail`.
   * @param detail - the code and field when they come from elsewhere (a result that failed the schema).
   */
  constructor(
    kind: RpcCallError['kind'],
    method: string,
    message: string,
    error?: RpcErrorObject,
    detail: { code?: number; field?: string } = {},
  ) {
    const named = error?.data?.field;
    super(method, detail.field ?? (typeof named === 'string' ? named : undefined), message);
    this.name = 'RpcCallError';
    this.kind = kind;
    if (error !== undefined) this.error = error;
    const code = detail.code ?? error?.code;
    if (code !== undefined) this.code = code;
  }
}

/**
 * Why a call to a remote policy backend failed, as one line naming the backend, the method and what
 * happened: the backend refused (`remote`, with its JSON-RPC `code`), died or could not be reached
 * (`exit`), hung past the timeout (`timeout`), or answered with a message that fails the schema
 * (`malformed`, with the `field`). An {@link RpcCallError} that also names the backend.
 */
export class BackendCallError extends RpcCallError {
  /** The backend's command or URL. */
  readonly backend: string;
  constructor(
    backend: string,
    method: string,
    kind: BackendCallError['kind'],
    message: string,
    extra: { code?: number; field?: string } = {},
  ) {
    super(kind, method, message, undefined, extra);
    this.name = 'BackendCallError';
    this.backend = backend;
  }
}

/**
 * A stdio backend whose command was not found: the shell that runs it exited with 127 before
 * answering. Bad input rather than a backend failure (the CLI exits 2 and names `--backend`).
 */
export class BackendCommandNotFound extends BackendCallError {
  constructor(backend: string, method: string, message: string) {
    super(backend, method, 'exit', message);
    this.name = 'BackendCommandNotFound';
  }
}
