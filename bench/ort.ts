// onnxruntime side of the benchmarks: builds the Cast→Cast (e4m3fn, saturate 1) and MatMul sessions once and times n runs, single thread.
// Not the benchmark driver: it prints nothing and compares nothing; `bench/index.ts` decides sizes, warm-up and reporting.
import {
  ortDisposeSessions,
  prepareOrtCastRoundTrip,
  prepareOrtMatMul,
  type OrtCastOptions,
  type OrtCastTarget,
  type OrtPreparedRun,
} from '../test/oracle/ort.js';

/** Wall time of `runs` back-to-back runs of one prepared ORT session. */
export interface OrtTiming {
  /** Number of timed runs. */
  runs: number;
  /** Total wall time of the timed runs, in milliseconds. */
  totalMs: number;
  /** `totalMs / runs`. */
  msPerRun: number;
}

/** A prepared session on fixed data: its output (to check against) and a timer. */
export interface OrtBench<T extends OrtTiming = OrtTiming> {
  /** What is run, e.g. "ort Cast→Cast e4m3fn saturate=1, 16777216 values". */
  readonly label: string;
  /** Runs once (untimed) and returns the output buffer, e.g. to compare with qrl-sim's result or to warm up. */
  once(): Promise<Float32Array>;
  /** Times `runs` sequential runs (no model build, no input or output allocation inside the loop). */
  time(runs: number): Promise<T>;
}

/** Timing of the cast round trip, with the per-value cost. */
export interface OrtCastTiming extends OrtTiming {
  /** Nanoseconds per value for encode + decode (`msPerRun · 1e6 / values`). */
  nsPerValue: number;
}

/** Timing of MatMul, with the throughput. */
export interface OrtMatMulTiming extends OrtTiming {
  /** 2·m·k·n / (seconds per run) / 1e9. */
  gflops: number;
}

async function timeRuns(run: OrtPreparedRun, runs: number): Promise<OrtTiming> {
  if (!Number.isInteger(runs) || runs < 1) throw new RangeError(`runs = ${runs} is not a positive integer`);
  const start = process.hrtime.bigint();
  for (let i = 0; i < runs; i++) await run.run();
  const totalMs = Number(process.hrtime.bigint() - start) / 1e6;
  return { runs, totalMs, msPerRun: totalMs / runs };
}

/**
 * The ORT side of the cast benchmark: Cast float→`to`→float on `values` (default e4m3fn, saturate 1),
 * one session, one thread, graph optimizations off so that both Casts execute.
 *
 * @example
 * const b = await ortCastBench(values);
 * await b.once(); // warm-up
 * const t = await b.time(5); // t.nsPerValue
 */
export async function ortCastBench(
  values: Float32Array,
  to: OrtCastTarget = 'e4m3fn',
  opts: OrtCastOptions = { saturate: 1 },
): Promise<OrtBench<OrtCastTiming>> {
  const run = await prepareOrtCastRoundTrip(values, to, opts);
  const sat = opts.saturate === undefined ? '' : ` saturate=${opts.saturate}`;
  return {
    label: `ort Cast→Cast ${to}${sat}, ${values.length} values`,
    once: () => run.run(),
    async time(runs) {
      const t = await timeRuns(run, runs);
      return { ...t, nsPerValue: (t.msPerRun * 1e6) / values.length };
    },
  };
}

/**
 * The ORT side of the GEMM benchmark: MatMul-13 in fp32 of A (m, k) by B (k, n), row-major, one thread.
 *
 * @example
 * const b = await ortMatMulBench(a, b, 256, 256, 256);
 * const t = await b.time(10); // t.gflops
 */
export async function ortMatMulBench(
  a: Float32Array,
  b: Float32Array,
  m: number,
  k: number,
  n: number,
): Promise<OrtBench<OrtMatMulTiming>> {
  const run = await prepareOrtMatMul(a, b, m, k, n);
  return {
    label: `ort MatMul fp32 ${m}×${k}·${k}×${n}`,
    once: () => run.run(),
    async time(runs) {
      const t = await timeRuns(run, runs);
      return { ...t, gflops: (2 * m * k * n) / (t.msPerRun * 1e6) };
    },
  };
}

/** Releases the ORT sessions the benchmarks built (call once at the end of the driver). */
export const disposeOrtBenches: () => Promise<void> = ortDisposeSessions;
