// A sweep on an external backend (`qrl-sim lab run NAME --backend COMMAND`): each run spawns the
// backend command with the backend's own plan for the run's plan (the experiment's mapping) and drives
// it as `qrl-sim run --backend` does. Not the sweep's scheduling (sweep.ts) nor the CLI (cli/lab.ts).

import { UsageError } from '../core/errors.js';
import { connectBackend, parseBackendAddress } from '../protocol/remote.js';
import { replaysSupport, type RunConfig } from '../rl/grpo/config.js';
import { makeTaskFromConfig } from '../tasks/registry.js';
import { PLAN_FROM_BACKEND, backendMismatches, backendSetup } from './backend-expect.js';
import { CheckedBackend } from './checked-backend.js';
import type { PolicyFactory } from '../policies/engine.js';
import { runGrpo, type RunSummary } from './run.js';

/** The backend a sweep's runs run on. */
export interface SweepBackend {
  /** The command as spawned (a leading `qrl-sim` already resolved); `{plan}` marks where the plan goes. */
  readonly command: string;
  /** The command as given, recorded in each run's config.json (`backend.address`) and its warm-start key. */
  readonly address: string;
  /** qrl-sim plan name → the backend's served plan name (an experiment's `backendPlans`). */
  readonly plans: Readonly<Record<string, string>>;
}

/** What one run of the sweep sends to its worker (structured-cloneable). */
export interface SweepBackendRun {
  readonly command: string;
  readonly address: string;
  /** The plan the backend must serve. */
  readonly plan: string;
}

/** The name of a config's plan: a preset's name, or a plan object's `name` ('(unnamed)' without one). */
export function planNameOf(plan: RunConfig['plan']): string {
  if (typeof plan === 'string') return plan;
  const name = (plan as Record<string, unknown>)['name'];
  return typeof name === 'string' ? name : '(unnamed)';
}

/** `command` with its `{plan}` marks replaced by `plan`, or ` --plan <plan>` appended when it has none. */
export function commandForPlan(command: string, plan: string): string {
  return command.includes('{plan}') ? command.split('{plan}').join(plan) : `${command} --plan ${plan}`;
}

/**
 * The backend run of a planned run: its plan mapped (a UsageError naming the plan and `where` when
 * the mapping has none) and the command and address for it; the config it runs with says
 * `"plan": "backend"` (the served plan is checked against the mapping when the backend answers).
 */
export function sweepBackendRun(
  config: RunConfig,
  backend: SweepBackend,
  where: string,
): { readonly config: RunConfig; readonly backend: SweepBackendRun } {
  const name = planNameOf(config.plan);
  const plan = Object.hasOwn(backend.plans, name) ? backend.plans[name] : undefined;
  if (plan === undefined)
    throw new UsageError(
      `--backend: ${where} has no backend plan for plan '${name}' (mapped: ${Object.keys(backend.plans).join(', ') || 'none'})`,
    );
  return {
    config: { ...config, plan: PLAN_FROM_BACKEND },
    backend: {
      command: commandForPlan(backend.command, plan),
      address: commandForPlan(backend.address, plan),
      plan,
    },
  };
}

/** Options of {@link runGrpoOnBackend}. */
export interface BackendRunOptions {
  readonly config: RunConfig;
  readonly outDir: string;
  readonly factory: PolicyFactory;
  readonly cacheDir: string;
  readonly backend: SweepBackendRun;
  readonly resume?: boolean;
  readonly shouldStop?: () => boolean;
}

/** The last characters of a backend's stderr that a failure quotes. */
const STDERR_TAIL = 2000;

/**
 * One run on a spawned backend, checked as `qrl-sim run --backend` checks it: the start-up checks
 * (docs/adapter.md §5), the served plan against the mapping, every answer through CheckedBackend.
 * The backend's stderr is kept (its tail is quoted when the run fails) and the backend is shut down after.
 */
export async function runGrpoOnBackend(options: BackendRunOptions): Promise<RunSummary> {
  const { config, backend: target } = options;
  const task = makeTaskFromConfig(config.task);
  let stderr = '';
  const remote = await connectBackend(parseBackendAddress(target.command), {
    timeoutMs: 600_000,
    run: config,
    setup: backendSetup(config, task),
    onStderr: (text) => {
      stderr = (stderr + text).slice(-STDERR_TAIL);
    },
  });
  try {
    const info = remote.lastInfo!;
    const problems = backendMismatches(info, config, task);
    if (info.plan.name !== target.plan)
      problems.push(`plan: the mapping asks for '${target.plan}', the backend serves '${info.plan.name}'`);
    if (problems.length > 0)
      throw new Error(`the backend does not serve what the run asks for: ${problems.join('; ')}`);
    return await runGrpo({
      config,
      outDir: options.outDir,
      factory: options.factory,
      cacheDir: options.cacheDir,
      resume: options.resume === true,
      backend: new CheckedBackend(remote, remote.name, { replaysSupport: replaysSupport(config) }),
      backendIdentity: {
        address: target.address,
        name: info.backend.name,
        version: info.backend.version,
        protocol: info.protocol,
        policy: info.policy,
        plan: info.plan.name,
      },
      ...(options.shouldStop === undefined ? {} : { shouldStop: options.shouldStop }),
    });
  } catch (error) {
    const tail = stderr.trim().split('\n').slice(-3).join(' | ');
    if (error instanceof Error && tail !== '') error.message = `${error.message} (backend stderr: ${tail})`;
    throw error;
  } finally {
    await remote.close();
  }
}
