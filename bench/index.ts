// `npm run bench`: throughput of qrl-sim's hot paths against onnxruntime measured in the same
// process, single thread. Prints ratios; nothing here is asserted (no timing asserts in tests).

import { benchAr, benchSizes, benchSizesLines } from './ar.js';
import { type BenchLine, benchCast } from './cast.js';
import { benchGemm } from './gemm.js';
import { machineLine } from './machine.js';
import { benchLength, lengthBenchPlans } from './length.js';
import { disposeOrtBenches } from './ort.js';
import { benchQuantize } from './quantize.js';
import { benchThreads } from './threads.js';

function print(line: BenchLine): void {
  const figures = Object.entries(line.figures)
    .map(([k, v]) => `${k}=${v >= 100 ? v.toFixed(1) : v.toPrecision(4)}`)
    .join('  ');
  console.log(`${line.name}\n  ${figures}`);
}

const only = process.argv.slice(2);
console.log(machineLine());
const benches: Record<string, () => Promise<BenchLine | BenchLine[]>> = {
  cast: () => benchCast(),
  // quantize of several presets and quantized GEMMs (operands quantized inside the call), µs per call.
  quantize: async () => benchQuantize(),
  // QRL_BENCH_PLANS=a,b limits the plans (bf16 always runs: the ratios' reference); QRL_BENCH_REPEATS=n timed rounds (default 5).
  ar: () =>
    benchAr(
      Number(process.env.QRL_BENCH_REPEATS ?? 5),
      process.env.QRL_BENCH_PLANS ? process.env.QRL_BENCH_PLANS.split(',') : undefined,
    ),
  // QRL_BENCH_SIZES=tiny,small limits the size rows (default: all of benchSizes).
  sizes: () =>
    benchSizesLines(benchSizes.filter((s) => (process.env.QRL_BENCH_SIZES ?? s.name).split(',').includes(s.name))),
  // QRL_BENCH_THREADS=n compares 1 with n threads (default 2).
  threads: () => benchThreads(Number(process.env.QRL_BENCH_THREADS ?? 2)),
  // The long-response lab setting, one GRPO step per plan (QRL_BENCH_PLANS=a,b; QRL_BENCH_REPEATS=n rounds).
  length: () =>
    benchLength(
      process.env.QRL_BENCH_PLANS ? process.env.QRL_BENCH_PLANS.split(',') : lengthBenchPlans,
      Number(process.env.QRL_BENCH_REPEATS ?? 1),
    ),
};
const sections: Record<string, () => Promise<void>> = {
  gemm: async () => {
    await benchGemm({ out: (text: string) => console.log(text) });
  },
};

for (const [name, run] of Object.entries(benches)) {
  if (only.length > 0 && !only.includes(name)) continue;
  const result = await run();
  for (const line of Array.isArray(result) ? result : [result]) print(line);
}
for (const [name, run] of Object.entries(sections)) {
  if (only.length > 0 && !only.includes(name)) continue;
  await run();
}
await disposeOrtBenches();
