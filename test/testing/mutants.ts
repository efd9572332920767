// Mutants of the in-process reference backend, one per bug class of the conformance battery
// (src/testing/request-checks.ts `namedChecks`): each changes one behaviour the way a backend
// written from the docs could get it wrong. test/testing/mutants.test.ts runs the battery on each.

import type {
  BackendInfo,
  GenerateRequest,
  LogprobsRequest,
  LogprobsResult,
  RolloutBatch,
  StepRequest,
  StepResult,
} from '../../src/core/backend-contract.js';
import { ReferenceBackend } from '../../src/backend/reference.js';
import { arPolicyFactory } from '../../src/policies/ar/engine.js';
import type { RunConfig } from '../../src/rl/grpo/config.js';
import type { BugClass } from '../../src/testing/request-checks.js';
import { makeTaskFromConfig } from '../../src/tasks/registry.js';

/** A mutant: the bug class it plants, whether the bug can show under a plan whose sides differ or not, and how it is built. */
export interface Mutant {
  readonly bug: BugClass;
  /** Plans under which the bug changes nothing a run sees (e.g. an ignored `side` when both sides are the same). */
  readonly harmlessWhen?: 'identical sides' | 'different sides';
  /** A sampler the inner backend is configured with (default: the run config's). */
  readonly sampler?: RunConfig['policy']['sampler'];
  /** The battery is given the run config (`backend-check --config`), as the bug shows only under its sampler. */
  readonly checkedWithConfig?: boolean;
  readonly make: (config: RunConfig) => ReferenceBackend;
}

const task = (config: RunConfig) => makeTaskFromConfig(config.task);
/** The reference backend's private state, reached the way a careless subclass would. */
type Internals = { optimizer: unknown };

function dropField<K extends keyof GenerateRequest>(r: GenerateRequest, key: K): GenerateRequest {
  const copy = { ...r };
  delete copy[key];
  return copy;
}

/** Every mutant, by name. */
export const mutants: Readonly<Record<string, Mutant>> = {
  'rows-ignored': {
    bug: 'rows ignored',
    make: (config) =>
      new (class extends ReferenceBackend {
        override logprobs(r: LogprobsRequest): Promise<LogprobsResult> {
          return super.logprobs({ ...r, rows: r.rows.map((_, i) => i) }); // scores the first rows, whatever was asked
        }
      })(config, arPolicyFactory, task(config)),
  },
  'temperature-ignored': {
    bug: 'temperature ignored',
    make: (config) =>
      new (class extends ReferenceBackend {
        override generate(r: GenerateRequest): Promise<RolloutBatch> {
          return super.generate(dropField(r, 'sampling')); // accepts any sampler, samples with its own
        }
      })(config, arPolicyFactory, task(config)),
  },
  'trainer-ignores-record-temperature': {
    bug: 'temperature ignored',
    make: (config) =>
      new (class extends ReferenceBackend {
        override logprobs(r: LogprobsRequest): Promise<LogprobsResult> {
          // scores at τ 1, whatever temperature the batch's record carries
          return super.logprobs({ ...r, batch: { ...r.batch, record: { ...r.batch.record, temperature: 1 } } });
        }
      })(config, arPolicyFactory, task(config)),
  },
  'trainer-ignores-support': {
    bug: 'support replay ignored',
    // top-k 4 with supportReplay: the record carries the kept set, the trainer scores the whole vocabulary
    sampler: { temperature: 1, topK: 4, topP: 1, logprob: 'processed', supportReplay: true },
    checkedWithConfig: true,
    make: (config) =>
      new (class extends ReferenceBackend {
        override logprobs(r: LogprobsRequest): Promise<LogprobsResult> {
          const record = { ...r.batch.record } as Record<string, unknown>;
          delete record.support;
          return super.logprobs({ ...r, batch: { ...r.batch, record: record as typeof r.batch.record } });
        }
      })(config, arPolicyFactory, task(config)),
  },
  'temperature-recorded-as-1': {
    bug: 'temperature recorded as 1',
    // samples at τ 0.5 and reports the raw (τ = 1) log-prob whatever kind is asked
    sampler: { temperature: 0.5, topK: 0, topP: 1, logprob: 'raw', supportReplay: false },
    make: (config) =>
      new (class extends ReferenceBackend {
        override generate(r: GenerateRequest): Promise<RolloutBatch> {
          return super.generate(dropField(r, 'sampling'));
        }
      })(config, arPolicyFactory, task(config)),
  },
  'random-greedy': {
    bug: 'random greedy',
    make: (config) =>
      new (class extends ReferenceBackend {
        override generate(r: GenerateRequest): Promise<RolloutBatch> {
          return super.generate({ ...r, greedy: false });
        }
      })(config, arPolicyFactory, task(config)),
  },
  'side-ignored': {
    bug: 'side ignored',
    harmlessWhen: 'identical sides',
    make: (config) =>
      new (class extends ReferenceBackend {
        override generate(r: GenerateRequest): Promise<RolloutBatch> {
          return super.generate(dropField(r, 'side'));
        }
      })(config, arPolicyFactory, task(config)),
  },
  'max-new-tokens-ignored': {
    bug: 'maxNewTokens ignored',
    make: (config) =>
      new (class extends ReferenceBackend {
        override generate(r: GenerateRequest): Promise<RolloutBatch> {
          return super.generate(dropField(r, 'maxNewTokens'));
        }
      })(config, arPolicyFactory, task(config)),
  },
  'sync-keeps-old-weights': {
    bug: 'sync keeps old weights',
    make: (config) =>
      new (class extends ReferenceBackend {
        private synced = false;
        private version = 0;
        override async sync(): Promise<{ readonly weightVersion: number }> {
          if (!this.synced) {
            this.synced = true;
            this.version = (await super.sync()).weightVersion;
          }
          return { weightVersion: this.version }; // the version moves, the engine does not
        }
        override async step(r: StepRequest): Promise<StepResult> {
          const s = await super.step(r);
          this.version = s.weightVersion;
          return s;
        }
        override async generate(r: GenerateRequest): Promise<RolloutBatch> {
          return { ...(await super.generate(r)), weightVersion: this.version };
        }
      })(config, arPolicyFactory, task(config)),
  },
  'off-by-one-logprobs': {
    bug: 'off-by-one log-probs',
    make: (config) =>
      new (class extends ReferenceBackend {
        override async logprobs(r: LogprobsRequest): Promise<LogprobsResult> {
          const out = await super.logprobs(r);
          const { T } = r.batch;
          const logp = Float64Array.from(out.logp);
          for (let k = 0; k < r.rows.length; k++) {
            const b = r.rows[k]!;
            let n = 0;
            while (n < T && r.batch.mask[b * T + n] === 1) n++;
            // each token gets the log-prob of the position after it (the last keeps its own)
            for (let t = 0; t + 1 < n; t++) logp[k * T + t] = out.logp[k * T + t + 1]!;
          }
          return { ...out, logp };
        }
      })(config, arPolicyFactory, task(config)),
  },
  'rollout-logprobs-from-trainer': {
    bug: 'ℓroll from the trainer',
    harmlessWhen: 'identical sides',
    make: (config) =>
      new (class extends ReferenceBackend {
        override async generate(r: GenerateRequest): Promise<RolloutBatch> {
          const batch = await super.generate(r);
          const lp = await super.logprobs({
            batch,
            rows: Array.from({ length: batch.B }, (_, b) => b),
            policy: 'current',
          });
          return { ...batch, logpRollout: lp.logp };
        }
      })(config, arPolicyFactory, task(config)),
  },
  'gradient-sign': {
    bug: 'gradient sign',
    make: (config) =>
      new (class extends ReferenceBackend {
        override backward(handle: string, g: Float64Array): Promise<void> {
          return super.backward(
            handle,
            g.map((x) => -x),
          );
        }
      })(config, arPolicyFactory, task(config)),
  },
  'unfrozen-reference': {
    bug: 'unfrozen reference',
    make: (config) =>
      new (class extends ReferenceBackend {
        override logprobs(r: LogprobsRequest): Promise<LogprobsResult> {
          return super.logprobs(r.policy === 'reference' ? { ...r, policy: 'current' } : r);
        }
      })(config, arPolicyFactory, task(config)),
  },
  'version-not-advanced': {
    bug: 'version not advanced',
    make: (config) =>
      new (class extends ReferenceBackend {
        override async step(r: StepRequest): Promise<StepResult> {
          const s = await super.step(r);
          return { ...s, weightVersion: s.weightVersion - 1 };
        }
      })(config, arPolicyFactory, task(config)),
  },
  'handle-reuse': {
    bug: 'handle reuse',
    make: (config) =>
      new (class extends ReferenceBackend {
        override async backward(handle: string, g: Float64Array): Promise<void> {
          try {
            await super.backward(handle, g);
          } catch {
            // a spent handle is accepted silently
          }
        }
      })(config, arPolicyFactory, task(config)),
  },
  'load-without-optimizer': {
    bug: 'load without optimizer',
    make: (config) =>
      new (class extends ReferenceBackend {
        override async load(dir: string): Promise<void> {
          const kept = (this as unknown as Internals).optimizer;
          await super.load(dir);
          (this as unknown as Internals).optimizer = kept; // weights restored, optimizer state not
        }
      })(config, arPolicyFactory, task(config)),
  },
  'wrong-special-tokens': {
    bug: 'wrong special tokens',
    make: (config) =>
      new (class extends ReferenceBackend {
        override async info(): Promise<BackendInfo> {
          const info = await super.info();
          const v = info.vocabulary;
          // declares the first ordinary token as EOS; generation still stops at the real one
          return { ...info, vocabulary: { ...v, eos: Math.max(v.pad, v.bos, v.eos, v.sep, v.mask) + 1 } };
        }
      })(config, arPolicyFactory, task(config)),
  },
  'seed-ignored': {
    bug: 'seed ignored',
    make: (config) =>
      new (class extends ReferenceBackend {
        private calls = 0;
        override generate(r: GenerateRequest): Promise<RolloutBatch> {
          return super.generate({ ...r, seed: `${r.seed}/${this.calls++}` }); // a fresh stream per call
        }
      })(config, arPolicyFactory, task(config)),
  },
  'topk-not-most-likely': {
    bug: 'top-k not the most likely',
    make: (config) =>
      new (class extends ReferenceBackend {
        override async generate(r: GenerateRequest): Promise<RolloutBatch> {
          const b = await super.generate(r);
          if (b.topk === undefined) return b;
          // reports the valid slots of every position in reverse: the least likely first
          const { K, ids, logp } = b.topk;
          const rids = Int32Array.from(ids);
          const rlogp = Float64Array.from(logp);
          for (let k = 0; k < b.B * b.T; k++) {
            let n = 0;
            while (n < K && ids[k * K + n]! >= 0) n++;
            for (let j = 0; j < n; j++) {
              rids[k * K + j] = ids[k * K + n - 1 - j]!;
              rlogp[k * K + j] = logp[k * K + n - 1 - j]!;
            }
          }
          return { ...b, topk: { K, ids: rids, logp: rlogp } };
        }
      })(config, arPolicyFactory, task(config)),
  },
  'topk-misses-sampled-token': {
    bug: 'sampled token outside the top-k support',
    make: (config) =>
      new (class extends ReferenceBackend {
        override async generate(r: GenerateRequest): Promise<RolloutBatch> {
          const b = await super.generate(r);
          if (b.topk === undefined) return b;
          // drops the sampled id from its position's list (the slots after it move up)
          const { K, ids, logp } = b.topk;
          const dids = Int32Array.from(ids);
          const dlogp = Float64Array.from(logp);
          for (let k = 0; k < b.B * b.T; k++) {
            const row = Array.from(ids.subarray(k * K, (k + 1) * K));
            const at = row.indexOf(b.responses[k]!);
            if (b.mask[k] !== 1 || at < 0) continue;
            const keep = row.map((v, j) => [v, logp[k * K + j]!] as const).filter((_, j) => j !== at);
            for (let j = 0; j < K; j++) {
              dids[k * K + j] = j < keep.length ? keep[j]![0] : -1;
              dlogp[k * K + j] = j < keep.length ? keep[j]![1] : 0;
            }
          }
          return { ...b, topk: { K, ids: dids, logp: dlogp } };
        }
      })(config, arPolicyFactory, task(config)),
  },
};
