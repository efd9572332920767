#!/bin/sh
# Regenerates the measured agreement tables: casts of every library-named profile against its
# library (docs/numerics.md) and torch's GEMMs against the accumulator models (docs/golden.md), one
# GEMM table per kernel key. Besides the machine's own kernels it measures every MKL branch this
# machine can be steered to (MKL_ENABLE_INSTRUCTIONS, MKL_CBWR) and ATen's scalar kernel
# (ATEN_CPU_CAPABILITY=default): a branch this CPU cannot run falls back to another, whose key is
# then written instead. Needs the built CLI (npm run build) and .venv (scripts/python-env.sh).
# test/python/torch-check.test.ts runs the same check with --check-doc and fails when a table of
# the kernel it runs on is stale or a case disagrees.
set -eu
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
node bin/qrl-sim.js golden --suite library-casts,quantizers,gemm --out "$dir" --seed 0 >/dev/null
check() { env "$@" PYTHONPATH=python .venv/bin/python -m qrl_golden.torch_check --device cpu "$dir" --write-doc docs/golden.md | tail -1; }
# steered MKL branches first, the machine's own last (its run also writes the cast table)
check MKL_CBWR=COMPATIBLE
check MKL_ENABLE_INSTRUCTIONS=SSE4_2
check MKL_ENABLE_INSTRUCTIONS=AVX2
check MKL_ENABLE_INSTRUCTIONS=AVX512
PYTHONPATH=python .venv/bin/python -m qrl_golden.torch_check --device cpu --write-doc docs/numerics.md --write-doc docs/golden.md "$dir"
# drop the placeholder block a fresh file starts from
sed -i '/<!-- begin:torch-gemm PLACEHOLDER -->/,/<!-- end:torch-gemm PLACEHOLDER -->/d' docs/golden.md
