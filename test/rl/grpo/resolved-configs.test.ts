// Pins resolved run configs: `{}` and every sims/*.json resolve to the objects fixed in test/fixtures/resolved-configs.json.
// Not a schema test (config.test.ts checks errors): this guards the defaults against refactors (e.g. `.prefault({})`).

import { readFileSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { resolveRunConfig } from '../../../src/rl/grpo/config.js';

const root = new URL('../../../', import.meta.url);
const fixture = JSON.parse(readFileSync(new URL('test/fixtures/resolved-configs.json', root), 'utf8')) as Record<
  string,
  unknown
>;

describe('resolved run configs (fixture written before the defaults moved into the schemas; a sims/ file that changes on purpose is re-pinned)', () => {
  it('{} resolves to the same object, key order included', () => {
    expect(JSON.stringify(resolveRunConfig({}))).toBe(JSON.stringify(fixture['{}']));
  });
  const sims = readdirSync(new URL('sims/', root))
    .filter((f) => f.endsWith('.json') && f in fixture)
    .sort();
  it.each(sims)('sims/%s resolves to the same object', (file) => {
    const raw = JSON.parse(readFileSync(new URL(`sims/${file}`, root), 'utf8')) as unknown;
    expect(JSON.stringify(resolveRunConfig(raw))).toBe(JSON.stringify(fixture[file]));
  });
});
