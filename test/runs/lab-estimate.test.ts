// Tests of the lab's duration estimate as arithmetic: evaluation and checkpoint counts against the
// run driver's rule, the run extrapolation, and the sweep schedule. No timing is measured here.

import { describe, expect, it } from 'vitest';
import {
  checkpointCount,
  evaluationCount,
  runCpuSeconds,
  sweepWallSeconds,
  warmStartCpuSeconds,
} from '../../src/runs/lab-estimate.js';
import { estimateLabSeconds, labSchedule, loadLabExperiment } from '../../src/runs/lab.js';
import { planSweep } from '../../src/runs/sweep.js';
import { labSweepOptions } from '../../src/runs/lab.js';

/** The run driver's loop (src/runs/run.ts `drive`), counting instead of running. */
function driverCounts(
  steps: number,
  evalEvery: number,
  checkpointEvery: number,
): { evals: number; checkpoints: number } {
  let evals = evalEvery > 0 ? 1 : 0;
  let checkpoints = 0;
  for (let step = 1; step <= steps; step++) {
    const isLast = step === steps;
    if ((evalEvery > 0 && step % evalEvery === 0) || isLast) evals++;
    if ((checkpointEvery > 0 && step % checkpointEvery === 0) || isLast) checkpoints++;
  }
  return { evals, checkpoints };
}

describe('run extrapolation', () => {
  it('counts evaluations and checkpoints as the run driver makes them', () => {
    for (let steps = 1; steps <= 40; steps++) {
      for (let every = 0; every <= 12; every++) {
        const want = driverCounts(steps, every, every);
        expect(evaluationCount(steps, every), `steps ${steps}, every ${every}`).toBe(want.evals);
        expect(checkpointCount(steps, every), `steps ${steps}, every ${every}`).toBe(want.checkpoints);
      }
    }
  });

  it('adds setup, steps, evaluations and checkpoints; the warm start apart', () => {
    const phases = { setup: 0.5, warmStartStep: 0.1, grpoStep: 0.8, evaluation: 1, checkpoint: 0.05 };
    const config = { steps: 60, sft: { steps: 300 }, eval: { every: 20 }, checkpoint: { every: 5 } };
    // 0.5 + 60·0.8 + 4·1 + 12·0.05
    expect(runCpuSeconds(config, phases)).toBeCloseTo(0.5 + 48 + 4 + 0.6, 12);
    expect(warmStartCpuSeconds(config, phases)).toBeCloseTo(30, 12);
  });
});

describe('sweepWallSeconds', () => {
  it('runs independent runs as slots free up, in list order', () => {
    expect(sweepWallSeconds([], 2)).toBe(0);
    expect(
      sweepWallSeconds(
        Array.from({ length: 5 }, () => ({ seconds: 10 })),
        2,
      ),
    ).toBe(30);
    expect(
      sweepWallSeconds(
        Array.from({ length: 5 }, () => ({ seconds: 10 })),
        1,
      ),
    ).toBe(50);
    expect(
      sweepWallSeconds(
        Array.from({ length: 5 }, () => ({ seconds: 10 })),
        8,
      ),
    ).toBe(10);
    // list order, not longest first: 1 | 1 then 10 on the first free slot
    expect(sweepWallSeconds([{ seconds: 1 }, { seconds: 1 }, { seconds: 10 }], 2)).toBe(11);
  });

  it('starts a run that shares a warm start only after the run that trains it', () => {
    // One seed (length-long): the warm start's run alone, then three runs on two cores.
    const W = 900;
    const R = 2600;
    const oneSeed = [{ seconds: W + R }, { seconds: R, after: 0 }, { seconds: R, after: 0 }, { seconds: R, after: 0 }];
    expect(sweepWallSeconds(oneSeed, 2)).toBe(W + R + 2 * R);
    // The estimate before this schedule, ⌈runs/workers⌉·R + seeds·W, said W + 2R: a third too short.
    expect(sweepWallSeconds(oneSeed, 2)).toBeGreaterThan(Math.ceil(4 / 2) * R + W);
  });

  it('queues followers behind runs queued earlier', () => {
    // A (trains, 10 s), B (trains, 100 s), C after A (1 s), D independent (50 s); two cores:
    // A 0–10, B 0–100, D 10–60 (queued since 0), C 60–61.
    expect(sweepWallSeconds([{ seconds: 10 }, { seconds: 100 }, { seconds: 1, after: 0 }, { seconds: 50 }], 2)).toBe(
      100,
    );
    // B 0–20 instead: D 10–60, C on B's core 20–21.
    expect(sweepWallSeconds([{ seconds: 10 }, { seconds: 20 }, { seconds: 1, after: 0 }, { seconds: 50 }], 2)).toBe(60);
  });

  it('lies between total/slots and the total, and at or above every chain', () => {
    const runs = [
      { seconds: 13 },
      { seconds: 7 },
      { seconds: 5, after: 0 },
      { seconds: 5, after: 1 },
      { seconds: 9, after: 0 },
      { seconds: 2 },
    ];
    const total = runs.reduce((s, r) => s + r.seconds, 0);
    for (const slots of [1, 2, 3, 4, 10]) {
      const wall = sweepWallSeconds(runs, slots);
      expect(wall).toBeGreaterThanOrEqual(total / slots);
      expect(wall).toBeLessThanOrEqual(total);
      expect(wall).toBeGreaterThanOrEqual(13 + 9);
    }
    expect(sweepWallSeconds(runs, 1)).toBe(total);
  });

  it('refuses a run that waits for a run that never ends', () => {
    expect(() =>
      sweepWallSeconds(
        [
          { seconds: 1, after: 1 },
          { seconds: 1, after: 0 },
        ],
        2,
      ),
    ).toThrow(/never ends/);
  });
});

describe('estimateLabSeconds', () => {
  it('schedules an experiment as the sweep runs it: one warm start per seed, trained by its first run', async () => {
    const departure = loadLabExperiment('departure');
    const exp = { ...departure, secondsPerRun: 50, warmStartSeconds: 30 };
    const { runs } = await planSweep(labSweepOptions(exp, { outDir: 'unused' }));
    expect(runs).toHaveLength(18);
    const schedule = labSchedule(exp, runs);
    // Grid order × seeds: the first point's three runs train the three seeds' warm starts.
    expect(schedule.slice(0, 3)).toEqual([0, 1, 2].map(() => ({ seconds: 80, trainsWarmStart: true })));
    expect(schedule.slice(3).every((r, i) => r.after === i % 3 && r.seconds === 50 && !r.trainsWarmStart)).toBe(true);
    const estimate = estimateLabSeconds(exp, runs, 2);
    expect(estimate.warmStarts).toBe(3);
    expect(estimate.cpuSeconds).toBe(18 * 50 + 3 * 30);
    // 990 CPU s on two cores; the third warm start's run holds one core while the other is free for 30 s.
    expect(estimate.wallSeconds).toBe(sweepWallSeconds(schedule, 2));
    expect(estimate.wallSeconds).toBeGreaterThanOrEqual(990 / 2);
    // A cached warm start is not trained again; the run still goes first.
    const cached = estimateLabSeconds(exp, runs, 2, (run) => run.seed === 0);
    expect(cached.warmStarts).toBe(2);
    expect(cached.cpuSeconds).toBe(18 * 50 + 2 * 30);
  });
});
