// The panels of the report's curves: which metric each plot shows, its title, axis and scale (PLOT_PANELS), and
// the MoE panels a run with routing adds. Data only; plots.ts draws them.

import type { RunRecord } from './runs.js';

/** What one plot shows. */
export interface PlotPanel {
  /** Stable identifier (also the SVG's id prefix). */
  readonly id: string;
  /** Section of the report the plot belongs to. */
  readonly section: string;
  readonly title: string;
  /** Which file the metric comes from. */
  readonly source: 'metrics' | 'eval';
  /** The metric name in that file. */
  readonly metric: string;
  /** Y axis title, with the unit. */
  readonly yTitle: string;
  /** Whether the y axis starts at 0 (linear axes only). */
  readonly yZero: boolean;
  /**
   * Log y axis. A log axis has no 0: values ≤ 0 are not drawn, a band reaching 0 is cut at the
   * smallest positive value of the plot, and a configuration that is 0 at every step is listed
   * under the plot instead.
   */
  readonly yLog?: boolean;
  /**
   * A configuration whose values are 0 at every step has nothing to show here (e.g. rejected
   * tokens without a rejecting correction): it is left out and named under the plot.
   */
  readonly omitAllZero?: boolean;
  /** What the plot shows and what to look for (the caption). */
  readonly reading: string;
}

/**
 * Every plot the report can draw, in page order. A plot is drawn only when at least one run
 * logged its metric (AIS α only for AIS runs, TBPO drops only for TBPO, …).
 */
export const PLOT_PANELS: readonly PlotPanel[] = [
  {
    id: 'reward',
    section: 'Learning',
    title: 'Training reward',
    source: 'metrics',
    metric: 'reward/mean',
    yTitle: 'mean reward per response',
    yZero: false,
    reading:
      'Mean task reward of the step’s sampled responses (reward/mean). Learning shows as a rising curve; an uncorrected quantized rollout that departs from the bf16 baseline shows as a lower or collapsing curve.',
  },
  {
    id: 'eval-rollout',
    section: 'Learning',
    title: 'Held-out accuracy, rollout engine (greedy)',
    source: 'eval',
    metric: 'eval/rollout/greedy_accuracy',
    yTitle: 'greedy pass@1 (fraction)',
    yZero: true,
    reading:
      'Greedy pass@1 on the held-out split, answered by the rollout engine (the quantized side of the plan). This is the accuracy column of the table.',
  },
  {
    id: 'eval-trainer',
    section: 'Learning',
    title: 'Held-out accuracy, trainer plan (greedy)',
    source: 'eval',
    metric: 'eval/trainer/greedy_accuracy',
    yTitle: 'greedy pass@1 (fraction)',
    yZero: true,
    reading:
      'The same problems answered at the trainer’s precision. A gap to the rollout-engine plot is accuracy lost to quantized inference alone.',
  },
  {
    id: 'k3',
    section: 'Rollout/trainer mismatch',
    title: 'Mismatch KL (k3)',
    source: 'metrics',
    metric: 'rollout_corr/k3_kl',
    yTitle: 'k3 KL per token (nats, log scale)',
    yZero: false,
    yLog: true,
    omitAllZero: true,
    reading:
      'mean(e^δ − δ − 1) with δ = ℓold − ℓroll over the batch’s tokens: how far the rollout engine’s distribution is from the trainer’s. Zero for identical plans (not drawable on the log axis: such configurations are named under the plot); growth during training means the policy is drifting into regions where quantization matters.',
  },
  {
    id: 'ess',
    section: 'Rollout/trainer mismatch',
    title: 'Effective sample size ratio',
    source: 'metrics',
    metric: 'rollout_corr/weights_ess_ratio',
    yTitle: 'ESS / N',
    yZero: true,
    reading:
      '1 / mean((w / mean w)²) of the applied importance weights: 1 when every token weighs the same, lower when a few tokens dominate the corrected gradient.',
  },
  {
    id: 'ais-alpha',
    section: 'Adaptive correction (AIS)',
    title: 'AIS α',
    source: 'metrics',
    metric: 'rollout_corr/ais/alpha',
    yTitle: 'α (0 none, 1 full TIS)',
    yZero: true,
    reading:
      'The per-mini-batch mixing coefficient of AIS, averaged over the step’s mini-batches: how much of the truncated-IS correction is applied.',
  },
  {
    id: 'ais-alpha-ess',
    section: 'Adaptive correction (AIS)',
    title: 'AIS α_ess (weight reliability)',
    source: 'metrics',
    metric: 'rollout_corr/ais/alpha_ess',
    yTitle: 'α_ess',
    yZero: true,
    reading:
      'α_ess = (1 + CV²)^(−1/2) of the truncated weights: falls when they are uneven (high coefficient of variation).',
  },
  {
    id: 'ais-alpha-mis',
    section: 'Adaptive correction (AIS)',
    title: 'AIS α_mis (mismatch size)',
    source: 'metrics',
    metric: 'rollout_corr/ais/alpha_mis',
    yTitle: 'α_mis',
    yZero: true,
    reading:
      'α_mis = min(1, mean|δ| / δ₀): rises with the mean absolute log-prob gap between rollout and trainer; no mismatch, no correction.',
  },
  {
    id: 'ais-alpha-var',
    section: 'Adaptive correction (AIS)',
    title: 'AIS α_var (variance penalty)',
    source: 'metrics',
    metric: 'rollout_corr/ais/alpha_var',
    yTitle: 'α_var',
    yZero: true,
    reading: 'Positive when weighting inflates the spread of the advantages beyond γ; it is subtracted from α_ess.',
  },
  {
    id: 'clipfrac',
    section: 'Clipping, masking, dropping',
    title: 'PPO clip fraction',
    source: 'metrics',
    metric: 'actor/pg_clipfrac',
    yTitle: 'fraction of tokens clipped',
    yZero: true,
    reading: 'Fraction of tokens whose ratio r = e^(ℓθ − ℓold) was clipped in the policy loss.',
  },
  {
    id: 'masked',
    section: 'Clipping, masking, dropping',
    title: 'Tokens rejected by the correction',
    source: 'metrics',
    metric: 'rollout_corr/masked_fraction',
    yTitle: 'fraction of tokens masked',
    yZero: true,
    omitAllZero: true,
    reading: 'Fraction of valid tokens a rejecting correction (IcePop, MIS, RS, veto) removed from the loss.',
  },
  {
    id: 'tbpo-drop',
    section: 'Clipping, masking, dropping',
    title: 'TBPO dropped sequences',
    source: 'metrics',
    metric: 'actor/tbpo_drop_fraction',
    yTitle: 'sequences dropped',
    yZero: true,
    omitAllZero: true,
    reading: 'Fraction of sequences TBPO dropped because their sequence ratio left the trust band.',
  },
  {
    id: 'tis-truncated',
    section: 'Clipping, masking, dropping',
    title: 'TIS truncated weights',
    source: 'metrics',
    metric: 'rollout_corr/tis/truncated_fraction',
    yTitle: 'fraction of tokens with ρ > C',
    yZero: true,
    omitAllZero: true,
    reading: 'Fraction of tokens whose importance ratio exceeded the truncation cap C.',
  },
  {
    id: 'ais-truncated',
    section: 'Clipping, masking, dropping',
    title: 'AIS truncated weights',
    source: 'metrics',
    metric: 'rollout_corr/ais/truncated_fraction',
    yTitle: 'fraction of tokens with ρ > C',
    yZero: true,
    omitAllZero: true,
    reading: 'Fraction of tokens whose importance ratio exceeded the AIS cap C.',
  },
  {
    id: 'length',
    section: 'Policy',
    title: 'Response length',
    source: 'metrics',
    metric: 'response_length/mean',
    yTitle: 'tokens per response',
    yZero: false,
    reading:
      'Mean number of generated tokens (EOS included). Length blow-ups are a classic symptom of an uncorrected mismatch.',
  },
  {
    id: 'entropy',
    section: 'Policy',
    title: 'Policy entropy',
    source: 'metrics',
    metric: 'actor/entropy',
    yTitle: 'entropy per token (nats)',
    yZero: true,
    reading:
      'Mean token entropy of π_old at the trainer’s precision. A fast drop is entropy collapse; sharp policies are where quantization error changes sampled tokens.',
  },
  {
    id: 'grad-norm',
    section: 'Policy',
    title: 'Gradient norm',
    source: 'metrics',
    metric: 'actor/grad_norm',
    yTitle: '‖∇θ L‖ before clipping',
    yZero: true,
    reading: 'Spikes point to steps where a few heavily weighted tokens dominate the update.',
  },
];

/**
 * The MoE routing panels for the runs at hand (none when no run is an MoE run): one flip-rate plot
 * per layer that some run logged (`moe/flip_rate/l<l>`; the number of layers is the model's), then
 * the mismatch k3 with the trainer's own routing and with the rollout's routing replayed (logged
 * with `policy.routingReplay` R2/R3).
 */
export function moePanels(runs: Iterable<RunRecord>): PlotPanel[] {
  const layers = new Set<number>();
  for (const run of runs) {
    for (const line of run.metrics) {
      for (const key of Object.keys(line)) {
        const m = /^moe\/flip_rate\/l(\d+)$/.exec(key);
        if (m) layers.add(Number(m[1]));
      }
    }
  }
  if (layers.size === 0) return [];
  const section = 'MoE routing';
  const flips = [...layers]
    .sort((a, b) => a - b)
    .map(
      (l): PlotPanel => ({
        id: `moe-flip-l${l}`,
        section,
        title: `Routing flip rate, layer ${l}`,
        source: 'metrics',
        metric: `moe/flip_rate/l${l}`,
        yTitle: 'share of router decisions',
        yZero: true,
        reading: `Share of layer ${l}’s router decisions (token, expert) that differ between the rollout engine’s record and the trainer’s own top-k at θ_old, over the positions that score a response token. Zero for identical plans; under a quantized rollout, the decisions near a tie that the rollout’s rounding flips — a mismatch no token-level weight explains, which R3 removes by replaying the record.`,
      }),
    );
  return [
    ...flips,
    {
      id: 'moe-k3-own',
      section,
      title: 'Mismatch k3, trainer’s own routing',
      source: 'metrics',
      metric: 'moe/k3_kl_own_routing',
      yTitle: 'k3 KL per token (nats, log scale)',
      yZero: false,
      yLog: true,
      omitAllZero: true,
      reading:
        'rollout_corr/k3_kl with ℓold from the trainer’s own routing (runs with policy.routingReplay R2 or R3): the mismatch without replay.',
    },
    {
      id: 'moe-k3-rollout',
      section,
      title: 'Mismatch k3, rollout routing replayed (R3)',
      source: 'metrics',
      metric: 'moe/k3_kl_rollout_routing',
      yTitle: 'k3 KL per token (nats, log scale)',
      yZero: false,
      yLog: true,
      omitAllZero: true,
      reading:
        'The same k3 with the rollout engine’s routing replayed in the trainer: what is left of the mismatch once routing flips are removed.',
    },
  ];
}
