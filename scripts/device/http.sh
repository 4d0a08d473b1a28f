#!/usr/bin/env bash
# Issue #17, HTTP at >= 0.9 of the engine (branch http): Qwen3-0.6B bf16, 16 streaming clients,
# 128-token prompts, 128 new tokens, with the engine's step traces (bench/serve.ts --trace):
#   bash .device/run.sh bash scripts/device/http.sh
# One bench call: 3 reps of engine, http with batchWindowMs 0 (the old behaviour) and 2 (the new
# default), and for each http run an engine replay of its steps (--replay). Results under $OUT/http:
# serve.json (rows), trace.json (every step of every run), serve-trace.txt (one line per timed run:
# where its time went), summary.txt.
set -uo pipefail
out=${OUT:-/tmp/out}/http; mkdir -p "$out"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$out/summary.txt"; }
export KILN_CACHE_DIR=/tmp/kiln-cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > "$out/gpu.txt" 2>&1
timeout 160 node dist/bench/serve.js --config qwen3-0.6b --device cuda --dtype bfloat16 --clients 16 --prompt 128 --new 128 --reps 3 --no-start \
  --batch-window-ms 0,2 --replay --trace "$out/trace.json" --json "$out/serve.json" > "$out/serve.txt" 2> "$out/serve-trace.txt"
el "serve bench rc=$?"
cut -c1-400 "$out/serve.txt" | tee -a "$out/summary.txt"
grep -E "^(engine|http|  )" "$out/serve-trace.txt" | cut -c1-900 | tee -a "$out/summary.txt"
grep -iE "error" "$out/serve-trace.txt" | head -5 | tee -a "$out/summary.txt"
