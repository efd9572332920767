// The run-config reference table of docs/grpo.md, generated from the zod schema (descriptions and
// defaults live next to the fields, so the table cannot drift). Not documentation prose.

import { z } from 'zod';
import { runConfigSchema } from './config.js';

interface JsonSchema {
  type?: string;
  description?: string;
  default?: unknown;
  properties?: Record<string, JsonSchema>;
  anyOf?: JsonSchema[];
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
}

function range(s: JsonSchema): string {
  if (s.enum) return s.enum.map((v) => `\`${String(v)}\``).join(' \\| ');
  const parts: string[] = [s.type ?? 'any'];
  const lo =
    s.exclusiveMinimum !== undefined
      ? `> ${s.exclusiveMinimum}`
      : s.minimum !== undefined && s.minimum > -1e15
        ? `≥ ${s.minimum}`
        : '';
  const hi =
    s.exclusiveMaximum !== undefined
      ? `< ${s.exclusiveMaximum}`
      : s.maximum !== undefined && s.maximum < 1e15
        ? `≤ ${s.maximum}`
        : '';
  if (lo || hi) parts.push([lo, hi].filter(Boolean).join(', '));
  return parts.join(' ');
}

function rows(schema: JsonSchema, path: string, out: string[]): void {
  const objectBranch = schema.anyOf?.find((b) => b.type === 'object' && b.properties);
  const props = schema.properties ?? objectBranch?.properties;
  if (props && Object.keys(props).length > 0) {
    if (objectBranch)
      out.push(
        `| \`${path}\` | object or null | \`${JSON.stringify(schema.default)}\` | ${schema.description ?? ''} |`,
      );
    for (const [key, child] of Object.entries(props)) rows(child, path ? `${path}.${key}` : key, out);
    return;
  }
  const def = schema.default === undefined ? '(required)' : `\`${JSON.stringify(schema.default)}\``;
  out.push(`| \`${path}\` | ${range(schema)} | ${def} | ${schema.description ?? ''} |`);
}

/** Markdown table of every run-config field: path, type and range, default, meaning and reason. */
export function configTableMarkdown(): string {
  const schema = z.toJSONSchema(runConfigSchema, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
  const out = ['| field | type | default | meaning and why this default |', '| --- | --- | --- | --- |'];
  rows(schema, '', out);
  return out.join('\n');
}
