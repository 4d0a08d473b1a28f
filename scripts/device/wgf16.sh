#!/usr/bin/env bash
# The wgf16 helper's device call (issue #20: float16 webgpu GEMM dispatch, split K, conv im2col), from
# the repo root with dist/ built and carried, under the device tool's limits (about 170 s in all):
#   bash .device/run.sh bash scripts/device/wgf16.sh
# 1. GPU tests of the kernels it touched (staged GEMM incl. split K / 64x64 tiles / conv im2col, all
#    GEMM cases, conv GEMM); 2. kiln bench, every workload, float32 and float16; 3. an A/B of Dawn's
#    shader robustness on the float16 rows that slowed 2-3x between session 13 (robustness on) and 15.
set -uo pipefail
out=${OUT:-/tmp/out}; mkdir -p "$out"
export KILN_CACHE_DIR=/tmp/kiln-cache KILN_WEBGPU_BACKEND=vulkan
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$out/summary.txt"; }
timeout 40 node --test dist/test/webgpu-subgroup-matrix.test.js dist/test/webgpu-linalg.test.js dist/test/webgpu-conv-gemm.test.js > "$out/tests.txt" 2>&1
el "gpu tests rc=$?"; grep -E "^# (pass|fail)|^not ok" "$out/tests.txt" | head -8 | tee -a "$out/summary.txt"
timeout 100 node dist/src/cli/main.js bench --device webgpu --size full --dtype float32 float16 --workload all --include-slow --reps 20 --no-progress --json "$out/wg.json" > "$out/wg.txt" 2>&1
el "kiln bench webgpu rc=$?"; grep -E "^[a-z0-9.-]+ +webgpu|FAILED|rror" "$out/wg.txt" | head -16 | tee -a "$out/summary.txt"
KILN_WEBGPU_ROBUSTNESS=1 timeout 30 node dist/src/cli/main.js bench --device webgpu --size full --dtype float16 --workload mlp-2048x4096,mlp-64x512,conv-stack --reps 10 --no-progress --json "$out/wg-robust.json" > "$out/wg-robust.txt" 2>&1
el "float16 with robustness on rc=$?"; grep -E "^[a-z0-9.-]+ +webgpu|FAILED|rror" "$out/wg-robust.txt" | head -4 | tee -a "$out/summary.txt"
echo "=== summary"; cat "$out/summary.txt"
