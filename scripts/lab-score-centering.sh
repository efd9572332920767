#!/bin/bash
# The score-centering / TRPL lab table (docs/lab/score-centering.md): REINFORCE on reverse under the
# fp8-rollout plan with TIS, IcePop, TIS + score centering, and TRPL; seeds 0–2, 20 steps each.
# usage: bash scripts/lab-score-centering.sh OUTDIR   (after npm run build; prints a Markdown table)
set -e
D=${1:?usage: lab-score-centering.sh OUTDIR}
mkdir -p "$D"
run() { node bin/qrl-sim.js run --config sims/smoke-reverse.json --set plan=fp8-rollout --steps 20 \
  --set policy.sampler.topkLogprobs=13 --set seed=$2 --out "$D/$1-$2" "${@:3}" >/dev/null 2>&1; }
for s in 0 1 2; do
  run tis $s --set 'estimators.loss={"name":"reinforce"}' --set 'estimators.correction={"name":"tis"}'
  run icepop $s --set 'estimators.loss={"name":"reinforce"}' --set 'estimators.correction={"name":"icepop"}'
  run tis+sc $s --set 'estimators.loss={"name":"reinforce"}' --set 'estimators.correction={"name":"tis"}' --set 'estimators.scoreCentering={}'
  run trpl $s --set 'estimators.loss={"name":"trpl"}'
done
node -e '
const fs = require("fs"); const D = process.argv[1];
console.log("| estimator | reward/mean, steps 16–20 (seeds 0, 1, 2) | mean | actor/grad_norm, mean |");
console.log("| --- | --- | --- | --- |");
for (const e of ["tis", "icepop", "tis+sc", "trpl"]) {
  const per = [0, 1, 2].map((s) => fs.readFileSync(`${D}/${e}-${s}/metrics.jsonl`, "utf8").trim().split("\n").map(JSON.parse));
  const last = per.map((ms) => ms.slice(-5).reduce((a, m) => a + m["reward/mean"], 0) / 5);
  const gn = per.flat().reduce((a, m) => a + m["actor/grad_norm"], 0) / per.flat().length;
  console.log(`| ${e} | ${last.map((x) => x.toFixed(3)).join(", ")} | ${(last.reduce((a, b) => a + b) / 3).toFixed(3)} | ${gn.toFixed(3)} |`);
}' "$D"
