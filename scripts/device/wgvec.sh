#!/usr/bin/env bash
# Device round of helper wgvec (issue #20: vectorised webgpu pointwise kernels; int64 add on webgpu).
# Runs from a staged build (scripts/device-stage-helper.sh wgvec scripts/device/wgvec.sh 540, then
# scripts/device-round.sh wgvec) or from the repo root with dist/ built; results under $HOUT or $OUT.
#   1. tests on the GPU: vectorised launches write the scalar kernel's bits (NVIDIA's compiler this
#      time), int64 add/sub exact, every pointwise op against the cpu;
#   2. bench/webgpu-elementwise-vec.js: elementwise-4096 compiled, vectorised and scalar, against a
#      buffer copy and the pointwise clone kernel, float32 / float16 / bfloat16, with the workgroup
#      count sweep of the vectorised kernel (--grid); JSON to ew-vec.json;
#   3. `kiln bench --workload elementwise-4096` float32 and float16, KILN_WEBGPU_VEC_POINTWISE=1 and 0;
#   4. bench/train-step.js --device webgpu (conv-stack with BatchNorm: failed on int64 add_ before).
set -uo pipefail
out=${HOUT:-${OUT:-/tmp/out}}; mkdir -p "$out"
export KILN_WEBGPU_BACKEND=vulkan
T=$(mktemp -d)
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }

el "tests"
timeout 150 node --test --test-concurrency=1 dist/test/webgpu-vector-pointwise.test.js dist/test/webgpu-int64.test.js dist/test/webgpu-pointwise.test.js > "$T/test.txt" 2>&1
echo "exit $?"; grep -E "^# (pass|fail|skipped)|^not ok" "$T/test.txt"; grep -A10 "^not ok" "$T/test.txt" | grep -vE '^\s+at ' | head -40

el "elementwise-4096: copy / clone / compiled, vectorised and scalar"
timeout 240 node dist/bench/webgpu-elementwise-vec.js --grid --json "$out/ew-vec.json" 2>&1 | grep -vE '^\{"dtype":"[a-z0-9]+","variant"'

el "kiln bench elementwise-4096"
for v in 1 0; do
  echo "-- KILN_WEBGPU_VEC_POINTWISE=$v"
  KILN_WEBGPU_VEC_POINTWISE=$v timeout 100 node dist/src/cli/main.js bench --device webgpu --workload elementwise-4096 --dtype float32 float16 --no-progress 2>&1 | tail -5
done

el "train-step --device webgpu (conv-stack, cpu size)"
timeout 120 node dist/bench/train-step.js --device webgpu --size cpu --reps 5 --warmup 2 2>&1 | head -10
el "done"
