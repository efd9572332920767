// `qrl-sim refit-check` on planted-fault dumps of a toy state dict: each fault is named on exactly its
// tensor with exactly its kind, healthy tensors give nothing, exit codes 0/1/2, the substring vs
// prefix ignore rules; and `python -m qrl_golden.refit_check` gives the same --json on every dump.

import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  EXAMPLE_RECIPE,
  engineEntries,
  quantizeWeight,
  swapHalves,
  toyStateDict,
  trainerEntries,
  bf16,
  type EngineRecipe,
} from '../../scripts/refit-example.js';
import { writeSafetensors, type SafetensorsEntry } from '../../src/protocol/safetensors.js';
import { runCli } from './io.js';

const dir = mkdtempSync(join(tmpdir(), 'qrl-refit-check-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const trainerState = toyStateDict(1);
const previousState = toyStateDict(2);
const TRAINER = join(dir, 'trainer.safetensors');
const PREVIOUS = join(dir, 'previous.safetensors');
writeSafetensors(TRAINER, trainerEntries(trainerState));
writeSafetensors(PREVIOUS, trainerEntries(previousState));

const L = 'model.layers.0';
const blockArgs = [
  '--recipe',
  'deepseek-fp8-block',
  '--block',
  '16',
  '--match',
  'prefix',
  '--ignore',
  'model.embed_tokens',
  '--ignore',
  'lm_head',
  '--ignore',
  `${L}.mlp.gate`,
];

let counter = 0;
/** Writes an engine dump (healthy under `recipe`, then `plant` edits it) and returns its path. */
function engine(
  plant: (e: Record<string, SafetensorsEntry>) => void = () => {},
  recipe: EngineRecipe = EXAMPLE_RECIPE,
): string {
  const e = engineEntries(trainerState, recipe);
  plant(e);
  const path = join(dir, `engine-${counter++}.safetensors`);
  writeSafetensors(path, e);
  return path;
}

interface Result {
  code: number;
  json: { findings: Record<string, unknown>[]; tensors: number; quantized: number; kvScales: number } | null;
  err: string;
}

const python = existsSync('.venv/bin/python') ? '.venv/bin/python' : 'python3';

/** Runs the TypeScript command in-process and the Python twin as a process; both results. */
async function both(args: string[]): Promise<{ ts: Result; py: Result }> {
  const t = await runCli(['refit-check', ...args, '--json']);
  const p = spawnSync(python, ['-m', 'qrl_golden.refit_check', ...args, '--json'], {
    encoding: 'utf8',
    env: { ...process.env, PYTHONPATH: ['python', process.env.PYTHONPATH].filter(Boolean).join(':') },
  });
  const parse = (out: string): Result['json'] => (out.trim() === '' ? null : (JSON.parse(out) as Result['json']));
  return {
    ts: { code: t.code, json: parse(t.out), err: t.err },
    py: { code: p.status ?? -1, json: parse(p.stdout), err: p.stderr },
  };
}

/** Checks a dump with both implementations: same exit code, same JSON; returns the findings. */
async function check(
  enginePath: string,
  args: string[] = blockArgs,
  extra: string[] = [],
): Promise<Record<string, unknown>[]> {
  const { ts, py } = await both(['--trainer', TRAINER, '--engine', enginePath, ...args, ...extra]);
  expect(ts.err).toBe('');
  expect(py.code, py.err).toBe(ts.code);
  expect(py.json).toEqual(ts.json);
  expect(ts.code).toBe((ts.json?.findings.length ?? 0) === 0 ? 0 : 1);
  return ts.json?.findings ?? [];
}

describe('refit-check on planted faults (TypeScript and Python agree on every dump)', () => {
  it('a healthy dump is clean: exit 0, every tensor counted, the kv scales seen', async () => {
    const { ts, py } = await both(['--trainer', TRAINER, '--engine', engine(), ...blockArgs]);
    expect(ts.code).toBe(0);
    expect(ts.json).toEqual({
      findings: [],
      tensors: 12,
      quantized: 6,
      kvScales: 2,
      recipe: 'deepseek-fp8-block',
      block: 16,
      match: 'prefix',
    });
    expect(py.json).toEqual(ts.json);
  }, 60_000);

  it('missing: a weight, and a weight whose scale tensor the engine lacks', async () => {
    expect(
      await check(
        engine((e) => {
          delete e[`${L}.self_attn.o_proj.weight`];
          delete e[`${L}.self_attn.o_proj.weight_scale_inv`];
        }),
      ),
    ).toEqual([{ tensor: `${L}.self_attn.o_proj.weight`, kind: 'missing' }]);
    expect(
      await check(
        engine((e) => {
          delete e[`${L}.self_attn.q_proj.weight_scale_inv`];
        }),
      ),
    ).toEqual([{ tensor: `${L}.self_attn.q_proj.weight_scale_inv`, kind: 'missing' }]);
    expect(
      await check(
        engine((e) => {
          delete e['model.norm.weight'];
        }),
      ),
    ).toEqual([{ tensor: 'model.norm.weight', kind: 'missing' }]);
  }, 60_000);

  it('not-quantized: a layer left in BF16', async () => {
    const findings = await check(
      engine((e) => {
        e[`${L}.self_attn.v_proj.weight`] = {
          data: bf16(trainerState[`${L}.self_attn.v_proj.weight`]!.values),
          shape: [32, 32],
          dtype: 'BF16',
        };
        delete e[`${L}.self_attn.v_proj.weight_scale_inv`];
      }),
    );
    expect(findings).toEqual([{ tensor: `${L}.self_attn.v_proj.weight`, kind: 'not-quantized', dtype: 'BF16' }]);
  }, 60_000);

  it('unexpectedly-quantized: an ignored layer (lm_head) quantized, with the pattern that keeps it', async () => {
    const findings = await check(
      engine((e) => {
        const q = quantizeWeight(EXAMPLE_RECIPE, trainerState['lm_head.weight']!);
        e['lm_head.weight'] = { data: q.codes, shape: [64, 32], dtype: 'F8_E4M3' };
        e['lm_head.weight_scale_inv'] = { data: q.scales, shape: q.scaleShape };
      }),
    );
    expect(findings).toEqual([
      { tensor: 'lm_head.weight', kind: 'unexpectedly-quantized', dtype: 'F8_E4M3', pattern: 'lm_head' },
    ]);
  }, 60_000);

  it('layout-permuted: gate/up halves swapped (w13 → w31) and two row blocks swapped, the permutation named', async () => {
    const gu = `${L}.mlp.gate_up_proj`;
    const w31 = await check(
      engine((e) => {
        for (const n of [`${gu}.weight`, `${gu}.weight_scale_inv`]) e[n] = swapHalves(e[n]!);
      }),
    );
    expect(w31).toEqual([
      {
        tensor: `${gu}.weight`,
        kind: 'layout-permuted',
        permutation: 'halves-swapped',
        unitRows: 16,
        order: [4, 5, 6, 7, 0, 1, 2, 3],
      },
    ]);
    const blocks = await check(
      engine((e) => {
        const codes = e[`${gu}.weight`]!.data.slice();
        codes.set(e[`${gu}.weight`]!.data.subarray(16 * 32, 32 * 32), 0);
        codes.set(e[`${gu}.weight`]!.data.subarray(0, 16 * 32), 16 * 32);
        const scales = e[`${gu}.weight_scale_inv`]!.data.slice();
        scales.set(e[`${gu}.weight_scale_inv`]!.data.subarray(2, 4), 0);
        scales.set(e[`${gu}.weight_scale_inv`]!.data.subarray(0, 2), 2);
        e[`${gu}.weight`] = { ...e[`${gu}.weight`]!, data: codes };
        e[`${gu}.weight_scale_inv`] = { ...e[`${gu}.weight_scale_inv`]!, data: scales };
      }),
    );
    expect(blocks).toEqual([
      {
        tensor: `${gu}.weight`,
        kind: 'layout-permuted',
        permutation: 'row-blocks',
        unitRows: 16,
        order: [1, 0, 2, 3, 4, 5, 6, 7],
      },
    ]);
  }, 60_000);

  it('stale: a weight (and a norm) equal to the recipe applied to --previous; without --previous a value-error', async () => {
    const k = `${L}.self_attn.k_proj`;
    const path = engine((e) => {
      const q = quantizeWeight(EXAMPLE_RECIPE, previousState[`${k}.weight`]!);
      e[`${k}.weight`] = { data: q.codes, shape: [32, 32], dtype: 'F8_E4M3' };
      e[`${k}.weight_scale_inv`] = { data: q.scales, shape: q.scaleShape };
      e['model.norm.weight'] = { data: bf16(previousState['model.norm.weight']!.values), shape: [32], dtype: 'BF16' };
    });
    expect(await check(path, blockArgs, ['--previous', PREVIOUS])).toEqual([
      { tensor: `${k}.weight`, kind: 'stale' },
      { tensor: 'model.norm.weight', kind: 'stale' },
    ]);
    expect((await check(path)).map((f) => [f.tensor, f.kind])).toEqual([
      [`${k}.weight`, 'value-error'],
      ['model.norm.weight', 'value-error'],
    ]);
  }, 60_000);

  it('unity-scale: block scales all 1, and k_scale reset to 1.0', async () => {
    const o = `${L}.self_attn.o_proj.weight_scale_inv`;
    expect(
      await check(
        engine((e) => {
          e[o] = { data: new Float32Array(4).fill(1), shape: [2, 2] };
        }),
      ),
    ).toEqual([{ tensor: o, kind: 'unity-scale', count: 4 }]);
    const kv = await check(engine(() => {}, { ...EXAMPLE_RECIPE, kvScales: { k: 1, v: 0.05 } }));
    expect(kv).toEqual([{ tensor: `${L}.self_attn.k_scale`, kind: 'unity-scale', count: 1 }]);
  }, 60_000);

  it('value-error: three corrupted codes (count, first position, max dequantized difference); a changed norm', async () => {
    const d = `${L}.mlp.down_proj.weight`;
    const findings = await check(
      engine((e) => {
        const codes = e[d]!.data.slice();
        for (const i of [70, 5, 1000]) codes[i] = (codes[i] as number) ^ 0x01;
        e[d] = { ...e[d]!, data: codes };
      }),
    );
    expect(findings.length).toBe(1);
    expect(findings[0]).toMatchObject({ tensor: d, kind: 'value-error', codes: 3, scales: 0, first: [0, 5] });
    expect(findings[0]!.maxAbsDiff as number).toBeGreaterThan(0);
    const norm = await check(
      engine((e) => {
        const bits = (e[`${L}.input_layernorm.weight`]!.data as Uint16Array).slice();
        bits[7] = (bits[7] as number) + 1;
        e[`${L}.input_layernorm.weight`] = { ...e[`${L}.input_layernorm.weight`]!, data: bits };
      }),
    );
    expect(norm).toMatchObject([{ tensor: `${L}.input_layernorm.weight`, kind: 'value-error', values: 1, first: [7] }]);
  }, 60_000);

  it("substring vs prefix: vLLM's `in` test makes `mlp.gate` keep `mlp.gate_up_proj` in BF16 (verl #7519)", async () => {
    const substringEngine = engine(() => {}, {
      ...EXAMPLE_RECIPE,
      ignore: ['model.embed_tokens', 'lm_head', 'mlp.gate'],
      match: 'substring',
    });
    const base = [
      '--recipe',
      'deepseek-fp8-block',
      '--block',
      '16',
      '--ignore',
      'model.embed_tokens',
      '--ignore',
      'lm_head',
    ];
    expect(await check(substringEngine, [...base, '--match', 'vllm', '--ignore', 'mlp.gate'])).toEqual([]);
    expect(await check(substringEngine, [...base, '--match', 'prefix', '--ignore', `${L}.mlp.gate`])).toEqual([
      { tensor: `${L}.mlp.gate_up_proj.weight`, kind: 'not-quantized', dtype: 'BF16' },
    ]);
    expect(await check(engine(), [...base, '--match', 'substring', '--ignore', 'mlp.gate'])).toEqual([
      { tensor: `${L}.mlp.gate_up_proj.weight`, kind: 'unexpectedly-quantized', dtype: 'F8_E4M3', pattern: 'mlp.gate' },
    ]);
    // compressed-tensors: `re:` patterns match from the start, other patterns the whole name.
    expect(
      await check(engine(), [
        ...base.slice(0, 4),
        '--match',
        'compressed-tensors',
        '--ignore',
        're:.*embed_tokens$',
        '--ignore',
        'lm_head',
        '--ignore',
        're:.*mlp\\.gate$',
      ]),
    ).toEqual([]);
  }, 60_000);

  it('per-tensor (vllm-fp8-tensor) and per-channel (vllm-fp8-token) recipes: clean, and faults named', async () => {
    for (const recipe of ['vllm-fp8-tensor', 'vllm-fp8-token'] as const) {
      const r: EngineRecipe = { recipe, ignore: ['model.embed_tokens', 'lm_head', `${L}.mlp.gate`], match: 'prefix' };
      const args = ['--recipe', recipe, ...blockArgs.slice(4)];
      expect(
        await check(
          engine(() => {}, r),
          args,
        ),
      ).toEqual([]);
      const gu = `${L}.mlp.gate_up_proj`;
      const w31 = await check(
        engine((e) => {
          e[`${gu}.weight`] = swapHalves(e[`${gu}.weight`]!);
          if (recipe === 'vllm-fp8-token') e[`${gu}.weight_scale`] = swapHalves(e[`${gu}.weight_scale`]!);
        }, r),
        args,
      );
      expect(w31).toMatchObject([
        { tensor: `${gu}.weight`, kind: 'layout-permuted', permutation: 'halves-swapped', unitRows: 1 },
      ]);
      const q = `${L}.self_attn.q_proj.weight_scale`;
      const unity = await check(
        engine((e) => {
          e[q] = { ...e[q]!, data: new Float32Array(e[q]!.data.length).fill(1) };
        }, r),
        args,
      );
      expect(unity).toEqual([{ tensor: q, kind: 'unity-scale', count: recipe === 'vllm-fp8-tensor' ? 1 : 32 }]);
    }
  }, 60_000);
});

describe('refit-check: the twin reproduces the recipes at the edges', () => {
  it('an all-zero block, an all-zero tensor and a large outlier give the same codes and scales in both (healthy dumps clean)', async () => {
    const edge = { ...trainerState };
    const zeroBlock = edge[`${L}.self_attn.q_proj.weight`]!.values.slice();
    for (let r = 0; r < 16; r++) zeroBlock.fill(0, r * 32, r * 32 + 16);
    edge[`${L}.self_attn.q_proj.weight`] = { values: zeroBlock, shape: [32, 32] };
    edge[`${L}.self_attn.k_proj.weight`] = { values: new Float32Array(32 * 32), shape: [32, 32] };
    const outlier = edge[`${L}.mlp.down_proj.weight`]!.values.slice();
    outlier[77] = 96; // BF16-exact
    outlier[78] = -1e-30; // below E4M3's subnormals after scaling: a signed zero code
    outlier.set(bf16ToF32(bf16(outlier)));
    edge[`${L}.mlp.down_proj.weight`] = { values: outlier, shape: [32, 64] };
    const trainer = join(dir, 'trainer-edge.safetensors');
    writeSafetensors(trainer, trainerEntries(edge));
    for (const recipe of ['deepseek-fp8-block', 'vllm-fp8-tensor', 'vllm-fp8-token'] as const) {
      const r: EngineRecipe = {
        recipe,
        ...(recipe === 'deepseek-fp8-block' ? { block: 16 } : {}),
        ignore: ['model.embed_tokens', 'lm_head', `${L}.mlp.gate`],
        match: 'prefix',
      };
      const path = join(dir, `engine-edge-${recipe}.safetensors`);
      writeSafetensors(path, engineEntries(edge, r));
      const args = [
        '--trainer',
        trainer,
        '--engine',
        path,
        '--recipe',
        recipe,
        ...(recipe === 'deepseek-fp8-block' ? ['--block', '16'] : []),
        ...blockArgs.slice(4),
      ];
      const { ts, py } = await both(args);
      expect(ts.json?.findings, recipe).toEqual([]);
      expect(py.json, `${recipe}: ${py.err}`).toEqual(ts.json);
    }
  }, 60_000);
});

/** BF16 bits back to float32 values. */
function bf16ToF32(bits: Uint16Array): Float32Array {
  return new Float32Array(Uint32Array.from(bits, (b) => b << 16).buffer);
}

describe('refit-check: bad input exits 2 with one line naming the problem (both implementations)', () => {
  const cases: [string, () => string[], RegExp][] = [
    ['no --recipe', () => ['--trainer', TRAINER, '--engine', engine()], /recipe/],
    [
      'an unsupported recipe',
      () => ['--trainer', TRAINER, '--engine', engine(), '--recipe', 'mxfp4'],
      /unsupported preset 'mxfp4'/,
    ],
    [
      '--block on a per-tensor recipe',
      () => ['--trainer', TRAINER, '--engine', engine(), '--recipe', 'vllm-fp8-tensor', '--block', '16'],
      /--block/,
    ],
    [
      'an unreadable file',
      () => ['--trainer', join(dir, 'nope.safetensors'), '--engine', engine(), '--recipe', 'vllm-fp8-tensor'],
      /--trainer/,
    ],
    [
      'an engine tensor of an unexpected dtype',
      () => [
        '--trainer',
        TRAINER,
        '--engine',
        engine((e) => {
          e['model.norm.weight'] = { data: new Int32Array(32), shape: [32] };
        }),
        ...blockArgs,
      ],
      /model\.norm\.weight: dtype I32/,
    ],
    [
      'an engine tensor of an unexpected shape',
      () => [
        '--trainer',
        TRAINER,
        '--engine',
        engine((e) => {
          e[`${L}.self_attn.q_proj.weight`] = { ...e[`${L}.self_attn.q_proj.weight`]!, shape: [16, 64] };
        }),
        ...blockArgs,
      ],
      /q_proj\.weight: shape \[16, 64\]/,
    ],
    [
      'a scale tensor of the wrong convention',
      () => ['--trainer', TRAINER, '--engine', engine(), '--recipe', 'vllm-fp8-tensor', ...blockArgs.slice(4)],
      /weight_scale_inv: recipe vllm-fp8-tensor keeps its scales in/,
    ],
  ];
  it.each(cases)(
    '%s',
    async (_, args, message) => {
      const a = args();
      const { ts, py } = await both(a);
      expect(ts.code).toBe(2);
      expect(py.code).toBe(2);
      expect(ts.err.trim().split('\n')).toHaveLength(1);
      expect(py.err.trim().split('\n')).toHaveLength(1);
      expect(ts.err).toMatch(message);
      if (!/no --recipe/.test(_)) expect(py.err).toMatch(message);
    },
    60_000,
  );

  it('text output: one line per finding and a summary; exit 1', async () => {
    const r = await runCli([
      'refit-check',
      '--trainer',
      TRAINER,
      '--engine',
      engine((e) => {
        delete e['lm_head.weight'];
      }),
      ...blockArgs,
    ]);
    expect(r.code).toBe(1);
    expect(r.out).toBe(
      'lm_head.weight  missing\n12 tensors (6 quantized by deepseek-fp8-block 16×16, ignore rule prefix), 2 kv scales: 1 finding\n',
    );
  });
});
