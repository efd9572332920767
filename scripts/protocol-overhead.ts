// Measures what qrl-backend/1 costs per GRPO-shaped step (sync, generate, logprobs current with grad,
// logprobs reference, backward, step) for a batch of B sequences × T response positions: the in-test
// fake backend in-process, the same backend over stdio and over HTTP, and the numpy AR backend.
// Usage: `node --import tsx scripts/protocol-overhead.ts [B] [T] [steps]`. Prints ms per step.

import type { PolicyBackend } from '../src/core/backend-contract.js';
import { connectBackend } from '../src/protocol/remote.js';
import { serveBackend } from '../src/protocol/serve.js';
import { FakeBackend } from '../test/protocol/fake-backend.js';

const B = Number(process.argv[2] ?? 64);
const T = Number(process.argv[3] ?? 8);
const steps = Number(process.argv[4] ?? 20);

async function perStep(backend: PolicyBackend, promptLength: number): Promise<number> {
  const prompts = Array.from({ length: B }, (_, b) => [
    1,
    ...Array.from({ length: promptLength - 2 }, (_, j) => 5 + ((b + j) % 8)),
    3,
  ]);
  const rows = Array.from({ length: B }, (_, b) => b);
  const one = async (s: number): Promise<void> => {
    await backend.sync();
    const batch = await backend.generate({ prompts, seed: `bench/${s}` });
    const lp = await backend.logprobs({ batch, rows, policy: 'current', grad: true });
    await backend.logprobs({ batch, rows, policy: 'reference' });
    await backend.backward(
      lp.handle!,
      Float64Array.from(batch.mask, (m) => -m / B),
    );
    await backend.step({ maxGradNorm: 1 });
  };
  await one(-1); // warm-up
  const t0 = performance.now();
  for (let s = 0; s < steps; s++) await one(s);
  return (performance.now() - t0) / steps;
}

const rows: [string, number][] = [];
rows.push(['fake, in-process', await perStep(new FakeBackend('qrl-backend/1', T), 5)]);
const stdio = await connectBackend({ command: `node --import tsx test/protocol/fake-backend.ts --T ${T}` });
rows.push(['fake, stdio', await perStep(stdio, 5)]);
await stdio.close();
const server = await serveBackend(new FakeBackend('qrl-backend/1', T), { port: 0 });
const http = await connectBackend({ url: `http://127.0.0.1:${server.port}` });
rows.push(['fake, HTTP', await perStep(http, 5)]);
await http.close();
const config = JSON.stringify({ vocabSize: 13, maxLen: 5 + T });
const numpy = await connectBackend({
  command: `PYTHONPATH=python python3 -m qrl_backend.numpy_ar --config '${config}' --max-new-tokens ${T} --lr 1e-3`,
});
rows.push(['numpy AR (toy defaults), stdio', await perStep(numpy, 5)]);
await numpy.close();
console.log(`B=${B} T=${T}, mean over ${steps} steps (sync, generate, 2× logprobs, backward, step):`);
for (const [name, ms] of rows) console.log(`  ${name.padEnd(32)} ${ms.toFixed(2)} ms/step`);
