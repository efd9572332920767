// Public surface of the wire formats: JSON-RPC 2.0 over NDJSON, tensors as JSON, safetensors files.
// Not the method schemas of qrl-backend/1 (those belong to their callers) and not a tensor library.

export * from './jsonrpc.js';
export * from './tensor.js';
export * from './safetensors.js';
