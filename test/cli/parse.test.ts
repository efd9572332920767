// The option groups and helpers of src/cli/parse.ts: a command's flags stated by name parse as
// parseArgs options would, and the backend timeouts keep their defaults and one-line errors.

import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/core/errors.js';
import {
  BACKEND_OPTIONS,
  backendTimeouts,
  booleans,
  parseCommandArgs,
  REPEATED,
  strings,
} from '../../src/cli/parse.js';

describe('option groups', () => {
  it('strings, booleans and REPEATED build the parseArgs options they name', () => {
    expect({ ...strings('config', 'out'), ...booleans('json'), set: REPEATED }).toEqual({
      config: { type: 'string' },
      out: { type: 'string' },
      json: { type: 'boolean' },
      set: { type: 'string', multiple: true },
    });
    expect(BACKEND_OPTIONS).toEqual({
      backend: { type: 'string' },
      timeout: { type: 'string' },
      'startup-timeout': { type: 'string' },
      'token-file': { type: 'string' },
    });
  });

  it('a command stated with them parses values, lists and switches, and refuses what it does not name', () => {
    const options = { ...strings('out'), ...booleans('json'), set: REPEATED, ...BACKEND_OPTIONS };
    const { values } = parseCommandArgs(
      ['--out', 'd', '--set', 'a=1', '--set', 'b=2', '--json', '--timeout', '-1'],
      options,
    );
    expect(values).toEqual({ out: 'd', set: ['a=1', 'b=2'], json: true, timeout: '-1' });
    expect(() => parseCommandArgs(['--steps', '3'], options)).toThrow(UsageError);
    expect(() => parseCommandArgs(['--out', 'a', '--out', 'b'], options)).toThrow(/--out: given twice/);
  });
});

describe('backendTimeouts', () => {
  it('defaults the startup timeout to the request timeout, which defaults to the fallback', () => {
    expect(backendTimeouts({}, 120_000)).toEqual({ timeoutMs: 120_000, startupTimeoutMs: 120_000 });
    expect(backendTimeouts({ timeout: '5000' }, 120_000)).toEqual({ timeoutMs: 5000, startupTimeoutMs: 5000 });
    expect(backendTimeouts({ timeout: '5000', 'startup-timeout': '90000' }, 120_000)).toEqual({
      timeoutMs: 5000,
      startupTimeoutMs: 90_000,
    });
  });

  it('refuses a timeout below 1 ms with the option named', () => {
    expect(() => backendTimeouts({ timeout: '0' }, 1)).toThrow(/--timeout: expected an integer ≥ 1, got '0'/);
    expect(() => backendTimeouts({ 'startup-timeout': '1.5' }, 1)).toThrow(
      /--startup-timeout: expected an integer ≥ 1, got '1.5'/,
    );
  });
});
