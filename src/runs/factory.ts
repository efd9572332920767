// Where a sweep finds its policy factory: a module URL and an export, so that worker threads can
// load the same factory the main thread validated with. Not a factory itself.

import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { RunConfig } from '../rl/grpo/config.js';
import type { PolicyFactory } from '../policies/engine.js';

/** A policy factory (with `validate`, which checks a config before anything runs). */
export type ValidatingPolicyFactory = PolicyFactory;

/**
 * A module that exports a factory: `export` names either a {@link PolicyFactory} object or a
 * function `(kind: 'ar' | 'diffusion') => PolicyFactory`.
 */
export interface FactorySource {
  /** Module URL (`file:` URL) or absolute path. */
  readonly module: string;
  /** Export name. @defaultValue `'policyFactory'` */
  readonly export?: string;
}

/** The project's policy factories (`policyFactory(kind)` in src/runs/policies.ts). */
export const DEFAULT_FACTORY: FactorySource = Object.freeze({
  module: new URL('./policies.js', import.meta.url).href,
  export: 'policyFactory',
});

function toUrl(module: string): string {
  return /^[a-z]+:/i.test(module) && !/^[a-z]:[\\/]/i.test(module)
    ? module
    : new URL(`file://${module.startsWith('/') ? '' : '/'}${module.replace(/\\/g, '/')}`).href;
}

/**
 * Imports `source` and returns the factory for `kind`. Throws (not a usage error) when the module
 * or the export is missing, or when the export is not a factory.
 */
export async function loadPolicyFactory(
  source: FactorySource,
  kind: RunConfig['policy']['kind'],
): Promise<ValidatingPolicyFactory> {
  const name = source.export ?? 'policyFactory';
  const url = toUrl(source.module);
  const fail = (error: unknown): Error =>
    new Error(
      `policy factory: cannot load ${source.module}: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`,
    );
  let mod: Record<string, unknown>;
  try {
    mod = (await import(url)) as Record<string, unknown>;
  } catch (error) {
    // From the TypeScript sources, worker threads run under tsx, whose ESM hooks do not reach
    // dynamic imports in Node 20 worker threads; its require hook does.
    if (!import.meta.url.endsWith('.ts') || !url.startsWith('file:')) throw fail(error);
    try {
      mod = createRequire(import.meta.url)(fileURLToPath(url)) as Record<string, unknown>;
    } catch (second) {
      throw fail(second);
    }
  }
  const exported = mod[name];
  const factory = typeof exported === 'function' ? (exported as (k: string) => unknown)(kind) : exported;
  if (
    typeof factory !== 'object' ||
    factory === null ||
    typeof (factory as PolicyFactory).create !== 'function' ||
    typeof (factory as PolicyFactory).warmStart !== 'function'
  ) {
    throw new Error(
      `policy factory: export '${name}' of ${source.module} is not a PolicyFactory (create, warmStart) or a function returning one`,
    );
  }
  return factory as ValidatingPolicyFactory;
}
