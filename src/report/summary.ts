// Per-configuration statistics over seeds: group runs by every config field except `seed`, label
// the groups by what differs, and compute mean ± sample std. Not rendering (table.ts, plots.ts).

import type { MetricLine, RunRecord } from './runs.js';

/** The eval metric the accuracy columns use: greedy pass@1 of the rollout engine (the deployed, quantized side). */
export const ACCURACY_METRIC = 'eval/rollout/greedy_accuracy';

/** Mean ± sample standard deviation over seeds. */
export interface SeedStat {
  /** Mean over the runs that have a value (NaN when none has). */
  readonly mean: number;
  /** Sample standard deviation (n − 1 in the denominator); 0 for a single value, NaN for none. */
  readonly std: number;
  /** Number of values. */
  readonly n: number;
  /** The per-seed values, in seed order. */
  readonly values: readonly number[];
}

/** The per-configuration statistics (the columns of the summary table). */
export interface GroupStats {
  /** {@link ACCURACY_METRIC} at the last evaluation. */
  readonly finalAccuracy: SeedStat;
  /** Highest {@link ACCURACY_METRIC} over the evaluations after step 0 (step 0 when it is the only one). */
  readonly bestAccuracy: SeedStat;
  /** `reward/mean` of the last step. */
  readonly finalReward: SeedStat;
  /** Mean over steps of `rollout_corr/k3_kl` (the rollout/trainer mismatch). */
  readonly meanK3: SeedStat;
  /** Sum over steps of `total` in timings.jsonl: seconds of GRPO steps (warm start and evaluation excluded). */
  readonly stepSeconds: SeedStat;
}

/** Names of the {@link GroupStats} columns, in table order. */
export const STAT_COLUMNS = ['finalAccuracy', 'bestAccuracy', 'finalReward', 'meanK3', 'stepSeconds'] as const;

/** One run inside a group. */
export interface GroupRun {
  /** Run directory relative to the report root. */
  readonly name: string;
  /** Its `seed`, or null when the config is unknown. */
  readonly seed: number | null;
  /** Steps completed. */
  readonly steps: number;
  /** Why it failed, or null. */
  readonly error: string | null;
}

/** One configuration (all config fields except `seed`) and its runs. */
export interface GroupSummary {
  /** Short label: the fields that differ between groups, e.g. `plan=fp8-rollout, correction=tis`. */
  readonly label: string;
  /** The fields that label the group, by short name. */
  readonly fields: Readonly<Record<string, string>>;
  /** The shared config without `seed`. */
  readonly config: Readonly<Record<string, unknown>> | null;
  /** Runs in seed order. */
  readonly runs: readonly GroupRun[];
  /** Statistics over the runs that did not fail. */
  readonly stats: GroupStats;
}

/** What summary.json holds. */
export interface Summary {
  readonly version: 1;
  /** How each column is computed. */
  readonly definitions: Readonly<Record<(typeof STAT_COLUMNS)[number], string>>;
  readonly groups: readonly GroupSummary[];
  /** Failed runs with their error. */
  readonly failures: readonly { readonly run: string; readonly label: string; readonly error: string }[];
}

/** Column definitions written into summary.json and under the tables. */
export const STAT_DEFINITIONS: Summary['definitions'] = {
  finalAccuracy: `${ACCURACY_METRIC} at the last evaluation`,
  bestAccuracy: `max of ${ACCURACY_METRIC} over the evaluations after step 0`,
  finalReward: 'reward/mean of the last step',
  meanK3: 'mean over steps of rollout_corr/k3_kl',
  stepSeconds: 'sum over steps of timings.jsonl total (seconds; warm start and evaluation excluded)',
};

/**
 * Mean and sample standard deviation of `values` (non-finite values are dropped).
 * @example seedStat([0.5, 0.7]) // { mean: 0.6, std: 0.1414…, n: 2, values: [0.5, 0.7] }
 */
export function seedStat(values: readonly number[]): SeedStat {
  const xs = values.filter((v) => Number.isFinite(v));
  const n = xs.length;
  if (n === 0) return { mean: Number.NaN, std: Number.NaN, n: 0, values: xs };
  const mean = xs.reduce((a, b) => a + b, 0) / n;
  if (n === 1) return { mean, std: 0, n, values: xs };
  const ss = xs.reduce((a, b) => a + (b - mean) ** 2, 0);
  return { mean, std: Math.sqrt(ss / (n - 1)), n, values: xs };
}

function lastValue(lines: readonly MetricLine[], metric: string): number {
  for (let i = lines.length - 1; i >= 0; i--) {
    const v = lines[i]?.[metric];
    if (typeof v === 'number') return v;
  }
  return Number.NaN;
}

function bestAccuracy(lines: readonly MetricLine[]): number {
  const withValue = lines.filter((l) => typeof l[ACCURACY_METRIC] === 'number');
  const after = withValue.filter((l) => (l['step'] ?? 0) > 0);
  const pool = after.length > 0 ? after : withValue;
  return pool.length === 0 ? Number.NaN : Math.max(...pool.map((l) => l[ACCURACY_METRIC] as number));
}

function meanOf(lines: readonly MetricLine[], metric: string): number {
  const xs = lines.map((l) => l[metric]).filter((v): v is number => typeof v === 'number');
  return xs.length === 0 ? Number.NaN : xs.reduce((a, b) => a + b, 0) / xs.length;
}

function sumOf(lines: readonly MetricLine[], metric: string): number {
  const xs = lines.map((l) => l[metric]).filter((v): v is number => typeof v === 'number');
  return xs.length === 0 ? Number.NaN : xs.reduce((a, b) => a + b, 0);
}

/** The statistics of one run (the per-seed values of {@link GroupStats}). */
export function runStats(run: RunRecord): Record<(typeof STAT_COLUMNS)[number], number> {
  return {
    finalAccuracy: lastValue(run.eval, ACCURACY_METRIC),
    bestAccuracy: bestAccuracy(run.eval),
    finalReward: lastValue(run.metrics, 'reward/mean'),
    meanK3: meanOf(run.metrics, 'rollout_corr/k3_kl'),
    stepSeconds: sumOf(run.timings, 'total'),
  };
}

/** JSON with object keys sorted, so equal configs give equal strings. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

function withoutSeed(config: Readonly<Record<string, unknown>> | null): Record<string, unknown> | null {
  if (config === null) return null;
  const { seed: _seed, ...rest } = config;
  return rest;
}

/** Config paths compared as one unit: an estimator spec differs as a whole (name and hyper-parameters). */
const UNIT_PATHS: ReadonlySet<string> = new Set(['estimators.advantage', 'estimators.correction', 'estimators.loss', 'estimators.aggregation', 'estimators.kl']);

/**
 * Leaf values of a config by dotted path (arrays indexed: `rollout.prompts`, `task.options.length`);
 * estimator specs (`estimators.correction`, `estimators.loss`, …) stay whole.
 */
export function flattenConfig(value: unknown, prefix = '', out: Map<string, unknown> = new Map()): Map<string, unknown> {
  const isContainer = typeof value === 'object' && value !== null && (Array.isArray(value) ? value.length > 0 : Object.keys(value).length > 0);
  if (isContainer && !UNIT_PATHS.has(prefix)) {
    for (const [k, v] of Object.entries(value)) flattenConfig(v, prefix ? `${prefix}.${k}` : k, out);
  } else {
    out.set(prefix, value);
  }
  return out;
}

/**
 * Short display name of a config path: `estimators.` dropped (`estimators.correction` →
 * `correction`, `estimators.loss` → `loss`; `optim.lr` stays).
 */
export function shortFieldName(path: string): string {
  return path.replace(/^estimators\./, '');
}

type Spec = { readonly name?: unknown } & Readonly<Record<string, unknown>>;
const specs = (v: unknown): Spec[] => (Array.isArray(v) ? v : [v]).filter((s): s is Spec => typeof s === 'object' && s !== null);
const specName = (v: unknown): string => specs(v).map((s) => String(s.name ?? '?')).join('+');
const specFull = (v: unknown): string =>
  specs(v)
    .map((s) => {
      const params = Object.entries(s).filter(([k]) => k !== 'name').map(([k, x]) => `${k}=${typeof x === 'string' ? x : JSON.stringify(x)}`);
      return params.length === 0 ? String(s.name ?? '?') : `${String(s.name ?? '?')}(${params.join(',')})`;
    })
    .join('+');

/** Display values of one differing path across groups: estimator specs by name when the names tell them apart. */
function displayValues(path: string, values: readonly unknown[]): string[] {
  if (!UNIT_PATHS.has(path)) return values.map((v) => (typeof v === 'string' ? v : v === undefined ? '—' : JSON.stringify(v)));
  if (values.some((v) => v === null || v === undefined)) return values.map((v) => (v === null || v === undefined ? 'none' : specFull(v)));
  const names = values.map(specName);
  const full = values.map(specFull);
  const distinct = new Set(full).size === new Set(names).size;
  return distinct ? names : full;
}

/** The correction chain of a config as `tis+geo-rs` (or `none`). */
function correctionName(config: Readonly<Record<string, unknown>>): string {
  const est = config['estimators'];
  const chain = typeof est === 'object' && est !== null ? specName((est as Record<string, unknown>)['correction']) : '';
  return chain === '' ? 'none' : chain;
}

/**
 * Groups runs by configuration (every field except `seed`) in order of first appearance, labels
 * each group by the fields that differ between groups, and computes the statistics.
 */
export function summarizeRuns(runs: readonly RunRecord[]): Summary {
  const byKey = new Map<string, RunRecord[]>();
  for (const run of runs) {
    const key = run.config === null ? `run:${run.name}` : canonicalJson(withoutSeed(run.config));
    const list = byKey.get(key) ?? [];
    list.push(run);
    byKey.set(key, list);
  }
  const members = [...byKey.values()];
  const flats = members.map((list) => flattenConfig(withoutSeed(list[0]?.config ?? null) ?? {}));
  const allPaths = [...new Set(flats.flatMap((f) => [...f.keys()]))];
  const differing = allPaths.filter((p) => new Set(flats.map((f) => canonicalJson(f.get(p)))).size > 1);
  const displayed = new Map(differing.map((p) => [p, displayValues(p, flats.map((f) => f.get(p)))]));

  const groups: GroupSummary[] = members.map((list, g) => {
    const first = list[0] as RunRecord;
    const fields: Record<string, string> = {};
    if (first.config === null) fields['run'] = first.name;
    else if (differing.length > 0) for (const p of differing) fields[shortFieldName(p)] = displayed.get(p)?.[g] ?? '—';
    else {
      fields['plan'] = String(first.config['plan']);
      fields['correction'] = correctionName(first.config);
    }
    const label = Object.entries(fields).map(([k, v]) => `${k}=${v}`).join(', ');
    const sorted = [...list].sort((a, b) => Number(a.config?.['seed'] ?? 0) - Number(b.config?.['seed'] ?? 0));
    const ok = sorted.filter((r) => r.error === null);
    const per = ok.map(runStats);
    const column = (c: (typeof STAT_COLUMNS)[number]): SeedStat => seedStat(per.map((p) => p[c]));
    return {
      label,
      fields,
      config: withoutSeed(first.config),
      runs: sorted.map((r) => ({
        name: r.name,
        seed: typeof r.config?.['seed'] === 'number' ? r.config['seed'] : null,
        steps: r.metrics.length,
        error: r.error,
      })),
      stats: {
        finalAccuracy: column('finalAccuracy'),
        bestAccuracy: column('bestAccuracy'),
        finalReward: column('finalReward'),
        meanK3: column('meanK3'),
        stepSeconds: column('stepSeconds'),
      },
    };
  });
  const failures = groups.flatMap((g) => g.runs.filter((r) => r.error !== null).map((r) => ({ run: r.name, label: g.label, error: r.error as string })));
  return { version: 1, definitions: STAT_DEFINITIONS, groups, failures };
}
