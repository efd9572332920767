// The Python SDK's own tests (python/tests, pytest) as part of npm test: fails when pytest fails or
// when python3, numpy or pytest is missing.

import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

describe('python SDK (pytest)', () => {
  it('passes python3 -m pytest python/ -q', { timeout: 900_000 }, () => {
    const r = spawnSync('python3', ['-m', 'pytest', 'python/', '-q', '-rs', '-p', 'no:cacheprovider'], { encoding: 'utf8', timeout: 890_000 });
    if (r.error) throw new Error(`cannot run python3: ${r.error.message}`);
    const out = `${r.stdout}\n${r.stderr}`;
    if (r.status !== 0) console.error(out);
    for (const line of out.split('\n')) if (/^SKIPPED/.test(line)) console.log(`python SDK: ${line}`);
    expect(r.status, out.split('\n').slice(-30).join('\n')).toBe(0);
    expect(out).toMatch(/\d+ passed/);
  });
});
