#!/usr/bin/env bash
# Session 33's device calls, from the repo root through .device/run.sh with dist/ built and carried
# (bash .device/run.sh bash scripts/device/s33.sh PART):
#   probe  #20: what the compiled elementwise-4096 float32 kernel spends (bench/webgpu-elementwise-vec.js
#          --hand: hand edits of its WGSL, at 4096^2 from DRAM and 1024^2 from L2, where the
#          kernel's own issue rate shows); the math bench's vectors-per-invocation steps; the
#          float16 profiles of mlp-64x512 and conv-stack on webgpu and cuda.
#   table  #20's table (scripts/device/webgpu-table.sh webgpu,cuda) with this build's defaults.
# A step starts only while the call is under its deadline (S33_DEADLINE s); logs and JSON under
# $OUT/s33-PART come back, the summary printed last.
set -uo pipefail
part=${1:?usage: s33.sh probe|table}
if [ "$part" = table ]; then exec bash "$(dirname "$0")/webgpu-table.sh" webgpu,cuda; fi
session=s33
source "$(dirname "$0")/session-lib.sh"
if [ "$part" = probe ]; then
  # KILN_WEBGPU_NATIVE_COMPOSITES=1 (sigmoid whole, the new default) and 0 (decomposed, as before).
  for n in 4096 1024; do for w in 1 0; do
    go ew-$n-$w && { KILN_WEBGPU_NATIVE_COMPOSITES=$w wg $K 100 node dist/bench/webgpu-elementwise-vec.js --n $n --dtypes float32 --hand --calls 20 --reps 15 --json "$out/ew-$n-$w.json" > "$out/ew-$n-$w.txt" 2>&1; el "elementwise hand edits n=$n native composites=$w rc=$?"; grep -E "^float32 " "$out/ew-$n-$w.txt" | tee -a "$out/summary.txt"; }
  done; done
  go ew-steps && { wg $K 120 node dist/bench/webgpu-elementwise-math.js --dtypes float32,float16 --forms v2+exp2,fast --steps 1,2 --json "$out/ew-steps.json" > "$out/ew-steps.txt" 2>&1; el "elementwise steps rc=$?"; grep -E "^float(32|16) " "$out/ew-steps.txt" | cut -c1-120 | tee -a "$out/summary.txt"; }
  # kiln bench elementwise-4096 float32 compiled: webgpu with the sigmoid whole (1) and decomposed (0), alternating, and cuda.
  for rep in 1 2; do for w in 1 0; do
    go kb-ew-$w-$rep && { KILN_WEBGPU_NATIVE_COMPOSITES=$w KILN_WEBGPU_BACKEND=vulkan $K 60 node dist/src/cli/main.js bench --device webgpu --size full --dtype float32 --workload elementwise-4096 --reps 30 --no-progress --json "$out/kb-ew-$w-$rep.json" > "$out/kb-ew-$w-$rep.txt" 2>&1; el "kiln bench f32 elementwise-4096 webgpu native composites=$w rc=$?"; grep -E "^[a-z0-9.-]+ +webgpu" "$out/kb-ew-$w-$rep.txt" | cut -c1-120 | tee -a "$out/summary.txt"; }
  done; done
  go kb-ew-cuda && { $K 60 node dist/src/cli/main.js bench --device cuda --size full --dtype float32 --workload elementwise-4096,mlp-64x512 --reps 30 --no-progress --json "$out/kb-ew-cuda.json" > "$out/kb-ew-cuda.txt" 2>&1; el "kiln bench f32 cuda rc=$?"; grep -E "^[a-z0-9.-]+ +cuda" "$out/kb-ew-cuda.txt" | cut -c1-120 | tee -a "$out/summary.txt"; }
  go gemm-mlp64 && { wg $K 60 node dist/bench/webgpu-gemm-shapes.js --shapes mlp64 --plans "auto;nosplit;auto+split=32;auto+split=64;auto+split=128;auto+split=512;1,1,4,4,2;1,1,2,2,2,stages=0" --json "$out/gemm-mlp64.json" > "$out/gemm-mlp64.txt" 2>&1; el "gemm mlp64 plans rc=$?"; grep -E "^mlp64" "$out/gemm-mlp64.txt" | cut -c1-160 | tee -a "$out/summary.txt"; }
  for w in mlp-64x512 conv-stack; do
    go wgprof-$w && { wg $K 90 node dist/bench/webgpu-profile.js $w float16 --top 25 --json "$out/wgprof-$w.json" > "$out/wgprof-$w.txt" 2>&1; el "webgpu profile $w rc=$?"; tail -n 14 "$out/wgprof-$w.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
    go cuprof-$w && { $K 90 node dist/bench/cuda-profile.js $w float16 --top 25 --json "$out/cuprof-$w.json" > "$out/cuprof-$w.txt" 2>&1; el "cuda profile $w rc=$?"; tail -n 10 "$out/cuprof-$w.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
  done
else
  el "unknown part $part"
fi
finish
