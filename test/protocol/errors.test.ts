// The protocol layer's error taxonomy: one base class, a kind per situation, BackendCallError an
// RpcCallError; and on the ground floor, JsonInputError a UsageError (the CLI's exit-2 class).
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/core/errors.js';
import { JsonInputError, parseJsonInput } from '../../src/core/json.js';
import {
  BackendCallError,
  BackendProtocolError,
  ProtocolError,
  RpcCallError,
  RpcError,
} from '../../src/protocol/errors.js';
import { RPC_ERRORS } from '../../src/protocol/jsonrpc.js';
import { parseMessage } from '../../src/protocol/schema.js';

describe('protocol errors', () => {
  it('a schema failure is a ProtocolError of kind malformed naming the method and the field', () => {
    let caught: unknown;
    try {
      parseMessage('generate', 'params', { prompts: 'x', seed: '0' });
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ProtocolError);
    expect(caught).toBeInstanceOf(BackendProtocolError);
    const e = caught as ProtocolError;
    expect([e.kind, e.method, e.field, e.name]).toEqual(['malformed', 'generate', 'prompts', 'ProtocolError']);
  });

  it('every subclass is a BackendProtocolError with its kind, method and field', () => {
    const refused = new RpcError(RPC_ERRORS.failedPrecondition, 'unknown handle', { field: 'handle' });
    expect([refused.kind, refused.method, refused.field, refused.code]).toEqual(['refused', '', 'handle', -32000]);
    const remote = new RpcCallError('remote', 'step', 'impl: step failed: no', {
      code: -32602,
      message: 'no',
      data: { field: 'lr' },
    });
    expect([remote.kind, remote.method, remote.field, remote.code]).toEqual(['remote', 'step', 'lr', -32602]);
    const timeout = new RpcCallError('timeout', 'info', 'impl: no answer');
    expect([timeout.field, timeout.code, timeout.error]).toEqual([undefined, undefined, undefined]);
    const call = new BackendCallError(
      'python3 b.py',
      'logprobs',
      'malformed',
      "backend 'python3 b.py': malformed answer",
      { field: 'result.logp' },
    );
    expect(call).toBeInstanceOf(RpcCallError);
    expect([call.kind, call.method, call.field, call.code, call.backend, call.name]).toEqual([
      'malformed',
      'logprobs',
      'result.logp',
      undefined,
      'python3 b.py',
      'BackendCallError',
    ]);
    const refusal = new BackendCallError('b', 'info', 'remote', 'refused', { code: -32000, field: 'protocols' });
    expect([refusal.code, refusal.field]).toEqual([-32000, 'protocols']);
    for (const e of [refused, remote, timeout, call, refusal]) expect(e).toBeInstanceOf(BackendProtocolError);
    expect(remote).not.toBeInstanceOf(BackendCallError);
    expect(refused).not.toBeInstanceOf(RpcCallError);
  });

  it('bad JSON input is a UsageError (exit 2) that keeps its own name', () => {
    let caught: unknown;
    try {
      parseJsonInput('[1e400]', 'input');
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(JsonInputError);
    expect(caught).toBeInstanceOf(UsageError);
    expect((caught as Error).name).toBe('JsonInputError');
    expect((caught as Error).message).toBe(
      'input: 1e400 at line 1 column 2 overflows float64 (largest finite value ≈ 1.8e308)',
    );
  });
});
