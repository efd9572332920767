// Per-tensor dynamic activation scales shared by the requests of one engine step: under the scheduler each
// request runs its own GEMM calls, but an engine's per-tensor scale is the amax over every row of the step's GEMM
// (all co-batched requests, every token of a prefill chunk). Not the scheduler (ar/scheduler.ts).

import { fmaxf } from '../numerics/scales.js';

/**
 * The shared amaxes of one engine step, settled site by site: `fixed` holds the step amax of the sites
 * settled so far, `seen` the amax over this pass's calls of every site, `order` the sites in the order
 * they were first called (a topological order of the step: a site's inputs depend only on earlier sites).
 */
export interface StepScales {
  readonly fixed: Map<object, number>;
  readonly seen: Map<object, number>;
  readonly order: object[];
}

let active: StepScales | null = null;

/** An empty {@link StepScales}. */
export function createStepScales(): StepScales {
  return { fixed: new Map(), seen: new Map(), order: [] };
}

/** Runs `fn` with `scales` collecting (and, for the settled sites, supplying) the step's per-tensor amaxes. */
export function withStepScales<T>(scales: StepScales, fn: () => T): T {
  const previous = active;
  active = scales;
  try {
    return fn();
  } finally {
    active = previous;
  }
}

/** Whether a step is collecting per-tensor activation amaxes (a quantized numerics then reports its calls). */
export function stepScalesActive(): boolean {
  return active !== null;
}

/**
 * Records one call's own per-tensor activation amax at `site` (the site's weight array) and returns the
 * step's amax when the site is settled, else undefined (the call then uses its own amax, provisionally).
 */
export function stepTensorAmax(site: object, amax: number): number | undefined {
  const s = active;
  if (s === null) return undefined;
  const prev = s.seen.get(site);
  if (prev === undefined) {
    s.order.push(site);
    s.seen.set(site, amax);
  } else s.seen.set(site, amax !== amax || prev !== prev ? Number.NaN : fmaxf(prev, amax));
  return s.fixed.get(site);
}

/**
 * Settles the first site of the pass not yet settled (its recorded amax is final: every site it depends
 * on was settled before the pass); returns false when every site was settled, i.e. the pass was final.
 */
export function settleNextSite(s: StepScales): boolean {
  const site = s.order.find((o) => !s.fixed.has(o));
  if (site !== undefined) s.fixed.set(site, s.seen.get(site)!);
  s.seen.clear();
  s.order.length = 0;
  return site !== undefined;
}
