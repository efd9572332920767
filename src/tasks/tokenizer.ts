// Character-level tokenizers of the toy tasks, with the special tokens every task shares at fixed ids.
// Not a subword tokenizer and not task logic: a task only chooses its list of ordinary tokens.

/** Padding token id; prompts are left-padded with it. */
export const PAD = 0;
/** Beginning-of-sequence token id; every prompt's first non-PAD token. */
export const BOS = 1;
/** End-of-sequence token id; a response is read up to its first EOS. */
export const EOS = 2;
/** Separator token id; the last token of every prompt (the response starts after it). */
export const SEP = 3;
/** Mask token id of the masked-diffusion policy; never in a prompt or a gold response. */
export const MASK = 4;

/** Printed forms of the special tokens, indexed by their ids (`PAD` = 0 … `MASK` = 4). */
export const specialTokenStrings = ['<pad>', '<bos>', '<eos>', '<sep>', '<mask>'] as const;

/** Maps text to token ids and back. Token ids are indices into {@link Tokenizer.vocab}. */
export interface Tokenizer {
  /** Printed form of every token, indexed by id; ids 0–4 are the special tokens. */
  readonly vocab: readonly string[];
  /** Number of tokens, `vocab.length`. */
  readonly vocabSize: number;
  /**
   * Token ids of `text`, read greedily (longest token first); whitespace is skipped.
   * Throws an error naming the character and its position when no token matches.
   */
  encode(text: string): number[];
  /**
   * The printed forms of `ids`, concatenated. Never throws: an id outside the vocabulary
   * (negative, too large, fractional) prints as `<unk:ID>`.
   */
  decode(ids: readonly number[]): string;
}

/**
 * A tokenizer whose vocabulary is the five special tokens followed by `tokens`.
 *
 * @example
 * ```ts
 * const tok = createTokenizer(['a', 'b']);
 * tok.encode('<bos>ab<sep>'); // [1, 5, 6, 3]
 * tok.decode([6, 5, 2]);      // 'ba<eos>'
 * ```
 */
export function createTokenizer(tokens: readonly string[]): Tokenizer {
  const vocab: readonly string[] = Object.freeze([...specialTokenStrings, ...tokens]);
  const ids = new Map<string, number>();
  vocab.forEach((token, id) => {
    if (token.length === 0 || /\s/.test(token)) {
      throw new Error(`tokenizer: token ${JSON.stringify(token)} must be non-empty without whitespace`);
    }
    if (ids.has(token)) throw new Error(`tokenizer: token ${JSON.stringify(token)} appears twice`);
    ids.set(token, id);
  });
  const longest = Math.max(...vocab.map((t) => t.length));

  const encode = (text: string): number[] => {
    const out: number[] = [];
    let i = 0;
    outer: while (i < text.length) {
      if (/\s/.test(text[i] as string)) {
        i++;
        continue;
      }
      for (let len = Math.min(longest, text.length - i); len >= 1; len--) {
        const id = ids.get(text.slice(i, i + len));
        if (id !== undefined) {
          out.push(id);
          i += len;
          continue outer;
        }
      }
      throw new Error(
        `tokenizer.encode: no token matches ${JSON.stringify(text[i])} at position ${i} of ${JSON.stringify(text)}`,
      );
    }
    return out;
  };

  const decode = (input: readonly number[]): string => input.map((id) => vocab[id] ?? `<unk:${String(id)}>`).join('');

  return Object.freeze({ vocab, vocabSize: vocab.length, encode, decode });
}
