#!/usr/bin/env bash
# Session 25's device calls, from the repo root through .device/run.sh with dist/ built and carried
# (bash .device/run.sh bash scripts/device/s25.sh PART):
#   wg    #20 webgpu pointwise kernels with several vectors per invocation step
#         (KILN_WEBGPU_VEC_STEPS): the vector pointwise tests on the GPU (steps' bits equal one's);
#         bench/webgpu-elementwise-math.js over math forms x steps in one process (copy, clone,
#         compiled; WGSL dumped); kiln bench elementwise-4096 / -1024 float32 and float16 on webgpu
#         at steps 1 and 4 and on cuda, in this call (the ratio to Kiln cuda); the float32 GEMM's
#         128x128 tile (KILN_WEBGPU_GEMM_TILE small / auto) on the GEMM-bound workloads, their cuda
#         rows, and its tests
#   table #20's table: every kiln bench workload, float32 and float16, on webgpu and on Kiln cuda in
#         this call (scripts/device/webgpu-table.sh webgpu,cuda), with this build's defaults
#   ph3   #17: the cuda decode megakernel against the compiled step (scripts/device/s23.sh ph3)
# A step starts only while the call is under its deadline (S25_DEADLINE s); logs and JSON under
# $OUT/s25-PART come back as one tarball, the summary printed last.
set -uo pipefail
part=${1:?usage: s25.sh wg|table|ph3}
if [ "$part" = ph3 ]; then S23_DEADLINE=${S25_DEADLINE:-300} exec bash "$(dirname "$0")/s23.sh" ph3; fi
if [ "$part" = table ]; then exec bash "$(dirname "$0")/webgpu-table.sh" webgpu,cuda; fi
session=s25
source "$(dirname "$0")/session-lib.sh"
if [ "$part" = wg ]; then
  go tests && { wg $K 240 node --test dist/test/webgpu-vector-pointwise.test.js > "$out/tests.txt" 2>&1; el "vector pointwise tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail)|^not ok|error:" 10; }
  go math && { wg $K 200 node dist/bench/webgpu-elementwise-math.js --forms ${FORMS:-v2,v3,fast} --steps ${STEPS:-1,2,4,8} --dump "$out/wgsl" --json "$out/math-steps.json" > "$out/math-steps.txt" 2>&1
    el "math forms x steps rc=$?"; sum "$out/math-steps.txt" "^(float32|float16|dtype) " 40; }
  for s in 1 4; do
    go kiln-wg-$s && { KILN_WEBGPU_VEC_STEPS=$s wg $K 90 node dist/src/cli/main.js bench --device webgpu --size full --dtype float32 float16 --workload elementwise-4096,elementwise-1024 --reps 30 --no-progress \
      --json "$out/kiln-wg-steps$s.json" > "$out/kiln-wg-steps$s.txt" 2>&1
      el "kiln bench webgpu elementwise steps=$s rc=$?"; sum "$out/kiln-wg-steps$s.txt" "^[a-z0-9.-]+ +webgpu|FAILED" 6; }
  done
  # The float32 GEMM's 128x128 tile (KILN_WEBGPU_GEMM_TILE): the GEMM-bound workloads, small / auto.
  for t in $([ "${S25_GEMM:-1}" = 1 ] && echo small auto); do
    go kiln-gemm-$t && { KILN_WEBGPU_GEMM_TILE=$t wg $K 120 node dist/src/cli/main.js bench --device webgpu --size full --dtype float32 --workload mlp-2048x4096,transformer-block,conv-stack,qwen3-0.6b-forward --include-slow --reps 20 --no-progress \
      --json "$out/kiln-wg-gemm-$t.json" > "$out/kiln-wg-gemm-$t.txt" 2>&1
      el "kiln bench webgpu float32 GEMM tile=$t rc=$?"; sum "$out/kiln-wg-gemm-$t.txt" "^[a-z0-9.-]+ +webgpu|FAILED" 6; }
  done
  go kiln-cuda && { $K 120 node dist/src/cli/main.js bench --device cuda --size full --dtype float32 float16 --workload elementwise-4096,elementwise-1024,mlp-2048x4096,transformer-block,conv-stack,qwen3-0.6b-forward --include-slow --reps 20 --no-progress \
    --json "$out/kiln-cuda.json" > "$out/kiln-cuda.txt" 2>&1
    el "kiln bench cuda rc=$?"; sum "$out/kiln-cuda.txt" "^[a-z0-9.-]+ +cuda|FAILED" 14; }
  [ "${S25_GEMM:-1}" = 1 ] && go gemm-tests && { wg $K 120 node --test dist/test/webgpu-gemm-large-tile.test.js > "$out/gemm-tests.txt" 2>&1; el "large-tile GEMM tests rc=$?"; sum "$out/gemm-tests.txt" "^# (tests|pass|fail)|^not ok|error:" 10; }
else
  el "unknown part $part"
fi
finish
