// Regenerates the tables the docs embed: formats, profiles and presets (docs/numerics.md, docs/quantization.md),
// the run config (docs/grpo.md), the stacks' metric names (docs/estimators.md) and the public surface of each
// package entry (docs/library.md), and the lab's runs and duration estimates (docs/lab/, from sims/lab/*.json).
// Usage: npx tsx scripts/doc-tables.ts [--check]; the test suite runs the check.

import { readFileSync, writeFileSync } from 'node:fs';
import { formatTableMarkdown, profileSourcesMarkdown, profileTableMarkdown } from '../src/numerics/describe.js';
import { presetTableMarkdown } from '../src/numerics/presets.js';
import { configTableMarkdown } from '../src/rl/grpo/describe.js';
import { stackMetricsTableMarkdown } from '../src/rl/stack-metrics.js';
import { labListLines, labPlannedRuns, labSizeText } from '../src/cli/lab.js';
import { labExperimentNames, loadLabExperiment } from '../src/runs/lab.js';
import { surfaceBlocks } from './api-surface.js';
import { bugClassTableMarkdown } from '../src/testing/request-checks.js';
import { stepFieldsTableMarkdown, readStepBundle } from '../src/golden/step-bundle.js';
import { formatReplay, replayStep } from '../src/golden/replay.js';

/** Replaces the text between `<!-- begin:NAME -->` and `<!-- end:NAME -->`. */
export function fillMarkers(text: string, blocks: Record<string, string>): string {
  let out = text;
  for (const [name, body] of Object.entries(blocks)) {
    const re = new RegExp(`<!-- begin:${name} -->[\\s\\S]*?<!-- end:${name} -->`);
    if (!re.test(out)) throw new Error(`marker ${name} not found`);
    out = out.replace(re, () => `<!-- begin:${name} -->\n${body}\n<!-- end:${name} -->`);
  }
  return out;
}

export const numericsBlocks = (): Record<string, string> => ({
  formats: formatTableMarkdown(),
  profiles: profileTableMarkdown(),
  'profile-sources': profileSourcesMarkdown(),
});

export const grpoBlocks = (): Record<string, string> => ({ 'run-config': configTableMarkdown() });

/** Every generated document and its blocks. */
export const generatedDocs = (): Record<string, Record<string, string>> => ({
  'docs/numerics.md': numericsBlocks(),
  'docs/grpo.md': grpoBlocks(),
  'docs/quantization.md': { presets: presetTableMarkdown() },
  'docs/library.md': surfaceBlocks(),
  'docs/estimators.md': { 'stack-metrics': stackMetricsTableMarkdown() },
  'docs/adapter.md': { 'bug-classes': bugClassTableMarkdown() },
  'docs/replay.md': replayBlocks(),
});

/** docs/replay.md: the field table and the stage tables of the shipped example bundles. */
export function replayBlocks(): Record<string, string> {
  const table = (dir: string) =>
    ['```console', `$ npx qrl-sim replay ${dir}`, formatReplay(replayStep(readStepBundle(dir))), '```'].join('\n');
  return {
    'step-fields': stepFieldsTableMarkdown(),
    'replay-example': table('docs/examples/replay/trl-grpo/1'),
    'replay-planted': table('docs/examples/replay/trl-grpo-planted/1'),
  };
}

/**
 * The lab's generated blocks (async: planning a sweep loads its policy factories): the `lab list`
 * table in docs/lab/README.md and each page's command line with its runs and estimate (block
 * `lab-command` on the page named after the experiment, `lab-command-NAME` for a second experiment
 * on a page, e.g. length-long-hf's section of docs/lab/length-long.md).
 */
export async function labDocs(): Promise<Record<string, Record<string, string>>> {
  const docs: Record<string, Record<string, string>> = {
    'docs/lab/README.md': { 'lab-list': (await labListLines()).join('\n') },
  };
  for (const name of labExperimentNames()) {
    const exp = loadLabExperiment(name);
    const key = exp.page.endsWith(`/${name}.md`) ? 'lab-command' : `lab-command-${name}`;
    docs[exp.page] = {
      ...docs[exp.page],
      [key]: ['```sh', `npx qrl-sim lab run ${name}   # ${labSizeText(exp, await labPlannedRuns(exp))}`, '```'].join(
        '\n',
      ),
    };
  }
  return docs;
}

const isMain =
  process.argv[1] !== undefined && import.meta.url.endsWith(process.argv[1].replace(/\\/g, '/').split('/').pop() ?? '');
if (isMain) {
  for (const [path, blocks] of Object.entries({ ...generatedDocs(), ...(await labDocs()) })) {
    const before = readFileSync(path, 'utf8');
    const after = fillMarkers(before, blocks);
    if (process.argv.includes('--check')) {
      if (before !== after) {
        console.error(`${path} is out of date: run npx tsx scripts/doc-tables.ts`);
        process.exitCode = 1;
      }
    } else writeFileSync(path, after);
  }
}
