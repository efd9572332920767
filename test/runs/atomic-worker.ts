// Test helper: a worker thread that writes one JSON file many times with writeJsonAtomic.
// Not a test file itself.

import { parentPort, workerData } from 'node:worker_threads';
import { writeJsonAtomic } from '../../src/core/files.js';

const { path, writes, id } = workerData as { path: string; writes: number; id: number };
const errors: string[] = [];
for (let i = 0; i < writes; i++) {
  try {
    writeJsonAtomic(path, { id, i });
  } catch (error) {
    errors.push((error as Error).message);
  }
}
parentPort?.postMessage(errors);
