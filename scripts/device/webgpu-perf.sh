#!/usr/bin/env bash
# Device round for issue #20's webgpu decode and float16 GEMM work (branch wgpuperf): first the
# numbers (the skinny GEMV and the staged subgroup-matrix GEMM against float64), then A/B timings.
#   1. tests: webgpu-gemv (KILN_WEBGPU_GEMV), webgpu-subgroup-matrix (v1 and staged), webgpu-linalg
#      with the GEMV on, webgpu-generate with the GEMV on (tokens against the reference);
#   2. where a decode step's device time goes, per kernel, float16 and float32, GEMV off and on
#      (bench/webgpu-decode-profile.js);
#   3. the decode bench, float16 and float32, GEMV off / on (64 new tokens);
#   4. matmul float16 8192^3 and 4096^3 on subgroup matrices v1 vs staged, and the tiled FMA kernel.
# Run from the repo root with dist/ built:  bash scripts/device/webgpu-perf.sh   (about 6 minutes)
set -uo pipefail
out=${OUT:-/tmp/out}; mkdir -p "$out"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
export KILN_CACHE_DIR=/tmp/kiln-cache KILN_WEBGPU_BACKEND=vulkan

el "tests"
KILN_WEBGPU_GEMV=1 node --test dist/test/webgpu-gemv.test.js dist/test/webgpu-subgroup-matrix.test.js > "$out/test-gemv-sm.txt" 2>&1; grep -E "^# (pass|fail|skip)|^not ok" "$out/test-gemv-sm.txt"
KILN_WEBGPU_GEMV=1 timeout 300 node --test dist/test/webgpu-linalg.test.js dist/test/webgpu-generate.test.js > "$out/test-linalg-generate-gemv.txt" 2>&1; grep -E "^# (pass|fail|skip)|^not ok" "$out/test-linalg-generate-gemv.txt"

for dt in float16 float32; do
  for g in 0 1; do
    el "decode profile $dt GEMV=$g"
    KILN_WEBGPU_GEMV=$g timeout 120 node dist/bench/webgpu-decode-profile.js --dtype $dt --steps 4 --json "$out/profile-$dt-gemv$g.json" 2>&1 | head -14
  done
done

for dt in float16 float32; do
  for g in 0 1; do
    el "decode bench $dt GEMV=$g"
    KILN_WEBGPU_GEMV=$g timeout 180 node dist/bench/decode.js --device webgpu --dtype $dt --batches 1 --new 64 --reps 3 --json "$out/decode-$dt-gemv$g.json" 2>&1 | grep -E "batch 1:|^decode|^ttft"
  done
done
el "decode bench float16 GEMV=1 compiled"
KILN_WEBGPU_GEMV=1 timeout 180 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 3 --decode compiled --json "$out/decode-float16-gemv1-compiled.json" 2>&1 | grep -E "batch 1:|^decode"

for k in v1 staged; do
  el "matmul float16 subgroup matrix $k"
  KILN_WEBGPU_SM_KERNEL=$k timeout 120 node scripts/bench-webgpu-matmul.mjs --shapes float16:8192:8192:8192,float16:4096:4096:4096 | tee "$out/matmul-sm-$k.jsonl"
done
el "matmul float16 tiled FMA"
KILN_WEBGPU_SUBGROUP_MATRIX=0 timeout 120 node scripts/bench-webgpu-matmul.mjs --shapes float16:8192:8192:8192 | tee "$out/matmul-fma.jsonl"
el "done"
