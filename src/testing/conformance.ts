// The qrl-backend/1 conformance battery: shapes and masks, determinism, ℓroll vs ℓ, versions, the frozen
// reference, save/load, MoE routing replay and bad requests, as table rows. Not the protocol (src/protocol)
// and not a backend; `qrl-sim backend-check` parses its flags and prints these rows.

import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { probeDiagnostics } from '../policies/diagnostics.js';
import { BackendCallError } from '../protocol/errors.js';
import { type RemoteBackend } from '../protocol/remote.js';
import { RPC_ERRORS } from '../protocol/jsonrpc.js';
import { logprobsToJson, NEWEST_REVISION, UNDECLARED_FIELDS } from '../protocol/schema.js';
import type { RolloutBatch, SamplingParams } from '../core/backend-contract.js';
import type { RunConfig } from '../rl/grpo/config.js';
import { formatViolation, generateViolation, logprobsViolation } from '../protocol/response-checks.js';
import { backendMismatches } from '../runs/backend-expect.js';
import { checkTopk } from './topk-conformance.js';
import {
  checkGenerateRequestFields,
  checkLogprobsRows,
  checkRolloutIsEngine,
  checkSyncServesNewWeights,
  checkTrainerSideScored,
  refusedFor,
} from './request-checks.js';
import { makeTaskFromConfig } from '../tasks/registry.js';
import { checkProbSqSum, checkRoutingReplay, differences, equalArrays, sameJson } from './capability-checks.js';
import { checkDiffusion } from './diffusion-checks.js';
import { checkTemperatureHonoured, samplerMismatch, supportReplayed } from './temperature-checks.js';

/** One row of the conformance table. */
export interface ConformanceRow {
  /** What was checked. */
  readonly check: string;
  /** `ok`, `FAIL` (a violation) or `info` (reported, never a violation). */
  readonly status: 'ok' | 'FAIL' | 'info';
  /** Figures or the reason of a failure. */
  readonly detail: string;
}

/** The sampler the battery's generates ask for: `config.policy.sampler`, else τ 1 without top-k/top-p, ℓroll processed. */
function samplerOf(config: RunConfig | undefined): SamplingParams {
  const s = config?.policy.sampler;
  return s === undefined
    ? { temperature: 1, topK: 0, topP: 1, logprob: 'processed' }
    : { temperature: s.temperature, topK: s.topK, topP: s.topP, logprob: s.logprob };
}

/** Options of {@link runConformance}. */
export interface ConformanceOptions {
  /** Sequences per generate. @defaultValue 8 */
  readonly batch?: number;
  /** Prompt length (BOS, tokens, SEP). @defaultValue 4 */
  readonly promptLength?: number;
  /** Largest |ℓroll − ℓ| allowed when the plan's two sides are identical. @defaultValue 1e-4 */
  readonly tolerance?: number;
  /** A run config: the backend's plan, vocabulary, special tokens and ℓroll modes are checked against it (as `run` does at start). */
  readonly config?: RunConfig;
}

/**
 * Runs the conformance battery against a connected backend: protocol version, shapes and masks,
 * same seed ⇒ same tokens, `generate` ℓroll vs `logprobs` ℓ on the same weights (the mismatch
 * diagnostics of `qrl-sim mismatch`), the weight version after `step` and `sync`, the frozen
 * reference, the save/load round trip, MoE routing replay when the record carries a routing, and the
 * errors bad requests get. Leaves the backend changed
 * (it takes optimizer steps); run it on a scratch instance.
 */
export async function runConformance(
  backend: RemoteBackend,
  options: ConformanceOptions = {},
): Promise<ConformanceRow[]> {
  const rows: ConformanceRow[] = [];
  const add = (check: string, ok: boolean, detail: string, informational = false): void => {
    rows.push({ check, status: informational ? 'info' : ok ? 'ok' : 'FAIL', detail });
  };
  const B = options.batch ?? 8;
  const P = options.promptLength ?? 4;
  const tolerance = options.tolerance ?? 1e-4;
  const attempt = async <T>(check: string, fn: () => Promise<T>): Promise<T | undefined> => {
    try {
      return await fn();
    } catch (error) {
      add(check, false, error instanceof Error ? error.message : String(error));
      return undefined;
    }
  };

  // Protocol and description.
  const info = backend.lastInfo ?? (await backend.info());
  add(
    'protocol version',
    info.protocol === 'qrl-backend/1',
    `${info.protocol}; ${info.backend.name} ${info.backend.version}, policy ${info.policy}, plan ${info.plan.name}, ${info.parameters} parameters`,
  );
  const revision = backend.paramsRevision;
  const leftOut = UNDECLARED_FIELDS.filter((f) => f.revision > revision).map((f) => `${f.method}.${f.field}`);
  add(
    'params revision',
    true,
    leftOut.length === 0
      ? `takes the params of revision ${revision} (the newest, docs/adapter.md §12)`
      : `written to revision ${revision} (refused ${leftOut[0]} as unknown): the client leaves out ${leftOut.join(', ')}`,
    revision !== NEWEST_REVISION,
  );
  const refused = await backend.raw('info', { protocols: ['qrl-backend/999'] }).then(
    () => 'answered',
    (e: unknown) =>
      e instanceof BackendCallError && e.code === RPC_ERRORS.failedPrecondition && e.field === 'protocols'
        ? 'ok'
        : String(e),
  );
  add(
    'unknown version refused',
    refused === 'ok',
    refused === 'ok'
      ? 'info {protocols: [qrl-backend/999]} → −32000, field protocols'
      : `expected error −32000 with field protocols, got ${refused}`,
  );
  const infoAgain = await backend.raw('info', { protocols: ['qrl-backend/1'] }).then(
    (r) => r,
    (e: unknown) => String(e),
  );
  const stable = sameJson(infoAgain, { ...info });
  add(
    'info answers the same twice',
    stable,
    stable
      ? 'a second info gives the same description'
      : `a second info answered ${JSON.stringify(infoAgain).slice(0, 160)}`,
  );
  if (options.config !== undefined) {
    const config = options.config;
    const mismatches = backendMismatches(info, config, makeTaskFromConfig(config.task));
    add(
      'plan and vocabulary against the run config',
      mismatches.length === 0,
      mismatches.length === 0
        ? `policy ${info.policy}, plan ${info.plan.name}, vocabulary ${info.vocabulary.size} and special tokens as the config asks`
        : mismatches.join('; '),
    );
  }
  const voc = info.vocabulary;
  const specials = [voc.pad, voc.bos, voc.eos, voc.sep, voc.mask];
  const firstFree = Math.max(...specials) + 1;
  add(
    'vocabulary',
    specials.every((s) => s < voc.size) && new Set(specials).size === 5 && firstFree < voc.size,
    `size ${voc.size}, pad ${voc.pad} bos ${voc.bos} eos ${voc.eos} sep ${voc.sep} mask ${voc.mask}`,
  );

  const prompts = Array.from({ length: B }, (_, b) => [
    voc.bos,
    ...Array.from({ length: P - 2 }, (_, j) => firstFree + ((b * 3 + j * 5) % (voc.size - firstFree))),
    voc.sep,
  ]);
  const synced = await attempt('sync', () => backend.sync());
  if (synced === undefined) return rows;
  const v0 = synced.weightVersion;
  add('sync', true, `serves weight version ${v0}`);

  // Shapes, masks, determinism.
  const seed = 'backend-check/rollout/0';
  // The sampler of every generate that does not test a sampler field: the run config's, else the untouched
  // one, sent as `run` sends it (docs/adapter.md §3) — the comparisons below assume it, so a backend's own
  // default (e.g. numpy_ar's --top-k) must not stand in for it. A backend that refuses it naming
  // `sampling` (one that serves its configured sampler only) is asked again without it.
  const asked = samplerOf(options.config);
  const firstTry = await backend.generate({ prompts, seed, sampling: asked }).then(
    (b) => b,
    (e: unknown) => e,
  );
  const refusedSampler = refusedFor(firstTry, 'sampling');
  /** The `sampling` field of the battery's default generates: the sampler asked, or none after a refusal. */
  const sampling: { readonly sampling?: SamplingParams } = refusedSampler ? {} : { sampling: asked };
  let batch: RolloutBatch | undefined;
  if (refusedSampler) batch = await attempt('generate shapes and masks', () => backend.generate({ prompts, seed }));
  else if (firstTry instanceof Error) add('generate shapes and masks', false, firstTry.message);
  else batch = firstTry as RolloutBatch; // the client rejects only with Errors
  if (batch === undefined) return rows;
  const refusedNote = refusedSampler
    ? ` (the backend refused sampling ${JSON.stringify(asked)} naming sampling, so it sampled with its own sampler, which the battery does not know: pass --config with that sampler)`
    : '';
  // the driver's own response rules (protocol/response-checks.ts): B, T, ids, prefix masks ending at EOS, ℓroll, version
  const violation = generateViolation(info, { prompts, seed, ...sampling }, batch, v0);
  let tokens = 0;
  for (const m of batch.mask) tokens += m;
  add(
    'generate shapes and masks',
    violation === null,
    violation === null
      ? `B ${batch.B}, T ${batch.T}, ${tokens} tokens, record kind ${batch.record.kind}`
      : formatViolation(violation),
  );
  const again = await attempt('same seed ⇒ same tokens', () => backend.generate({ prompts, seed, ...sampling }));
  if (again !== undefined) {
    const same =
      equalArrays(again.responses, batch.responses) &&
      equalArrays(again.logpRollout, batch.logpRollout) &&
      equalArrays(again.mask, batch.mask);
    add(
      'same seed ⇒ same tokens',
      same,
      same ? 'responses, mask and ℓroll identical' : 'a second generate with the same seed differs',
    );
  }
  const other = await attempt('other seed ⇒ other tokens', () =>
    backend.generate({ prompts, seed: 'backend-check/rollout/1', ...sampling }),
  );
  if (other !== undefined)
    add(
      'other seed ⇒ other tokens',
      true,
      equalArrays(other.responses, batch.responses) ? 'identical (a deterministic policy?)' : 'responses differ',
      true,
    );

  // The entropy capability: declared ⇒ returned; not declared ⇒ may be omitted.
  const all = Array.from({ length: B }, (_, b) => b);
  const probe = await attempt('entropy capability', () =>
    backend.raw('logprobs', logprobsToJson({ batch, rows: all, policy: 'current' })),
  );
  if (probe === undefined) return rows;
  const hasEntropy = probe !== null && typeof probe === 'object' && 'entropy' in probe;
  if (info.capabilities.entropy && !hasEntropy) {
    add(
      'entropy capability',
      false,
      'capabilities.entropy is true but logprobs returned no entropy: return it, or declare entropy: false (then the run reports NaN entropies); the checks that score log-probs are skipped',
    );
    return rows;
  }
  add(
    'entropy capability',
    true,
    info.capabilities.entropy
      ? 'declared and returned'
      : hasEntropy
        ? 'not declared, returned anyway'
        : 'not declared and omitted (the run reports NaN entropies)',
  );

  // Rollout vs trainer log-probs on the same weights.
  const lp = await attempt('logprobs shapes', () => backend.logprobs({ batch, rows: all, policy: 'current' }));
  if (lp !== undefined) {
    const lv = logprobsViolation(info, { batch, rows: all, policy: 'current' }, lp);
    add(
      'logprobs shapes',
      lv === null,
      lv === null ? `ℓ and entropy (${B}, ${batch.T}), finite ≤ 0 on the mask, 0 off it` : formatViolation(lv),
    );
    const d = probeDiagnostics(batch.logpRollout, lp.logp, batch.mask);
    const sameGemms = sameJson(
      info.plan.rollout && (info.plan.rollout as { gemm?: unknown }).gemm,
      info.plan.trainer && (info.plan.trainer as { gemm?: unknown }).gemm,
    );
    // ℓroll of another quantity than the trainer's ℓ (a raw ℓroll at τ ≠ 1, a cut support not replayed, τ placed
    // after the log-softmax by the trainer) differs even on the same weights: the comparisons that need equality skip it
    const replayed = supportReplayed(options.config, batch);
    const mismatch = samplerMismatch(
      asked,
      (info.plan.trainer as { temperatureAt?: unknown } | undefined)?.temperatureAt,
      replayed,
    );
    const likeForLike = mismatch === null;
    const comparisonNote =
      refusedNote +
      (replayed && likeForLike && (asked.topK > 0 || asked.topP < 1)
        ? ' (the record carries the sampler’s kept set: does logprobs renormalise over record.support, as supportReplay asks?)'
        : '');
    const identicalSides = sameGemms && likeForLike;
    const detail = `tokens ${d.tokens}, k1 ${d.k1.toExponential(3)}, k3 ${d.k3.toExponential(3)}, mean|δ| ${d.meanAbsDelta.toExponential(3)}, max|δ| ${d.maxAbsDelta.toExponential(3)}, ess ${d.ess.toFixed(4)}`;
    if (identicalSides)
      add(
        `ℓroll vs ℓ (same sides, max|δ| ≤ ${tolerance})`,
        d.maxAbsDelta <= tolerance,
        d.maxAbsDelta <= tolerance ? detail : detail + comparisonNote,
      );
    else if (!likeForLike)
      add(
        'ℓroll vs ℓ (not the same quantity)',
        true,
        `${detail}; the configured sampler (τ ${asked.temperature}, top-k ${asked.topK}, top-p ${asked.topP}, ℓroll ${asked.logprob}): ${mismatch}, so ℓroll is not compared with ℓ`,
        true,
      );
    else add('ℓroll vs ℓ (plan sides differ)', true, detail, true);
    const ctx = {
      backend,
      info,
      prompts,
      seed,
      batch,
      logp: lp.logp,
      tolerance,
      identicalSides,
      likeForLike,
      sampling,
      comparisonNote,
      add,
      attempt,
    };
    await checkLogprobsRows(ctx);
    await checkRolloutIsEngine(ctx);
    await checkTrainerSideScored(ctx);
    await checkGenerateRequestFields(ctx);
    if (info.policy === 'diffusion') await checkDiffusion(ctx, options.config);
    else
      await checkTemperatureHonoured(ctx, {
        row: 'AR temperature recorded and honoured',
        sampler: options.config?.policy.sampler,
        withoutTemperature: 'info',
      });
    const check = { backend, info, batch, rows: all, logp: lp.logp, add, attempt };
    await checkRoutingReplay(check);
    await checkProbSqSum(check);
    await checkTopk(check, { prompts, seed, ...sampling });
  }

  // Gradient, handles, step, versions, frozen reference.
  const maskedMean = (logp: Float64Array): number => {
    let sum = 0;
    for (let i = 0; i < logp.length; i++) sum += batch.mask[i]! * logp[i]!;
    return sum / Math.max(1, tokens);
  };
  await attempt('setReference', () => backend.setReference());
  const refBefore = await attempt('reference frozen', () =>
    backend.logprobs({ batch, rows: all, policy: 'reference' }),
  );
  const withGrad = await attempt('backward + step', () =>
    backend.logprobs({ batch, rows: all, policy: 'current', grad: true }),
  );
  const unspent =
    withGrad === undefined
      ? undefined
      : await attempt('step retires unspent handles', () =>
          backend.logprobs({ batch, rows: all, policy: 'current', grad: true }),
        );
  // g = ∂(−mean ℓ)/∂ℓ: one step descending it must raise the samples' mean ℓ
  const g = Float64Array.from(batch.mask, (m) => -m / Math.max(1, tokens));
  const refusedAnswer = (e: unknown): string =>
    e instanceof BackendCallError && e.kind === 'remote' ? 'ok' : String(e);
  if (withGrad !== undefined && refBefore !== undefined) {
    const handle = withGrad.handle;
    if (handle === undefined) {
      add('backward + step', false, 'logprobs with grad returned no handle');
    } else {
      const stepped = await attempt('backward + step', async () => {
        await backend.backward(handle, g);
        const spent = await backend
          .backward(handle, g)
          .then(() => 'accepted: the gradient was accumulated twice', refusedAnswer);
        add(
          'spent handle refused',
          spent === 'ok',
          spent === 'ok'
            ? 'a second backward on the same handle (before step) is an error'
            : `backward must spend its handle; a second backward on it was ${spent}`,
        );
        return backend.step({ maxGradNorm: 1 });
      });
      if (stepped !== undefined) {
        add(
          'backward + step',
          Number.isFinite(stepped.gradNorm) && stepped.gradNorm > 0,
          `gradNorm ${stepped.gradNorm.toExponential(4)}`,
        );
        add(
          'weight version advances after step',
          stepped.weightVersion === v0 + 1,
          `step → ${stepped.weightVersion} (was ${v0})`,
        );
        if (unspent?.handle !== undefined) {
          const retired = await backend.backward(unspent.handle, g).then(() => 'accepted', refusedAnswer);
          add(
            'step retires unspent handles',
            retired === 'ok',
            retired === 'ok'
              ? 'backward on a handle taken before the step is an error'
              : `step must drop unspent handles; backward on one taken before the step was ${retired}`,
          );
        }
        const stale = await attempt('generate before sync: old version', () =>
          backend.generate({ prompts, seed, ...sampling }),
        );
        if (stale !== undefined) {
          add(
            'generate before sync: old version',
            stale.weightVersion === v0,
            `version ${stale.weightVersion} (synced ${v0})`,
          );
          // Reported, not a violation: an engine that samples with the new weights before sync mislabels
          // its batches (the contract's StepResult says the engine sees them at the next sync).
          const same = equalArrays(stale.responses, batch.responses);
          add(
            'generate before sync: old weights',
            same,
            same
              ? 'same tokens as before the step'
              : 'tokens differ: the engine samples with weights it has not synced',
            true,
          );
        }
        const resync = await attempt('sync serves the new version', () => backend.sync());
        if (resync !== undefined)
          add('sync serves the new version', resync.weightVersion === v0 + 1, `sync → ${resync.weightVersion}`);
        if (resync !== undefined)
          await checkSyncServesNewWeights({
            backend,
            info,
            prompts,
            seed,
            batch,
            logp: lp?.logp ?? batch.logpRollout,
            tolerance,
            identicalSides: false,
            likeForLike: true,
            sampling,
            comparisonNote: refusedNote,
            add,
            attempt,
          });
        const after = await attempt('current policy moved', () =>
          backend.logprobs({ batch, rows: all, policy: 'current' }),
        );
        if (after !== undefined) {
          add(
            'current policy moved',
            !equalArrays(after.logp, withGrad.logp),
            equalArrays(after.logp, withGrad.logp)
              ? 'ℓ bit-identical after a step with a nonzero gradient'
              : 'ℓ changed with the step',
          );
          const before = maskedMean(withGrad.logp);
          const now = maskedMean(after.logp);
          add(
            'gradient direction (finite difference)',
            now > before,
            now > before
              ? `one step descending −mean ℓ raised mean ℓ ${before.toFixed(6)} → ${now.toFixed(6)} (Δ ${(now - before).toExponential(3)})`
              : `one step descending −mean ℓ (gradLogp = −mask/${tokens}) moved mean ℓ ${before.toFixed(6)} → ${now.toFixed(6)} (Δ ${(now - before).toExponential(3)}): the gradient points the wrong way; backward must accumulate +∂(Σ gradLogp·ℓ)/∂θ and step must descend it`,
          );
        }
        const refAfter = await attempt('reference frozen', () =>
          backend.logprobs({ batch, rows: all, policy: 'reference' }),
        );
        if (refAfter !== undefined)
          add(
            'reference frozen',
            equalArrays(refAfter.logp, refBefore.logp),
            equalArrays(refAfter.logp, refBefore.logp)
              ? 'reference ℓ bit-identical across the step'
              : `the reference moved with the step (${differences(refBefore.logp, refAfter.logp)})`,
          );
      }
    }
  }

  // save → step → load → step: the restore (weights, reference, version) and the optimizer state.
  const dir = mkdtempSync(join(tmpdir(), 'qrl-backend-check-'));
  try {
    const state = join(dir, 'state');
    mkdirSync(state);
    const oneStep = async (): Promise<{ logp: Float64Array; version: number }> => {
      const h = await backend.logprobs({ batch, rows: all, policy: 'current', grad: true });
      await backend.backward(h.handle!, g);
      const { weightVersion } = await backend.step({ maxGradNorm: 1 });
      return { logp: (await backend.logprobs({ batch, rows: all, policy: 'current' })).logp, version: weightVersion };
    };
    const roundTrip = await attempt('save/load restores weights, reference and version', async () => {
      const saved = await backend.logprobs({ batch, rows: all, policy: 'current' });
      const savedRef = await backend.logprobs({ batch, rows: all, policy: 'reference' });
      const version = (await backend.sync()).weightVersion;
      await backend.save(state);
      const first = await oneStep();
      await backend.load(state);
      const restored = await backend.logprobs({ batch, rows: all, policy: 'current' });
      const restoredRef = await backend.logprobs({ batch, rows: all, policy: 'reference' });
      const v = (await backend.sync()).weightVersion;
      const problems: string[] = [];
      if (v !== version) problems.push(`version after load and sync is ${v}, saved at ${version}`);
      if (!equalArrays(saved.logp, restored.logp))
        problems.push(`current ℓ differs from the saved (${differences(saved.logp, restored.logp)})`);
      if (!equalArrays(savedRef.logp, restoredRef.logp))
        problems.push(`reference ℓ differs from the saved (${differences(savedRef.logp, restoredRef.logp)})`);
      add(
        'save/load restores weights, reference and version',
        problems.length === 0,
        problems.length === 0
          ? `ℓ (current and reference) bit-identical after load; version ${v}`
          : problems.join('; '),
      );
      return { first, restoredOk: problems.length === 0 };
    });
    if (roundTrip?.restoredOk) {
      const second = await attempt('save → step → load → step (optimizer state)', oneStep);
      if (second !== undefined) {
        const same = equalArrays(second.logp, roundTrip.first.logp) && second.version === roundTrip.first.version;
        add(
          'save → step → load → step (optimizer state)',
          same,
          same
            ? `the step after load reproduces the step after save bit-for-bit (version ${second.version})`
            : second.version !== roundTrip.first.version
              ? `the step after load reports version ${second.version}, the same step after save ${roundTrip.first.version}`
              : `the step after load gives other weights than the same step after save (${differences(roundTrip.first.logp, second.logp)}): load does not restore the optimizer state (or step is not deterministic); a resumed run would diverge`,
        );
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }

  // Bad requests: clear errors, and the backend keeps serving.
  const probes: { name: string; method: string; params: unknown; code: number; field?: string }[] = [
    {
      name: 'generate {prompts: "x"}',
      method: 'generate',
      params: { prompts: 'x', seed: 's' },
      code: RPC_ERRORS.invalidParams,
      field: 'prompts',
    },
    {
      name: 'step {maxGradNorm: -1}',
      method: 'step',
      params: { maxGradNorm: -1 },
      code: RPC_ERRORS.invalidParams,
      field: 'maxGradNorm',
    },
    { name: 'sync {bogus: 1}', method: 'sync', params: { bogus: 1 }, code: RPC_ERRORS.invalidParams, field: 'bogus' },
    { name: 'unknown method', method: 'noSuchMethod', params: {}, code: RPC_ERRORS.methodNotFound },
  ];
  for (const p of probes) {
    const got = await backend.raw(p.method, p.params).then(
      () => 'answered with a result',
      (e: unknown) => {
        if (!(e instanceof BackendCallError) || e.kind !== 'remote') return String(e);
        if (e.code !== p.code) return `code ${e.code}`;
        if (p.field !== undefined && e.field !== p.field) return `field ${e.field ?? '(none)'}`;
        return 'ok';
      },
    );
    add(
      `bad request: ${p.name}`,
      got === 'ok',
      got === 'ok'
        ? `error ${p.code}${p.field ? `, field ${p.field}` : ''}`
        : `expected error ${p.code}${p.field ? ` naming ${p.field}` : ''}, got ${got}`,
    );
  }
  const alive = await attempt('still serving after bad requests', () => backend.sync());
  if (alive !== undefined) add('still serving after bad requests', true, `sync → ${alive.weightVersion}`);
  return rows;
}

/** The table of {@link runConformance} rows. */
export function formatConformance(rows: readonly ConformanceRow[]): string {
  const w = Math.max(...rows.map((r) => r.check.length));
  const lines = rows.map((r) => `${r.check.padEnd(w)}  ${r.status.padEnd(4)}  ${r.detail}`);
  const failed = rows.filter((r) => r.status === 'FAIL').length;
  lines.push(
    '',
    failed === 0
      ? `conformance: all ${rows.filter((r) => r.status === 'ok').length} checks passed`
      : `conformance: ${failed} violation${failed === 1 ? '' : 's'}`,
  );
  return lines.join('\n');
}
