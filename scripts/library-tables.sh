#!/bin/sh
# Regenerates the measured agreement tables: casts of every library-named profile against its
# library (docs/numerics.md) and torch's GEMMs against the accumulator models (docs/golden.md).
# Needs the built CLI (npm run build) and .venv (scripts/python-env.sh). test/python/torch-check.test.ts
# runs the same command with --check-doc and fails when a table is stale or a case disagrees.
set -eu
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
node bin/qrl-sim.js golden --suite library-casts,quantizers,gemm --out "$dir" --seed 0 >/dev/null
PYTHONPATH=python .venv/bin/python -m qrl_golden.torch_check --device cpu --write-doc docs/numerics.md --write-doc docs/golden.md "$dir"
