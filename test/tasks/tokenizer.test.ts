// Tokenizer round trips, fixed special ids, and errors for text that no token matches.
import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { BOS, createTokenizer, EOS, MASK, PAD, SEP, specialTokenStrings } from '../../src/tasks/index.js';

describe('tokenizer', () => {
  const tok = createTokenizer(['a', 'b', 'ab', '=']);

  it('puts the specials first at fixed ids', () => {
    expect([PAD, BOS, EOS, SEP, MASK]).toEqual([0, 1, 2, 3, 4]);
    expect(tok.vocab).toEqual([...specialTokenStrings, 'a', 'b', 'ab', '=']);
    expect(tok.vocabSize).toBe(9);
  });

  it('encodes greedily, skipping whitespace', () => {
    expect(tok.encode('<bos>ab a b<sep>')).toEqual([BOS, 7, 5, 6, SEP]);
    expect(tok.encode(' <mask>=\n')).toEqual([MASK, 8]);
    expect(tok.encode('')).toEqual([]);
  });

  it('names the character no token matches', () => {
    expect(() => tok.encode('ab<c')).toThrow(/no token matches "<" at position 2 of "ab<c"/);
    expect(() => tok.encode('abc')).toThrow(/"c" at position 2/);
  });

  it('decodes unknown ids without throwing', () => {
    expect(tok.decode([BOS, 5, -1, 9, 1.5, Number.MAX_SAFE_INTEGER, EOS])).toBe(
      `<bos>a<unk:-1><unk:9><unk:1.5><unk:${Number.MAX_SAFE_INTEGER}><eos>`,
    );
  });

  it('rejects duplicate and blank tokens', () => {
    expect(() => createTokenizer(['a', 'a'])).toThrow(/"a" appears twice/);
    expect(() => createTokenizer(['<eos>'])).toThrow(/"<eos>" appears twice/);
    expect(() => createTokenizer(['a b'])).toThrow(/"a b" must be non-empty without whitespace/);
  });

  const single = createTokenizer(['x', 'y', '+', '(']);
  test.prop([fc.array(fc.integer({ min: 0, max: single.vocabSize - 1 }), { maxLength: 30 })])(
    'decode then encode is the identity on in-vocabulary ids',
    (ids) => {
      expect(single.encode(single.decode(ids))).toEqual(ids);
    },
  );
});
