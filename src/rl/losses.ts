// Policy losses: the table of the 16 losses by config name (ppo-clip, gspo, sapo, cispo, reinforce, tbpo, dppo-tv, dppo-kl, ipo, luspo, vespo, geo_mean, topr, trpl, dppo-topk-tv, dppo-topk-kl).
// Not a loss itself (ratio surrogates: losses/ratio.ts; detached-coefficient losses: losses/score-function.ts) and not the correction or the aggregation.

import type { NoParams } from './types.js';
import type { LossFn } from './losses/loss.js';
import { trpl, type TrplParams } from './losses/trpl.js';
import { dppoTopkKl, dppoTopkTv, type DppoTopkParams } from './losses/dppo-topk.js';
import {
  geoMean,
  gspo,
  luspo,
  ppoClip,
  sapo,
  tbpo,
  type ClipParams,
  type PpoClipParams,
  type SapoParams,
  type TbpoParams,
} from './losses/ratio.js';
import {
  cispo,
  dppoKl,
  dppoTv,
  ipo,
  reinforce,
  topr,
  vespo,
  type CispoParams,
  type DppoParams,
  type IpoParams,
  type ToprParams,
  type VespoParams,
} from './losses/score-function.js';

/**
 * Each policy loss's parameters by config name, defaults filled in. The table {@link losses} is checked
 * against it entry by entry ({@link LossTable}).
 */
export interface LossParams {
  readonly 'ppo-clip': PpoClipParams;
  readonly gspo: ClipParams;
  readonly sapo: SapoParams;
  readonly cispo: CispoParams;
  readonly reinforce: NoParams;
  readonly tbpo: TbpoParams;
  readonly 'dppo-tv': DppoParams;
  readonly 'dppo-kl': DppoParams;
  readonly ipo: IpoParams;
  readonly luspo: ClipParams;
  readonly vespo: VespoParams;
  readonly geo_mean: ClipParams;
  readonly topr: ToprParams;
  readonly trpl: TrplParams;
  readonly 'dppo-topk-tv': DppoTopkParams;
  readonly 'dppo-topk-kl': DppoTopkParams;
}

/** Config name of a policy loss. */
export type LossName = keyof LossParams;

/**
 * The type of the table {@link losses}: every name of {@link LossParams}, each mapped to a loss that
 * accepts that loss's own parameters. A missing entry, an extra one or a loss whose options type does not
 * accept its parameters fails to compile.
 */
export type LossTable = { readonly [K in LossName]: LossFn<LossParams[K]> };

/** Every policy loss by its config name. */
export const losses = {
  'ppo-clip': ppoClip,
  gspo,
  sapo,
  cispo,
  reinforce,
  tbpo,
  'dppo-tv': dppoTv,
  'dppo-kl': dppoKl,
  ipo,
  luspo,
  vespo,
  geo_mean: geoMean,
  topr,
  trpl,
  'dppo-topk-tv': dppoTopkTv,
  'dppo-topk-kl': dppoTopkKl,
} as const satisfies LossTable;

/** The losses that read the batch's `topk` (the sampler's distribution; src/rl/topk.ts): refused without it. */
export const topkLossNames: readonly LossName[] = ['trpl', 'dppo-topk-tv', 'dppo-topk-kl'];

/** True when the loss named `name` reads the batch's `topk` ({@link topkLossNames}). */
export function readsTopkLoss(name: unknown): boolean {
  return (topkLossNames as readonly unknown[]).includes(name);
}
