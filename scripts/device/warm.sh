#!/usr/bin/env bash
# Issue #17, warm start to first token (branch warm), from the repo root with dist/ built and carried:
#   bash .device/run.sh bash scripts/device/warm.sh
# 1. the GPU random draw against the host draw, bit for bit (test file; 2 tests skip without a GPU elsewhere);
# 2. qwen3-0.6b bfloat16 weights built with the GPU draw and with the host draw: times and sha256 of all weights;
# 3. `kiln serve --random qwen3-0.6b` start to first token, cold and 3x warm (goal: warm <= 2 s);
# 4. the same with the host draw (KILN_DEVICE_RANDOM=0), the before/after A/B of the weights phase.
# Every step has its own cap (total under 3 minutes); logs and JSON under $OUT/warm, a summary last.
set -uo pipefail
final=${OUT:-/tmp/out}; out=$final/warm; mkdir -p "$out"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$out/summary.txt"; }
sum() { grep -hE "$2" "$1" | head -${3:-8} | cut -c1-400 | tee -a "$out/summary.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/gpu.txt" 2>&1
timeout 45 node --test dist/test/cuda-random-draw.test.js > "$out/tests.txt" 2>&1
el "draw tests rc=$?"; sum "$out/tests.txt" "^# (pass|fail|skipped)|^not ok" 8
timeout 40 node scripts/device/warm-weights.mjs qwen3-0.6b bfloat16 "$out/weights.json" > "$out/weights.txt" 2>&1
el "weights gpu vs host rc=$?"; tail -n 3 "$out/weights.txt" | cut -c1-400 | tee -a "$out/summary.txt"
timeout 40 node dist/bench/serve.js --config qwen3-0.6b --device cuda --dtype bfloat16 --prompt 128 --start-only --reps 3 --json "$out/start.json" > "$out/start.txt" 2>&1
el "serve start (gpu draw) rc=$?"; sum "$out/start.txt" "serve-start|rror" 4
KILN_DEVICE_RANDOM=0 timeout 40 node dist/bench/serve.js --config qwen3-0.6b --device cuda --dtype bfloat16 --prompt 128 --start-only --reps 3 --json "$out/start-hostdraw.json" > "$out/start-hostdraw.txt" 2>&1
el "serve start (host draw) rc=$?"; sum "$out/start-hostdraw.txt" "serve-start|rror" 4
