// Files that survive interruption: JSON written atomically (temp file + rename) and JSONL
// appended one complete line at a time with fsync. Not a database and not a log framework.

import {
  closeSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { threadId } from 'node:worker_threads';

let tempCounter = 0;
/** A temp name next to `path`, unique across processes, worker threads and calls (pid + threadId + counter). */
export function tempName(path: string): string {
  return `${path}.tmp-${process.pid}-${threadId}-${++tempCounter}`;
}

/** Temp names of {@link tempName} (and the safetensors and golden writers): `<name>.tmp-<pid>[-<thread>-<n>]`. */
const TEMP = /\.tmp-(\d+)(-\d+-\d+)?$/;

/** Whether `pid` names a running process: one that signal 0 reaches and, on Linux, not a zombie. */
function alive(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  // A killed process nobody has reaped (its parent gone, and a container's PID 1 that does not reap)
  // still answers signal 0; its state in /proc is Z (zombie) or X (dead).
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch (error) {
    // gone since the signal (ENOENT), or no /proc on this system (signal 0 is then the answer)
    return (error as NodeJS.ErrnoException).code !== 'ENOENT';
  }
}

/**
 * Removes the temp files and directories directly in `dir` that a process which no longer runs
 * left behind (killed between writing a temp and renaming it into place); those of live processes
 * are kept. Returns the names removed. A missing directory is nothing to clean.
 */
export function removeStaleTemps(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const removed: string[] = [];
  for (const name of readdirSync(dir)) {
    const m = TEMP.exec(name);
    if (m === null || alive(Number(m[1]))) continue;
    rmSync(join(dir, name), { recursive: true, force: true });
    removed.push(name);
  }
  return removed;
}

/** Writes `value` as pretty JSON to `path` so that readers see the old or the new file, never half. */
export function writeJsonAtomic(path: string, value: unknown): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = tempName(path);
  const fd = openSync(tmp, 'w');
  try {
    writeSync(fd, `${JSON.stringify(value, null, 2)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
}

/** Appends JSON lines; each `write` is one complete line on disk before it returns. */
export class JsonlWriter {
  private readonly fd: number;
  constructor(readonly path: string) {
    mkdirSync(dirname(path), { recursive: true });
    this.fd = openSync(path, 'a');
  }
  write(record: unknown): void {
    writeSync(this.fd, `${JSON.stringify(record)}\n`);
    fsyncSync(this.fd);
  }
  close(): void {
    closeSync(this.fd);
  }
}

/** Reads a JSONL file; a trailing partial line (a crash mid-write) is ignored. */
export function readJsonl<T = unknown>(path: string): T[] {
  if (!existsSync(path)) return [];
  const text = readFileSync(path, 'utf8');
  const lines = text.split('\n');
  const complete = text.endsWith('\n') ? lines.slice(0, -1) : lines.slice(0, -1);
  return complete.filter((l) => l.length > 0).map((l) => JSON.parse(l) as T);
}
