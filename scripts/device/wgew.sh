#!/usr/bin/env bash
# Issue #20, KILN_WEBGPU_MATH=v3 on the H200 (helper wgew), from the repo root through .device/run.sh
# with dist/ built and carried:
#   bash .device/run.sh bash scripts/device/wgew.sh
# 1. test/webgpu-math.test.ts on Dawn/Vulkan: v3's spec-derived bounds, edges, float16 store bits
#    (its "# v3 ..." diagnostics are the largest errors measured on this GPU);
# 2. bench/webgpu-elementwise-math.js, forms v2,v3,fast in one process, WGSL dumped;
# 3. kiln bench elementwise-4096 float32/float16 compiled, one process per form (v2, v3): the
#    figures comparable with docs/bench.md's table (the math bench's copy/clone rows are not).
# Logs under $OUT/wgew, a summary last.
set -uo pipefail
out=${OUT:-/tmp/out}/wgew; mkdir -p "$out"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$out/summary.txt"; }
sum() { grep -hE "$2" "$1" | head -${3:-12} | cut -c1-300 | tee -a "$out/summary.txt"; }
export KILN_CACHE_DIR=/tmp/kiln-cache KILN_WEBGPU_BACKEND=vulkan
timeout 120 node --test dist/test/webgpu-math.test.js > "$out/webgpu-math-test.txt" 2>&1
el "webgpu-math test rc=$?"; sum "$out/webgpu-math-test.txt" "^# (pass|fail|skipped)|^not ok|^# v3|ulp >|bits of" 24
timeout 150 node dist/bench/webgpu-elementwise-math.js --forms v2,v3,fast --dump "$out/wgsl" --json "$out/math-forms.json" > "$out/math-forms.txt" 2>&1
el "math forms bench rc=$?"; sum "$out/math-forms.txt" "^(float32|float16|dtype) " 16
for form in v2 v3; do
  KILN_WEBGPU_MATH=$form timeout 90 node dist/src/cli/main.js bench --device webgpu --size full --dtype float32 float16 --workload elementwise-4096 --reps 30 --no-progress \
    --json "$out/kiln-ew-$form.json" > "$out/kiln-ew-$form.txt" 2>&1
  el "kiln bench elementwise-4096 KILN_WEBGPU_MATH=$form rc=$?"; sum "$out/kiln-ew-$form.txt" "^[a-z0-9.-]+ +webgpu|FAILED" 4
done
