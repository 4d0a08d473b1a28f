#!/usr/bin/env bash
# Training benchmarks on one H200 (#19 items 5, 6): step time and peak memory of a deep-MLP step in
# float32, bfloat16 autocast and gradient checkpointing (bench/train-memory.ts, at a GPU size), and
# conv-stack's training step eager vs compiled (bench/train-step.ts, full size). Run from the repo
# root on the device machine, after a build:
#   bash scripts/device/train.sh [BUDGET_S]
# Results: $OUT/h200-train-memory-mlp.json, $OUT/h200-train-step-conv-stack.json and their logs.
set -uo pipefail
budget=${1:-560}
out=${OUT:-/tmp/out}; mkdir -p "$out"
start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - start) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$out/smi.txt" 2>&1
KILN_CACHE_DIR=/tmp/kiln-train-cache timeout "$(( $(left) / 2 ))" node dist/bench/train-memory.js --device cuda \
  --layers 32 --width 4096 --batch 2048 --every 4 --reps 10 --out "$out/h200-train-memory-mlp.json" > "$out/train-memory.txt" 2>&1
echo "train-memory rc=$? after $(( $(date +%s) - start )) s"; cat "$out/train-memory.txt"
KILN_CACHE_DIR=/tmp/kiln-train-cache timeout "$(left)" node --stack-trace-limit=60 dist/bench/train-step.js --device cuda --size full \
  --reps 20 --warmup 3 --out "$out/h200-train-step-conv-stack.json" > "$out/train-step.txt" 2>&1
echo "train-step rc=$? after $(( $(date +%s) - start )) s"; grep -E '_ms|speedup|fallbacks' "$out/train-step.txt"
