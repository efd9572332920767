// The conformance checks that exercise the request fields a run sends (rows, sampling, greedy,
// maxNewTokens, side) and that tell an engine's log-probs from the trainer's, each its own function,
// and the table of every named check of the battery with the bug classes it catches: the source of
// docs/adapter.md's bug-class table and of the mutation test (test/testing/mutants.test.ts).

import type { BackendInfo, RolloutBatch, SamplingParams } from '../core/backend-contract.js';
import { BackendCallError } from '../protocol/errors.js';
import type { RemoteBackend } from '../protocol/remote.js';
import { takesField } from '../protocol/schema.js';

/** Adds a row to the battery's table (`informational`: reported, never a violation). */
export type AddRow = (check: string, ok: boolean, detail: string, informational?: boolean) => void;
/** Runs one call of a check; a thrown error becomes a FAIL row of that check and `undefined`. */
export type Attempt = <T>(check: string, fn: () => Promise<T>) => Promise<T | undefined>;

/** What the request checks share: the connected backend, the battery's first batch and its ℓ. */
export interface CheckContext {
  readonly backend: RemoteBackend;
  readonly info: BackendInfo;
  readonly prompts: readonly (readonly number[])[];
  readonly seed: string;
  /** The battery's first rollout batch (rollout side, default sampling). */
  readonly batch: RolloutBatch;
  /** Trainer ℓ of every row of `batch` (current policy). */
  readonly logp: Float64Array;
  readonly tolerance: number;
  /** Whether the plan's two sides compute the same numbers (same GEMM settings) and ℓroll is comparable with ℓ. */
  readonly identicalSides: boolean;
  /** Whether the sampler's ℓroll is the quantity `logprobs` returns (`samplerMismatch` of temperature-checks.ts is null: raw at τ 1 with no support replayed, or processed without top-k/top-p or with the kept set replayed). */
  readonly likeForLike: boolean;
  /**
   * The `sampling` field of the battery's generates that test no sampler field (the run config's sampler,
   * else the untouched one); empty when the backend refused it naming `sampling`.
   */
  readonly sampling: { readonly sampling?: SamplingParams };
  /**
   * Appended to a failed ℓroll-vs-ℓ comparison: that the backend refused {@link CheckContext.sampling}, or that
   * the record replays a cut support ('' otherwise).
   */
  readonly comparisonNote: string;
  readonly add: AddRow;
  readonly attempt: Attempt;
}

/** A bug a backend can have, as the battery names it. */
export type BugClass =
  | 'impossible response'
  | 'rows ignored'
  | 'temperature ignored'
  | 'temperature recorded as 1'
  | 'support replay ignored'
  | 'random greedy'
  | 'side ignored'
  | 'maxNewTokens ignored'
  | 'sync keeps old weights'
  | 'off-by-one log-probs'
  | 'ℓroll from the trainer'
  | 'gradient sign'
  | 'unfrozen reference'
  | 'version not advanced'
  | 'handle reuse'
  | 'load without optimizer'
  | 'wrong special tokens'
  | 'seed ignored'
  | 'entropy declared, not returned'
  | 'protocol violation'
  | 'plan or vocabulary not the config’s'
  | 'no gradient'
  | 'handle kept across a step'
  | 'engine samples unsynced weights'
  | 'step does not move the policy'
  | 'save/load loses state'
  | 'probSqSum wrong'
  | 'top-k not the most likely'
  | 'sampled token outside the top-k support'
  | 'MoE routing misreported'
  | 'diffusion record malformed'
  | 'diffusion schedule broken'
  | 'diffusion record not replayed'
  | 'estimator ignored';

/** One named check of the battery: the row name it writes (`tolerance` standing for the figure) and the bug classes it catches. */
export interface NamedCheck {
  readonly check: string;
  readonly catches: readonly BugClass[];
  /** For a bug it can see only under some plans: which. */
  readonly when?: Partial<Record<BugClass, string>>;
}

/** Whether a row of the battery is the named check (its `tolerance` stands for any figure). */
export function isCheck(row: string, check: string): boolean {
  return row === check || row.replace(/≤ [^)]+\)$/, '≤ tolerance)') === check;
}

/**
 * Every check of `runConformance` (and `--kill-resume`) that can fail, with what it catches: the one
 * list the docs table and the mutation tests are made from (test/testing/named-checks.test.ts keeps it
 * equal to the rows the battery writes). A bug class listed in {@link blackBoxLimits} has no black-box check.
 */
export const namedChecks: readonly NamedCheck[] = Object.freeze([
  { check: 'protocol version', catches: ['protocol violation'] },
  { check: 'unknown version refused', catches: ['protocol violation'] },
  { check: 'info answers the same twice', catches: ['protocol violation'] },
  { check: 'params revision', catches: ['protocol violation'] },
  {
    check: 'plan and vocabulary against the run config',
    catches: ['plan or vocabulary not the config’s'],
    when: { 'plan or vocabulary not the config’s': 'with --config' },
  },
  { check: 'vocabulary', catches: ['protocol violation', 'wrong special tokens'] },
  { check: 'sync', catches: ['protocol violation'] },
  { check: 'generate shapes and masks', catches: ['impossible response', 'wrong special tokens'] },
  { check: 'same seed ⇒ same tokens', catches: ['seed ignored'] },
  { check: 'other seed ⇒ other tokens', catches: ['protocol violation'] },
  { check: 'entropy capability', catches: ['entropy declared, not returned'] },
  { check: 'logprobs shapes', catches: ['impossible response'] },
  {
    check: 'ℓroll vs ℓ (same sides, max|δ| ≤ tolerance)',
    catches: ['off-by-one log-probs', 'sync keeps old weights', 'support replay ignored'],
    when: {
      'off-by-one log-probs': 'plan sides identical',
      'sync keeps old weights': 'plan sides identical',
      'support replay ignored': 'plan sides identical, a truncating sampler with supportReplay',
    },
  },
  { check: 'logprobs honours rows', catches: ['rows ignored'] },
  {
    check: 'ℓroll is the engine’s',
    catches: ['ℓroll from the trainer'],
    when: { 'ℓroll from the trainer': 'plan sides differ' },
  },
  {
    check: 'trainer-side generate scored by the trainer',
    catches: ['off-by-one log-probs', 'side ignored', 'support replay ignored'],
    when: { 'side ignored': 'plan sides differ', 'support replay ignored': 'a truncating sampler with supportReplay' },
  },
  { check: 'greedy is seed-independent', catches: ['random greedy'] },
  { check: 'maxNewTokens honoured', catches: ['maxNewTokens ignored'] },
  { check: 'temperature → 0 is greedy', catches: ['temperature ignored', 'temperature recorded as 1'] },
  { check: 'processed ℓroll at τ ≠ 1 is not the raw one', catches: ['temperature recorded as 1'] },
  {
    check: 'AR temperature recorded and honoured',
    catches: ['temperature ignored'],
    when: { 'temperature ignored': 'policy ar, a record that carries its temperature' },
  },
  {
    check: 'MoE: own routing returned',
    catches: ['MoE routing misreported'],
    when: { 'MoE routing misreported': 'an MoE record' },
  },
  {
    check: 'MoE: flip rate per layer',
    catches: ['MoE routing misreported'],
    when: { 'MoE routing misreported': 'an MoE record' },
  },
  {
    check: 'MoE: replaying its own routing (R2) keeps ℓ',
    catches: ['MoE routing misreported'],
    when: { 'MoE routing misreported': 'an MoE record' },
  },
  {
    check: 'MoE: rollout routing replay (R3)',
    catches: ['MoE routing misreported'],
    when: { 'MoE routing misreported': 'an MoE record' },
  },
  {
    check: 'diffusion record well-formed',
    catches: ['diffusion record malformed', 'impossible response'],
    when: { 'diffusion record malformed': 'policy diffusion', 'impossible response': 'policy diffusion' },
  },
  {
    check: 'diffusion sampler schedule and block length',
    catches: ['diffusion schedule broken'],
    when: { 'diffusion schedule broken': 'policy diffusion, with --config' },
  },
  {
    check: 'same seed ⇒ same diffusion record',
    catches: ['seed ignored'],
    when: { 'seed ignored': 'policy diffusion' },
  },
  {
    check: 'diffusion record replayed',
    catches: ['diffusion record not replayed'],
    when: { 'diffusion record not replayed': 'policy diffusion' },
  },
  {
    check: 'each estimator recomputes its own ℓ',
    catches: ['estimator ignored'],
    when: { 'estimator ignored': 'policy diffusion' },
  },
  {
    check: 'diffusion temperature recorded and honoured',
    catches: ['temperature recorded as 1', 'temperature ignored'],
    when: { 'temperature recorded as 1': 'policy diffusion', 'temperature ignored': 'policy diffusion' },
  },
  {
    check: 'probSqSum capability',
    catches: ['probSqSum wrong'],
    when: { 'probSqSum wrong': 'capabilities.probSqSum' },
  },
  {
    check: 'top-k ids are the engine’s most likely',
    catches: ['top-k not the most likely'],
    when: { 'top-k not the most likely': 'capabilities.topkLogprobs' },
  },
  {
    check: 'sampled token in the support',
    catches: ['sampled token outside the top-k support'],
    when: { 'sampled token outside the top-k support': 'capabilities.topkLogprobs' },
  },
  { check: 'trainer ℓ at the top-k ids', catches: ['protocol violation'] },
  { check: 'setReference', catches: ['protocol violation'] },
  { check: 'spent handle refused', catches: ['handle reuse'] },
  { check: 'backward + step', catches: ['no gradient'] },
  { check: 'weight version advances after step', catches: ['version not advanced'] },
  { check: 'step retires unspent handles', catches: ['handle kept across a step'] },
  { check: 'generate before sync: old version', catches: ['engine samples unsynced weights'] },
  { check: 'sync serves the new version', catches: ['version not advanced', 'protocol violation'] },
  { check: 'sync serves the new weights', catches: ['sync keeps old weights'] },
  { check: 'current policy moved', catches: ['step does not move the policy'] },
  { check: 'gradient direction (finite difference)', catches: ['gradient sign'] },
  { check: 'reference frozen', catches: ['unfrozen reference'] },
  { check: 'save/load restores weights, reference and version', catches: ['save/load loses state'] },
  { check: 'save → step → load → step (optimizer state)', catches: ['load without optimizer'] },
  { check: 'bad request: generate {prompts: "x"}', catches: ['protocol violation'] },
  { check: 'bad request: step {maxGradNorm: -1}', catches: ['protocol violation'] },
  { check: 'bad request: sync {bogus: 1}', catches: ['protocol violation'] },
  { check: 'bad request: unknown method', catches: ['protocol violation'] },
  { check: 'still serving after bad requests', catches: ['protocol violation'] },
  {
    check: 'kill → resume: files byte-identical',
    catches: ['save/load loses state'],
    when: { 'save/load loses state': 'with --kill-resume' },
  },
]);

/** Bug classes no black-box check can see, why, and what a backend must declare so that one could. */
export const blackBoxLimits: readonly { readonly bug: string; readonly why: string }[] = Object.freeze([
  {
    bug: 'optimizer state dropped between steps (moments reset every step)',
    why: 'two steps on the same gradient give the same AdamW update with fresh or kept moments, and a save/load round trip restores the same fresh state; a backend would have to return its optimizer state (or a digest of it) for this to be checked',
  },
  {
    bug: 'a stale KV cache that sync does not clear',
    why: 'seen only as a batch that does not change after a step; the check "sync serves the new weights" catches it when the cached prefix affects the sampled tokens, not a cache kept for prompts the battery does not repeat',
  },
]);

/** Whether a call was refused with a JSON-RPC error naming `field` (in `data.field`, or as `method.field:` in its message). */
export const refusedFor = (e: unknown, field: string): boolean =>
  e instanceof BackendCallError &&
  e.kind === 'remote' &&
  (e.field === field || (e.field ?? '').startsWith(`${field}.`) || new RegExp(`\\b${field}\\b[.:]`).test(e.message));

/** The masked positions where two ℓ arrays (same layout) differ by more than `tol`, and the largest |Δ|. */
function compare(
  batch: RolloutBatch,
  a: Float64Array,
  b: Float64Array,
  tol: number,
): { bad: number; max: number; first: string } {
  let bad = 0;
  let max = 0;
  let first = '';
  for (let i = 0; i < a.length; i++) {
    if (batch.mask[i] !== 1) continue;
    const d = Math.abs(a[i]! - b[i]!);
    if (d > max || Number.isNaN(d)) max = Number.isNaN(d) ? Infinity : d;
    if (!(d <= tol)) {
      bad += 1;
      if (first === '') first = `row ${Math.floor(i / batch.T)}, position ${i % batch.T}: ${a[i]} vs ${b[i]}`;
    }
  }
  return { bad, max, first };
}

/** `logprobs` of a subset of rows, out of order, equals those rows of the all-rows pass bit for bit. */
export async function checkLogprobsRows(c: CheckContext): Promise<void> {
  const { batch } = c;
  const B = batch.B;
  if (B < 3) return c.add('logprobs honours rows', true, `batch of ${B}: no subset to permute`, true);
  const pick = [B - 1, 0, Math.floor(B / 2)];
  const r = await c.attempt('logprobs honours rows', () =>
    c.backend.logprobs({ batch, rows: pick, policy: 'current' }),
  );
  if (r === undefined) return;
  for (let k = 0; k < pick.length; k++) {
    for (let t = 0; t < batch.T; t++) {
      const got = r.logp[k * batch.T + t]!;
      const want = c.logp[pick[k]! * batch.T + t]!;
      if (!Object.is(got, want)) {
        return c.add(
          'logprobs honours rows',
          false,
          `rows [${pick.join(', ')}]: result row ${k} position ${t} is ${got}, row ${pick[k]} of the all-rows pass is ${want}: the backend does not score the rows it is asked for, in their order`,
        );
      }
    }
  }
  c.add(
    'logprobs honours rows',
    true,
    `rows [${pick.join(', ')}] equal those rows of the all-rows pass, in that order`,
  );
}

/** With plan sides that differ, ℓroll must not equal the trainer's ℓ bit for bit (it would be the trainer's, not the engine's). */
export async function checkRolloutIsEngine(c: CheckContext): Promise<void> {
  if (!c.likeForLike)
    return c.add(
      'ℓroll is the engine’s',
      true,
      'the sampler’s ℓroll is not the trainer’s quantity (row “ℓroll vs ℓ (not the same quantity)”)',
      true,
    );
  if (c.identicalSides) return c.add('ℓroll is the engine’s', true, 'plan sides identical: ℓroll may equal ℓ', true);
  let differ = 0;
  let tokens = 0;
  for (let i = 0; i < c.logp.length; i++) {
    if (c.batch.mask[i] !== 1) continue;
    tokens += 1;
    if (!Object.is(c.logp[i], c.batch.logpRollout[i])) differ += 1;
  }
  c.add(
    'ℓroll is the engine’s',
    differ > 0,
    differ > 0
      ? `${differ} of ${tokens} tokens differ from the trainer's ℓ, as two different plan sides do`
      : `the plan's sides differ (${c.info.plan.name}) yet ℓroll equals the trainer's ℓ at all ${tokens} tokens: generate reports log-probs computed with the trainer's weights or side, not the rollout engine's`,
  );
}

/** `generate {side: 'trainer'}`: its ℓroll is the trainer's ℓ of the same tokens (any plan). */
export async function checkTrainerSideScored(c: CheckContext): Promise<void> {
  const name = 'trainer-side generate scored by the trainer';
  if (!c.likeForLike)
    return c.add(
      name,
      true,
      'the sampler’s ℓroll is not the trainer’s quantity (row “ℓroll vs ℓ (not the same quantity)”)',
      true,
    );
  const g = await c.backend.generate({ prompts: c.prompts, seed: c.seed, side: 'trainer', ...c.sampling }).then(
    (b) => b,
    (e: unknown) => e,
  );
  if (!(g instanceof Object) || g instanceof Error) {
    if (refusedFor(g, 'side'))
      return c.add(name, true, 'side trainer refused (allowed: the run never asks for it)', true);
    return c.add(name, false, g instanceof Error ? g.message : String(g));
  }
  const batch = g as RolloutBatch;
  const all = Array.from({ length: batch.B }, (_, b) => b);
  const lp = await c.attempt(name, () => c.backend.logprobs({ batch, rows: all, policy: 'current' }));
  if (lp === undefined) return;
  const d = compare(batch, batch.logpRollout, lp.logp, c.tolerance);
  c.add(
    name,
    d.bad === 0,
    d.bad === 0
      ? `ℓroll of the trainer side equals logprobs of its tokens (max|δ| ${d.max.toExponential(3)})`
      : `${d.bad} tokens differ by more than ${c.tolerance} (max|δ| ${d.max.toExponential(3)}; first at ${d.first}): ${c.identicalSides ? 'logprobs scores other positions than generate (an off-by-one?)' : 'generate ignored side (sampled with the rollout engine), or logprobs scores other positions than generate'}${c.comparisonNote}`,
  );
}

/** The sampler fields of a request: greedy, maxNewTokens, temperature (τ → 0 and processed vs raw). */
export async function checkGenerateRequestFields(c: CheckContext): Promise<void> {
  const { backend, prompts, seed, batch } = c;
  const sameTokens = (a: RolloutBatch, b: RolloutBatch): string => {
    if (a.T !== b.T) return `T ${a.T} vs ${b.T}`;
    for (let i = 0; i < a.responses.length; i++) {
      if (a.mask[i] !== b.mask[i] || (a.mask[i] === 1 && a.responses[i] !== b.responses[i]))
        return `row ${Math.floor(i / a.T)}, position ${i % a.T}`;
    }
    return '';
  };

  // greedy: the same tokens whatever the seed
  const g1 = await c.attempt('greedy is seed-independent', () => backend.generate({ prompts, seed, greedy: true }));
  const g2 =
    g1 === undefined
      ? undefined
      : await c.attempt('greedy is seed-independent', () =>
          backend.generate({ prompts, seed: `${seed}/other`, greedy: true }),
        );
  if (g1 !== undefined && g2 !== undefined) {
    const diff = sameTokens(g1, g2);
    c.add(
      'greedy is seed-independent',
      diff === '',
      diff === ''
        ? 'two seeds give the same greedy tokens'
        : `greedy decoding differs between two seeds at ${diff}: greedy is ignored or not argmax`,
    );
  }

  // maxNewTokens: a shorter limit is honoured, or refused naming the field (a backend of a revision before
  // the field never gets it: docs/adapter.md §12)
  const limit = 2;
  const short = !takesField(backend.paramsRevision, 'generate', 'maxNewTokens')
    ? null
    : await backend.generate({ prompts, seed, maxNewTokens: limit }).then(
        (b) => b,
        (e: unknown) => e,
      );
  if (short === null) {
    c.add(
      'maxNewTokens honoured',
      true,
      `not sent: the backend takes the params of revision ${backend.paramsRevision}, before maxNewTokens`,
      true,
    );
  } else if (short instanceof Error) {
    if (refusedFor(short, 'maxNewTokens'))
      c.add(
        'maxNewTokens honoured',
        true,
        `maxNewTokens ${limit} refused naming the field (allowed: a backend may serve its configured length only)`,
        true,
      );
    else c.add('maxNewTokens honoured', false, short.message);
  } else {
    const s = short as RolloutBatch;
    let longest = 0;
    for (let b = 0; b < s.B; b++) {
      let n = 0;
      for (let t = 0; t < s.T; t++) n += s.mask[b * s.T + t]!;
      longest = Math.max(longest, n);
    }
    c.add(
      'maxNewTokens honoured',
      s.T <= limit && longest <= limit,
      s.T <= limit && longest <= limit
        ? `maxNewTokens ${limit}: T ${s.T}, longest row ${longest}`
        : `maxNewTokens ${limit} asked, got T ${s.T} and a row of ${longest} tokens: the limit is ignored`,
    );
  }

  // temperature: near 0 the sample is the greedy one; at 0.5 the processed ℓroll is not the raw one
  const sampling = (temperature: number, logprob: SamplingParams['logprob']): SamplingParams => ({
    temperature,
    topK: 0,
    topP: 1,
    logprob,
  });
  const kinds = c.info.capabilities.logprobs;
  const cold = await backend
    .generate({ prompts, seed, sampling: sampling(1e-6, kinds.includes('raw') ? 'raw' : 'processed') })
    .then(
      (b) => b,
      (e: unknown) => e,
    );
  if (cold instanceof Error) {
    if (refusedFor(cold, 'sampling'))
      c.add(
        'temperature → 0 is greedy',
        true,
        'a sampler other than the configured one is refused naming sampling (allowed: then it is never silently ignored)',
        true,
      );
    else c.add('temperature → 0 is greedy', false, cold.message);
    return;
  }
  if (g1 !== undefined) {
    const diff = sameTokens(cold as RolloutBatch, g1);
    c.add(
      'temperature → 0 is greedy',
      diff === '',
      diff === ''
        ? 'τ = 1e-6 samples the greedy tokens'
        : `τ = 1e-6 sampled other tokens than greedy decoding at ${diff}: the temperature is ignored`,
    );
  }
  if (!(kinds.includes('raw') && kinds.includes('processed')))
    return c.add(
      'processed ℓroll at τ ≠ 1 is not the raw one',
      true,
      `capabilities.logprobs ${JSON.stringify(kinds)}: not both kinds`,
      true,
    );
  const processed = await c.attempt('processed ℓroll at τ ≠ 1 is not the raw one', () =>
    backend.generate({ prompts, seed, sampling: sampling(0.5, 'processed') }),
  );
  const raw =
    processed === undefined
      ? undefined
      : await c.attempt('processed ℓroll at τ ≠ 1 is not the raw one', () =>
          backend.generate({ prompts, seed, sampling: sampling(0.5, 'raw') }),
        );
  if (processed === undefined || raw === undefined) return;
  const diff = sameTokens(processed, raw);
  if (diff !== '')
    return c.add(
      'processed ℓroll at τ ≠ 1 is not the raw one',
      false,
      `the same seed and τ gave other tokens when only the reported ℓ kind changed (${diff})`,
    );
  let differ = 0;
  for (let i = 0; i < raw.logpRollout.length; i++)
    if (raw.mask[i] === 1 && !Object.is(raw.logpRollout[i], processed.logpRollout[i])) differ += 1;
  c.add(
    'processed ℓroll at τ ≠ 1 is not the raw one',
    differ > 0,
    differ > 0
      ? `at τ 0.5, ${differ} tokens' processed ℓroll differ from their raw ℓroll`
      : 'at τ 0.5 the processed ℓroll equals the raw one at every token: the temperature is not applied to the reported distribution (ℓroll recorded at τ = 1)',
  );
  void batch;
}

/** After a step and a sync, the same prompts and seed must give other ℓroll (or tokens) than before the step. */
export async function checkSyncServesNewWeights(c: CheckContext): Promise<void> {
  const name = 'sync serves the new weights';
  const now = await c.attempt(name, () => c.backend.generate({ prompts: c.prompts, seed: c.seed, ...c.sampling }));
  if (now === undefined) return;
  let same = now.T === c.batch.T;
  for (let i = 0; same && i < now.responses.length; i++) {
    if (
      now.mask[i] !== c.batch.mask[i] ||
      now.responses[i] !== c.batch.responses[i] ||
      !Object.is(now.logpRollout[i], c.batch.logpRollout[i])
    )
      same = false;
  }
  c.add(
    name,
    !same,
    same
      ? 'after a step and a sync, the same seed gives the same tokens and ℓroll as before the step: sync advanced the version but the engine kept its old weights'
      : 'the batch after step + sync differs from the one before the step',
  );
}

/** The bug-class table of docs/adapter.md §4: each bug class, the checks that catch it and when. */
export function bugClassTableMarkdown(): string {
  const classes = [...new Set(namedChecks.flatMap((c) => c.catches))];
  const cell = (s: string): string => s.replace(/\|/g, '\\|');
  const lines = ['| bug class | caught by (under which plans) |', '| --- | --- |'];
  for (const bug of classes) {
    const by = namedChecks.filter((c) => c.catches.includes(bug));
    lines.push(`| ${bug} | ${by.map((c) => `\`${cell(c.check)}\` (${c.when?.[bug] ?? 'any plan'})`).join(', ')} |`);
  }
  for (const l of blackBoxLimits) lines.push(`| ${l.bug} | — (not black-box: ${cell(l.why)}) |`);
  return lines.join('\n');
}
