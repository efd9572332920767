// A small in-test PolicyBackend (deterministic, no model) and its stdio entry point, for the protocol
// tests. Not a policy: tokens come from a hash of the seed, log-probs from the weight version.
//
// Run as a process: `node --import tsx test/protocol/fake-backend.ts [--die-after N] [--hang-on M] [--garbage-on M] [--protocol P]
// [--vocab V] [--eos E] [--T T]` plus one deliberate bug for the conformance tests: `--stale-version`,
// `--wrong-sign`, `--no-spend`, `--load-skips-optimizer`, `--omit-entropy` (declares entropy, omits it),
// `--no-entropy` (declares none, omits it: correct), `--writes-reserved` (save writes checkpoint.json),
// `--no-handover` (declines qrl-sim's weights: capabilities.handOver false).

import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import type {
  BackendInfo,
  GenerateRequest,
  LogprobsRequest,
  LogprobsResult,
  PolicyBackend,
  RolloutBatch,
  StepResult,
} from '../../src/core/backend-contract.js';

/**
 * The fake: weights are one number `w`; ℓ = −(1 + w)/(t + 2) on masked positions, so ∂ℓ/∂w = −1/(t + 2).
 * `backward` accumulates ∂(Σ g·ℓ)/∂w, `step` is SGD with momentum 0.5 (its optimizer state, saved).
 */
export class FakeBackend implements PolicyBackend {
  w = 0;
  version = 0;
  served = 0;
  reference = 0;
  grad = 0;
  momentum = 0;
  handles = new Map<string, { rows: number; T: number; mask: Float64Array }>();
  closed = false;
  /** Bugs for the conformance tests (each makes exactly one check fail). */
  bugs = new Set<string>();
  /** A broken backend for the conformance test: `step` does not advance the version. */
  get staleVersion(): boolean {
    return this.bugs.has('stale-version');
  }
  set staleVersion(on: boolean) {
    if (on) this.bugs.add('stale-version');
    else this.bugs.delete('stale-version');
  }
  vocabSize = 8;
  eos = 2;
  private nextHandle = 1;
  constructor(
    private readonly protocol = 'qrl-backend/1',
    private readonly responseLength = 3,
  ) {}
  async info(): Promise<BackendInfo> {
    return {
      protocol: this.protocol,
      backend: { name: 'fake', version: '0.0.1' },
      policy: 'ar',
      vocabulary: { size: this.vocabSize, pad: 0, bos: 1, eos: this.eos, sep: 3, mask: 4 },
      plan: { name: 'fp32', rollout: { gemm: { kind: 'fp32' } }, trainer: { gemm: { kind: 'fp32' } } },
      capabilities: {
        logprobs: ['processed'],
        entropy: !this.bugs.has('no-entropy'),
        warmStart: false,
        ...(this.bugs.has('no-handover') ? { handOver: false } : {}),
      },
      parameters: 1,
    };
  }
  async sync(): Promise<{ weightVersion: number }> {
    this.served = this.version;
    return { weightVersion: this.served };
  }
  async generate(request: GenerateRequest): Promise<RolloutBatch> {
    const B = request.prompts.length;
    const s = request.sampling;
    // the fake's tokens are a hash, not a distribution: it serves temperature 1 untruncated only, and says so
    if (s !== undefined && (s.temperature !== 1 || s.topK !== 0 || s.topP !== 1))
      throw new Error(
        `generate.sampling: the fake backend samples at temperature 1 without top-k/top-p only, got ${JSON.stringify(s)}`,
      );
    const T = Math.min(this.responseLength, request.maxNewTokens ?? this.responseLength);
    const responses = new Int32Array(B * T);
    const mask = new Float64Array(B * T);
    const logpRollout = new Float64Array(B * T);
    let h = 7;
    // greedy: one answer whatever the seed
    if (request.greedy !== true) for (const c of request.seed) h = (h * 31 + c.charCodeAt(0)) % 1000003;
    for (let b = 0; b < B; b++) {
      const len = 1 + ((h + b) % T);
      for (let t = 0; t < len; t++) {
        responses[b * T + t] = t === len - 1 ? this.eos : 5 + ((h + b + t) % 3);
        mask[b * T + t] = 1;
        logpRollout[b * T + t] = -(1 + this.served) / (t + 2);
      }
    }
    return {
      weightVersion: this.served,
      B,
      T,
      prompts: request.prompts,
      responses,
      mask,
      logpRollout,
      record: { kind: 'fake', lengths: new Int32Array(B).fill(1), note: 'x' },
    };
  }
  async logprobs(request: LogprobsRequest): Promise<LogprobsResult> {
    const { T } = request.batch;
    const w = request.policy === 'reference' ? this.reference : this.w;
    const logp = new Float64Array(request.rows.length * T);
    const entropy = new Float64Array(request.rows.length * T);
    const mask = new Float64Array(request.rows.length * T);
    request.rows.forEach((r, i) => {
      for (let t = 0; t < T; t++) {
        if (!request.batch.mask[r * T + t]) continue;
        mask[i * T + t] = 1;
        logp[i * T + t] = -(1 + w) / (t + 2);
        entropy[i * T + t] = 0.5;
      }
    });
    const omit = this.bugs.has('omit-entropy') || this.bugs.has('no-entropy');
    const out = (omit ? { logp } : { logp, entropy }) as LogprobsResult;
    if (!request.grad) return out;
    const handle = `h${this.nextHandle++}-${this.version}`;
    this.handles.set(handle, { rows: request.rows.length, T, mask });
    return { ...out, handle };
  }
  async backward(handle: string, gradLogp: Float64Array): Promise<void> {
    const h = this.handles.get(handle);
    if (!h) throw new Error(`unknown handle ${handle}`);
    if (!this.bugs.has('no-spend')) this.handles.delete(handle);
    for (let i = 0; i < gradLogp.length; i++) if (h.mask[i]) this.grad += gradLogp[i]! * (-1 / ((i % h.T) + 2));
  }
  async step(request: { maxGradNorm: number }): Promise<StepResult> {
    const gradNorm = Math.abs(this.grad);
    const clipped = gradNorm > request.maxGradNorm ? (this.grad * request.maxGradNorm) / gradNorm : this.grad;
    this.momentum = 0.5 * this.momentum + clipped;
    this.w += (this.bugs.has('wrong-sign') ? 0.01 : -0.01) * this.momentum;
    this.grad = 0;
    this.handles.clear();
    if (!this.staleVersion) this.version += 1;
    return { gradNorm, weightVersion: this.version };
  }
  async setReference(): Promise<void> {
    this.reference = this.w;
  }
  async warmStart(): Promise<Record<string, number>> {
    throw new Error('warmStart: not supported');
  }
  async save(dir: string): Promise<void> {
    if (!isAbsolute(dir)) throw new Error(`save: dir must be an absolute path, got ${dir}`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, 'fake.json'),
      JSON.stringify({ w: this.w, version: this.version, reference: this.reference, momentum: this.momentum }),
    );
    if (this.bugs.has('writes-reserved')) writeFileSync(join(dir, 'checkpoint.json'), '{}');
  }
  async load(dir: string): Promise<void> {
    if (!isAbsolute(dir)) throw new Error(`load: dir must be an absolute path, got ${dir}`);
    if (!existsSync(join(dir, 'fake.json')) && existsSync(join(dir, 'weights.safetensors'))) {
      // the driver's weight hand-over: weights only, the optimizer zeroed
      this.reference = this.w;
      this.momentum = 0;
      return;
    }
    const s = JSON.parse(readFileSync(join(dir, 'fake.json'), 'utf8')) as {
      w: number;
      version: number;
      reference: number;
      momentum: number;
    };
    this.w = s.w;
    this.version = s.version;
    this.reference = s.reference;
    if (!this.bugs.has('load-skips-optimizer')) this.momentum = s.momentum;
    this.grad = 0;
    this.handles.clear();
  }
  async close(): Promise<void> {
    this.closed = true;
  }
}

/** Wraps `inner` so that its process dies, hangs or answers garbage at the chosen request. */
async function main(argv: string[]): Promise<void> {
  const { serveBackend } = await import('../../src/protocol/serve.js');
  const arg = (name: string): string | undefined => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const dieAfter = arg('--die-after') === undefined ? Infinity : Number(arg('--die-after'));
  const hangOn = arg('--hang-on');
  const garbageOn = arg('--garbage-on');
  const backend = new FakeBackend(arg('--protocol'), arg('--T') === undefined ? 3 : Number(arg('--T')));
  for (const bug of [
    'stale-version',
    'wrong-sign',
    'no-spend',
    'load-skips-optimizer',
    'omit-entropy',
    'no-entropy',
    'writes-reserved',
    'no-handover',
  ]) {
    if (argv.includes(`--${bug}`)) backend.bugs.add(bug);
  }
  if (arg('--vocab') !== undefined) backend.vocabSize = Number(arg('--vocab'));
  if (arg('--eos') !== undefined) backend.eos = Number(arg('--eos'));
  let count = 0;
  const { PassThrough } = await import('node:stream');
  const input = new PassThrough();
  process.stdin.on('data', (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (line.trim() === '') continue;
      count += 1;
      const method = (JSON.parse(line) as { method: string }).method;
      if (count > dieAfter) process.exit(3);
      if (method === hangOn) continue;
      if (method === garbageOn) {
        process.stdout.write('this is not json\n');
        continue;
      }
      input.write(`${line}\n`);
    }
  });
  process.stdin.on('end', () => input.end());
  const server = await serveBackend(backend, { stdio: true, input });
  await server.done;
  process.exit(0);
}

if (process.argv[1]?.endsWith('fake-backend.ts')) void main(process.argv.slice(2));
