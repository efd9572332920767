// backend-check's rows for the negotiated capability topkLogprobs: the engine's top-k ids are its K
// most likely (ℓ descending, distinct, the sampled token's ℓ equal to ℓroll), the sampled token lies
// in the support, and the trainer's ℓ at the ids comes from the row that scores ℓ. Not run without it.

import type { SamplingParams } from '../core/backend-contract.js';
import type { CapabilityCheck } from './capability-checks.js';

/** The first problem of one position's top-k slots against its sampled token, or '' (see {@link checkTopk}). */
export function topkSlotProblem(
  ids: ArrayLike<number>,
  logp: ArrayLike<number>,
  y: number,
  logpRollout: number,
  V: number,
): { order: string; support: string } {
  const K = ids.length;
  let valid = 0;
  let order = '';
  const seen = new Set<number>();
  for (let j = 0; j < K; j++) {
    const v = ids[j]!;
    if (v < 0) {
      for (let i = j; i < K && order === ''; i++)
        if (ids[i]! >= 0) order = `slot ${i} holds id ${ids[i]} after an empty slot`;
      break;
    }
    valid++;
    if (v >= V || seen.has(v)) order ||= `id ${v} out of range or repeated`;
    seen.add(v);
    if (j > 0 && !(logp[j]! < logp[j - 1]! || (logp[j] === logp[j - 1] && v > ids[j - 1]!)))
      order ||= `slot ${j} (id ${v}, ℓ ${logp[j]}) not below slot ${j - 1} (id ${ids[j - 1]}, ℓ ${logp[j - 1]})`;
  }
  const at = Array.from(ids).indexOf(y);
  if (at >= 0 && logp[at] !== logpRollout) order ||= `ℓ at the sampled id ${y} is ${logp[at]}, ℓroll ${logpRollout}`;
  // y outside a full list: it must not be more likely than the last slot
  if (at < 0 && valid === K && logpRollout > logp[K - 1]!)
    order ||= `the sampled id ${y} (ℓroll ${logpRollout}) is more likely than slot ${K - 1} (ℓ ${logp[K - 1]})`;
  const support = at < 0 && valid < K ? `the sampled id ${y} is not in the support of ${valid} ids` : '';
  return { order, support };
}

/**
 * The `topkLogprobs` capability: declared ⇒ `generate` with K = min(V, 16) returns the same tokens
 * and ℓroll as without it and, per response position, the K most likely ids of the sampled
 * distribution (row `top-k ids are the engine's most likely`); the sampled token is among them when
 * the support is smaller than K (row `sampled token in the support`); `logprobs` with `topk` keeps
 * ℓ and scores ℓ at the sampled id as ℓ itself (row `trainer ℓ at the top-k ids`).
 */
export async function checkTopk(
  check: CapabilityCheck,
  generated: {
    readonly prompts: readonly (readonly number[])[];
    readonly seed: string;
    /** The sampler of the battery's first batch (absent when the backend refused one). */
    readonly sampling?: SamplingParams;
  },
): Promise<void> {
  const { backend, info, batch, add, attempt } = check;
  const { prompts, seed } = generated;
  const sampling = generated.sampling === undefined ? {} : { sampling: generated.sampling };
  if (info.capabilities.topkLogprobs !== true) {
    add('top-k capability', true, 'not declared (runs with policy.sampler.topkLogprobs > 0 are refused)', true);
    return;
  }
  const V = info.vocabulary.size;
  const K = Math.min(V, 16);
  const b = await attempt('top-k ids are the engine’s most likely', () =>
    backend.generate({ prompts, seed, topkLogprobs: K, ...sampling }),
  );
  if (b === undefined) return;
  const same =
    b.responses.every((t, i) => t === batch.responses[i]) &&
    b.logpRollout.every((x, i) => Object.is(x, batch.logpRollout[i]));
  let order = same ? '' : 'tokens or ℓroll differ from the same generation without topkLogprobs';
  let support = '';
  const topk = b.topk;
  if (topk === undefined || topk.K !== K) order ||= `no topk with K = ${K} in the batch`;
  else
    for (let k = 0; k < b.B * b.T && order === '' && support === ''; k++) {
      const ids = topk.ids.subarray(k * K, (k + 1) * K);
      if (b.mask[k] !== 1) {
        if (ids.some((v) => v >= 0)) order = `ids at masked position ${k}`;
        continue;
      }
      const p = topkSlotProblem(ids, topk.logp.subarray(k * K, (k + 1) * K), b.responses[k]!, b.logpRollout[k]!, V);
      if (p.order !== '') order = `position ${k}: ${p.order}`;
      if (p.support !== '') support = `position ${k}: ${p.support}`;
    }
  add(
    'top-k ids are the engine’s most likely',
    order === '',
    order || `K = ${K}: ordered by ℓ, ℓ(y) = ℓroll, tokens unchanged`,
  );
  add(
    'sampled token in the support',
    support === '' && topk !== undefined,
    support || 'every sampled id in its support',
  );
  if (topk === undefined) return;
  const rows = Array.from({ length: b.B }, (_, i) => i);
  const lp = await attempt('trainer ℓ at the top-k ids', async () => {
    const plain = await backend.logprobs({ batch: b, rows, policy: 'current' });
    const withTopk = await backend.logprobs({ batch: b, rows, policy: 'current', topk: true });
    return { plain, withTopk };
  });
  if (lp === undefined) return;
  let bad = lp.plain.logp.every((x, i) => Object.is(x, lp.withTopk.logp[i]))
    ? ''
    : 'ℓ differs from the pass without topk';
  const t = lp.withTopk.topkLogp;
  for (let k = 0; k < b.B * b.T && bad === '' && t !== undefined; k++) {
    if (b.mask[k] !== 1) continue;
    const j = Array.from(topk.ids.subarray(k * K, (k + 1) * K)).indexOf(b.responses[k]!);
    if (j >= 0 && t[k * K + j] !== lp.withTopk.logp[k])
      bad = `position ${k}: ℓ at the sampled id ${t[k * K + j]}, ℓ ${lp.withTopk.logp[k]}`;
  }
  add('trainer ℓ at the top-k ids', bad === '' && t !== undefined, bad || 'ℓ unchanged; ℓ at the sampled id is ℓ');
}
