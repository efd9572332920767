#!/bin/bash
# The second table of docs/lab/score-centering.md: score centering and TRPL against no correction, TIS and
# IcePop where the rollout mismatch matters — sims/quantized-departure.json (sudoku4, 300 warm-start
# steps, PPO-clip, 60 GRPO steps) under fp8-rollout and mxfp4-rollout, with a bf16 reference; seeds 0–2;
# the sampler's whole distribution (K = V = 10); score centering in prime-rl's form (sc: proportional tail) on its
# own and on top of TIS, and in vime's IS-weighted form on top of TIS (sc-vime); under MXFP4 also TRPL with α = 0
# and with klBound 0.5. 51 runs, about 16 minutes on two cores (a finished run is kept and not rerun).
# usage: bash scripts/lab-score-centering-sudoku.sh OUTDIR   (after npm run build; prints a Markdown table)
set -e
D=${1:?usage: lab-score-centering-sudoku.sh OUTDIR}
mkdir -p "$D"
run() { # run NAME PLAN SEED --set …
  [ -f "$D/$1-$2-$3/eval.jsonl" ] && [ "$(wc -l < "$D/$1-$2-$3/metrics.jsonl")" -ge 60 ] && return 0
  rm -rf "$D/$1-$2-$3"
  node bin/qrl-sim.js run --config sims/quantized-departure.json --set plan=$2 --set seed=$3 \
    --set policy.sampler.topkLogprobs=10 --no-report --out "$D/$1-$2-$3" "${@:4}" >/dev/null 2>&1
}
for s in 0 1 2; do
  run none bf16 $s
  for p in fp8-rollout mxfp4-rollout; do
    run none $p $s
    run tis $p $s --set 'estimators.correction={"name":"tis"}'
    run icepop $p $s --set 'estimators.correction={"name":"icepop"}'
    run tis+sc $p $s --set 'estimators.correction={"name":"tis"}' --set 'estimators.scoreCentering={}'
    run tis+sc-vime $p $s --set 'estimators.correction={"name":"tis"}' --set 'estimators.scoreCentering={"form":"vime"}'
    run none+sc $p $s --set 'estimators.scoreCentering={}'
    run trpl $p $s --set 'estimators.loss={"name":"trpl"}'
  done
  # which part of TRPL: its projection term off (α = 0), or a trust region wider than the mismatch
  run trpl-alpha0 mxfp4-rollout $s --set 'estimators.loss={"name":"trpl","alpha":0}'
  run trpl-kl05 mxfp4-rollout $s --set 'estimators.loss={"name":"trpl","klBound":0.5}'
done
node -e '
const fs = require("fs"); const D = process.argv[1];
const lines = (f) => fs.readFileSync(f, "utf8").trim().split("\n").map(JSON.parse);
const mean = (a) => a.reduce((x, y) => x + y, 0) / a.length;
const sd = (a) => { const m = mean(a); return Math.sqrt(a.reduce((x, y) => x + (y - m) ** 2, 0) / (a.length - 1)); };
const pm = (a, k = 1, d = 1) => `${(mean(a) * k).toFixed(d)} ± ${(sd(a) * k).toFixed(d)}`;
const base = [0, 1, 2].map((s) => lines(`${D}/none-bf16-${s}/eval.jsonl`).at(-1)["eval/trainer/greedy_accuracy"]);
console.log("| plan | estimator | held-out acc., trainer (%) | Δ to bf16, paired (pp) | acc., rollout engine (%) | reward, last 12 steps | entropy, steps 1–5 → 56–60 | k3, mean | TRPL projected_frac |");
console.log("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
console.log(`| bf16 | none | ${pm(base, 100)} | — | — | — | — | 0 | — |`);
const arms = {
  "fp8-rollout": ["none", "none+sc", "tis", "tis+sc", "tis+sc-vime", "icepop", "trpl"],
  "mxfp4-rollout": ["none", "none+sc", "tis", "tis+sc", "tis+sc-vime", "icepop", "trpl", "trpl-alpha0", "trpl-kl05"],
};
for (const [p, es] of Object.entries(arms)) for (const e of es) {
  const runs = [0, 1, 2].map((s) => ({ m: lines(`${D}/${e}-${p}-${s}/metrics.jsonl`), ev: lines(`${D}/${e}-${p}-${s}/eval.jsonl`).at(-1) }));
  const acc = runs.map((r) => r.ev["eval/trainer/greedy_accuracy"]);
  const roll = runs.map((r) => r.ev["eval/rollout/greedy_accuracy"]);
  const delta = acc.map((a, i) => a - base[i]);
  const rew = runs.map((r) => mean(r.m.slice(-12).map((x) => x["reward/mean"])));
  const ent = (a, b) => mean(runs.flatMap((r) => r.m.slice(a, b).map((x) => x["actor/entropy"]))).toFixed(3);
  const k3 = mean(runs.flatMap((r) => r.m.map((x) => x["rollout_corr/k3_kl"])));
  const pf = e.startsWith("trpl") ? mean(runs.flatMap((r) => r.m.map((x) => x["actor/trpl/projected_frac"]))).toFixed(3) : "—";
  console.log(`| ${p} | ${e} | ${pm(acc, 100)} | ${pm(delta, 100)} (${delta.filter((d) => d < 0).length}/3 < 0) | ${pm(roll, 100)} | ${pm(rew, 1, 3)} | ${ent(0, 5)} → ${ent(-5)} | ${k3.toExponential(2)} | ${pf} |`);
}' "$D"
