// The checks of a decoded `logprobs` answer that no schema states: ℓ ≤ 0 in result.logp and in
// result.topkLogp (−∞ allowed: a token the sampler could not draw), each refusal naming its field.
import { describe, expect, it } from 'vitest';
import { ProtocolError } from '../../src/protocol/errors.js';
import { logprobsResultFromJson } from '../../src/protocol/logprobs-json.js';
import { encodeTensor } from '../../src/protocol/tensor.js';

const f64 = (values: readonly number[], shape: readonly number[]) => encodeTensor(Float64Array.from(values), shape);
const asked = { rows: 1, T: 2, grad: false, entropyRequired: false };

function refusal(run: () => unknown): { field: string | undefined; message: string } {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ProtocolError);
    return { field: (error as ProtocolError).field, message: (error as Error).message };
  }
  throw new Error('expected a ProtocolError');
}

describe('logprobsResultFromJson: log-probs ≤ 0', () => {
  it('keeps −∞ and 0, refuses a positive or NaN result.logp at its position', () => {
    const ok = logprobsResultFromJson({ logp: f64([-Infinity, 0], [1, 2]) }, asked);
    expect(Array.from(ok.logp)).toEqual([-Infinity, 0]);
    expect(refusal(() => logprobsResultFromJson({ logp: f64([-1, 0.5], [1, 2]) }, asked))).toEqual({
      field: 'result.logp',
      message: 'logprobs: result.logp must hold log-probs ≤ 0, got 0.5 at 1',
    });
    expect(refusal(() => logprobsResultFromJson({ logp: f64([Number.NaN, -1], [1, 2]) }, asked)).message).toBe(
      'logprobs: result.logp must hold log-probs ≤ 0, got NaN at 0',
    );
  });

  it('applies the same rule to result.topkLogp, and names it', () => {
    const withTopk = { ...asked, topkK: 2 };
    const logp = f64([-1, -2], [1, 2]);
    const ok = logprobsResultFromJson({ logp, topkLogp: f64([-0.1, -Infinity, -0.2, -3], [1, 2, 2]) }, withTopk);
    expect(Array.from(ok.topkLogp ?? [])).toEqual([-0.1, -Infinity, -0.2, -3]);
    expect(
      refusal(() => logprobsResultFromJson({ logp, topkLogp: f64([-0.1, -1, 2, -3], [1, 2, 2]) }, withTopk)),
    ).toEqual({
      field: 'result.topkLogp',
      message: 'logprobs: result.topkLogp must hold log-probs ≤ 0, got 2 at 2',
    });
    expect(refusal(() => logprobsResultFromJson({ logp }, withTopk)).message).toBe(
      'logprobs: result.topkLogp is required when the request sets topk',
    );
  });
});
