// The run driver's guard around a backend it does not own: every answer is checked against the
// request and the backend's info (protocol/response-checks.ts) and the versions it promised, and the
// first impossible one stops the run as a BackendCallError (exit 1, one line naming method, field,
// row and position; the files written so far are whole and --resume continues). Not the schema
// check (RemoteBackend does that) and not a conformance battery (testing/conformance.ts).

import type {
  BackendInfo,
  GenerateRequest,
  LogprobsRequest,
  LogprobsResult,
  PolicyBackend,
  RolloutBatch,
  StepRequest,
  StepResult,
  WarmStartRequest,
} from '../core/backend-contract.js';
import { BackendCallError } from '../protocol/errors.js';
import {
  formatViolation,
  generateViolation,
  logprobsViolation,
  stepViolation,
  syncViolation,
  type ResponseViolation,
} from '../protocol/response-checks.js';

/**
 * A {@link PolicyBackend} that checks every answer of `inner` and throws a {@link BackendCallError}
 * (kind `malformed`) on the first violation. It tracks the versions the contract promises: `sync`
 * serves the trainer's version, a rollout-side `generate` reports the last synced one, `step` adds
 * one; after `load` or `warmStart` the trainer's version is learnt again at the next `sync`.
 */
export class CheckedBackend implements PolicyBackend {
  private described: BackendInfo | null = null;
  /** The trainer's weight version when known. */
  private trainer: number | undefined;
  /** What the last sync returned. */
  private served: number | undefined;

  /**
   * @param name the backend's command or URL, as errors name it
   * @param options.replaysSupport the run replays a cut sampling support (`replaysSupport`,
   *   rl/grpo/config.ts): a sampled diffusion batch must carry the record's `support`
   */
  constructor(
    private readonly inner: PolicyBackend,
    private readonly name: string,
    private readonly options: { readonly replaysSupport?: boolean } = {},
  ) {}

  private fail(v: ResponseViolation): never {
    throw new BackendCallError(
      this.name,
      v.method,
      'malformed',
      `backend '${this.name}' answered an impossible ${formatViolation(v)}`,
      { field: v.field },
    );
  }

  private async described_(): Promise<BackendInfo> {
    if (this.described === null) this.described = await this.inner.info();
    return this.described;
  }

  async info(): Promise<BackendInfo> {
    this.described = await this.inner.info();
    return this.described;
  }

  async sync(): Promise<{ readonly weightVersion: number }> {
    const r = await this.inner.sync();
    const bad = syncViolation(r.weightVersion, this.trainer);
    if (bad !== null) this.fail(bad);
    this.trainer = r.weightVersion;
    this.served = r.weightVersion;
    return r;
  }

  async generate(request: GenerateRequest): Promise<RolloutBatch> {
    const batch = await this.inner.generate(request);
    const expected = (request.side ?? 'rollout') === 'rollout' ? this.served : this.trainer;
    const info = await this.described_();
    const bad = generateViolation(info, request, batch, expected);
    if (bad !== null) this.fail(bad);
    const support = (batch.record as { support?: unknown }).support;
    if (
      this.options.replaysSupport === true &&
      info.policy === 'diffusion' &&
      request.greedy !== true &&
      (support === undefined || support === null)
    )
      this.fail({
        method: 'generate',
        field: 'result.record.support',
        message:
          'is absent, but the run config sets policy.sampler.supportReplay under a truncating sampler: the trainer would score the whole vocabulary, ℓroll the kept set (docs/adapter.md §7, "Record")',
      });
    return batch;
  }

  async logprobs(request: LogprobsRequest): Promise<LogprobsResult> {
    const result = await this.inner.logprobs(request);
    const bad = logprobsViolation(await this.described_(), request, result);
    if (bad !== null) this.fail(bad);
    return result;
  }

  backward(handle: string, gradLogp: Float64Array): Promise<void> {
    return this.inner.backward(handle, gradLogp);
  }

  async step(request: StepRequest): Promise<StepResult> {
    const result = await this.inner.step(request);
    const bad = stepViolation(result, this.trainer === undefined ? undefined : this.trainer + 1);
    if (bad !== null) this.fail(bad);
    this.trainer = result.weightVersion;
    return result;
  }

  setReference(): Promise<void> {
    return this.inner.setReference();
  }

  async warmStart(request: WarmStartRequest): Promise<Record<string, number>> {
    const metrics = await this.inner.warmStart(request);
    this.trainer = undefined; // a warm start may or may not advance the version (docs/adapter.md): learnt at the next sync
    this.served = undefined;
    return metrics;
  }

  save(dir: string): Promise<void> {
    return this.inner.save(dir);
  }

  async load(dir: string): Promise<void> {
    await this.inner.load(dir);
    this.trainer = undefined;
    this.served = undefined;
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
