// `qrl-sim quantize`: quantizes a JSON array (1-D or rows × cols) with a named preset and prints codes, scales,
// the dequantized values and error statistics. Not a file converter: no binary formats, one tensor per call.

import { readFileSync } from 'node:fs';
import { type QuantPreset, type QuantPresetParams, quantPresets } from '../numerics/presets.js';
import { quantizeArray } from '../golden/methods.js';
import type { Command } from './command.js';
import { UsageError } from '../core/errors.js';
import { parseQuantizeInput } from '../numerics/values.js';
import { booleans, integerOption, parseCommandArgs, required, strings } from './parse.js';

const presetLines = Object.entries(quantPresets as Record<string, QuantPreset>)
  .map(([name, p]) => `  ${name.padEnd(24)} ${p.description}`)
  .join('\n');

const help = `usage: qrl-sim quantize --preset NAME [--block N] [--ue8m0] --input FILE|- [--json]

Reads a JSON array of numbers (one row) or an array of equal-length arrays (rows = tokens or
output channels; groups and blocks run along each row), quantizes it with the preset and prints
the codes, the dequant scales (x ≈ q·s), the dequantized values and the error statistics (text:
the first 8 rows and columns; --json: everything). The statistics cover the elements whose input
and output are finite; finite inputs that dequantize to NaN or ±Infinity (e.g. an MX block with a
NaN, whose shared scale is NaN) are counted and reported separately.
Values may also be the strings "NaN", "Infinity", "-Infinity" and "-0"; every value is first
rounded to float32.

options:
  --preset NAME   one of the presets below
  --block N       group/block size of the presets that have one (default: the preset's)
  --ue8m0         power-of-two (UE8M0) scales, for the presets that take ue8m0
                  (vllm-fp8-group*, deepseek-*, deepgemm-*)
  --input FILE    JSON file, or - for standard input
  --json          print {preset, codes, scales, zeroPoints?, dequantized,
                  stats: {maxAbsError, rmse, sqnrDb, nonFinite}}
                  (codes and dequantized in the input's shape; non-finite numbers as strings)

presets:
${presetLines}

examples:
  echo '[[1, -2, 3.5, 0], [0.1, 0.2, 0.3, 400]]' | qrl-sim quantize --preset vllm-fp8-token --input - --json
  qrl-sim quantize --preset mxfp4 --block 32 --input docs/examples/weights.json
  echo '[[1, -2, 3.5, 0]]' | qrl-sim quantize --preset deepgemm-fp8-group --block 4 --ue8m0 --input -`;

/** A JSON-safe number: non-finite values and −0 as strings. */
function jsonNumber(v: number): number | string {
  if (Object.is(v, -0)) return '-0';
  return Number.isFinite(v) ? v : String(v);
}

/** The `quantize` subcommand. */
export const quantizeCommand: Command = {
  summary: 'quantize a JSON array with a named preset (codes, scales, dequantized values, error)',
  help,
  async run(args, io) {
    const { values } = parseCommandArgs(args, { ...strings('preset', 'block', 'input'), ...booleans('ue8m0', 'json') });
    const name = required(values.preset, 'preset');
    const preset = (quantPresets as Record<string, QuantPreset>)[name];
    if (preset === undefined)
      throw new UsageError(`--preset: unknown preset '${name}' (known: ${Object.keys(quantPresets).join(', ')})`);
    const params: QuantPresetParams = {};
    if (values.block !== undefined) {
      if (!preset.params.includes('block')) throw new UsageError(`--block: preset '${name}' has no block size`);
      Object.assign(params, { block: integerOption(values.block, 'block', 0, 1) });
    }
    if (values.ue8m0) {
      if (!preset.params.includes('ue8m0'))
        throw new UsageError(
          `--ue8m0: preset '${name}' has no UE8M0 variant (presets with one: ${Object.entries(
            quantPresets as Record<string, QuantPreset>,
          )
            .filter(([, p]) => p.params.includes('ue8m0'))
            .map(([n]) => n)
            .join(', ')})`,
        );
      Object.assign(params, { ue8m0: true });
    }
    const inputPath = required(values.input, 'input');
    let text: string;
    if (inputPath === '-') text = await io.readStdin();
    else {
      try {
        text = readFileSync(inputPath, 'utf8');
      } catch (error) {
        throw new UsageError(
          `--input: cannot read '${inputPath}' (${error instanceof Error ? error.message.split('\n')[0] : String(error)})`,
        );
      }
    }
    const { x, shape, oneD } = parseQuantizeInput(text, inputPath === '-' ? '--input' : `--input '${inputPath}'`);
    const { spec, q, y, stats, json } = quantizeArray(name, params, { x, shape, oneD });
    const codes = Array.from(q.codes as ArrayLike<number>);
    const dataShape = oneD ? [shape[1]] : [...shape];
    const scaleShape = oneD && q.scaleShape.length === 2 ? [q.scaleShape[1] as number] : q.scaleShape;
    if (values.json) {
      io.out(JSON.stringify(json));
      return 0;
    }
    io.out(
      `${name}: ${spec.format}, ${spec.granularity.kind}${'size' in spec.granularity ? ` ${spec.granularity.size}` : ''}, input [${dataShape.join(', ')}], scales [${scaleShape.join(', ')}]`,
    );
    const finiteInputs = x.filter((v) => Number.isFinite(v)).length;
    if (stats.nonFinite > 0)
      io.out(
        `non-finite outputs: ${stats.nonFinite} of ${finiteInputs} finite inputs dequantize to NaN or ±Infinity (not in the statistics below)`,
      );
    if (finiteInputs - stats.nonFinite === 0)
      io.out('max |error| —   rmse —   SQNR — (no finite input has a finite output)');
    else
      io.out(
        `max |error| ${stats.maxAbsError}   rmse ${stats.rmse}   SQNR ${stats.sqnrDb.toFixed(2)} dB   (over ${finiteInputs - stats.nonFinite} finite outputs)`,
      );
    const [rows, cols] = shape;
    const line = (values: ArrayLike<number>, start: number, width: number): string =>
      `${Array.from({ length: Math.min(width, 8) }, (_, c) => String(jsonNumber(values[start + c] as number))).join(' ')}${width > 8 ? ' …' : ''}`;
    // Scales (and zero points) in their own shape: [] per tensor, [rows], [rows, groups] or [blockRows, blockCols].
    const sShape = q.scaleShape;
    const sRows = sShape.length === 2 ? (sShape[0] as number) : sShape.length === 1 ? (sShape[0] as number) : 1;
    const sCols = sShape.length === 2 ? (sShape[1] as number) : 1;
    const scaleTable = (label: string, values: ArrayLike<number>): void => {
      io.out(`${label}:`);
      if (sShape.length === 1) io.out(`  ${line(values, 0, sRows)}`);
      else for (let r = 0; r < Math.min(sRows, 8); r++) io.out(`  ${line(values, r * sCols, sCols)}`);
      if (sShape.length !== 1 && sRows > 8) io.out(`  … ${sRows - 8} more rows`);
    };
    scaleTable('scales', q.scales);
    if (q.zeroPoints) scaleTable('zero points', q.zeroPoints);
    for (let r = 0; r < Math.min(rows, 8); r++) {
      io.out(`row ${r} codes:   ${line(codes, r * cols, cols)}`);
      io.out(`row ${r} dequant: ${line(y, r * cols, cols)}`);
    }
    if (rows > 8) io.out(`… ${rows - 8} more rows (use --json for everything)`);
    if (q.globalScale !== undefined) io.out(`global scale ${q.globalScale}`);
    return 0;
  },
};
