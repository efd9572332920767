// A small in-test PolicyBackend (deterministic, no model) and its stdio entry point, for the protocol
// tests. Not a policy: tokens come from a hash of the seed, log-probs from the weight version.
//
// Run as a process: `node --import tsx test/protocol/fake-backend.ts [--die-after N] [--hang-on M] [--garbage-on M] [--protocol P]`.

import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BackendInfo, GenerateRequest, LogprobsRequest, LogprobsResult, PolicyBackend, RolloutBatch, StepResult } from '../../src/backend/contract.js';

/** The fake: weights are one number `w`; ℓ = −(1 + w)/(t + 2) on masked positions. */
export class FakeBackend implements PolicyBackend {
  w = 0;
  version = 0;
  served = 0;
  reference = 0;
  grad = 0;
  handles = new Map<string, { rows: number; T: number }>();
  closed = false;
  /** A broken backend for the conformance test: `step` does not advance the version. */
  staleVersion = false;
  constructor(
    private readonly protocol = 'qrl-backend/1',
    private readonly responseLength = 3,
  ) {}
  async info(): Promise<BackendInfo> {
    return {
      protocol: this.protocol,
      backend: { name: 'fake', version: '0.0.1' },
      policy: 'ar',
      vocabulary: { size: 8, pad: 0, bos: 1, eos: 2, sep: 3, mask: 4 },
      plan: { name: 'fp32', rollout: { gemm: { kind: 'fp32' } }, trainer: { gemm: { kind: 'fp32' } } },
      capabilities: { logprobs: ['processed'], entropy: true, warmStart: false },
      parameters: 1,
    };
  }
  async sync(): Promise<{ weightVersion: number }> {
    this.served = this.version;
    return { weightVersion: this.served };
  }
  async generate(request: GenerateRequest): Promise<RolloutBatch> {
    const B = request.prompts.length;
    const T = this.responseLength;
    const responses = new Int32Array(B * T);
    const mask = new Float64Array(B * T);
    const logpRollout = new Float64Array(B * T);
    let h = 7;
    for (const c of request.seed) h = (h * 31 + c.charCodeAt(0)) % 1000003;
    for (let b = 0; b < B; b++) {
      const len = 1 + ((h + b) % T);
      for (let t = 0; t < len; t++) {
        responses[b * T + t] = t === len - 1 ? 2 : 5 + ((h + b + t) % 3);
        mask[b * T + t] = 1;
        logpRollout[b * T + t] = -(1 + this.served) / (t + 2);
      }
    }
    return { weightVersion: this.served, B, T, prompts: request.prompts, responses, mask, logpRollout, record: { kind: 'fake', lengths: new Int32Array(B).fill(1), note: 'x' } };
  }
  async logprobs(request: LogprobsRequest): Promise<LogprobsResult> {
    const { T } = request.batch;
    const w = request.policy === 'reference' ? this.reference : this.w;
    const logp = new Float64Array(request.rows.length * T);
    const entropy = new Float64Array(request.rows.length * T);
    request.rows.forEach((r, i) => {
      for (let t = 0; t < T; t++) {
        if (!request.batch.mask[r * T + t]) continue;
        logp[i * T + t] = -(1 + w) / (t + 2);
        entropy[i * T + t] = 0.5;
      }
    });
    if (!request.grad) return { logp, entropy };
    const handle = `h${this.handles.size + 1}-${this.version}`;
    this.handles.set(handle, { rows: request.rows.length, T });
    return { logp, entropy, handle };
  }
  async backward(handle: string, gradLogp: Float64Array): Promise<void> {
    const h = this.handles.get(handle);
    if (!h) throw new Error(`unknown handle ${handle}`);
    this.handles.delete(handle);
    for (const g of gradLogp) this.grad += g;
  }
  async step(request: { maxGradNorm: number }): Promise<StepResult> {
    const gradNorm = Math.abs(this.grad);
    this.w += 0.01 * Math.sign(this.grad) * Math.min(gradNorm, request.maxGradNorm);
    this.grad = 0;
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
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'fake.json'), JSON.stringify({ w: this.w, version: this.version, reference: this.reference }));
  }
  async load(dir: string): Promise<void> {
    const s = JSON.parse(readFileSync(join(dir, 'fake.json'), 'utf8')) as { w: number; version: number; reference: number };
    this.w = s.w;
    this.version = s.version;
    this.reference = s.reference;
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
  backend.staleVersion = argv.includes('--stale-version');
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
