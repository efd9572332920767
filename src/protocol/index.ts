// Public surface of qrl-backend/1: framing, wire tensors, safetensors, message schemas, the remote
// client and the server. Not a place for logic.

export * from './jsonrpc.js';
export * from './tensor.js';
export * from './safetensors.js';
export * from './schema.js';
export * from './remote.js';
export * from './serve.js';
