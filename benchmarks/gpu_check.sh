#!/usr/bin/env bash
# Everything lazyscope checks on a CUDA GPU, in one command sized for one device call (issue 51):
#   1. the GPU-marked tests (every attention variant against math in bf16, xFormers too when its
#      wheel is carried in .whl/; CUDA host syncs of a compiled loop at their lines, with the
#      stall; the CUDA step anatomy) and `lazyscope compare decoder --backends eager,compile` on
#      CUDA, while the seed benchmark's compile cases compile in the background;
#   2. benchmarks/gpu_seed.py: round 2's cases (the best variants with the batch made in the step
#      or ahead by DataLoader workers, each with its step anatomy; fused optimizer), the HF GPT-2
#      compiled row, the vocabulary rows and xFormers, in that order, until the deadline;
#   3. benchmarks/gpu_kernels.py: the best eval and train steps' GPU time by kernel category.
# Writes its outputs under $OUT (the device tool's folder) or runs/gpu-check.
#
#   OUT=runs/gpu-check BUDGET=540 bash benchmarks/gpu_check.sh
#   DEVICE=cpu SEED_ARGS="--preset tiny --autocast none --only varlen-w2-eval-compile" \
#     KERNEL_ARGS="--preset tiny --autocast none" BUDGET=300 bash benchmarks/gpu_check.sh
#
# Runs from a checkout without installing lazyscope (the GPU machine has torch and transformers,
# no network): the scenarios package is reached through a link named lazyscope_scenarios.
# Wheels in .whl/ (xFormers) are installed into /tmp/site first.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/gpu-check}
BUDGET=${BUDGET:-540}
mkdir -p "$OUT"
T0=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - T0))); }
export PYTHONUNBUFFERED=1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
SHIM=$(mktemp -d)
ln -s "$PWD/scenarios" "$SHIM/lazyscope_scenarios"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && SITE=/tmp/site
fi
export PYTHONPATH="$PWD:$SHIM${SITE:+:$SITE}${PYTHONPATH:+:$PYTHONPATH}"
PY=${PY:-python3}
DEVICE=${DEVICE:-cuda}
SEED_ARGS=${SEED_ARGS:-}
KERNEL_ARGS=${KERNEL_ARGS:---preset seed --autocast bf16}
KERNEL_S=${KERNEL_S:-110}

{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
  $PY -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')"
  $PY -c "import xformers; print('xformers', xformers.__version__)" 2>&1 | tail -1
  $PY -c "import flash_attn; print('flash_attn', flash_attn.__version__)" 2>&1 | tail -1
  echo "cpus $(nproc)"
} 2>&1 | tee "$OUT/env.txt"

# warm-ups in parallel: 3 on a card with over 100 GB, else 2 (each holds a seed model in training)
MEM_MB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1)
PREWARM=2
[ "${MEM_MB:-0}" -gt 100000 ] && PREWARM=3
READY=$(mktemp -u)
ONLY=varlen-w2-eval-compile,flex-packed-w2-train-compile,varlen-w0-eval-compile
ONLY=$ONLY,flex-packed-w2-fused-train-compile,flex-packed-w2-eval-compile,hf-sdpa-train-compile
ONLY=$ONLY,vocab50257-train-compile,vocab50304-train-compile,xformers-eval-eager
ONLY=$ONLY,xformers-train-eager,flex-packed-w0-eval-compile,varlen-w2-train-compile
# shellcheck disable=SC2086
$PY benchmarks/gpu_seed.py --out /tmp/gpu-seed --json "$OUT/gpu_seed.json" --device "$DEVICE" \
  --prewarm $PREWARM --deadline $(($(left) - KERNEL_S)) --wait-for "$READY" --only "$ONLY" \
  $SEED_ARGS >"$OUT/gpu_seed.txt" 2>&1 &
SEED=$!

# 1. the tests and the compare, while the seed cases compile
timeout 200 $PY -m pytest -q -p no:cacheprovider -m gpu -rs -s \
  tests/unit/test_attention_variants.py tests/integration/test_compile_backend.py \
  >"$OUT/pytest_gpu.txt" 2>&1 &
TESTS=$!
timeout 200 $PY -m lazyscope compare --backends eager,compile --policies max,longest \
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

# 3. the best steps' kernels (the compile cache is warm from the cases above)
KS=$(( $(left) / 2 ))
[ "$KS" -gt 20 ] && timeout $KS $PY benchmarks/gpu_kernels.py --skip 5 --active 3 -- \
  --backend compile --device "$DEVICE" --mode eval --attention varlen --padding longest \
  --workers 2 --steps 9 $KERNEL_ARGS >"$OUT/kernels_eval.txt" 2>&1
KS=$(( $(left) - 5 ))
[ "$KS" -gt 20 ] && timeout $KS $PY benchmarks/gpu_kernels.py --skip 5 --active 3 -- \
  --backend compile --device "$DEVICE" --mode train --attention flex \
  --padding packed:16x1024 --workers 2 --steps 9 $KERNEL_ARGS >"$OUT/kernels_train.txt" 2>&1
grep -v "^W\|warn" "$OUT"/kernels_*.txt 2>/dev/null | tail -50
# every case's log and run (the warm-ups left out), for reading back
tar czf "$OUT/runs.tgz" -C /tmp --exclude=gpu-seed/prewarm gpu-seed compare-cuda 2>/dev/null
echo "total $(($(date +%s) - T0)) s"
