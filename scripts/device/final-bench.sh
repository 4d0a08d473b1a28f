#!/usr/bin/env bash
# Final device run, part 2 (via .device/run.sh from the repo root): every workload in both dtypes,
# Kiln then PyTorch in the same device call (scripts/cuda-compile-device.sh), then qwen3-0.6b's
# compiled start (cold / warm, new processes) and its cold compile with the worker pool vs one
# worker vs in-process. Usage: bash scripts/device/final-bench.sh [seconds for the two benches]
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
bash scripts/cuda-compile-device.sh kiln,pytorch "${1:-320}"
timeout 150 node dist/src/cli/main.js bench --device cuda --size full --dtype bfloat16 --workload qwen3-0.6b-forward \
  --startup --startup-runs 1 --compile-report --report-workload qwen3-0.6b-forward --reps 5 --warmup 2 --no-progress \
  --json "$out/qwen3-startup.json" > "$out/qwen3-startup.txt" 2>&1
echo "qwen3 startup rc=$?"; tail -n 12 "$out/qwen3-startup.txt"
python3 scripts/h200-table.py "$out/kiln-cuda.json" "$out/pytorch.json" 2>&1 | tail -n 16
