#!/usr/bin/env bash
# The GPU checks in one command, on a machine with CUDA, torch (float8 dtypes), transformers and node:
#
#   bash scripts/gpu-check.sh OUT_DIR
#
# 1. the goldens (library-casts, quantizers, gemm) written by qrl-sim;
# 2. python -m qrl_golden.torch_check --device cuda: casts, quantizers and GEMMs (torch._scaled_mm on the
#    device's FP8 tensor cores against hopper-fp8) — the same code CI runs with --device cpu;
# 3. python -m qrl_golden.gemm_capture --device cuda: operands and outputs of _scaled_mm (per-tensor and
#    row-wise scales, fast accumulation on and off, K up to 16384) and of bf16/fp32 matmul, for
#    `npx tsx scripts/gemm-capture-compare.ts OUT_DIR` to compare with every accumulator model;
# 4. the CUDA tests of the Python packages (torch_check, the transformers backend) and the torch_ar
#    engine's agreement with the TypeScript engine on the device (QRL_TORCH_DEVICE=cuda);
# 5. qrl-sim backend-check and a short GRPO run on reverse with the transformers backend on cuda, bf16 and
#    the FP8 W8A8 refit: the driver's k3 per step.
#
# Every step runs under a time limit and the script goes on after a failure; the log says which failed.
# QRL_TS_FIXTURE: a directory written by `node --import tsx scripts/ar-logprobs-fixture.ts DIR` when tsx is
# not installed where this runs. QRL_GPU_STEPS: GRPO steps of step 5 (default 6). QRL_GPU_DEVICE: the torch device
# (default cuda; cpu runs the same steps here, to check the script itself).
set -u
out=${1:?usage: bash scripts/gpu-check.sh OUT_DIR}
mkdir -p "$out"
log="$out/gpu-check.log"
export PYTHONPATH=python PYTHONUNBUFFERED=1
golden=$(mktemp -d)
dev=${QRL_GPU_DEVICE:-cuda}
failed=()

step() { # step NAME SECONDS COMMAND...
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  echo "=== $name" | tee -a "$log"
  timeout "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  echo "=== $name: exit $rc in $((SECONDS - t0)) s" | tee -a "$log"
  [ $rc -eq 0 ] || failed+=("$name")
}

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available() and torch.cuda.get_device_name(0))"
  python3 -c "import transformers, numpy; print('transformers', transformers.__version__, 'numpy', numpy.__version__)"
  node --version
} >>"$log" 2>&1

step golden 120 node bin/qrl-sim.js golden --suite library-casts,quantizers,gemm --out "$golden"
# one line per case and the agreement tables, into the log and into torch-check-cuda.md
step torch-check 300 bash -o pipefail -c 'python3 -m qrl_golden.torch_check --device "$1" --table "$2" 2>&1 | tee "$3"' _ "$dev" "$golden" "$out/torch-check-cuda.md"
# the same check with the machine's torch on its CPU: tells a difference of the device from one of the torch version
step torch-check-cpu 300 python3 -m qrl_golden.torch_check --device cpu "$golden"
# two torch behaviours the checks above depend on, printed on the CPU and on the device
step torch-quirks 60 python3 - "$dev" <<'PY'
import sys, torch
dev = sys.argv[1]
g = torch.Generator().manual_seed(0)
x = torch.rand(1 << 20, generator=g) * torch.exp2(torch.randint(-60, 60, (1 << 20,), generator=g).float())
for d in ["cpu", dev]:
    xd = x.to(d)
    true_div = (xd / torch.tensor(448.0, device=d)).cpu()
    scalar_div = (xd / 448.0).cpu()
    recip = (xd * (torch.tensor(1.0) / torch.tensor(448.0)).item()).cpu()
    print(f"{d}: x / 448.0 differs from x / tensor(448.0) on {(scalar_div != true_div).sum().item()} of {x.numel()}, equals x * fl(1/448) on {(scalar_div == recip).sum().item()}")
    v = torch.tensor([448.0, 460.0, 464.0, 465.0, 479.0, 480.0, 1e4, float("inf")], device=d)
    print(f"{d}: e4m3fn codes of {v.tolist()}: {[hex(c) for c in v.to(torch.float8_e4m3fn).view(torch.uint8).tolist()]}")
PY
step gemm-capture 120 python3 -m qrl_golden.gemm_capture --device $dev "$out"
step pytest-cuda 300 env -u PYTHONPATH python3 -m pytest -q -rs -p no:cacheprovider python/tests/test_torch_check.py python/tests/test_hf_backend.py -k cuda
step torch-ar-cuda 300 env -u PYTHONPATH QRL_TORCH_DEVICE=$dev python3 -m pytest -q -s -p no:cacheprovider python/tests/test_torch_ar.py -k agree
backend="python3 -m qrl_backend.hf --device $dev --vocab-size 13 --max-new-tokens 7"
step backend-check 180 node bin/qrl-sim.js backend-check --backend "$backend --plan hf-bf16"
for plan in hf-bf16 hf-fp8-w8a8-rollout; do
  run=$(mktemp -d)/run
  step "grpo-$plan" 240 node bin/qrl-sim.js run --config sims/hf-reverse.json --set plan=backend --set "steps=${QRL_GPU_STEPS:-6}" \
    --out "$run" --backend "python3 -m qrl_backend.hf --device $dev --plan $plan"
  cp "$run/metrics.jsonl" "$out/metrics-$plan.jsonl" 2>>"$log"
done
echo "failed: ${failed[*]:-none}" | tee -a "$log"
[ ${#failed[@]} -eq 0 ]
