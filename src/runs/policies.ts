// The policy factories `qrl-sim run` can build, by `policy.kind`. Not the policies themselves.

import { arPolicyFactory } from '../policies/ar-api.js';
import { diffusionPolicyFactory } from '../policies/diffusion/engine.js';
import type { PolicyFactory } from '../policies/engine.js';
import { UsageError } from '../core/errors.js';

const factories: Readonly<Record<string, PolicyFactory>> = Object.freeze({
  ar: arPolicyFactory,
  diffusion: diffusionPolicyFactory,
});

/** The factory of a policy kind; throws an error listing the known kinds. */
export function policyFactory(kind: string): PolicyFactory {
  const factory = factories[kind];
  if (factory === undefined)
    throw new UsageError(`config.policy.kind: unknown policy '${kind}' (known: ${Object.keys(factories).join(', ')})`);
  return factory;
}
