// `qrl-sim/protocol`: qrl-backend/1 — the remote backend client, the server, wire tensors, safetensors, protocol errors.
// Chosen names, not `export *` (the rule: docs/decisions.md; pinned by test/api-surface.test.ts).

// The remote backend client.
export {
  connectBackend,
  RemoteBackend,
  type RemoteBackendOptions,
  type BackendAddress,
  parseBackendAddress,
} from './remote.js';

// The backend server.
export { serveBackend, type ServeOptions, type BackendServer } from './serve.js';

// Protocol versions and methods.
export { PROTOCOL_VERSIONS, BACKEND_METHODS, type BackendMethod } from './schema.js';

// The protocol layer's errors: one base class, a subclass and a kind per situation.
export {
  BackendProtocolError,
  type ProtocolErrorKind,
  ProtocolError,
  RpcError,
  RpcCallError,
  BackendCallError,
  BackendCommandNotFound,
  type RpcErrorObject,
} from './errors.js';

// Tensors as JSON.
export { encodeTensor, decodeTensor, type WireTensor, type WireArray, type WireDtype, WIRE_DTYPES } from './tensor.js';

// Safetensors files.
export {
  readSafetensors,
  writeSafetensors,
  encodeSafetensors,
  decodeSafetensors,
  type SafetensorsDtype,
  type SafetensorsTensor,
  type SafetensorsEntry,
} from './safetensors.js';
