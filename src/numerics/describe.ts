// Markdown tables generated from the format and profile records (docs/numerics.md embeds them,
// and a test checks they have not drifted). Not documentation prose.

import { type FloatFormat, decode, floatFormats } from './formats.js';
import { castProfiles, profileCoverage } from './profiles.js';
import { edgeCodes, rawRangeCodes } from './round.js';

function hex(format: FloatFormat, code: number): string {
  return `0x${code
    .toString(16)
    .toUpperCase()
    .padStart(Math.ceil(format.bits / 4), '0')}`;
}

function show(v: number): string {
  if (Object.is(v, -0)) return '−0';
  if (v === 0) return '+0';
  const a = Math.abs(v);
  const e = Math.log2(a);
  const text =
    Number.isInteger(e) && Math.abs(e) >= 16
      ? `2^${e}`
      : a >= 1e6 || a < 1e-3
        ? a.toExponential(7).replace(/\.?0+e/, 'e')
        : String(a);
  return a === Infinity ? 'Inf' : text;
}

/** Describes the outcome codes for a positive and a negative input, e.g. `±448` or `NaN 0x7F/0xFF`. */
function outcome(format: FloatFormat, [pos, neg]: readonly [number, number]): string {
  const a = decode(format, pos);
  const b = decode(format, neg);
  if (Number.isNaN(a) || Number.isNaN(b)) {
    if (Number.isNaN(a) && Number.isNaN(b))
      return pos === neg ? `NaN ${hex(format, pos)}` : `NaN ${hex(format, pos)}/${hex(format, neg)}`;
    return `${Number.isNaN(a) ? `NaN ${hex(format, pos)}` : show(a)} / ${Number.isNaN(b) ? `NaN ${hex(format, neg)}` : show(b)}`;
  }
  if (a === -b && a !== 0) return `±${show(a)}`;
  if (Object.is(a, b)) return `${a < 0 || Object.is(a, -0) ? '' : '+'}${show(a)}`.replace('+−', '−').replace('++', '+');
  return `${show(a)} / ${show(b)}`;
}

/** The format table of docs/numerics.md. */
export function formatTableMarkdown(): string {
  const rows = Object.values(floatFormats).map((f) => {
    const bits = `${f.signed ? 1 : 0}/${f.expBits}/${f.manBits}`;
    const inf = f.infCode === null ? '—' : hex(f, f.infCode);
    const nan =
      f.nanEncoding === 'none'
        ? '—'
        : `${f.nanEncoding}${f.bits <= 8 ? ` (${f.nanCodes.map((c) => hex(f, c)).join(', ')})` : ''}`;
    return `| \`${f.name}\` | ${bits} | ${f.bias} | ${show(f.maxFinite)} (${hex(f, f.maxCode)}) | ${show(f.minNormal)} | ${show(f.minSubnormal)} | ${inf} | ${nan} | ${f.hasNegZero ? 'yes' : 'no'} |`;
  });
  return [
    '| format | s/e/m | bias | max finite (code) | min normal | min subnormal | +Inf | NaN | −0 |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...rows,
  ].join('\n');
}

/** The profile table of docs/numerics.md: one row per (profile, format) pair that exists. */
export function profileTableMarkdown(): string {
  const rows = profileCoverage().map(({ profile, format, rules }) => {
    const codes = edgeCodes(format, rules);
    const ties = {
      rne: 'RNE',
      rha: 'ties away',
      rhz: 'ties toward zero',
      rtz: 'toward zero',
      stochastic: 'stochastic',
    }[profile.mode];
    const quirks = rules.rawRanges.map(
      (r) =>
        `[${r.lo}, ${r.hi}) → ${outcome(format, rawRangeCodes(format, r, codes))}${r.to === 'up' ? ' (rne only)' : ''}`,
    );
    if (!format.hasZero) {
      quirks.push(
        `0 → ${outcome(format, codes.zeroInput).replace('+', '')}`,
        `underflow → ${outcome(format, codes.zero).replace('+', '')}`,
      );
      quirks.push(
        `negative → ${codes.negative === null ? 'abs(x)' : outcome(format, [codes.negative, codes.negative]).replace('+', '')}`,
      );
    }
    return `| \`${profile.name}\` | \`${format.name}\` | ${ties} | ${outcome(format, codes.overflow)} | ${outcome(format, codes.infinity)} | ${outcome(format, codes.nan)}${rules.nan.to === 'nan' && rules.nan.pattern === 'payload' && format.nanEncoding === 'ieee' ? ' with the float32 payload' : ''} | ${outcome(format, [codes.zeroInput[1], codes.zeroInput[1]])} | ${quirks.join('; ') || '—'} |`;
  });
  return [
    '| profile | format | ties | overflow (+/−) | ±Inf in | NaN in (+/−) | −0 in | other rules |',
    '| --- | --- | --- | --- | --- | --- | --- | --- |',
    ...rows,
  ].join('\n');
}

/** One line per profile: name, description and source. */
export function profileSourcesMarkdown(): string {
  return Object.values(castProfiles)
    .map((p) => `- \`${p.name}\` — ${p.description}. Source: ${p.source}.`)
    .join('\n');
}
