// The conformance battery on an in-process backend served over loopback HTTP (as `qrl-sim serve
// --port` would serve it), for the tests of the battery itself. The battery saves under the system
// temp directory: that is the state root the server confines save/load to.

import { tmpdir } from 'node:os';
import type { PolicyBackend } from '../../src/core/backend-contract.js';
import { connectBackend, parseBackendAddress } from '../../src/protocol/remote.js';
import { serveBackend } from '../../src/protocol/serve.js';
import { type ConformanceOptions, type ConformanceRow, runConformance } from '../../src/testing/conformance.js';

/** Serves `backend`, runs the battery on it (batch 4 unless `options` say otherwise), stops the server. */
export async function servedConformance(
  backend: PolicyBackend,
  options: ConformanceOptions = {},
): Promise<ConformanceRow[]> {
  const server = await serveBackend(backend, { port: 0, stateRoot: tmpdir() });
  const remote = await connectBackend(parseBackendAddress(`http://127.0.0.1:${server.port}`), { timeoutMs: 60_000 });
  try {
    return await runConformance(remote, { batch: 4, ...options });
  } finally {
    await remote.close();
    await server.close();
  }
}
