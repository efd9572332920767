// The mismatch diagnostics of each RL stack under that stack's own metric names and definitions, and their docs table.
// Not qrl-sim's own diagnostics (diagnostics.ts) and not used by any loss: logged numbers only, from detached inputs.

import { type MetricRecord, acceptRenamed, mean, sampleStd } from './types.js';
import { mismatchDiagnostics } from './diagnostics.js';
import {
  type StackMetricInput,
  type StackMetricSet,
  k3,
  max,
  median,
  min,
  overValidRows,
  rowMeans,
  rowSums,
  segmentMeans,
  tokens,
} from './stack-metric-input.js';

export type { StackMetricDoc, StackMetricInput, StackMetricSet } from './stack-metric-input.js';

const VERL = 'verl-project/verl 1dda039';
const SLIME = 'THUDM/slime 624b824';
const PRIME = 'PrimeIntellect-ai/prime-rl 559b447';
const PRIME_MISMATCH = 'PrimeIntellect-ai/prime-rl e1502f0';
const NEMO = 'NVIDIA-NeMo/RL 7ea279a';
const SKYRL = 'NovaSky-AI/SkyRL a956457';
const ROLL = 'alibaba/ROLL 8eb27cc';
const TRL = 'huggingface/trl f2cd577';
const AREAL = 'areal-project/AReaL cbff54d';
const OPENRLHF = 'OpenRLHF/OpenRLHF 3c3be62';

const verlNames = [
  'kl',
  'k3_kl',
  'chi2_token',
  'chi2_seq',
  'training_ppl',
  'training_log_ppl',
  'rollout_ppl',
  'rollout_log_ppl',
  'log_ppl_diff',
  'log_ppl_abs_diff',
  'log_ppl_diff_max',
  'log_ppl_diff_min',
  'ppl_ratio',
] as const;
const verlFormula: Record<(typeof verlNames)[number], string> = {
  kl: 'token mean of −x',
  k3_kl: 'token mean of e^x − x − 1',
  chi2_token: 'token mean of e^(2·clamp(x, ±20)) − 1',
  chi2_seq: 'mean over all B rows of e^(2·clamp(Σ_t x, ±20)) − 1',
  training_ppl: 'mean over all B rows of exp(−mean_t ℓtrain) (an empty row: 1)',
  training_log_ppl: 'mean over all B rows of −mean_t ℓtrain',
  rollout_ppl: 'mean over all B rows of exp(−mean_t ℓroll)',
  rollout_log_ppl: 'mean over all B rows of −mean_t ℓroll',
  log_ppl_diff: 'mean over all B rows of mean_t ℓroll − mean_t ℓtrain',
  log_ppl_abs_diff: 'mean over all B rows of |mean_t ℓroll − mean_t ℓtrain|',
  log_ppl_diff_max: 'max over all B rows of mean_t ℓroll − mean_t ℓtrain',
  log_ppl_diff_min: 'min over all B rows of mean_t ℓroll − mean_t ℓtrain',
  ppl_ratio: 'mean over all B rows of exp(mean_t ℓroll − mean_t ℓtrain)',
};

/** DPPO mask of prime-rl's default loss with its default bands (dppo_mask_low = dppo_mask_high = 0.2). */
function primeMasks(input: StackMetricInput, k: number): { masked: boolean; low: boolean; high: boolean } {
  const dp = Math.exp(input.logpTrain[k]!) - Math.exp(input.logpRollout[k]!);
  const A = input.advantages?.[k] ?? 0;
  const high = dp > 0.2;
  const low = dp < -0.2;
  return { masked: A > 0 ? high : low, low: A < 0 && low, high: A > 0 && high };
}

/**
 * Every stack's mismatch metrics by stack name (definitions read at the commit of each set; the names are
 * exactly those on the stack's dashboard).
 */
export const stackMetricSets = {
  verl: {
    commit: VERL,
    metrics: {
      ...Object.fromEntries(
        verlNames.map((n) => [
          `rollout_corr/${n}`,
          {
            formula: verlFormula[n],
            source: `${VERL} verl/trainer/ppo/rollout_corr_helper.py compute_offpolicy_metrics l.904–1010`,
          },
        ]),
      ),
      'training/rollout_probs_diff_valid': {
        formula: '1 if any token is valid, else 0',
        source: `${VERL} verl/utils/debug/metrics.py calculate_debug_metrics l.63–121`,
      },
      'training/rollout_probs_diff_max': {
        formula:
          'max over tokens of |e^ℓtrain − e^ℓroll| (this and the next three omitted where veRL logs NaN: no token; std and corr also with one token or a constant side)',
        source: `${VERL} verl/utils/debug/metrics.py l.58–60, l.114–117`,
      },
      'training/rollout_probs_diff_mean': {
        formula: 'token mean of |e^ℓtrain − e^ℓroll|',
        source: `${VERL} verl/utils/debug/metrics.py l.118`,
      },
      'training/rollout_probs_diff_std': {
        formula: 'Bessel std over tokens of |e^ℓtrain − e^ℓroll|',
        source: `${VERL} verl/utils/debug/metrics.py l.119`,
      },
      'training/rollout_actor_probs_pearson_corr': {
        formula: 'Pearson correlation over tokens of e^ℓtrain and e^ℓroll',
        source: `${VERL} verl/utils/debug/metrics.py l.48–55, l.113`,
      },
    },
    compute: (input) => {
      const d = mismatchDiagnostics({
        shape: input.shape,
        logpOld: input.logpTrain,
        logpRollout: input.logpRollout,
        responseMask: input.responseMask,
        emptyRows: 'verl',
      }).metrics;
      const out: MetricRecord = Object.fromEntries(
        verlNames.map((n) => [`rollout_corr/${n}`, d[`rollout_corr/${n}`]!]),
      );
      const ts = tokens(input);
      out['training/rollout_probs_diff_valid'] = ts.length > 0 ? 1 : 0;
      if (ts.length === 0) return out;
      const p = ts.map((t) => Math.exp(input.logpTrain[t.k]!));
      const q = ts.map((t) => Math.exp(input.logpRollout[t.k]!));
      const diff = p.map((v, j) => Math.abs(v - q[j]!));
      out['training/rollout_probs_diff_max'] = max(diff);
      out['training/rollout_probs_diff_mean'] = mean(diff);
      if (diff.length > 1) out['training/rollout_probs_diff_std'] = sampleStd(diff);
      const mp = mean(p);
      const mq = mean(q);
      let sxy = 0;
      let sxx = 0;
      let syy = 0;
      p.forEach((v, j) => {
        sxy += (v - mp) * (q[j]! - mq);
        sxx += (v - mp) ** 2;
        syy += (q[j]! - mq) ** 2;
      });
      const r = sxy / Math.sqrt(sxx * syy);
      if (Number.isFinite(r)) out['training/rollout_actor_probs_pearson_corr'] = r;
      return out;
    },
  },
  slime: {
    commit: SLIME,
    metrics: {
      'train/train_rollout_logprob_abs_diff': {
        formula:
          "(1/B)·Σ_i mean_t |x| (per-sample mean, summed, divided by the step sample count; an empty sample adds 0); with aggregation slime-per-token (--calculate-per-token-loss) Σ_{i,t} |x| / Σ_i max(n_i, 1), n_i the sample's tokens",
        source: `${SLIME} slime/backends/megatron_utils/loss.py l.1136–1151, l.1317, l.1377; cp_utils.py l.70–101`,
      },
      'train/tis': {
        formula: '(1/B)·Σ_i mean_t ρ (slime-per-token: Σ_{i,t} ρ / Σ_i max(n_i, 1), as every metric of this set)',
        source: `${SLIME} loss.py vanilla_tis_function l.895, l.1157–1163`,
      },
      'train/tis_abs': { formula: '(1/B)·Σ_i mean_t |ρ − 1|', source: `${SLIME} loss.py l.896` },
      'train/tis_clipfrac': {
        formula: '(1/B)·Σ_i mean_t [clamp(ρ, 0, 2) ≠ ρ] (slime --tis-clip 2, --tis-clip-low 0)',
        source: `${SLIME} loss.py l.897–898; slime/utils/arguments.py`,
      },
    },
    compute: (input) => {
      const B = input.shape.B;
      const x = (k: number): number => input.logpTrain[k]! - input.logpRollout[k]!;
      // --calculate-per-token-loss: sum_of_token over the loss masks, divided by the logged normaliser
      // num_tokens = Σ_i clamp_min(n_i, 1) (loss.py l.1317, l.1377; cp_utils.py l.96–101), so an empty sample adds 1.
      const perToken = input.aggregation === 'slime-per-token';
      const per = (f: (x: number) => number): number => {
        if (B === 0) return 0;
        const rows = rowMeans(input, (k) => f(x(k)));
        if (!perToken) return rows.means.reduce((a, b) => a + b, 0) / B;
        const sum = rowSums(input, (k) => f(x(k))).reduce((a, b) => a + b, 0);
        return sum / rows.counts.reduce((a, n) => a + Math.max(n, 1), 0);
      };
      return {
        'train/train_rollout_logprob_abs_diff': per(Math.abs),
        'train/tis': per(Math.exp),
        'train/tis_abs': per((x) => Math.abs(Math.exp(x) - 1)),
        'train/tis_clipfrac': per((x) => (Math.min(2, Math.max(0, Math.exp(x))) !== Math.exp(x) ? 1 : 0)),
      };
    },
  },
  'prime-rl': {
    commit: PRIME,
    metrics: {
      'mismatch_kl/all/mean': {
        formula:
          'token mean of ρ − x − 1 (the mismatch_kl/all/* keys are omitted with no token, where prime-rl logs NaN; std also with one token)',
        source: `${PRIME} src/prime_rl/trainer/rl/loss.py l.100–106; train.py l.496–512; trainer/utils.py compute_stats l.245–275`,
      },
      'mismatch_kl/all/std': {
        formula: 'Bessel std over tokens of ρ − x − 1',
        source: `${PRIME} trainer/utils.py l.268`,
      },
      'mismatch_kl/all/min': { formula: 'min over tokens of ρ − x − 1', source: `${PRIME} trainer/utils.py l.269` },
      'mismatch_kl/all/max': { formula: 'max over tokens of ρ − x − 1', source: `${PRIME} trainer/utils.py l.270` },
      'mismatch_kl/all/median': {
        formula: 'lower median over tokens of ρ − x − 1 (torch.median)',
        source: `${PRIME} trainer/utils.py l.267`,
      },
      'is_masked/mean': {
        formula: 'token mean of the DPPO mask: A > 0 ? Δp > 0.2 : Δp < −0.2, Δp = e^ℓtrain − e^ℓroll',
        source: `${PRIME} loss.py default_loss_fn l.130–139, l.154`,
      },
      'is_masked_low/mean': { formula: 'token mean of A < 0 and Δp < −0.2', source: `${PRIME} loss.py l.139, l.155` },
      'is_masked_high/mean': { formula: 'token mean of A > 0 and Δp > 0.2', source: `${PRIME} loss.py l.138, l.156` },
      'masked_mismatch_kl/mean': {
        formula: 'mean of ρ − x − 1 over DPPO-masked tokens (0 if none)',
        source: `${PRIME} loss.py l.152`,
      },
      'unmasked_mismatch_kl/mean': {
        formula: 'mean of ρ − x − 1 over the other tokens (0 if none)',
        source: `${PRIME} loss.py l.153`,
      },
    },
    compute: (input) => {
      const ts = tokens(input);
      const kl = ts.map((t) => k3(t.x));
      const m = ts.map((t) => primeMasks(input, t.k));
      const on = (p: (j: number) => boolean): number[] => kl.filter((_, j) => p(j));
      // prime-rl reports NaN for an empty tensor and torch's std of one value is NaN: those keys are left out
      return {
        ...(kl.length > 0
          ? {
              'mismatch_kl/all/mean': mean(kl),
              'mismatch_kl/all/min': min(kl),
              'mismatch_kl/all/max': max(kl),
              'mismatch_kl/all/median': median(kl),
            }
          : {}),
        ...(kl.length > 1 ? { 'mismatch_kl/all/std': sampleStd(kl) } : {}),
        'is_masked/mean': mean(m.map((q) => (q.masked ? 1 : 0))),
        'is_masked_low/mean': mean(m.map((q) => (q.low ? 1 : 0))),
        'is_masked_high/mean': mean(m.map((q) => (q.high ? 1 : 0))),
        'masked_mismatch_kl/mean': mean(on((j) => m[j]!.masked)),
        'unmasked_mismatch_kl/mean': mean(on((j) => !m[j]!.masked)),
      };
    },
  },
  'prime-rl-debug': {
    commit: PRIME_MISMATCH,
    metrics: {
      'logprob_abs_error/all/mean': {
        formula:
          'token mean of |d|, d = f64(f32 ℓtrain) − f64(f32 ℓroll), each |d| stored in float32 (the keys are omitted with no token, where prime-rl logs NaN)',
        source: `${PRIME_MISMATCH} src/prime_rl/trainer/rl/mismatch.py l.21–26, l.30`,
      },
      'logprob_abs_error/all/max': {
        formula: 'max over tokens of that |d|',
        source: `${PRIME_MISMATCH} mismatch.py l.30`,
      },
      'logprob_bit_mismatch/all/mean': {
        formula: 'fraction of tokens whose float32 ℓtrain and ℓroll differ in bits (−0 ≠ +0) or either is not finite',
        source: `${PRIME_MISMATCH} mismatch.py l.25, l.31`,
      },
      'logprob_nonfinite/all/mean': {
        formula: 'fraction of tokens with a non-finite ℓtrain or ℓroll',
        source: `${PRIME_MISMATCH} mismatch.py l.25, l.32`,
      },
      'mismatch_k3_stable/all/mean': {
        formula:
          'token mean of expm1(d) − d in float64, each stored in float32 (no cancellation for tiny d, where e^d − d − 1 rounds to 0)',
        source: `${PRIME_MISMATCH} mismatch.py l.26–28, l.33`,
      },
    },
    compute: (input) => {
      const f32 = new Float32Array(2);
      const bits = new Int32Array(f32.buffer);
      const rows: { abs: number; bit: number; nonfinite: number; k3: number }[] = [];
      for (let k = 0; k < input.responseMask.length; k++) {
        if (input.responseMask[k] !== 1) continue;
        f32[0] = input.logpTrain[k]!;
        f32[1] = input.logpRollout[k]!;
        const nonfinite = Number.isFinite(f32[0]) && Number.isFinite(f32[1]) ? 0 : 1;
        const d = f32[0] - f32[1];
        rows.push({
          abs: Math.fround(Math.abs(d)),
          bit: bits[0] !== bits[1] || nonfinite === 1 ? 1 : 0,
          nonfinite,
          k3: Math.fround(Math.expm1(d) - d),
        });
      }
      if (rows.length === 0) return {} as MetricRecord;
      const absErrors = rows.map((r) => r.abs);
      return {
        'logprob_abs_error/all/mean': mean(absErrors),
        'logprob_abs_error/all/max': absErrors.reduce((a, b) => (Number.isNaN(b) || b > a ? b : a), -Infinity),
        'logprob_bit_mismatch/all/mean': mean(rows.map((r) => r.bit)),
        'logprob_nonfinite/all/mean': mean(rows.map((r) => r.nonfinite)),
        'mismatch_k3_stable/all/mean': mean(rows.map((r) => r.k3)),
      };
    },
  },
  'nemo-rl': {
    commit: NEMO,
    metrics: {
      token_mult_prob_error: {
        formula: 'token mean of e^|x|',
        source: `${NEMO} nemo_rl/algorithms/loss/loss_functions.py l.404–412`,
      },
      gen_kl_error: {
        formula: 'token mean of e^x − x − 1 (KL(P_gen‖P_train), k3)',
        source: `${NEMO} loss_functions.py l.414–427`,
      },
      policy_kl_error: {
        formula: 'token mean of e^(−x) + x − 1 (KL(P_train‖P_gen), k3)',
        source: `${NEMO} loss_functions.py l.429–442`,
      },
      js_divergence_error: {
        formula:
          'token mean of ½k3(ℓtrain − ℓm) + ½k3(ℓroll − ℓm), ℓm = log(½e^ℓtrain + ½e^ℓroll), k3(u) = e^u − u − 1',
        source: `${NEMO} loss_functions.py l.444–466`,
      },
    },
    compute: (input) => {
      const ts = tokens(input);
      const js = ts.map(({ k }) => {
        const o = input.logpTrain[k]!;
        const r = input.logpRollout[k]!;
        const lm = Math.log(0.5 * Math.exp(o) + 0.5 * Math.exp(r));
        return 0.5 * k3(o - lm) + 0.5 * k3(r - lm);
      });
      return {
        token_mult_prob_error: mean(ts.map((t) => Math.exp(Math.abs(t.x)))),
        gen_kl_error: mean(ts.map((t) => k3(t.x))),
        policy_kl_error: mean(ts.map((t) => k3(-t.x))),
        js_divergence_error: mean(js),
      };
    },
  },
  skyrl: {
    commit: SKYRL,
    metrics: {
      'policy/rollout_train_logprobs_abs_diff_mean': {
        formula: 'token mean of |x| (all four omitted when no token is valid)',
        source: `${SKYRL} skyrl/train/trainer.py l.1383–1405`,
      },
      'policy/rollout_train_logprobs_abs_diff_std': {
        formula: 'Bessel std over tokens of |x| (torch .std(); omitted with one token, where torch gives NaN)',
        source: `${SKYRL} skyrl/train/trainer.py l.1397`,
      },
      'policy/rollout_train_logprobs_abs_diff_max': {
        formula: 'max over tokens of |x|',
        source: `${SKYRL} skyrl/train/trainer.py l.1394`,
      },
      'policy/rollout_train_logprobs_abs_diff_min': {
        formula: 'min over tokens of |x|',
        source: `${SKYRL} skyrl/train/trainer.py l.1395`,
      },
    },
    compute: (input) => {
      const a = tokens(input).map((t) => Math.abs(t.x));
      if (a.length === 0) return {};
      return {
        'policy/rollout_train_logprobs_abs_diff_mean': mean(a),
        // torch's std of one value is NaN, which JSON cannot carry: the key is left out instead
        ...(a.length > 1 ? { 'policy/rollout_train_logprobs_abs_diff_std': sampleStd(a) } : {}),
        'policy/rollout_train_logprobs_abs_diff_max': max(a),
        'policy/rollout_train_logprobs_abs_diff_min': min(a),
      };
    },
  },
  roll: {
    commit: ROLL,
    metrics: Object.fromEntries(
      (['token', 'geometric', 'sequence', 'segment'] as const).flatMap((agg) => [
        [
          `actor/train_infer_ratio_${agg}_mean`,
          {
            formula: `mean over non-empty rows of the row mean of the ${agg} ratio (token ρ; geometric exp(mean_t x); sequence exp(Σ_t x); segment exp(mean of x over each run of valid tokens))`,
            source: `${ROLL} roll/utils/train_infer_corrections.py _compute_all_granularity l.14–45, l.96–108 (logged with ROLL's "@sum" reduce suffix)`,
          },
        ],
        [
          `actor/train_infer_diff_${agg}_mean`,
          {
            formula: `the same of Δp = e^ℓtrain − e^ℓroll (token; row mean; row sum; segment mean)`,
            source: `${ROLL} roll/utils/train_infer_corrections.py l.14–45, l.96–108`,
          },
        ],
      ]),
    ),
    compute: (input) => {
      const x = (k: number): number => input.logpTrain[k]! - input.logpRollout[k]!;
      const dp = (k: number): number => Math.exp(input.logpTrain[k]!) - Math.exp(input.logpRollout[k]!);
      const { means: xm, counts } = rowMeans(input, x);
      const { means: dpm } = rowMeans(input, dp);
      const xs = rowSums(input, x);
      const dps = rowSums(input, dp);
      const segX = segmentMeans(input, x);
      const segDp = segmentMeans(input, dp);
      const seqTok = (f: (k: number) => number): number => overValidRows(rowMeans(input, f).means, counts);
      return {
        'actor/train_infer_ratio_token_mean': seqTok((k) => Math.exp(x(k))),
        'actor/train_infer_diff_token_mean': seqTok(dp),
        'actor/train_infer_ratio_geometric_mean': overValidRows(xm.map(Math.exp), counts),
        'actor/train_infer_diff_geometric_mean': overValidRows(dpm, counts),
        'actor/train_infer_ratio_sequence_mean': overValidRows(xs.map(Math.exp), counts),
        'actor/train_infer_diff_sequence_mean': overValidRows(dps, counts),
        'actor/train_infer_ratio_segment_mean': seqTok((k) => Math.exp(segX[k]!)),
        'actor/train_infer_diff_segment_mean': seqTok((k) => segDp[k]!),
      };
    },
  },
  trl: {
    commit: TRL,
    metrics: {
      'sampling/sampling_logp_difference/mean': {
        formula: 'token mean of |x| (0 with no token)',
        source: `${TRL} trl/trainer/grpo_trainer.py l.2779–2787`,
      },
      'sampling/sampling_logp_difference/max': {
        formula: 'max over tokens of |x|',
        source: `${TRL} grpo_trainer.py l.2783, l.2788–2790`,
      },
      'sampling/importance_sampling_ratio/min': {
        formula: 'min over valid tokens of the applied correction weight w (TRL: its vLLM IS ratio after its mode)',
        source: `${TRL} grpo_trainer.py l.2791–2806`,
      },
      'sampling/importance_sampling_ratio/mean': {
        formula: 'mean over valid tokens of w',
        source: `${TRL} grpo_trainer.py l.2799–2809`,
      },
      'sampling/importance_sampling_ratio/max': {
        formula: 'max over valid tokens of w',
        source: `${TRL} grpo_trainer.py l.2802–2812`,
      },
    },
    compute: (input) => {
      const ts = tokens(input);
      const a = ts.map((t) => Math.abs(t.x));
      const w = ts.map((t) => (input.weights !== undefined ? input.weights[t.k]! : 1));
      return {
        'sampling/sampling_logp_difference/mean': mean(a),
        'sampling/sampling_logp_difference/max': max(a),
        'sampling/importance_sampling_ratio/min': min(w),
        'sampling/importance_sampling_ratio/mean': mean(w),
        'sampling/importance_sampling_ratio/max': max(w),
      };
    },
  },
  areal: {
    commit: AREAL,
    metrics: {
      'ppo_actor/update/behave_imp_weight/avg': {
        formula:
          'mean of the applied weight w over behave_mask = effective mask ∧ w > 0 (AReaL: its rejection_sampling weight)',
        source: `${AREAL} areal/utils/functional/functional.py l.565–568; areal/trainer/ppo/actor.py l.690–696; areal/utils/stats_tracker.py l.363–372`,
      },
      'ppo_actor/update/behave_imp_weight/min': {
        formula: 'min of w over behave_mask',
        source: `${AREAL} actor.py l.690–696`,
      },
      'ppo_actor/update/behave_imp_weight/max': {
        formula: 'max of w over behave_mask',
        source: `${AREAL} actor.py l.690–696`,
      },
      'ppo_actor/update/behave_approx_kl/avg': {
        formula: 'mean of x over behave_mask',
        source: `${AREAL} functional.py l.565–567; actor.py l.690–696`,
      },
      'ppo_actor/update/behave_approx_kl/min': {
        formula: 'min of x over behave_mask',
        source: `${AREAL} actor.py l.690–696`,
      },
      'ppo_actor/update/behave_approx_kl/max': {
        formula: 'max of x over behave_mask',
        source: `${AREAL} actor.py l.690–696`,
      },
      'ppo_actor/update/behave_filtered_ratio/avg': {
        formula: 'fraction of valid tokens outside behave_mask',
        source: `${AREAL} actor.py l.697–701`,
      },
    },
    compute: (input) => {
      const lossMask = input.lossMask ?? input.responseMask;
      const ts = tokens(input);
      const kept = ts.filter((t) => lossMask[t.k] === 1 && (input.weights === undefined || input.weights[t.k]! > 0));
      const w = kept.map((t) => (input.weights !== undefined ? input.weights[t.k]! : 1));
      const x = kept.map((t) => t.x);
      return {
        'ppo_actor/update/behave_imp_weight/avg': mean(w),
        'ppo_actor/update/behave_imp_weight/min': min(w),
        'ppo_actor/update/behave_imp_weight/max': max(w),
        'ppo_actor/update/behave_approx_kl/avg': mean(x),
        'ppo_actor/update/behave_approx_kl/min': min(x),
        'ppo_actor/update/behave_approx_kl/max': max(x),
        'ppo_actor/update/behave_filtered_ratio/avg': ts.length > 0 ? (ts.length - kept.length) / ts.length : 0,
      };
    },
  },
  openrlhf: {
    commit: OPENRLHF,
    metrics: {
      vllm_kl: {
        formula: 'token mean of −x (masked_mean(rollout − old) over the action mask)',
        source: `${OPENRLHF} openrlhf/models/loss.py l.218; openrlhf/trainer/ray/ppo_actor.py l.316–317`,
      },
    },
    compute: (input) => ({ vllm_kl: mean(tokens(input).map((t) => -t.x)) }),
  },
} as const satisfies Record<string, StackMetricSet>;

/** A stack with a metric set. */
export type StackName = keyof typeof stackMetricSets;

/**
 * The stacks' metrics for the requested stacks, merged (names are distinct across stacks). An input with
 * the former field names `mask` / `effectiveMask` is still accepted.
 */
export function stackMetrics(given: StackMetricInput, stacks: readonly StackName[]): MetricRecord {
  const input = acceptRenamed(given, { mask: 'responseMask', effectiveMask: 'lossMask' });
  const out: MetricRecord = {};
  for (const s of stacks) Object.assign(out, (stackMetricSets[s] as StackMetricSet).compute(input));
  return out;
}

/** The docs table of every stack's metric names, formulas and sources (docs/estimators.md, generated). */
export function stackMetricsTableMarkdown(): string {
  const rows = ['| stack | metric | formula (x = ℓtrain − ℓroll, ρ = e^x) | source |', '| --- | --- | --- | --- |'];
  for (const [stack, set] of Object.entries(stackMetricSets) as [string, StackMetricSet][]) {
    for (const [name, doc] of Object.entries(set.metrics))
      rows.push(`| ${stack} | \`${name}\` | ${doc.formula.replace(/\|/g, '\\|')} | ${doc.source} |`);
  }
  return rows.join('\n');
}
