// `sweep --executor ray`: the threaded sweep's files byte for byte, a killed Ray worker retried and its
// run resumed, Ctrl-C and SIGTERM leaving every run resumable on either executor, and bad input in one
// line with exit 2. Runs the built CLI (dist/) as a user would; skipped only where Ray is not importable.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const repo = process.cwd();
const bin = join(repo, 'bin', 'qrl-sim.js');
const rayProbe = spawnSync('python3', ['-c', 'import ray'], { encoding: 'utf8' });
const rayMissing =
  rayProbe.status === 0
    ? null
    : `ray is not importable by python3 (${(rayProbe.stderr ?? '').trim().split('\n').slice(-1)[0] ?? rayProbe.error?.message}); scripts/python-env.sh installs it`;

const root = mkdtempSync(join(tmpdir(), 'qrl-ray-'));
const base = {
  task: { name: 'reverse', options: { minLength: 3, maxLength: 4 } },
  policy: { kind: 'ar', model: { C: 16, H: 2, layers: 1, hidden: 32 } },
  sft: { steps: 20, batchSize: 8 },
  rollout: { prompts: 2, groupSize: 4 },
  eval: { every: 2, problems: 4 },
  checkpoint: { every: 1 },
};
const short = join(root, 'short.json');
const long = join(root, 'long.json');
writeFileSync(short, JSON.stringify({ ...base, steps: 4 }));
writeFileSync(long, JSON.stringify({ ...base, steps: 30 }));
const grid = ['--grid', 'correction=none,tis'];
const runs = ['correction-none/seed-0', 'correction-tis/seed-0'];

interface Exit {
  code: number | null;
  out: string;
  err: string;
}

/** Ray's single-machine mode: every address on 127.0.0.1 (the test cluster's, and a driver's that joins it;
 * a driver's own local cluster is in that mode without it). */
const loopback = { RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER: '0', RAY_USAGE_STATS_ENABLED: '0' };

/** `qrl-sim ARGS` in `root` (its .cache/sft is the warm-start cache of every run here). */
function cli(
  args: string[],
  env: Record<string, string> = {},
): { child: ChildProcess; done: Promise<Exit>; stderr: () => string } {
  const child = spawn(process.execPath, [bin, ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (err += b.toString()));
  return { child, done: new Promise((res) => child.on('close', (code) => res({ code, out, err }))), stderr: () => err };
}

async function sweep(args: string[], env: Record<string, string> = {}): Promise<Exit> {
  return cli(['sweep', ...args], env).done;
}

/** Every file of a sweep directory that is deterministic (timings.jsonl holds wall-clock times), by relative path. */
function deterministicFiles(dir: string): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (!/^(timings\.jsonl|summary\.(json|md|html)|report\.html)$/.test(e.name))
        files.set(relative(dir, p), readFileSync(p, 'utf8'));
    }
  };
  walk(dir);
  // The summary with its wall-clock fields set aside (as test/cli/emit-jobs.test.ts compares it).
  files.set(
    'summary.json',
    JSON.stringify(
      JSON.parse(readFileSync(join(dir, 'summary.json'), 'utf8'), (k, v) => (/time|seconds/i.test(k) ? undefined : v)),
      null,
      1,
    ),
  );
  return files;
}

function expectSameSweep(dir: string, reference: string): void {
  const got = deterministicFiles(dir);
  const want = deterministicFiles(reference);
  expect([...got.keys()].sort()).toEqual([...want.keys()].sort());
  for (const [path, text] of want) expect(got.get(path), path).toBe(text);
}

/** Pids of the Ray raylets on this machine (one per running Ray node). */
function raylets(): number[] {
  return readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        return readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0')[0]!.endsWith('/raylet');
      } catch {
        return false;
      }
    })
    .map(Number)
    .sort((a, b) => a - b);
}

/** Resolves once some run of `dir` has written `lines` metrics lines (bounded: 120 s). */
async function metricsLines(dir: string, lines: number): Promise<void> {
  for (let i = 0; i < 1200; i++) {
    for (const run of runs) {
      const p = join(dir, run, 'metrics.jsonl');
      if (existsSync(p) && readFileSync(p, 'utf8').split('\n').length - 1 >= lines) return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no run of ${dir} reached ${lines} metrics lines in 120 s`);
}

/** Resolves once `check()` holds (bounded: 120 s, then a failure naming `what`). */
async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1200; i++) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what}: not within 120 s`);
}

/** Every run that started is whole: a config.json, and whole JSON lines in metrics.jsonl. */
function expectResumable(dir: string): void {
  for (const run of runs) {
    const p = join(dir, run, 'metrics.jsonl');
    if (!existsSync(join(dir, run))) continue;
    expect(existsSync(join(dir, run, 'config.json')), run).toBe(true);
    if (!existsSync(p)) continue;
    const text = readFileSync(p, 'utf8');
    expect(text === '' || text.endsWith('\n'), run).toBe(true);
    for (const line of text.split('\n').filter((l) => l !== '')) JSON.parse(line);
  }
}

/** An existing cluster (as `ray start --head` gives one), its GCS on the loopback; closed at the end. */
let cluster: ChildProcess | undefined;
let address = '';
const clusterScript = `
import ray, sys
info = ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
print(info.address_info["gcs_address"], flush=True)
sys.stdin.read()
ray.shutdown()
`;

describe.skipIf(rayMissing !== null)(
  `sweep --executor ray${rayMissing === null ? '' : ` (skipped: ${rayMissing})`}`,
  () => {
    const shortReference = join(root, 'short-threads');
    const longReference = join(root, 'long-threads');

    beforeAll(async () => {
      if (!existsSync(join(repo, 'dist', 'cli', 'main.js'))) throw new Error('dist/ missing: run npm run build');
      // On this machine only: Ray's single-machine mode keeps every address on 127.0.0.1.
      cluster = spawn('python3', ['-c', clusterScript], {
        env: { ...process.env, ...loopback },
        stdio: ['pipe', 'pipe', 'ignore'],
      });
      address = await new Promise<string>((res, rej) => {
        const timer = setTimeout(() => rej(new Error('the test cluster did not start in 60 s')), 60_000);
        cluster!.stdout!.once('data', (b: Buffer) => {
          clearTimeout(timer);
          res(b.toString().trim());
        });
        cluster!.once('exit', (code) => rej(new Error(`the test cluster exited with ${code}`)));
      });
      expect(address).toMatch(/^127\.0\.0\.1:\d+$/);
      for (const [config, out] of [
        [short, shortReference],
        [long, longReference],
      ] as const) {
        const r = await sweep(['--config', config, ...grid, '--workers', '2', '--out', out]);
        expect(r.code, r.err).toBe(0);
      }
    });

    afterAll(async () => {
      if (cluster !== undefined && cluster.exitCode === null) {
        const exited = new Promise((r) => cluster!.once('exit', r));
        cluster.stdin!.end(); // the script shuts its cluster down and exits
        await exited;
      }
      rmSync(root, { recursive: true, force: true });
    });

    it('a local cluster gives the threaded sweep’s files byte for byte and is shut down after', async () => {
      const before = raylets();
      const out = join(root, 'short-ray');
      const r = await sweep(['--config', short, ...grid, '--workers', '2', '--out', out, '--executor', 'ray']);
      expect(r.code, r.err).toBe(0);
      expect(r.out).toMatch(/2 runs \(0 failed\) on 2 workers/);
      expectSameSweep(out, shortReference);
      expect(raylets()).toEqual(before);
    });

    it('a killed Ray worker is retried and its run resumes byte-identically (on an existing cluster)', async () => {
      // 30 steps: the task sees step 2 (it polls every 0.2 s) long before its run ends
      const out = join(root, 'long-killed');
      const marker = join(root, 'killed');
      const r = await sweep(['--config', long, ...grid, '--out', out, '--executor', 'ray', '--ray-address', address], {
        ...loopback,
        QRL_SWEEP_RAY_TEST_KILL: `2:${marker}`,
      });
      expect(r.code, r.err).toBe(0);
      expect(existsSync(marker)).toBe(true); // one worker did kill itself after its run's step 2
      expectSameSweep(out, longReference);
    });

    it('Ctrl-C of a Ray sweep stops every run whole, shuts the local cluster down; threads resume it', async () => {
      const before = raylets();
      const out = join(root, 'long-ray-stopped');
      const s = cli(['sweep', '--config', long, ...grid, '--workers', '2', '--out', out, '--executor', 'ray']);
      await metricsLines(out, 2);
      process.kill(-s.child.pid!, 'SIGINT'); // a terminal's Ctrl-C reaches the whole foreground group
      const r = await s.done;
      expect(r.code, r.err).toBe(130);
      expect(r.err).toMatch(
        /qrl-sim sweep: stopped \(SIGINT\): \d of 2 runs finished, \d stopped part-way \(files whole\); continue with: qrl-sim sweep --resume /,
      );
      expect(raylets()).toEqual(before);
      expect(existsSync(join(out, 'summary.json'))).toBe(false);
      expectResumable(out);
      const resumed = await sweep(['--resume', out]);
      expect(resumed.code, resumed.err).toBe(0);
      expectSameSweep(out, longReference);
    });

    it('a second Ctrl-C stops at once; the cluster still goes down, every file is whole and resume finishes', async () => {
      const before = raylets();
      const out = join(root, 'long-ray-killed');
      const s = cli(['sweep', '--config', long, ...grid, '--workers', '2', '--out', out, '--executor', 'ray']);
      await metricsLines(out, 2);
      process.kill(-s.child.pid!, 'SIGINT');
      await until(() => s.stderr().includes('SIGINT: no further run starts'), 'the first SIGINT answered');
      process.kill(-s.child.pid!, 'SIGINT');
      const r = await s.done;
      expect(r.code, r.err).toBe(130);
      expect(r.err).toMatch(/qrl-sim sweep: SIGINT again: stopping now/);
      // the driver, left without qrl-sim, shuts its local cluster down (its tasks' runs die with their workers)
      await until(() => JSON.stringify(raylets()) === JSON.stringify(before), 'the local cluster shut down');
      expectResumable(out);
      const resumed = await sweep(['--resume', out]);
      expect(resumed.code, resumed.err).toBe(0);
      expectSameSweep(out, longReference);
    });

    it('SIGTERM of a threaded sweep, resumed on Ray, gives the uninterrupted sweep', async () => {
      const out = join(root, 'long-threads-stopped');
      const s = cli(['sweep', '--config', long, ...grid, '--workers', '2', '--out', out]);
      await metricsLines(out, 2);
      s.child.kill('SIGTERM');
      const r = await s.done;
      expect(r.code, r.err).toBe(143);
      expectResumable(out);
      const resumed = await sweep(['--resume', out, '--executor', 'ray', '--ray-address', address], loopback);
      expect(resumed.code, resumed.err).toBe(0);
      expectSameSweep(out, longReference);
    });

    it('bad input exits 2 with one line naming the option and the value, writing nothing', async () => {
      const port = await new Promise<number>((res) => {
        const server = createServer();
        server.listen(0, '127.0.0.1', () => {
          const p = (server.address() as { port: number }).port;
          server.close(() => res(p)); // nothing listens there now: connection refused
        });
      });
      const noRay = join(root, 'python-without-ray');
      writeFileSync(noRay, `#!/bin/sh\nexec python3 -S "$@"\n`, { mode: 0o755 }); // -S: no site-packages, so no ray
      const cases: { args: string[]; env?: Record<string, string>; line: RegExp }[] = [
        { args: ['--executor', 'dask'], line: /^qrl-sim sweep: --executor: expected threads or ray, got 'dask'$/ },
        {
          args: ['--ray-address', '127.0.0.1:6379'],
          line: /^qrl-sim sweep: --ray-address: not used without --executor ray, got '127\.0\.0\.1:6379'$/,
        },
        {
          args: ['--executor', 'ray', '--ray-address', `127.0.0.1:${port}`],
          line: new RegExp(
            `^qrl-sim sweep: --ray-address: cannot reach '127\\.0\\.0\\.1:${port}' \\(Connection refused within 10 s\\)$`,
          ),
        },
        {
          args: ['--executor', 'ray', '--ray-address', 'nowhere'],
          line: /^qrl-sim sweep: --ray-address: expected HOST:PORT, ray:\/\/HOST:PORT or auto, got 'nowhere'$/,
        },
        {
          args: ['--executor', 'ray'],
          env: { QRL_PYTHON: noRay },
          line: /^qrl-sim sweep: --executor: ray: Ray is not importable by .*No module named 'ray'/,
        },
        {
          args: ['--executor', 'ray'],
          env: { QRL_PYTHON: join(root, 'no-such-python') },
          line: /^qrl-sim sweep: --executor: ray: cannot start .*no-such-python \(ENOENT\)/,
        },
      ];
      for (const [i, c] of cases.entries()) {
        const out = join(root, `bad-${i}`);
        const r = await sweep(['--config', short, ...grid, '--out', out, ...c.args], c.env);
        expect(r.code, `${c.args.join(' ')}: ${r.err}`).toBe(2);
        expect(r.err.trim().split('\n'), c.args.join(' ')).toHaveLength(1);
        expect(r.err.trim(), c.args.join(' ')).toMatch(c.line);
        expect(existsSync(join(out, 'sweep.json')), c.args.join(' ')).toBe(false);
      }
    });
  },
);
