// The battery's temperature rules: whether a sampler's ℓroll is the quantity the trainer's `logprobs`
// returns (so that the ℓroll = ℓ comparisons apply), and the row that a backend records the temperature
// it sampled at and scores at the record's temperature, for either policy. Not the samplers themselves
// and not the semantics table of the plans (src/policies/semantics.ts).

import type { ReplayRecord, RolloutBatch, SamplingParams } from '../core/backend-contract.js';
import { BackendCallError } from '../protocol/errors.js';
import type { RunConfig } from '../rl/grpo/config.js';
import type { CheckContext } from './request-checks.js';

/**
 * Why `generate`'s ℓroll under `sampler` is not the quantity `logprobs` returns for the same tokens on the
 * same weights, or null when it is. The trainer scores log softmax(z/τ)[y] at the record's τ (docs/adapter.md,
 * "Log-probs"), τ entering before the log-softmax unless the plan's trainer side says `temperatureAt:
 * "after-log-softmax"`, over the whole vocabulary or, when the record carries the sampler's kept set
 * (`supportReplay`), renormalised over it. A raw ℓroll is log softmax(z)[y] over the whole vocabulary, the
 * τ = 1 value, so it is the trainer's quantity only at τ = 1 with nothing replayed; a processed ℓroll is
 * log softmax(z/τ)[y] renormalised over the top-k/top-p kept set, so it is the trainer's quantity whenever
 * nothing is cut or the cut is replayed (any τ). The same rule as `semanticsDifferences` of
 * src/policies/semantics.ts, for a plan the battery knows only as JSON.
 *
 * @param trainerTemperatureAt - `info.plan.trainer.temperatureAt` as the backend declared it
 * @param supportReplayed - the run config asks for `supportReplay` and the batch's record carries a `support`
 */
export function samplerMismatch(
  sampler: SamplingParams,
  trainerTemperatureAt?: unknown,
  supportReplayed = false,
): string | null {
  const { temperature: tau, topK, topP } = sampler;
  const truncated = topK > 0 || topP < 1;
  if (sampler.logprob === 'raw') {
    if (truncated && supportReplayed)
      return `a raw ℓroll is over the whole vocabulary; the trainer renormalises over the replayed kept set (top-k ${topK}, top-p ${topP})`;
    return tau === 1 ? null : `a raw ℓroll is log softmax(z) (τ 1); the trainer scores at the record's τ ${tau}`;
  }
  if (truncated && !supportReplayed)
    return `a processed ℓroll is renormalised over the kept set (top-k ${topK}, top-p ${topP}); without supportReplay the trainer scores the whole vocabulary`;
  if (tau !== 1 && trainerTemperatureAt === 'after-log-softmax')
    return `the plan's trainer side divides by τ ${tau} after the log-softmax, the sampler before it`;
  return null;
}

/**
 * Whether a batch's record replays the sampler's kept set: the run config asks for `supportReplay` and the
 * record carries a `support` (the diffusion record's field, docs/adapter.md; an AR backend's own record
 * keeps it under the same name where it keeps it at all).
 */
export function supportReplayed(config: Pick<RunConfig, 'policy'> | undefined, batch: RolloutBatch): boolean {
  const support = (batch.record as { support?: unknown }).support;
  return config?.policy.sampler.supportReplay === true && support !== undefined && support !== null;
}

const same = (a: ArrayLike<number>, b: ArrayLike<number>): boolean =>
  a.length === b.length && Array.from(a).every((x, i) => Object.is(x, b[i]));

/** What {@link checkTemperatureHonoured} checks and writes. */
export interface TemperatureCheck {
  /** The row's name. */
  readonly row: string;
  /** The run config's sampler, when the battery has a config. */
  readonly sampler: RunConfig['policy']['sampler'] | undefined;
  /**
   * A record without a numeric `temperature`: `fail` where the record's schema requires one (diffusion),
   * `info` where the record's layout is the backend's own (an AR backend may keep τ elsewhere).
   */
  readonly withoutTemperature: 'fail' | 'info';
}

/**
 * The row `check.row`: a generate at τ 0.5 (the configured top-k and top-p, ℓroll processed) records τ 0.5
 * in `record.temperature` — for a backend that refuses another sampler naming `sampling`, the battery's
 * batch is used and its τ checked against the configured one (with a config only) — and `logprobs` of
 * that batch changes when only `record.temperature` changes (to 1, or to 0.5 from 1): the trainer scores
 * at the record's τ, not at 1 or at its own.
 */
export async function checkTemperatureHonoured(
  c: Pick<CheckContext, 'backend' | 'prompts' | 'seed' | 'batch' | 'add' | 'attempt'>,
  check: TemperatureCheck,
): Promise<void> {
  const { row: name, sampler } = check;
  let hot: RolloutBatch = c.batch;
  let tau: number | undefined = sampler?.temperature;
  let how = 'the configured sampler';
  try {
    hot = await c.backend.generate({
      prompts: c.prompts,
      seed: `${c.seed}/tau`,
      sampling: { temperature: 0.5, topK: sampler?.topK ?? 0, topP: sampler?.topP ?? 1, logprob: 'processed' },
    });
    tau = 0.5;
    how = 'a generate at τ 0.5';
  } catch (error) {
    const refused =
      error instanceof BackendCallError &&
      error.kind === 'remote' &&
      ((error.field ?? '').startsWith('sampling') || /\bsampling\b[.:]/.test(error.message));
    if (!refused) return c.add(name, false, error instanceof Error ? error.message : String(error));
    how = 'the configured sampler (another is refused naming sampling)';
  }
  const recorded = (hot.record as { temperature?: unknown }).temperature;
  if (typeof recorded !== 'number') {
    const info = check.withoutTemperature === 'info';
    return c.add(
      name,
      info,
      `record (kind ${JSON.stringify(hot.record.kind)}) has no numeric temperature${info ? ': the battery cannot move the batch’s τ, not checked' : ''}`,
      info,
    );
  }
  if (tau !== undefined && recorded !== tau)
    return c.add(name, false, `record.temperature ${recorded}, expected τ ${tau} (${how})`);
  const rows = Array.from({ length: hot.B }, (_, i) => i);
  await c.attempt(name, async () => {
    const other = recorded === 1 ? 0.5 : 1;
    const at = await c.backend.logprobs({ batch: hot, rows, policy: 'current' });
    const record = { ...hot.record, temperature: other } as ReplayRecord;
    const moved = await c.backend.logprobs({ batch: { ...hot, record }, rows, policy: 'current' });
    const honoured = !same(at.logp, moved.logp);
    c.add(
      name,
      honoured,
      honoured
        ? `record.temperature ${recorded} (${how}${tau === undefined ? '; τ not checked without --config' : ''}); ℓ at τ ${other} differs`
        : `ℓ is the same at τ ${recorded} and τ ${other}: the trainer ignores record.temperature`,
    );
  });
}
