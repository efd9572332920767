// The public surface of every package entry (`qrl-sim`, `qrl-sim/<layer>`): the names each entry file
// exports, read from its explicit export lists, grouped as the file groups them. Not the type checker:
// entry files name every export (no `export *`), so reading their syntax is the whole surface.
// Usage: npx tsx scripts/api-surface.ts — rewrites test/api-surface.json after a deliberate change.

import { readFileSync, writeFileSync } from 'node:fs';
import ts from 'typescript';

/** One exported name of an entry. */
export interface SurfaceName {
  /** The exported name. */
  name: string;
  /** `value` (usable at run time) or `type` (erased). */
  kind: 'value' | 'type';
  /** The comment above the export statement in the entry file (the group's one-line description). */
  group: string;
  /** The module it is re-exported from, as written in the entry file. */
  from: string;
}

/** The public surface of one package entry. */
export interface EntrySurface {
  /** The import specifier: `qrl-sim` or `qrl-sim/<layer>`. */
  entry: string;
  /** The entry's source file, relative to the repository root. */
  file: string;
  /** Statements that export without a named re-export list (`export *`, a local declaration): must stay empty. */
  exportStar: string[];
  /** Every exported name, in the order of the file. */
  names: SurfaceName[];
}

const root = new URL('../', import.meta.url);

/** The package entries: package.json `exports` minus `./package.json`, with their source files. */
export function packageEntries(): { entry: string; file: string }[] {
  const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as { exports: Record<string, unknown> };
  return Object.keys(pkg.exports)
    .filter((subpath) => subpath !== './package.json')
    .map((subpath) => {
      const layer = subpath === '.' ? '' : subpath.slice(2);
      return {
        entry: layer === '' ? 'qrl-sim' : `qrl-sim/${layer}`,
        file: layer === '' ? 'src/index.ts' : `src/${layer}/index.ts`,
      };
    });
}

/** Reads the explicit export lists of one entry file. */
export function entrySurface(entry: string, file: string): EntrySurface {
  const text = readFileSync(new URL(file, root), 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const names: SurfaceName[] = [];
  const exportStar: string[] = [];
  let group = '';
  for (const statement of source.statements) {
    // A comment after a blank line labels the statements below it (the file's opening lines do not).
    const last = (ts.getLeadingCommentRanges(text, statement.getFullStart()) ?? []).at(-1);
    if (last !== undefined && /\n\s*\n$/.test(text.slice(0, last.pos)))
      group = text.slice(last.pos, last.end).replace(/^\/\/\s*/, '');
    if (!ts.isExportDeclaration(statement)) {
      // Entries only re-export; a declaration exported here would be logic in an entry file.
      const modifiers = ts.canHaveModifiers(statement) ? (ts.getModifiers(statement) ?? []) : [];
      if (modifiers.some((m) => m.kind === ts.SyntaxKind.ExportKeyword)) exportStar.push(statement.getText(source));
      continue;
    }
    const from =
      statement.moduleSpecifier !== undefined && ts.isStringLiteral(statement.moduleSpecifier)
        ? statement.moduleSpecifier.text
        : '';
    if (statement.exportClause === undefined || !ts.isNamedExports(statement.exportClause)) {
      exportStar.push(statement.getText(source));
      continue;
    }
    for (const element of statement.exportClause.elements) {
      const kind = statement.isTypeOnly || element.isTypeOnly ? 'type' : 'value';
      names.push({ name: element.name.text, kind, group, from });
    }
  }
  return { entry, file, exportStar, names };
}

/** Every entry's surface. */
export const apiSurface = (): EntrySurface[] => packageEntries().map(({ entry, file }) => entrySurface(entry, file));

/** The snapshot form: per entry, sorted names, types written `type Name`. */
export function surfaceSnapshot(surfaces: EntrySurface[]): Record<string, string[]> {
  return Object.fromEntries(
    surfaces.map((s) => [
      s.entry,
      s.names
        .map((n) => (n.kind === 'type' ? `type ${n.name}` : n.name))
        .sort((a, b) => a.replace(/^type /, '').localeCompare(b.replace(/^type /, ''))),
    ]),
  );
}

/** The Markdown table of one entry for docs/library.md: one row per group, its names, values before types. */
export function surfaceTableMarkdown(surface: EntrySurface): string {
  const rows = new Map<string, SurfaceName[]>();
  for (const n of surface.names) rows.set(n.group, [...(rows.get(n.group) ?? []), n]);
  const cell = (ns: SurfaceName[]): string =>
    [...ns.filter((n) => n.kind === 'value'), ...ns.filter((n) => n.kind === 'type')]
      .map((n) => `\`${n.name}\``)
      .join(', ');
  const lines = ['| what | names (functions and values first, then types) |', '| --- | --- |'];
  for (const [group, ns] of rows) lines.push(`| ${group.replace(/\|/g, '\\|')} | ${cell(ns)} |`);
  const values = surface.names.filter((n) => n.kind === 'value').length;
  lines.push('', `${surface.names.length} names (${values} values, ${surface.names.length - values} types).`);
  return lines.join('\n');
}

/** The generated blocks of docs/library.md, one per entry (`surface-<layer>`, `surface-root`). */
export const surfaceBlocks = (): Record<string, string> =>
  Object.fromEntries(
    apiSurface().map((s) => [
      `surface-${s.entry === 'qrl-sim' ? 'root' : s.entry.slice('qrl-sim/'.length)}`,
      surfaceTableMarkdown(s),
    ]),
  );

/** Where the pinned snapshot lives. */
export const SNAPSHOT_FILE = 'test/api-surface.json';

const isMain =
  process.argv[1] !== undefined && import.meta.url.endsWith(process.argv[1].replace(/\\/g, '/').split('/').pop() ?? '');
if (isMain) {
  writeFileSync(new URL(SNAPSHOT_FILE, root), `${JSON.stringify(surfaceSnapshot(apiSurface()), null, 2)}\n`);
  console.log(`wrote ${SNAPSHOT_FILE}; now run npx tsx scripts/doc-tables.ts for docs/library.md`);
}
