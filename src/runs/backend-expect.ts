// What a run config expects of an external backend, and the start-up check of a backend's `info`
// against it: policy kind, plan (both sides), vocabulary, special tokens and the capabilities the
// run needs. Also what the driver sends in `info`'s `setup` so that a backend can build itself
// from the run. Not the transport (src/protocol) and not the run loop (run.ts).

import type { BackendInfo, BackendVocabulary, JsonValue } from '../core/backend-contract.js';
import { arConfigFor } from '../policies/ar-api.js';
import { planOfConfig } from '../policies/plans.js';
import { tokenLevelAdvantageNames } from '../rl/advantages.js';
import { generationOf, replaysSupport, type RunConfig } from '../rl/grpo/config.js';
import type { Task } from '../tasks/task.js';
import { BOS, EOS, MASK, PAD, SEP } from '../tasks/tokenizer.js';

/** `config.plan` value that takes the precision plan from the backend's `info` instead of checking it. */
export const PLAN_FROM_BACKEND = 'backend';

/**
 * What the driver sends as `info` params `setup` (docs/adapter.md §5): everything a backend needs to
 * build itself from the run, derived from the run config, in the protocol's own terms.
 */
export interface BackendSetup {
  readonly policy: string;
  readonly vocabulary: BackendVocabulary;
  /** The plan the run asks for, as data; absent when the config takes the plan from the backend. */
  readonly plan?: { readonly name: string; readonly rollout: JsonValue; readonly trainer: JsonValue };
  readonly promptLength: number;
  readonly maxNewTokens: number;
  readonly sampling: {
    readonly temperature: number;
    readonly topK: number;
    readonly topP: number;
    readonly logprob: 'processed' | 'raw';
  };
  readonly optim: {
    readonly lr: number;
    readonly beta1: number;
    readonly beta2: number;
    readonly eps: number;
    readonly weightDecay: number;
  };
  /** AR: the model's ArConfig (vocabSize, maxLen, C, H, layers, hidden, …), the shape of weights.safetensors (§7). */
  readonly model?: JsonValue;
}

const json = (v: unknown): JsonValue => JSON.parse(JSON.stringify(v)) as JsonValue;

/** The {@link BackendSetup} of a run. */
export function backendSetup(config: RunConfig, task: Task): BackendSetup {
  const { sampling, maxNewTokens } = generationOf(config, task);
  const o = config.optim;
  let plan: BackendSetup['plan'];
  if (config.plan !== PLAN_FROM_BACKEND) {
    const p = planOfConfig(config.plan);
    plan = { name: p.name, rollout: json(p.rollout), trainer: json(p.trainer) };
  }
  return {
    policy: config.policy.kind,
    vocabulary: { size: task.vocabSize, pad: PAD, bos: BOS, eos: EOS, sep: SEP, mask: MASK },
    ...(plan === undefined ? {} : { plan }),
    promptLength: task.promptLength,
    maxNewTokens,
    sampling,
    optim: { lr: o.lr, beta1: o.beta1, beta2: o.beta2, eps: o.eps, weightDecay: o.weightDecay },
    ...(config.policy.kind === 'ar' ? { model: json(arConfigFor(config, task)) } : {}),
  };
}

/** A plan side without the keys that say how an engine runs rather than what it computes. */
function numericsOf(side: unknown): string {
  if (side === null || typeof side !== 'object' || Array.isArray(side)) return JSON.stringify(side);
  const { decode: _decode, logprob: _logprob, ...rest } = side as Record<string, unknown>;
  return canonical(rest);
}

function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

/**
 * Every way the backend's `info` disagrees with what the run config asks for, one line each naming
 * the field and both values (empty when they agree). The plan is compared by name and by both
 * sides' numerics (`decode` and `logprob` are how the engine runs and which ℓroll it reports: the
 * sampler's `logprob` is checked against `capabilities.logprobs` instead), unless `config.plan` is
 * {@link PLAN_FROM_BACKEND}.
 */
export function backendMismatches(info: BackendInfo, config: RunConfig, task: Task): string[] {
  const want = backendSetup(config, task);
  const out: string[] = [];
  if (info.policy !== want.policy)
    out.push(`policy: the backend serves '${info.policy}', config.policy.kind is '${want.policy}'`);
  for (const key of ['size', 'pad', 'bos', 'eos', 'sep', 'mask'] as const) {
    const got = info.vocabulary[key];
    const expected = want.vocabulary[key];
    if (got !== expected) {
      out.push(
        key === 'size'
          ? `vocabulary.size: the backend's vocabulary has ${got} tokens, task '${config.task.name}' has ${expected}`
          : `vocabulary.${key}: the backend's ${key.toUpperCase()} id is ${got}, qrl-sim's is ${expected}`,
      );
    }
  }
  if (want.plan !== undefined) {
    if (info.plan.name !== want.plan.name)
      out.push(
        `plan.name: the backend serves plan '${info.plan.name}', config.plan is '${want.plan.name}' (set plan to '${PLAN_FROM_BACKEND}' to take the backend's)`,
      );
    for (const side of ['rollout', 'trainer'] as const) {
      const got = numericsOf(info.plan[side]);
      const expected = numericsOf(want.plan[side]);
      if (got !== expected)
        out.push(`plan.${side}: the backend's ${side} side is ${got}, config plan '${want.plan.name}' has ${expected}`);
    }
  }
  const mode = want.sampling.logprob;
  if (!info.capabilities.logprobs.includes(mode)) {
    out.push(
      `capabilities.logprobs: the backend reports ℓroll as [${info.capabilities.logprobs.join(', ')}], config.policy.sampler.logprob is '${mode}'`,
    );
  }
  const advantage = config.estimators.advantage.name;
  if (tokenLevelAdvantageNames.includes(advantage) && info.capabilities.probSqSum !== true) {
    out.push(
      `capabilities.probSqSum: the backend does not return Σ_v π(v)² per token (capabilities.probSqSum is ${String(info.capabilities.probSqSum ?? false)}), which config.estimators.advantage.name '${advantage}' needs`,
    );
  }
  const sampler = config.policy.sampler;
  if (info.policy === 'ar' && replaysSupport(config) && info.capabilities.supportReplay !== true) {
    out.push(
      `capabilities.supportReplay: the backend does not replay the sampling support (capabilities.supportReplay is ${String(info.capabilities.supportReplay ?? false)}), which config.policy.sampler.supportReplay asks for under top-k ${sampler.topK}, top-p ${sampler.topP} (without it ℓold and ℓθ are over the whole vocabulary, ℓroll over the kept set)`,
    );
  }
  const K = config.policy.sampler.topkLogprobs ?? 0;
  if (K > 0 && info.capabilities.topkLogprobs !== true) {
    out.push(
      `capabilities.topkLogprobs: the backend does not report the sampler's top-k log-probs (capabilities.topkLogprobs is ${String(info.capabilities.topkLogprobs ?? false)}), which config.policy.sampler.topkLogprobs = ${K} needs`,
    );
  }
  return out;
}
