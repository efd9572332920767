// `qrl-sim run`: one GRPO run from a JSON config, with a progress bar, resumable checkpoints and
// Ctrl-C handling. Not the loop itself (src/rl/grpo/) and not sweeps (`qrl-sim sweep`).

import { createHash } from 'node:crypto';
import { basename, join } from 'node:path';
import cliProgress from 'cli-progress';
import { applyOverrides } from '../runs/overrides.js';
import { checkModelLimits } from '../runs/limits.js';
import { type RunConfig, replaysSupport, resolveRunConfig } from '../rl/grpo/config.js';
import { policyFactory } from '../runs/policies.js';
import { writeReport } from '../report/write.js';
import { latestCheckpoint, type RunObserver, runGrpo } from '../runs/run.js';
import type { CliIo, Command } from './command.js';
import { UsageError } from '../core/errors.js';
import { backendToken, checkSetValues, readJsonFile } from './input.js';
import { groupMeanAdvantageNames } from '../rl/advantages.js';
import { bundledConfigNames, bundledConfigText, resolveConfigPath } from './bundled.js';
import { claimOutDir, outDirKind, releaseOutDir } from './outdir.js';
import {
  BACKEND_OPTIONS,
  backendTimeouts,
  integerOption,
  MAX_STEPS,
  parseCommandArgs,
  REPEATED,
  seedOption,
  strings,
} from './parse.js';
import { BackendCallError, BackendCommandNotFound } from '../protocol/errors.js';
import { connectBackend, type RemoteBackend } from '../protocol/remote.js';
import { CheckedBackend } from '../runs/checked-backend.js';
import { resolveBackendAddress } from './self-command.js';
import { eta, progressLine } from './progress.js';
import { backendMismatches, backendSetup, PLAN_FROM_BACKEND } from '../runs/backend-expect.js';
import { makeTaskFromConfig } from '../tasks/registry.js';
import { exitOnStopSignal, handleStopSignals, STOP_EXIT, stopReason, stopRequested } from './stop.js';

const help = `usage: qrl-sim run --config FILE|NAME [--out DIR] [--steps N] [--seed S] [--set path=value ...] [--backend B] [--timeout MS]
                    [--startup-timeout MS] [--token-file FILE] [--no-report]
       qrl-sim run --resume DIR [--steps N] [--backend B] [--token-file FILE] [--no-report]
       qrl-sim run --print-config NAME > my.json

Runs GRPO as configured (docs/grpo.md lists every field): supervised warm start (cached), then
N steps of rollout under the plan's rollout engine, correction, and updates under its trainer.
Writes DIR/config.json (resolved), metrics.jsonl (one deterministic line per step),
timings.jsonl, eval.jsonl and checkpoints/. Ctrl-C stops after the current step with a
checkpoint; --resume DIR continues from the last checkpoint with byte-identical metrics.
SIGTERM (Slurm, Kubernetes) and a closed standard output (| head) stop the same way; a second
signal stops at once with the files whole. Stopped during the warm start, before a first
checkpoint, --resume DIR starts the run over from step 0 (the same files, byte for byte).

options:
  --config FILE   JSON run config; a bare NAME (no '/', no .json) that is no file here is the
                  bundled config sims/NAME.json of the package (listed below)
  --print-config NAME  print a bundled config, to copy and edit (> my.json), and exit
  --out DIR       output directory (default runs/<config name>-seed<S>)
  --steps N       override config.steps
  --seed S        override config.seed
  --set P=V       override any field, e.g. --set estimators.correction.name=tis (repeatable)
  --resume DIR    continue the run in DIR (its config.json; --steps may extend it; a run on an
                  external backend goes back to the address config.json records unless --backend)
  --backend B     drive a backend in another process over qrl-backend/1 (docs/adapter.md): a
                  command spoken to over stdio, e.g. "qrl-sim serve --policy ar --stdio", or an
                  http:// URL; its identity goes into config.json as "backend"
  --timeout MS    request timeout for --backend (default 600000); on expiry the backend's
                  whole process group is killed
  --startup-timeout MS  timeout of the first info, for a backend that loads a model (default
                  --timeout)
  --token-file FILE  the shared token of an http:// backend, sent as Authorization: Bearer
                  (default: the environment variable QRL_BACKEND_TOKEN)
  --no-report     write no summary.* nor report.html into DIR (a sweep's run: the sweep writes
                  one report for all its runs; 'qrl-sim report DIR' writes it later)

Output directory: a new or empty directory; an existing run, a sweep (or a directory inside one)
or any other non-empty directory is refused with exit code 2 (continue a run with --resume).
A run refused before it writes config.json (a backend that does not start or does not serve the
config) removes the directories it created for --out, so the same command can be run again.
The default name carries a short hash of the --set overrides when there are any. Resuming a
run that already reached its steps says so and exits 0 without changing any file.
--seed is an integer in 0..4294967295; --steps at most 100000 (docs/grpo.md lists the limits of
every size field). Progress of the warm start and of evaluations goes to standard error.

bundled configs (--config NAME):
  ${bundledConfigNames().join(', ')}

examples:
  qrl-sim run --config smoke-reverse --out runs/smoke
  qrl-sim run --resume runs/smoke --steps 4
  qrl-sim run --print-config smoke-reverse`;

/** Builds the resolved config from the command line; throws UsageError naming the field. */
export function configFromArgs(values: {
  config?: string;
  steps?: string;
  seed?: string;
  set?: string[];
  resume?: string;
}): RunConfig {
  let raw =
    values.resume !== undefined
      ? readJsonFile(join(values.resume, 'config.json'), '--resume')
      : readJsonFile(resolveConfigPath(values.config as string), '--config');
  if (values.resume !== undefined && raw !== null && typeof raw === 'object' && 'backend' in raw) {
    const { backend: _backend, ...rest } = raw as Record<string, unknown>;
    raw = rest;
  }
  const overrides = [...(values.set ?? [])];
  checkSetValues(overrides);
  if (values.steps !== undefined) overrides.push(`steps=${integerOption(values.steps, 'steps', 0, 1, MAX_STEPS)}`);
  if (values.seed !== undefined) overrides.push(`seed=${seedOption(values.seed)}`);
  let merged: unknown;
  try {
    merged = applyOverrides(raw, overrides);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const config = resolveRunConfig(merged);
  checkModelLimits(config);
  if (config.plan === PLAN_FROM_BACKEND) {
    // the plan comes from the backend's info; everything else is validated as usual
    policyFactory(config.policy.kind).validate({ ...config, plan: 'fp32' });
  } else policyFactory(config.policy.kind).validate(config);
  return config;
}

/**
 * The default output directory `runs/<config name>-seed<S>`, with a short hash of the `--set`
 * overrides when there are any, so that runs that differ only in `--set` do not collide.
 */
export function defaultRunDir(configPath: string, seed: number, sets: readonly string[]): string {
  const name = `${basename(configPath).replace(/\.json$/, '')}-seed${seed}`;
  if (sets.length === 0) return join('runs', name);
  return join('runs', `${name}-set${createHash('sha256').update(sets.join('\n')).digest('hex').slice(0, 8)}`);
}

/** The step of the newest checkpoint in `dir` (from its file name), or 0. */
function checkpointStep(dir: string): number {
  const path = latestCheckpoint(dir);
  const m = path === null ? null : /step-(\d+)$/.exec(path);
  return m === null ? 0 : Number(m[1]);
}

function fmt(v: number | undefined, digits = 3): string {
  return v === undefined ? '—' : Math.abs(v) > 0 && Math.abs(v) < 1e-3 ? v.toExponential(2) : v.toFixed(digits);
}

function progressObserver(io: CliIo, tty: boolean): RunObserver & { stop(): void } {
  const out = io.out;
  let bar: cliProgress.SingleBar | null = null;
  const line = progressLine(io);
  const t0 = Date.now();
  return {
    onWarmStart(done, total) {
      if (done === total) line.done();
      else
        line.update(`warm start: ${done}/${total} supervised steps, ETA ${eta(done, total, (Date.now() - t0) / 1000)}`);
    },
    onEvalStart(step) {
      if (bar) bar.update({ phase: ' eval' });
      else line.update(`evaluating at step ${step} …`);
    },
    onStart({ totalSteps, firstStep }) {
      if (tty) {
        bar = new cliProgress.SingleBar(
          {
            format: 'step {value}/{total} |{bar}| reward {reward} k3 {k3}{phase} | ETA {eta_formatted}',
            hideCursor: true,
          },
          cliProgress.Presets.shades_classic,
        );
        bar.start(totalSteps, firstStep - 1, { reward: '—', k3: '—', phase: '' });
      } else out(`running steps ${firstStep}..${totalSteps}`);
    },
    onStep(step, metrics, timings) {
      const reward = fmt(metrics['reward/mean']);
      const k3 = fmt(metrics['rollout_corr/k3_kl']);
      if (bar) bar.update(step, { reward, k3, phase: '' });
      else
        out(
          `step ${step} reward ${reward} accuracy ${fmt(metrics['reward/accuracy'])} k3 ${k3} (${timings.total.toFixed(2)} s)`,
        );
    },
    onEval(step, metrics) {
      if (bar) bar.update({ phase: '' });
      else line.done();
      if (!bar)
        out(
          `eval ${step}: rollout greedy ${fmt(metrics['eval/rollout/greedy_accuracy'])} trainer greedy ${fmt(metrics['eval/trainer/greedy_accuracy'])}`,
        );
    },
    onMessage(text) {
      if (!bar) out(text);
    },
    stop() {
      bar?.stop();
    },
  };
}

/** The `run` subcommand. */
export const runCommand: Command = {
  summary: 'one GRPO run from a JSON config (progress bar, checkpoints, --resume)',
  help,
  async run(args, io) {
    const { values } = parseCommandArgs(args, {
      ...strings('config', 'out', 'steps', 'seed', 'resume', 'print-config'),
      set: REPEATED,
      'no-report': { type: 'boolean' },
      ...BACKEND_OPTIONS,
    });
    if (values['print-config'] !== undefined) {
      const others = Object.keys(values).filter(
        (k) => k !== 'print-config' && values[k as keyof typeof values] !== undefined,
      );
      if (others.length > 0)
        throw new UsageError(`--print-config prints a config and runs nothing; it takes no --${others[0]}`);
      io.out(bundledConfigText(values['print-config']).replace(/\n$/, ''));
      return 0;
    }
    if (values.config === undefined && values.resume === undefined)
      throw new UsageError('missing required option --config (or --resume DIR)');
    if (values.config !== undefined && values.resume !== undefined)
      throw new UsageError('--config and --resume are exclusive (a resumed run keeps its config)');
    if (values.resume !== undefined && (values.set !== undefined || values.seed !== undefined)) {
      throw new UsageError('--resume only accepts --steps (other changes would break determinism)');
    }
    if (values.resume !== undefined && values.out !== undefined)
      throw new UsageError(`--out: not used with --resume (the run continues in '${values.resume}')`);
    if (values.timeout !== undefined && values.backend === undefined && values.resume === undefined)
      throw new UsageError('--timeout: not used without --backend (it is the request timeout of an external backend)');
    if (values['token-file'] !== undefined && values.backend === undefined && values.resume === undefined)
      throw new UsageError('--token-file: not used without --backend (it is the token of an HTTP backend)');
    const token = backendToken(values['token-file']);
    const config = configFromArgs(values);
    const advantageName = config.estimators.advantage.name;
    if (config.rollout.groupSize === 1 && groupMeanAdvantageNames.includes(advantageName)) {
      // A warning, not a refusal: a G = 1 run still exercises rollout, correction and the KL terms.
      io.err(
        `qrl-sim run: warning: rollout.groupSize is 1, so every '${advantageName}' advantage (reward minus the group mean) is 0 and the policy loss has no gradient; use groupSize ≥ 2 or an advantage without a group baseline (reinforce++, batch-std)`,
      );
    }
    const outDir = values.resume ?? values.out ?? defaultRunDir(values.config as string, config.seed, values.set ?? []);
    if (values.resume !== undefined) {
      if (outDirKind(outDir) !== 'run') throw new UsageError(`--resume: '${outDir}' is not a run directory`);
      const done = checkpointStep(outDir);
      if (done > 0 && done >= config.steps) {
        io.out(
          `${outDir}: already finished at step ${done} of ${config.steps}; nothing to do (--steps N with N > ${done} extends it)`,
        );
        return 0;
      }
    }
    // What claimOutDir created is removed again (while empty) when the run is refused before it writes.
    const created =
      values.resume === undefined
        ? claimOutDir(outDir, 'run', values.out === undefined ? 'output directory' : '--out')
        : [];
    let backend: RemoteBackend | undefined;
    let backendIdentity: Record<string, unknown> | undefined;
    try {
      if (config.plan === PLAN_FROM_BACKEND && values.backend === undefined && values.resume === undefined) {
        throw new UsageError(
          `config.plan: '${PLAN_FROM_BACKEND}' takes the plan from the backend's info and needs --backend, got an in-process run`,
        );
      }
      const timeouts = backendTimeouts(values, 600_000);
      let address = values.backend;
      if (address === undefined && values.resume !== undefined) {
        // A resumed run goes back to the backend it ran on (config.json records the address).
        const recorded = (
          readJsonFile(join(values.resume, 'config.json'), '--resume') as { backend?: { address?: unknown } }
        ).backend?.address;
        if (typeof recorded === 'string') address = recorded;
      }
      if (address !== undefined) {
        try {
          const task = makeTaskFromConfig(config.task);
          const unwatch = exitOnStopSignal(io, 'run', `the backend's first info (${address})`);
          try {
            backend = await connectBackend(resolveBackendAddress(address), {
              ...timeouts,
              ...(token === undefined ? {} : { token }),
              run: config,
              setup: backendSetup(config, task),
              onStderr: (t) => io.err(t.replace(/\n$/, '')),
            });
          } finally {
            unwatch();
          }
        } catch (error) {
          if (error instanceof BackendCommandNotFound)
            throw new UsageError(`--backend: command not found: '${address}' (the shell exited with 127)`);
          io.err(`qrl-sim run: ${error instanceof Error ? error.message : String(error)}`);
          releaseOutDir(created);
          return 1;
        }
        const info = backend.lastInfo!;
        backendIdentity = {
          address,
          name: info.backend.name,
          version: info.backend.version,
          protocol: info.protocol,
          policy: info.policy,
          plan: info.plan.name,
        };
        const mismatches = backendMismatches(info, config, makeTaskFromConfig(config.task));
        if (mismatches.length > 0) {
          await backend.close();
          throw new UsageError(
            `--backend: the backend does not serve what the config asks for: ${mismatches.join('; ')}`,
          );
        }
        if (values.resume !== undefined) {
          // A resumed run continues on the backend it ran on: another implementation, version or served plan
          // would mix two backends' steps under one run (the address may change: a new port, another host).
          const recorded = (
            readJsonFile(join(values.resume, 'config.json'), '--resume') as { backend?: Record<string, unknown> }
          ).backend;
          const differs =
            recorded === undefined
              ? []
              : (['name', 'version', 'protocol', 'policy', 'plan'] as const).filter(
                  (k) => recorded[k] !== undefined && recorded[k] !== backendIdentity?.[k],
                );
          if (differs.length > 0) {
            await backend.close();
            throw new UsageError(
              `--backend: the run in '${values.resume}' ran on ${differs.map((k) => `${k} ${JSON.stringify(recorded![k])}`).join(', ')}; this backend serves ${differs.map((k) => `${k} ${JSON.stringify(backendIdentity![k])}`).join(', ')}`,
            );
          }
        }
      }
    } catch (error) {
      releaseOutDir(created);
      throw error;
    }
    const observer = progressObserver(io, io.interactive === true);
    // Where the run is, for the one line a backend failure prints.
    let where = values.resume !== undefined ? 'resume' : 'warm start';
    const tracking: RunObserver = {
      ...observer,
      onStepStart(step) {
        where = `step ${step}`;
      },
      onEvalStart(step) {
        where = `evaluation at step ${step}`;
        observer.onEvalStart?.(step);
      },
      onCheckpointStart(step) {
        where = `checkpoint of step ${step}`;
      },
    };
    // during a backend's own warm start the driver can only wait for that call to answer: say so
    const stopping = (): string =>
      where === 'warm start' && backend !== undefined && backend.lastInfo?.capabilities.warmStart === true
        ? `waiting for the backend's warm start (one warmStart call to ${backend.name}) to answer, then stopping before step 1`
        : 'stopping after this step';
    const unhandle = handleStopSignals(io, 'run', stopping);
    try {
      let summary;
      try {
        summary = await runGrpo({
          config,
          outDir,
          factory: policyFactory(config.policy.kind),
          resume: values.resume !== undefined,
          observer: tracking,
          shouldStop: stopRequested,
          // every answer of a backend the driver does not own is checked before it is trained on
          ...(backend !== undefined
            ? {
                backend: new CheckedBackend(backend, backend.name, { replaysSupport: replaysSupport(config) }),
                backendIdentity: backendIdentity!,
              }
            : {}),
        });
      } catch (error) {
        if (!(error instanceof BackendCallError)) throw error;
        observer.stop();
        // One line: the step, the method and the backend; the files written so far are whole (every
        // line is written at once, checkpoints are renamed into place) and --resume continues.
        io.err(
          `qrl-sim run: ${where}, ${error.method} (${error.kind}): ${error.message}; resume with: qrl-sim run --resume ${outDir}`,
        );
        return 1;
      }
      observer.stop();
      if (summary.stopped) {
        const reason = stopReason() ?? 'SIGINT';
        const at =
          summary.lastStep === 0
            ? 'before step 1 (no checkpoint yet: --resume starts it over from step 0)'
            : `at step ${summary.lastStep} with a checkpoint`;
        io.err(`qrl-sim run: stopped (${reason}) ${at}; continue with: qrl-sim run --resume ${outDir}`);
        io.out(`stopped at step ${summary.lastStep}: ${outDir}`);
        return STOP_EXIT[reason];
      }
      io.out(`finished at step ${summary.lastStep}: ${outDir}/metrics.jsonl, eval.jsonl, checkpoints/`);
      if (values['no-report'] === true) return 0;
      const report = await writeReport(outDir);
      io.out(`report: ${report.files.reportHtml}`);
      return 0;
    } finally {
      unhandle();
      await backend?.close();
    }
  },
};
