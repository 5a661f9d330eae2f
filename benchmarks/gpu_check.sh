#!/usr/bin/env bash
# Everything lazyscope checks on a CUDA GPU, in one command sized for one device call:
#   1. the GPU-marked tests (every attention variant against math in bf16; CUDA host syncs of a
#      compiled loop at their lines, with the stall), and `lazyscope compare decoder --backends
#      eager,compile` on CUDA, while the seed benchmark's compile cases compile in the background;
#   2. benchmarks/gpu_seed.py: the article's table on the seed preset, until BUDGET seconds.
# Writes its outputs under $OUT (the device tool's folder) or runs/gpu-check.
#
#   OUT=runs/gpu-check BUDGET=500 bash benchmarks/gpu_check.sh
#   DEVICE=cpu SEED_ARGS="--preset tiny --autocast none --groups table --variants sdpa-max" \
#     BUDGET=300 bash benchmarks/gpu_check.sh      # the plumbing, on a machine without a GPU
#
# Runs from a checkout without installing lazyscope (the GPU machine has torch and transformers,
# no network): the scenarios package is reached through a link named lazyscope_scenarios.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/gpu-check}
BUDGET=${BUDGET:-500}
mkdir -p "$OUT"
T0=$(date +%s)
export PYTHONUNBUFFERED=1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
SHIM=$(mktemp -d)
ln -s "$PWD/scenarios" "$SHIM/lazyscope_scenarios"
export PYTHONPATH="$PWD:$SHIM${PYTHONPATH:+:$PYTHONPATH}"
PY=${PY:-python3}
DEVICE=${DEVICE:-cuda}
SEED_ARGS=${SEED_ARGS:-}

{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
  $PY -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')"
  echo "cpus $(nproc)"
} 2>&1 | tee "$OUT/env.txt"

# warm-ups in parallel: 3 on a card with over 100 GB, else 2 (each holds a seed model in training)
MEM_MB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1)
PREWARM=2
[ "${MEM_MB:-0}" -gt 100000 ] && PREWARM=3
READY=$(mktemp -u)
LEFT=$((BUDGET - ($(date +%s) - T0)))
# shellcheck disable=SC2086
$PY benchmarks/gpu_seed.py --out /tmp/gpu-seed --json "$OUT/gpu_seed.json" --device "$DEVICE" \
  --prewarm $PREWARM --deadline $LEFT --wait-for "$READY" $SEED_ARGS >"$OUT/gpu_seed.txt" 2>&1 &
SEED=$!

# 1. the tests and the compare, while the seed cases compile
timeout 240 $PY -m pytest -q -p no:cacheprovider -m gpu -rs -s \
  tests/unit/test_attention_variants.py tests/integration/test_compile_backend.py \
  >"$OUT/pytest_gpu.txt" 2>&1 &
TESTS=$!
timeout 240 $PY -m lazyscope compare --backends eager,compile --policies max,longest \
  --steps 8 --out /tmp/compare-cuda --force -q decoder --device "$DEVICE" \
  >"$OUT/compare.txt" 2>&1
echo "compare exit $?" >>"$OUT/compare.txt"
wait $TESTS
echo "pytest exit $?" >>"$OUT/pytest_gpu.txt"
tail -25 "$OUT/pytest_gpu.txt"
tail -30 "$OUT/compare.txt"

# 2. the table
touch "$READY"
wait $SEED
cat "$OUT/gpu_seed.txt"
# every case's log and run (the warm-ups left out), for reading back
tar czf "$OUT/runs.tgz" -C /tmp --exclude=gpu-seed/prewarm gpu-seed compare-cuda 2>/dev/null
echo "total $(($(date +%s) - T0)) s"
