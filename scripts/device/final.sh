#!/usr/bin/env bash
# Session 4's final device call (via .device/run.sh from the repo root, carry .device + dist): the
# whole suite on the H200, then every workload in both dtypes, Kiln then PyTorch 2.11 in the same
# call, then qwen3-0.6b's compiled start (cold/warm, new processes) and its cold compile report, then
# the copy-bandwidth reference for elementwise-4096 (bench/cuda-copy-reference.ts).
# Usage: bash scripts/device/final.sh [suite seconds] [bench seconds] [startup seconds] [copy seconds]
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
t0=$(date +%s)
KILN_CACHE_DIR=/tmp/kiln-suite-cache timeout "${1:-110}" node --test dist/test/*.test.js > "$out/suite.txt" 2>&1
echo "suite rc=$? $(( $(date +%s) - t0 )) s"; grep -E "^# (tests|pass|fail|skipped)|^not ok" "$out/suite.txt" | head -20
bash scripts/cuda-compile-device.sh kiln,pytorch "${2:-300}"
timeout "${3:-80}" node dist/src/cli/main.js bench --device cuda --size full --dtype bfloat16 --workload qwen3-0.6b-forward \
  --startup --startup-runs 1 --compile-report --report-workload qwen3-0.6b-forward --reps 5 --warmup 2 --no-progress \
  --json "$out/qwen3-startup.json" > "$out/qwen3-startup.txt" 2>&1
echo "qwen3 startup rc=$?"; tail -n 12 "$out/qwen3-startup.txt"
timeout "${4:-40}" node dist/bench/cuda-copy-reference.js --json "$out/copy-reference.json" > "$out/copy-reference.txt" 2>&1
echo "copy reference rc=$?"; tail -n 3 "$out/copy-reference.txt"
python3 scripts/h200-table.py "$out/kiln-cuda.json" "$out/pytorch.json" 2>&1 | tail -n 16
