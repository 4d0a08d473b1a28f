#!/usr/bin/env bash
# Session 30's device calls, from the repo root through .device/run.sh with dist/ built and carried
# (bash .device/run.sh bash scripts/device/s30.sh PART):
#   fm     #20: the compiled kernels' fast float math (KILN_WEBGPU_FAST_MATH, wgsl-libm/fast.ts):
#          its tests and the math library's on the GPU, the compiled webgpu tests it reaches; the
#          math forms on elementwise-4096 (bench/webgpu-elementwise-math.ts: v2, v3, fast, and v2
#          with the fast math in each form); kiln bench's elementwise and Qwen3 rows, webgpu then
#          cuda (the same call, for the ratios).
#   table  #20's table (scripts/device/webgpu-table.sh webgpu,cuda) with this build's defaults.
# A step starts only while the call is under its deadline (S30_DEADLINE s); logs and JSON under
# $OUT/s30-PART come back as one tarball, the summary printed last.
set -uo pipefail
part=${1:?usage: s30.sh fm|table}
if [ "$part" = table ]; then exec bash "$(dirname "$0")/webgpu-table.sh" webgpu,cuda; fi
session=s30
source "$(dirname "$0")/session-lib.sh"
if [ "$part" = fm ]; then
  go math && { wg $K 150 node dist/bench/webgpu-elementwise-math.js --forms v2,v3,fast,v2+exp2,v2+reduced --json "$out/math-forms.json" > "$out/math-forms.txt" 2>&1; el "math forms rc=$?"; sum "$out/math-forms.txt" "^(float32|float16|dtype) " 20; }
  go tests && { wg $K 200 node --test --test-concurrency=4 dist/test/webgpu-fast-math.test.js dist/test/webgpu-math.test.js dist/test/webgpu-llm.test.js dist/test/webgpu-replay.test.js dist/test/webgpu-vector-pointwise.test.js dist/test/webgpu-reduction.test.js > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail|skipped)|^not ok|differ" 14; }
  go bench && { wg $K 200 node dist/src/cli/main.js bench --device webgpu --size full --dtype float32 float16 --workload elementwise-4096,elementwise-1024,qwen3-0.6b-forward --include-slow --reps 30 --no-progress --json "$out/bench-webgpu.json" > "$out/bench-webgpu.txt" 2>&1; el "kiln bench webgpu rc=$?"; grep -E "^[a-z0-9.-]+ +webgpu" "$out/bench-webgpu.txt" | cut -c1-120 | tee -a "$out/summary.txt"; }
  go cuda && { $K 150 node dist/src/cli/main.js bench --device cuda --size full --dtype float32 float16 --workload elementwise-4096,elementwise-1024,qwen3-0.6b-forward --include-slow --reps 30 --no-progress --json "$out/bench-cuda.json" > "$out/bench-cuda.txt" 2>&1; el "kiln bench cuda rc=$?"; grep -E "^[a-z0-9.-]+ +cuda" "$out/bench-cuda.txt" | cut -c1-120 | tee -a "$out/summary.txt"; }
else
  el "unknown part $part"
fi
finish
