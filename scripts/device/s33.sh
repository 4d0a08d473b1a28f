#!/usr/bin/env bash
# Session 33's device calls, from the repo root through .device/run.sh with dist/ built and carried
# (bash .device/run.sh bash scripts/device/s33.sh PART):
#   probe  #20: kiln bench elementwise-4096 and mlp-64x512 (float32, float16) on webgpu with Events
#          stamped in their dispatches' pass (KILN_WEBGPU_EVENT_IN_PASS=1, the new default) and as
#          empty passes (0), alternating, and on cuda; what the compiled elementwise-4096 float32
#          kernel spends (bench/webgpu-elementwise-vec.js --hand: hand edits of its WGSL, at 4096^2
#          from DRAM and 1024^2 from L2, with the sigmoid whole or decomposed:
#          KILN_WEBGPU_NATIVE_COMPOSITES); mlp-64x512's GEMM plans; the float16 profiles of
#          mlp-64x512 and conv-stack on webgpu and cuda.
#   final  #20: the float16 subgroup-matrix and fast-math tests, the float16 conv-stack profile
#          (the im2col gather by carries), elementwise-4096 against the copy and the clone, then the
#          table (webgpu-table.sh webgpu,cuda, both dtypes).
#   mma    #20: bench/webgpu-mma-peak.js with the whole-word refill through an untyped workgroup
#          buffer's views (form view) beside session 31's forms.
#   table  #20's table (scripts/device/webgpu-table.sh webgpu,cuda) with this build's defaults.
# A step starts only while the call is under its deadline (S33_DEADLINE s); logs and JSON under
# $OUT/s33-PART come back, the summary printed last.
set -uo pipefail
part=${1:?usage: s33.sh probe|mma|final|table}
if [ "$part" = table ]; then exec bash "$(dirname "$0")/webgpu-table.sh" webgpu,cuda; fi
session=s33
source "$(dirname "$0")/session-lib.sh"
if [ "$part" = probe ]; then
  for dt in float32 float16; do for v in 1 0; do
    kb wg-$dt-ev$v webgpu $dt elementwise-4096,mlp-64x512 KILN_WEBGPU_EVENT_IN_PASS=$v
  done; done
  kb wg-float32-nc0 webgpu float32 elementwise-4096 KILN_WEBGPU_NATIVE_COMPOSITES=0
  for dt in float32 float16; do kb cuda-$dt cuda $dt elementwise-4096,mlp-64x512; done
  for c in 4096-1 1024-1 1024-0; do n=${c%-*}; w=${c#*-}
    go ew-$c && { KILN_WEBGPU_NATIVE_COMPOSITES=$w wg $K 80 node dist/bench/webgpu-elementwise-vec.js --n $n --dtypes float32 --hand --calls 20 --reps 11 --json "$out/ew-$c.json" > "$out/ew-$c.txt" 2>&1; el "elementwise hand edits n=$n native composites=$w rc=$?"; grep -E "^float32 " "$out/ew-$c.txt" | tee -a "$out/summary.txt"; }
  done
  go gemm-mlp64 && { wg $K 60 node dist/bench/webgpu-gemm-shapes.js --shapes mlp64 --plans "auto;nosplit;auto+split=32;auto+split=64;auto+split=128;auto+split=512;1,1,4,4,2;1,1,2,2,2,stages=0" --json "$out/gemm-mlp64.json" > "$out/gemm-mlp64.txt" 2>&1; el "gemm mlp64 plans rc=$?"; grep -E "^mlp64" "$out/gemm-mlp64.txt" | cut -c1-160 | tee -a "$out/summary.txt"; }
  for w in mlp-64x512 conv-stack; do
    go wgprof-$w && { wg $K 90 node dist/bench/webgpu-profile.js $w float16 --top 25 --json "$out/wgprof-$w.json" > "$out/wgprof-$w.txt" 2>&1; el "webgpu profile $w rc=$?"; tail -n 12 "$out/wgprof-$w.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
    go cuprof-$w && { $K 90 node dist/bench/cuda-profile.js $w float16 --top 25 --json "$out/cuprof-$w.json" > "$out/cuprof-$w.txt" 2>&1; el "cuda profile $w rc=$?"; tail -n 8 "$out/cuprof-$w.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
  done
elif [ "$part" = mma ]; then
  # The subgroup-matrix ceiling with the whole-word refill into the tile the multiplies load (form view).
  go mma && { wg $K 120 node dist/bench/webgpu-mma-peak.js --json "$out/mma.json" > "$out/mma.txt" 2>&1; el "mma peak rc=$?"; grep -vE '^\{' "$out/mma.txt" | tail -n 24 | tee -a "$out/summary.txt"; grep -E 'error' "$out/mma.txt" | cut -c1-300 | head -4 | tee -a "$out/summary.txt"; }
elif [ "$part" = final ]; then
  # The im2col gather by carries (conv-stack's stem), the sigmoid whole: tests on real matrices, the
  # float16 conv-stack profile, elementwise-4096 against the copy and the clone, then the table.
  go tests && { wg $K 150 node --test dist/test/webgpu-subgroup-matrix.test.js dist/test/webgpu-fast-math.test.js > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail|skipped)|^not ok|differ|element" 12; }
  go wgprof-conv && { wg $K 90 node dist/bench/webgpu-profile.js conv-stack float16 --top 25 --json "$out/wgprof-conv-stack.json" > "$out/wgprof-conv-stack.txt" 2>&1; el "webgpu profile conv-stack rc=$?"; tail -n 3 "$out/wgprof-conv-stack.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
  go ew && { wg $K 90 node dist/bench/webgpu-elementwise-vec.js --n 4096 --dtypes float32,float16 --calls 20 --reps 11 --json "$out/ew.json" > "$out/ew.txt" 2>&1; el "elementwise vec rc=$?"; grep -E "^float(32|16) " "$out/ew.txt" | tee -a "$out/summary.txt"; }
  go table && { KILN_WEBGPU_BACKEND=vulkan WT_WEBGPU_S=150 WT_CUDA_S=110 bash scripts/device/webgpu-table.sh webgpu,cuda > "$out/table.txt" 2>&1; el "table rc=$?"; tail -n 24 "$out/table.txt" | tee -a "$out/summary.txt"; cp "$final/webgpu-table.tgz" "$out/" 2>/dev/null; }
else
  el "unknown part $part"
fi
finish
