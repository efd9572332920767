// The conformance rows of a masked-diffusion backend (policy "diffusion"): the record is well formed
// and agrees with the batch, the sampler keeps the schedule and block length of the run config, the
// trainer replays the record it is sent (its states, its seed) rather than anything kept from generate,
// each estimator's ℓ is a deterministic recomputation of its own views, the same seed gives the same
// record, and the temperature is recorded and honoured. Not the rows every backend gets (conformance.ts).

import type { RolloutBatch, ReplayRecord } from '../core/backend-contract.js';
import { replaysSupport, type RunConfig } from '../rl/grpo/config.js';
import { diffusionRecordSchema } from '../protocol/record-schemas.js';
import { recordValueToJson } from '../protocol/schema.js';
import type { CheckContext } from './request-checks.js';
import { checkTemperatureHonoured } from './temperature-checks.js';

/** The three estimators a diffusion record may name. */
const ESTIMATORS = ['trajectory', 'd1', 'elbo'] as const;

interface Sequence {
  readonly id: string;
  readonly prompt: readonly number[];
  readonly response: readonly number[];
  readonly commitStep: Int32Array | null;
}

interface Record_ {
  readonly kind: string;
  readonly sequences: readonly Sequence[];
  readonly estimator: string;
  readonly estimatorSeed: string;
  readonly temperature: number;
}

const same = (a: ArrayLike<number>, b: ArrayLike<number>): boolean =>
  a.length === b.length && Array.from(a).every((x, i) => Object.is(x, b[i]));

const withRecord = (batch: RolloutBatch, record: object): RolloutBatch => ({
  ...batch,
  record: record as unknown as ReplayRecord,
});

/** The first problem of a diffusion record against its batch and request, or null. */
function recordProblem(
  ctx: CheckContext,
  batch: RolloutBatch,
  seed: string,
  config: RunConfig | undefined,
): string | null {
  const json = recordValueToJson(batch.record);
  const parsed = diffusionRecordSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return `record.${issue.path.join('.')}: ${issue.message} (records.diffusion of the schema)`;
  }
  const r = batch.record as unknown as Record_;
  if (r.sequences.length !== batch.B) return `record.sequences holds ${r.sequences.length} sequences for B ${batch.B}`;
  if (r.estimatorSeed !== seed)
    return `record.estimatorSeed ${JSON.stringify(r.estimatorSeed)} is not the request's seed ${JSON.stringify(seed)}`;
  if (new Set(r.sequences.map((s) => s.id)).size !== r.sequences.length) return 'record.sequences ids are not distinct';
  const { eos, pad, mask: maskId } = ctx.info.vocabulary;
  for (let b = 0; b < batch.B; b++) {
    const s = r.sequences[b]!;
    if (!same(s.prompt, ctx.prompts[b] ?? batch.prompts[b]!))
      return `record.sequences.${b}.prompt is not the request's prompt`;
    if (s.response.length !== batch.T)
      return `record.sequences.${b}.response has ${s.response.length} slots for T ${batch.T}`;
    if (s.response.includes(maskId))
      return `record.sequences.${b}.response holds MASK (${maskId}): the policy never emits it`;
    let open = true;
    for (let j = 0; j < batch.T; j++) {
      const m = batch.mask[b * batch.T + j]!;
      const want = open ? 1 : 0;
      if (m !== want)
        return `mask[${b}, ${j}] = ${m}, the completion mask of record.sequences.${b}.response says ${want}`;
      const tok = batch.responses[b * batch.T + j]!;
      if (tok !== (open ? s.response[j]! : pad))
        return `responses[${b}, ${j}] = ${tok}, expected ${open ? `the record's ${s.response[j]}` : `PAD ${pad}`}`;
      if (s.response[j] === eos) open = false;
    }
  }
  return supportProblem(ctx, batch, config);
}

/**
 * With `--config` replaying a cut support (and the battery's sampler not refused): the record's `support`
 * is there, holds B·N·V entries of 0/1, and every committed slot's token is in its own kept set.
 */
function supportProblem(ctx: CheckContext, batch: RolloutBatch, config: RunConfig | undefined): string | null {
  if (config === undefined || !replaysSupport(config) || ctx.sampling.sampling === undefined) return null;
  const support = (batch.record as { support?: unknown }).support;
  const { topK, topP } = config.policy.sampler;
  if (!(support instanceof Uint8Array))
    return `record.support is absent, but the config replays the sampler's kept set (supportReplay, top-k ${topK}, top-p ${topP}): the trainer cannot renormalise over it`;
  const V = ctx.info.vocabulary.size;
  const N = batch.T;
  if (support.length !== batch.B * N * V)
    return `record.support has ${support.length} entries, B·N·V = ${batch.B}·${N}·${V} = ${batch.B * N * V}`;
  const r = batch.record as unknown as Record_;
  for (let b = 0; b < batch.B; b++)
    for (let j = 0; j < N; j++) {
      const at = (b * N + j) * V;
      for (let v = 0; v < V; v++)
        if (support[at + v] !== 0 && support[at + v] !== 1)
          return `record.support[${b}, ${j}, ${v}] = ${support[at + v]}, expected 0 or 1`;
      const tok = r.sequences[b]!.response[j]!;
      if (support[at + tok] !== 1)
        return `record.support[${b}, ${j}] does not keep the slot's committed token ${tok}: it was drawn from another set`;
    }
  return null;
}

/** The first slot that breaks the schedule of `config` in a sequence, or null. */
function scheduleProblem(s: Sequence, b: number, N: number, L: number, S: number): string | null {
  const blocks = N / L;
  const perBlock = S / blocks;
  const k = Array.from({ length: perBlock }, (_, i) => Math.floor(L / perBlock) + (i < L % perBlock ? 1 : 0));
  if (s.commitStep === null) return `record.sequences.${b}.commitStep is null for a sampled sequence`;
  const count = new Array<number>(S).fill(0);
  for (let j = 0; j < N; j++) {
    const step = s.commitStep[j]!;
    if (!(step >= 0 && step < S)) return `record.sequences.${b}.commitStep[${j}] = ${step}, outside 0 … ${S - 1}`;
    if (Math.floor(step / perBlock) !== Math.floor(j / L))
      return `record.sequences.${b}: slot ${j} of block ${Math.floor(j / L)} committed at step ${step}, in block ${Math.floor(step / perBlock)}'s steps`;
    count[step]!++;
  }
  for (let step = 0; step < S; step++)
    if (count[step] !== k[step % perBlock])
      return `record.sequences.${b}: step ${step} committed ${count[step]} slots, the schedule says ${k[step % perBlock]}`;
  return null;
}

/**
 * The diffusion rows of `backend-check` (docs/adapter.md §4): run when `info.policy` is "diffusion";
 * the schedule row needs the run config (`--config`) for N, the block length and S.
 */
export async function checkDiffusion(ctx: CheckContext, config: RunConfig | undefined): Promise<void> {
  const { backend, batch, prompts, seed, add, attempt } = ctx;
  const problem = recordProblem(ctx, batch, seed, config);
  add(
    'diffusion record well-formed',
    problem === null,
    problem ??
      `records.diffusion schema, ${batch.B} sequences with the request's prompts and seed, responses and mask from the record`,
  );
  if (problem !== null) return;
  const record = batch.record as unknown as Record_;
  const rows = Array.from({ length: batch.B }, (_, i) => i);

  if (config === undefined || config.policy.kind !== 'diffusion')
    add(
      'diffusion sampler schedule and block length',
      true,
      'needs --config (N, block length, steps): not exercised',
      true,
    );
  else {
    const d = config.policy.diffusion;
    let found: string | null = null;
    for (let b = 0; b < batch.B && found === null; b++)
      found = scheduleProblem(record.sequences[b]!, b, d.generationLength, d.blockLength, d.steps);
    add(
      'diffusion sampler schedule and block length',
      found === null,
      found ??
        `every step commits its k[i] slots, only in its block (N ${d.generationLength}, blocks of ${d.blockLength}, ${d.steps} steps)`,
    );
  }

  const again = await attempt('same seed ⇒ same diffusion record', () =>
    backend.generate({ prompts, seed, ...ctx.sampling }),
  );
  if (again !== undefined) {
    const equal = JSON.stringify(recordValueToJson(again.record)) === JSON.stringify(recordValueToJson(batch.record));
    add(
      'same seed ⇒ same diffusion record',
      equal,
      equal
        ? 'sequences, commit steps, estimator seed and τ identical'
        : 'a second generate with the same seed gives another record',
    );
  }

  // The trainer replays the record it is sent: after another generate, the first batch scores as before;
  // and a record whose states (trajectory) or seed (d1, elbo) differ scores differently.
  await attempt('diffusion record replayed', async () => {
    await backend.generate({ prompts, seed: `${seed}/other`, ...ctx.sampling });
    const after = await backend.logprobs({ batch, rows, policy: 'current' });
    if (!same(after.logp, ctx.logp)) {
      add(
        'diffusion record replayed',
        false,
        'ℓ of the first batch changed after another generate: the trainer scores what it kept, not the record',
      );
      return;
    }
    let edited: object | null = null;
    let what = '';
    if (record.estimator === 'trajectory') {
      const seqs = record.sequences.map((s) => {
        if (s.commitStep === null) return s;
        const steps = Int32Array.from(s.commitStep);
        const j = steps.findIndex((x, i) => i > 0 && x !== steps[0]);
        if (j < 0) return s;
        [steps[0], steps[j]] = [steps[j]!, steps[0]!];
        return { ...s, commitStep: steps };
      });
      if (seqs.some((s, i) => s !== record.sequences[i])) {
        edited = { ...record, sequences: seqs };
        what = 'commit steps of two slots swapped';
      }
    } else {
      edited = { ...record, estimatorSeed: `${record.estimatorSeed}/edited` };
      what = 'another estimatorSeed';
    }
    if (edited === null) {
      add(
        'diffusion record replayed',
        true,
        'no two slots committed at different steps: the state edit is not exercised',
        true,
      );
      return;
    }
    const moved = await backend.logprobs({ batch: withRecord(batch, edited), rows, policy: 'current' });
    const changed = !same(moved.logp, ctx.logp);
    add(
      'diffusion record replayed',
      changed,
      changed
        ? `ℓ unchanged by another generate, changed by a record with ${what}`
        : `a record with ${what} scores the same ℓ: the trainer does not replay the record's ${record.estimator === 'trajectory' ? 'states' : 'views'}`,
    );
  });

  // Each estimator named by the record is recomputed deterministically from its own views.
  await attempt('each estimator recomputes its own ℓ', async () => {
    const byEstimator: Float64Array[] = [];
    for (const estimator of ESTIMATORS) {
      const rec = { ...record, estimator };
      const a = await backend.logprobs({ batch: withRecord(batch, rec), rows, policy: 'current' });
      const b = await backend.logprobs({ batch: withRecord(batch, rec), rows, policy: 'current' });
      if (!same(a.logp, b.logp)) {
        add('each estimator recomputes its own ℓ', false, `${estimator}: two logprobs calls on the same record differ`);
        return;
      }
      if (estimator === record.estimator && !same(a.logp, ctx.logp)) {
        add(
          'each estimator recomputes its own ℓ',
          false,
          `${estimator}: the record's own estimator scores other ℓ than before`,
        );
        return;
      }
      byEstimator.push(a.logp);
    }
    const distinct = !same(byEstimator[0]!, byEstimator[1]!) && !same(byEstimator[1]!, byEstimator[2]!);
    add(
      'each estimator recomputes its own ℓ',
      distinct,
      distinct
        ? 'trajectory, d1 and elbo each bit-identical across calls, and different from each other'
        : "two estimators give identical ℓ: the backend scores its own estimator, not the record's",
    );
  });

  // The temperature: recorded as the request's τ (or the configured one, for a backend that refuses
  // another sampler naming `sampling`), and honoured by the trainer: ℓ at another record τ differs.
  await checkTemperatureHonoured(ctx, {
    row: 'diffusion temperature recorded and honoured',
    sampler: config?.policy.sampler,
    withoutTemperature: 'fail',
  });
}
