// Per-configuration statistics over seeds: group runs by every config field except `seed`, label
// the groups by what differs, and compute mean ± sample std. Not rendering (table.ts, plots.ts).

import type { MetricLine, RunRecord } from './runs.js';

/** The eval metric of the rollout-engine accuracy columns: greedy pass@1 of the rollout engine (the deployed, quantized side). */
export const ACCURACY_METRIC = 'eval/rollout/greedy_accuracy';

/** The eval metric of the trainer-precision accuracy column: the same problems answered at the trainer's precision (what the updates did to the weights). */
export const TRAINER_ACCURACY_METRIC = 'eval/trainer/greedy_accuracy';

/**
 * Share of a run's last steps whose `reward/mean` the tail-reward column averages:
 * K = max(1, ⌈0.2 · steps⌉), e.g. the last 12 of 60 steps.
 */
export const REWARD_TAIL_FRACTION = 0.2;

/** The number K of last steps the tail-reward column averages for a run of `steps` steps. */
export function rewardTailSteps(steps: number): number {
  return Math.max(1, Math.ceil(REWARD_TAIL_FRACTION * steps));
}

/** Mean ± sample standard deviation over seeds. */
export interface SeedStat {
  /** Mean over the runs that have a value (NaN when none has). */
  readonly mean: number;
  /** Sample standard deviation (n − 1 in the denominator); NaN for fewer than two values (no spread to measure). */
  readonly std: number;
  /** Number of values. */
  readonly n: number;
  /** The per-seed values, in seed order. */
  readonly values: readonly number[];
}

/** The per-configuration statistics (the columns of the summary table). */
export interface GroupStats {
  /** {@link TRAINER_ACCURACY_METRIC} at the last evaluation. */
  readonly finalTrainerAccuracy: SeedStat;
  /** {@link ACCURACY_METRIC} at the last evaluation. */
  readonly finalAccuracy: SeedStat;
  /** Highest {@link ACCURACY_METRIC} over the evaluations after step 0 (step 0 when it is the only one). */
  readonly bestAccuracy: SeedStat;
  /** Mean of `reward/mean` over the last K steps ({@link rewardTailSteps}). */
  readonly tailReward: SeedStat;
  /** Mean over steps of `rollout_corr/k3_kl` (the rollout/trainer mismatch). */
  readonly meanK3: SeedStat;
  /** Sum over steps of `total` in timings.jsonl: seconds of GRPO steps (warm start and evaluation excluded). */
  readonly stepSeconds: SeedStat;
}

/** Names of the {@link GroupStats} columns, in table order. */
export const STAT_COLUMNS = [
  'finalTrainerAccuracy',
  'finalAccuracy',
  'bestAccuracy',
  'tailReward',
  'meanK3',
  'stepSeconds',
] as const;

/** A column of {@link GroupStats}. */
export type StatColumn = (typeof STAT_COLUMNS)[number];

/** The columns compared with the baseline, paired by seed, in table order. */
export const DELTA_COLUMNS = ['finalTrainerAccuracy', 'finalAccuracy', 'tailReward'] as const;

/** A column of the paired comparison. */
export type DeltaColumn = (typeof DELTA_COLUMNS)[number];

/**
 * Per-seed differences of one column to the baseline configuration (this group's run of seed s
 * minus the baseline's run of seed s, over the seeds both have).
 */
export interface DeltaStat extends SeedStat {
  /** The seeds paired, in order (same order as `values`). */
  readonly seeds: readonly number[];
  /** How many differences are below zero. */
  readonly below: number;
  /**
   * Whether the difference is inside the seed spread: |mean Δ| ≤ std Δ (the interval
   * mean ± one sample std of the paired differences contains 0). Null with fewer than two pairs.
   */
  readonly insideSpread: boolean | null;
}

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
  /** Held-out problems per evaluation (`eval.problems`): accuracy moves in steps of 1/N. Null when unknown. */
  readonly evalProblems: number | null;
  /** K, the number of last steps the tail reward averages (from the longest run). */
  readonly rewardTailSteps: number;
  /** Whether this is the baseline configuration. */
  readonly isBaseline: boolean;
  /** Paired differences to the baseline, or null (this is the baseline, or there is none). */
  readonly delta: Readonly<Record<DeltaColumn, DeltaStat>> | null;
}

/** The configuration the others are compared with. */
export interface BaselineInfo {
  /** The selector used (`plan=bf16, correction=none` by default). */
  readonly selector: string;
  /** Label of the baseline group, or null when no single group matched. */
  readonly label: string | null;
  /** Why there is no baseline comparison, or null. */
  readonly note: string | null;
}

/** What summary.json holds. */
export interface Summary {
  readonly version: 2;
  /** How each column is computed. */
  readonly definitions: Readonly<Record<StatColumn, string>>;
  /** The baseline of the paired comparison. */
  readonly baseline: BaselineInfo;
  readonly groups: readonly GroupSummary[];
  /** Failed runs with their error. */
  readonly failures: readonly { readonly run: string; readonly label: string; readonly error: string }[];
}

/** Column definitions written into summary.json and under the tables. */
export const STAT_DEFINITIONS: Summary['definitions'] = {
  finalTrainerAccuracy: `${TRAINER_ACCURACY_METRIC} at the last evaluation: held-out greedy pass@1 at the trainer's precision (what the updates did to the weights)`,
  finalAccuracy: `${ACCURACY_METRIC} at the last evaluation: held-out greedy pass@1 of the rollout engine (what is served)`,
  bestAccuracy: `max of ${ACCURACY_METRIC} over the evaluations after step 0`,
  tailReward: `mean of reward/mean over the last K = max(1, ⌈${REWARD_TAIL_FRACTION}·steps⌉) steps`,
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
  if (n === 1) return { mean, std: Number.NaN, n, values: xs };
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

function tailMean(lines: readonly MetricLine[], metric: string): number {
  const xs = lines.map((l) => l[metric]).filter((v): v is number => typeof v === 'number');
  if (xs.length === 0) return Number.NaN;
  const tail = xs.slice(-rewardTailSteps(xs.length));
  return tail.reduce((a, b) => a + b, 0) / tail.length;
}

/** The statistics of one run (the per-seed values of {@link GroupStats}). */
export function runStats(run: RunRecord): Record<StatColumn, number> {
  return {
    finalTrainerAccuracy: lastValue(run.eval, TRAINER_ACCURACY_METRIC),
    finalAccuracy: lastValue(run.eval, ACCURACY_METRIC),
    bestAccuracy: bestAccuracy(run.eval),
    tailReward: tailMean(run.metrics, 'reward/mean'),
    meanK3: meanOf(run.metrics, 'rollout_corr/k3_kl'),
    stepSeconds: sumOf(run.timings, 'total'),
  };
}

/** JSON with object keys sorted, so equal configs give equal strings. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
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
const UNIT_PATHS: ReadonlySet<string> = new Set([
  'estimators.advantage',
  'estimators.correction',
  'estimators.loss',
  'estimators.aggregation',
  'estimators.kl',
]);

/** A plan given as data (`plan` an object, e.g. a plan file of the grid) differs as a whole and is shown by its name. */
const PLAN_PATH = 'plan';

/**
 * Leaf values of a config by dotted path (arrays indexed: `rollout.prompts`, `task.options.length`);
 * estimator specs (`estimators.correction`, `estimators.loss`, …) and a plan given as data stay whole.
 */
export function flattenConfig(
  value: unknown,
  prefix = '',
  out: Map<string, unknown> = new Map(),
): Map<string, unknown> {
  const isContainer =
    typeof value === 'object' &&
    value !== null &&
    (Array.isArray(value) ? value.length > 0 : Object.keys(value).length > 0);
  if (isContainer && !UNIT_PATHS.has(prefix) && prefix !== PLAN_PATH) {
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
const specs = (v: unknown): Spec[] =>
  (Array.isArray(v) ? v : [v]).filter((s): s is Spec => typeof s === 'object' && s !== null);
const specName = (v: unknown): string =>
  specs(v)
    .map((s) => String(s.name ?? '?'))
    .join('+');
const specFull = (v: unknown): string =>
  specs(v)
    .map((s) => {
      const params = Object.entries(s)
        .filter(([k]) => k !== 'name')
        .map(([k, x]) => `${k}=${typeof x === 'string' ? x : JSON.stringify(x)}`);
      return params.length === 0 ? String(s.name ?? '?') : `${String(s.name ?? '?')}(${params.join(',')})`;
    })
    .join('+');

/** Display values of one differing path across groups: estimator specs by name when the names tell them apart. */
function displayValues(path: string, values: readonly unknown[]): string[] {
  if (path === PLAN_PATH) {
    // a preset by its name, a plan as data by its own name; the whole JSON when two plans share a name
    const names = values.map((v) =>
      typeof v === 'object' && v !== null
        ? String((v as Record<string, unknown>)['name'] ?? 'custom')
        : typeof v === 'string'
          ? v
          : v === undefined
            ? '—'
            : JSON.stringify(v),
    );
    const distinct = new Set(names).size === new Set(values.map(canonicalJson)).size;
    return distinct ? names : values.map((v) => (typeof v === 'string' ? v : JSON.stringify(v)));
  }
  if (!UNIT_PATHS.has(path))
    return values.map((v) => (typeof v === 'string' ? v : v === undefined ? '—' : JSON.stringify(v)));
  if (values.some((v) => v === null || v === undefined))
    return values.map((v) => (v === null || v === undefined ? 'none' : specFull(v)));
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

/** A baseline selector that is malformed or does not pick exactly one configuration. */
export class BaselineError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BaselineError';
  }
}

/** The default baseline: the BF16 plan without a rollout correction. */
export const DEFAULT_BASELINE = 'plan=bf16,correction=none';

/** A run on a backend's own plan (`plan: "backend"`) compares by the plan it served (`backend.plan`). */
function servedPlan(flat: Map<string, unknown>): Map<string, unknown> {
  const served = flat.get('backend.plan');
  if (flat.get('plan') === 'backend' && typeof served === 'string') flat.set('plan', served);
  return flat;
}

/**
 * The differing paths that label the groups: a `backend.*` path (the address, the served plan) is left
 * out when the others already tell every group apart (a lab sweep on a backend: the address differs
 * only by the plan it was started with).
 */
function labelPaths(differing: readonly string[], flats: readonly Map<string, unknown>[]): string[] {
  const distinct = (paths: readonly string[]): number =>
    new Set(flats.map((f) => canonicalJson(paths.map((p) => f.get(p) ?? null)))).size;
  let kept = [...differing];
  const all = distinct(kept);
  for (const p of differing.filter((q) => q.startsWith('backend.'))) {
    const without = kept.filter((q) => q !== p);
    if (without.length > 0 && distinct(without) === all) kept = without;
  }
  return kept;
}

/** Short keys a baseline selector may use besides the label's field names, with their config paths. */
const SELECTOR_PATHS: Readonly<Record<string, string>> = {
  correction: 'estimators.correction',
  loss: 'estimators.loss',
  advantage: 'estimators.advantage',
  aggregation: 'estimators.aggregation',
  kl: 'estimators.kl',
  lr: 'optim.lr',
  task: 'task.name',
  policy: 'policy.kind',
};

/**
 * Parses a baseline selector `KEY=VALUE,KEY=VALUE` (a comma starts a new pair only when a
 * `KEY=` follows, so `correction=tis(C=2,x=1)` stays whole).
 * @example parseBaselineSelector('plan=bf16,correction=none') // [['plan','bf16'],['correction','none']]
 */
export function parseBaselineSelector(selector: string): [string, string][] {
  const parts = splitSelector(selector);
  if (selector.trim() === '')
    throw new BaselineError(`baseline: empty selector (expected KEY=VALUE[,KEY=VALUE…], e.g. ${DEFAULT_BASELINE})`);
  return parts.map((part) => {
    const eq = part.indexOf('=');
    if (eq <= 0 || eq === part.length - 1)
      throw new BaselineError(`baseline: '${part}' in '${selector}' is not KEY=VALUE (e.g. ${DEFAULT_BASELINE})`);
    return [part.slice(0, eq).trim(), part.slice(eq + 1).trim()];
  });
}

/** Splits a selector at the commas outside brackets that start a new `KEY=` pair. */
function splitSelector(selector: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < selector.length; i++) {
    const ch = selector[i] as string;
    if ('([{'.includes(ch)) depth++;
    else if (')]}'.includes(ch)) depth--;
    else if (ch === ',' && depth === 0 && /^\s*[\w.]+=/.test(selector.slice(i + 1))) {
      parts.push(selector.slice(start, i).trim());
      start = i + 1;
    }
  }
  parts.push(selector.slice(start).trim());
  return parts;
}

/** The value at a dotted path of a config (`'policy.kind'`), or undefined where the path leaves the objects. */
export function configAt(config: unknown, path: string): unknown {
  let node = config;
  for (const key of path.split('.')) {
    if (typeof node !== 'object' || node === null) return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

/** Every spelling under which a group matches `key` (its label field, the spec name, the full spec, the raw value). */
function selectorValues(
  fields: Readonly<Record<string, string>>,
  config: Readonly<Record<string, unknown>> | null,
  key: string,
): Set<string> {
  const out = new Set<string>();
  const field = fields[key];
  if (field !== undefined) out.add(field);
  if (config === null) return out;
  const path = SELECTOR_PATHS[key] ?? key;
  const value = configAt(config, path);
  if (UNIT_PATHS.has(path)) {
    const name = specName(value);
    out.add(name === '' ? 'none' : name);
    if (name !== '') out.add(specFull(value));
  } else if (path === PLAN_PATH && typeof value === 'object' && value !== null) {
    out.add(String((value as Record<string, unknown>)['name'] ?? 'custom'));
    out.add(JSON.stringify(value));
  } else if (value !== undefined) out.add(typeof value === 'string' ? value : JSON.stringify(value));
  return out;
}

/** Indices of the groups a selector matches. */
function matchingGroups(
  pairs: readonly [string, string][],
  groups: readonly { fields: Readonly<Record<string, string>>; config: Readonly<Record<string, unknown>> | null }[],
): number[] {
  return groups.flatMap((g, i) => (pairs.every(([k, v]) => selectorValues(g.fields, g.config, k).has(v)) ? [i] : []));
}

/**
 * Paired differences `a[s] − b[s]` over the seeds both maps have a finite value for.
 * @example pairedDelta(new Map([[0, 0.4], [1, 0.5]]), new Map([[0, 0.6], [1, 0.5]])) // values [−0.2, 0], below 1
 */
export function pairedDelta(a: ReadonlyMap<number, number>, b: ReadonlyMap<number, number>): DeltaStat {
  const seeds = [...a.keys()]
    .filter((s) => Number.isFinite(a.get(s)) && Number.isFinite(b.get(s)))
    .sort((x, y) => x - y);
  const diffs = seeds.map((s) => (a.get(s) as number) - (b.get(s) as number));
  const stat = seedStat(diffs);
  return {
    ...stat,
    seeds,
    below: diffs.filter((d) => d < 0).length,
    insideSpread: stat.n < 2 ? null : Math.abs(stat.mean) <= stat.std,
  };
}

/** Options of {@link summarizeRuns}. */
export interface SummaryOptions {
  /**
   * Selects the baseline of the paired comparison by label fields or config values
   * (`plan=bf16,correction=none`). When given, it must match exactly one configuration
   * ({@link BaselineError} otherwise). @defaultValue {@link DEFAULT_BASELINE}, used only when it matches exactly one
   */
  readonly baseline?: string;
}

/**
 * Groups runs by configuration (every field except `seed`) in order of first appearance, labels
 * each group by the fields that differ between groups, computes the statistics, and compares
 * every group with the baseline configuration, paired by seed.
 */
export function summarizeRuns(runs: readonly RunRecord[], options: SummaryOptions = {}): Summary {
  const byKey = new Map<string, RunRecord[]>();
  for (const run of runs) {
    const key = run.config === null ? `run:${run.name}` : canonicalJson(withoutSeed(run.config));
    const list = byKey.get(key) ?? [];
    list.push(run);
    byKey.set(key, list);
  }
  const members = [...byKey.values()];
  const flats = members.map((list) => servedPlan(flattenConfig(withoutSeed(list[0]?.config ?? null) ?? {})));
  const allPaths = [...new Set(flats.flatMap((f) => [...f.keys()]))];
  const differing = labelPaths(
    allPaths.filter((p) => new Set(flats.map((f) => canonicalJson(f.get(p)))).size > 1),
    flats,
  );
  const displayed = new Map(
    differing.map((p) => [
      p,
      displayValues(
        p,
        flats.map((f) => f.get(p)),
      ),
    ]),
  );

  const base = members.map((list, g) => {
    const first = list[0] as RunRecord;
    const fields: Record<string, string> = {};
    if (first.config === null) fields['run'] = first.name;
    else if (differing.length > 0) for (const p of differing) fields[shortFieldName(p)] = displayed.get(p)?.[g] ?? '—';
    else {
      const plan = first.config['plan'];
      // a plan given as data shows its name (or 'custom'), like the backend's info()
      // a plan taken from the backend ('backend') shows the plan the backend served (config.backend.plan)
      const served = (first.config['backend'] as { plan?: unknown } | undefined)?.plan;
      fields['plan'] =
        plan === 'backend' && typeof served === 'string'
          ? served
          : typeof plan === 'object' && plan !== null
            ? String((plan as Record<string, unknown>)['name'] ?? 'custom')
            : String(plan);
      fields['correction'] = correctionName(first.config);
    }
    const label = Object.entries(fields)
      .map(([k, v]) => `${k}=${v}`)
      .join(', ');
    const sorted = [...list].sort((a, b) => Number(a.config?.['seed'] ?? 0) - Number(b.config?.['seed'] ?? 0));
    const ok = sorted.filter((r) => r.error === null);
    const wanted = (r: RunRecord): number => (typeof r.config?.['steps'] === 'number' ? r.config['steps'] : 0);
    const per = ok.map((r) => ({
      seed: typeof r.config?.['seed'] === 'number' ? r.config['seed'] : null,
      stats: runStats(r),
      steps: r.metrics.length,
      complete: r.metrics.length >= wanted(r),
    }));
    const problems = configAt(first.config, 'eval.problems');
    return {
      first,
      fields,
      label,
      sorted,
      per,
      config: withoutSeed(first.config),
      evalProblems: typeof problems === 'number' ? problems : null,
    };
  });

  // The baseline: an explicit selector must match one group; the default is used when it does.
  const selector = options.baseline ?? DEFAULT_BASELINE;
  const matches = matchingGroups(parseBaselineSelector(selector), base);
  const shown = splitSelector(selector).join(', ');
  if (options.baseline !== undefined && matches.length !== 1) {
    const known = base.map((g) => `'${g.label}'`).join('; ');
    throw new BaselineError(
      matches.length === 0
        ? `baseline: '${selector}' matches no configuration (configurations: ${known})`
        : `baseline: '${selector}' matches ${matches.length} configurations (${matches.map((i) => `'${base[i]?.label}'`).join('; ')}); add a field to pick one`,
    );
  }
  const baseIndex = matches.length === 1 ? (matches[0] as number) : -1;
  const baseline: BaselineInfo = {
    selector: shown,
    label: baseIndex < 0 ? null : (base[baseIndex]?.label ?? null),
    note:
      baseIndex >= 0
        ? null
        : matches.length === 0
          ? `no configuration matches the default baseline ${shown}; choose one with --baseline`
          : `${matches.length} configurations match the default baseline ${shown}; choose one with --baseline`,
  };
  const bySeed = (per: (typeof base)[number]['per'], c: DeltaColumn): Map<number, number> =>
    // only complete runs are paired: an interrupted run's last evaluation is from an earlier step
    new Map(per.filter((p) => p.seed !== null && p.complete).map((p) => [p.seed as number, p.stats[c]]));

  const groups: GroupSummary[] = base.map((g, i) => {
    const column = (c: StatColumn): SeedStat => seedStat(g.per.map((p) => p.stats[c]));
    const ref = base[baseIndex];
    const delta =
      ref === undefined || i === baseIndex
        ? null
        : (Object.fromEntries(
            DELTA_COLUMNS.map((c) => [c, pairedDelta(bySeed(g.per, c), bySeed(ref.per, c))]),
          ) as Record<DeltaColumn, DeltaStat>);
    return {
      label: g.label,
      fields: g.fields,
      config: g.config,
      runs: g.sorted.map((r) => ({
        name: r.name,
        seed: typeof r.config?.['seed'] === 'number' ? r.config['seed'] : null,
        steps: r.metrics.length,
        error: r.error,
      })),
      stats: Object.fromEntries(STAT_COLUMNS.map((c) => [c, column(c)])) as Record<StatColumn, SeedStat>,
      evalProblems: g.evalProblems,
      rewardTailSteps: rewardTailSteps(Math.max(0, ...g.per.map((p) => p.steps))),
      isBaseline: i === baseIndex,
      delta,
    };
  });
  const failures = groups.flatMap((g) =>
    g.runs.filter((r) => r.error !== null).map((r) => ({ run: r.name, label: g.label, error: r.error as string })),
  );
  return { version: 2, definitions: STAT_DEFINITIONS, baseline, groups, failures };
}
