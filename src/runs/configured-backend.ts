// A reference backend built from a run config it receives late: up front, or in the driver's first
// `info` (`params.run`), as `qrl-sim serve` needs. Not the backend itself (src/backend/reference.ts).

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
import { ReferenceBackend } from '../backend/reference.js';
import { resolveRunConfig, type RunConfig } from '../rl/grpo/config.js';
import { makeTaskFromConfig } from '../tasks/registry.js';
import { policyFactory } from './policies.js';

/**
 * A {@link ReferenceBackend} built from a run config: given up front (`--config`) or by the driver in
 * its first `info` (`params.run`). `policy` and `plan` (`qrl-sim serve --policy --plan`) constrain
 * which configs it accepts.
 */
export class ConfiguredReference implements PolicyBackend {
  private inner: ReferenceBackend | null = null;
  private config: RunConfig | null = null;
  constructor(
    private readonly policy: string,
    private readonly plan: string | undefined,
  ) {}

  configure(raw: unknown): void {
    const config = resolveRunConfig(raw);
    if (config.policy.kind !== this.policy)
      throw new Error(
        `run.policy.kind: this server serves --policy ${this.policy}, the run config asks for ${config.policy.kind}`,
      );
    if (this.plan !== undefined && config.plan !== this.plan)
      throw new Error(
        `run.plan: this server serves --plan ${this.plan}, the run config asks for ${typeof config.plan === 'string' ? config.plan : JSON.stringify(config.plan)}`,
      );
    if (this.config !== null) {
      if (JSON.stringify(this.config) !== JSON.stringify(config))
        throw new Error('run: this server was already configured with another run config');
      return;
    }
    const factory = policyFactory(config.policy.kind);
    factory.validate(config);
    const task = makeTaskFromConfig(config.task);
    this.config = config;
    this.inner = new ReferenceBackend(config, factory, task);
  }

  /** True once a run config built the backend. */
  get configured(): boolean {
    return this.inner !== null;
  }

  private get backend(): ReferenceBackend {
    if (this.inner === null)
      throw new Error('no run config yet: send info with params.run (or start the server with --config FILE)');
    return this.inner;
  }

  info(): Promise<BackendInfo> {
    return this.backend.info();
  }
  sync(): Promise<{ readonly weightVersion: number }> {
    return this.backend.sync();
  }
  generate(request: GenerateRequest): Promise<RolloutBatch> {
    return this.backend.generate(request);
  }
  logprobs(request: LogprobsRequest): Promise<LogprobsResult> {
    return this.backend.logprobs(request);
  }
  backward(handle: string, gradLogp: Float64Array): Promise<void> {
    return this.backend.backward(handle, gradLogp);
  }
  step(request: StepRequest): Promise<StepResult> {
    return this.backend.step(request);
  }
  setReference(): Promise<void> {
    return this.backend.setReference();
  }
  warmStart(request: WarmStartRequest): Promise<Record<string, number>> {
    return this.backend.warmStart(request);
  }
  save(dir: string): Promise<void> {
    return this.backend.save(dir);
  }
  load(dir: string): Promise<void> {
    return this.backend.load(dir);
  }
  async close(): Promise<void> {
    if (this.inner !== null) await this.inner.close();
  }
}
