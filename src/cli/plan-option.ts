// `--plan P` of the probe commands: a preset name, or a JSON file holding a plan as data (the run
// config's `plan` object). Not the plan table (src/policies/plans.ts) and not its validation.

import { existsSync } from 'node:fs';
import { precisionPlans, resolvePlan, type PlanData, type PrecisionPlan } from '../policies/plans.js';
import { UsageError } from '../core/errors.js';
import { readJsonFile } from './input.js';

/**
 * The plan `--plan` names: a preset of {@link precisionPlans}, else a path to a `.json` file with
 * `{ name?, description?, rollout, trainer }` checked by {@link resolvePlan}. Errors are
 * {@link UsageError}s naming `--plan` and the field.
 */
export function planOption(value: string): PrecisionPlan {
  if (Object.hasOwn(precisionPlans, value)) return precisionPlans[value as keyof typeof precisionPlans];
  if (!value.endsWith('.json') || !existsSync(value)) {
    throw new UsageError(
      `--plan: expected one of ${Object.keys(precisionPlans).join(', ')} or a plan .json file, got '${value}'`,
    );
  }
  const data = readJsonFile(value, '--plan');
  try {
    return resolvePlan(data as PlanData);
  } catch (error) {
    throw new UsageError(`--plan: ${value}: ${error instanceof Error ? error.message : String(error)}`);
  }
}
