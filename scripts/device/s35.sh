#!/usr/bin/env bash
# Session 35's device calls, from the repo root through .device/run.sh with dist/ built and carried
# (bash .device/run.sh bash scripts/device/s35.sh PART):
#   h200   #20: the NaN hoist's tests (webgpu-nan-hoist, webgpu-fast-math) on real hardware; where the compiled elementwise-4096 float32 kernel's time goes on this GPU
#          (bench/webgpu-elementwise-vec.js: the NaN checks hoisted to the stores against in place, A/B; --hand: the fast math's parts priced by hand edits of its
#          WGSL, with the NaN checks hoisted to the store and ReLU's one-compare form; --grid: fewer,
#          fuller workgroups), then issue #20's whole table (webgpu-table.sh: webgpu, cuda, PyTorch
#          eager, webgpu decode, host overhead) with this build's defaults, then the small-product
#          plans (KILN_WEBGPU_SM_SMALL_DEEP) off / on in kiln bench float16 mlp-64x512 and Qwen3.
#   ew     the tests and the elementwise measurement only.
#   table  the table's webgpu and cuda rows, then the small-product plans' A/B (a warm follow-up to ew).
# A step starts only while the call is under its deadline (S35_DEADLINE s); logs and JSON under
# $OUT/s35-PART come back, the summary printed last.
set -uo pipefail
part=${1:?usage: s35.sh h200|ew|table}
session=s35
source "$(dirname "$0")/session-lib.sh"
if [ "$part" = h200 ] || [ "$part" = ew ]; then
  go tests && { wg $K 90 node --test dist/test/webgpu-nan-hoist.test.js dist/test/webgpu-fast-math.test.js > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail)|^not ok" 8; }
  go ew && { wg $K 90 node dist/bench/webgpu-elementwise-vec.js --n 4096 --dtypes float32,float16 --hand --grid --calls 20 --reps 11 --json "$out/ew.json" > "$out/ew.txt" 2>&1; el "elementwise hand edits rc=$?"; grep -E "^float32 " "$out/ew.txt" | tee -a "$out/summary.txt"; }
  [ "$part" = h200 ] && go table && { KILN_WEBGPU_BACKEND=vulkan WT_WEBGPU_S=150 WT_CUDA_S=100 WT_PT_S=80 WT_DECODE_S=70 bash scripts/device/webgpu-table.sh > "$out/table.txt" 2>&1; el "table rc=$?"; tail -n 40 "$out/table.txt" | tee -a "$out/summary.txt"; cp "$final/webgpu-table.tgz" "$out/" 2>/dev/null; }
  # The small-product plans (fitted on an H100 in session 34) off / on on this GPU.
  if [ "$part" = h200 ]; then for v in 0 1; do kb deep$v webgpu float16 mlp-64x512,qwen3-0.6b-forward KILN_WEBGPU_SM_SMALL_DEEP=$v; done; fi
elif [ "$part" = table ]; then
  # The table's webgpu and cuda rows only (PyTorch eager, decode and host overhead as in session 32), for a warm follow-up call.
  go table && { KILN_WEBGPU_BACKEND=vulkan WT_WEBGPU_S=150 WT_CUDA_S=100 bash scripts/device/webgpu-table.sh webgpu,cuda > "$out/table.txt" 2>&1; el "table rc=$?"; tail -n 40 "$out/table.txt" | tee -a "$out/summary.txt"; cp "$final/webgpu-table.tgz" "$out/" 2>/dev/null; }
  for v in 0 1; do kb deep$v webgpu float16 mlp-64x512,qwen3-0.6b-forward KILN_WEBGPU_SM_SMALL_DEEP=$v; done
else
  el "unknown part $part"
fi
finish
