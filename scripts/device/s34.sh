#!/usr/bin/env bash
# Session 34's device calls, from the repo root through .device/run.sh with dist/ built and carried
# (bash .device/run.sh bash scripts/device/s34.sh PART):
#   h200   #20 on the H200: the whole table (webgpu-table.sh: webgpu, cuda, PyTorch eager, webgpu
#          decode, host overhead) with this build's defaults, then bench/webgpu-mma-peak.js with the
#          whole-word refill through an untyped workgroup buffer's views (form view) beside session
#          31's forms, after the compiled elementwise-4096 float32 kernel's hand edits against the
#          clone (bench/webgpu-elementwise-vec.js --hand). The table first: it is what the issue asks for.
#   refill #20: the staged float16 GEMM's word refill (KILN_WEBGPU_SM_REFILL=words) against the
#          halves: the subgroup-matrix tests (both refills on real matrices), the mma-peak forms, the
#          GEMM shapes (square 4096 / 8192, mlp, block, conv, mlp64) with auto and auto+refill=words
#          alternating, then kiln bench float16 mlp-2048x4096, transformer-block and conv-stack
#          under each refill, alternating; conv-stack float16 with the implicit conv's carries
#          (KILN_WEBGPU_CONV_CARRY) against divisions; mlp-64x512 with llm.linearGelu
#          (KILN_LINEAR_GELU) on and off.
#   final  #20: the small-product plans (KILN_WEBGPU_SM_SMALL_DEEP) off / on in kiln bench float16
#          mlp-64x512, qwen3-0.6b-forward and conv-stack, alternating, with the tests; then cuda.
# A step starts only while the call is under its deadline (S34_DEADLINE s); logs and JSON under
# $OUT/s34-PART come back, the summary printed last.
set -uo pipefail
part=${1:?usage: s34.sh h200|refill|final}
session=s34
source "$(dirname "$0")/session-lib.sh"
if [ "$part" = h200 ]; then
  go table && { KILN_WEBGPU_BACKEND=vulkan WT_WEBGPU_S=150 WT_CUDA_S=100 WT_PT_S=80 WT_DECODE_S=70 bash scripts/device/webgpu-table.sh > "$out/table.txt" 2>&1; el "table rc=$?"; tail -n 40 "$out/table.txt" | tee -a "$out/summary.txt"; cp "$final/webgpu-table.tgz" "$out/" 2>/dev/null; }
  # Where the compiled elementwise-4096 float32 kernel's time goes on this GPU (hand edits of its WGSL) against the clone.
  go ew && { wg $K 90 node dist/bench/webgpu-elementwise-vec.js --n 4096 --dtypes float32 --hand --calls 20 --reps 11 --json "$out/ew.json" > "$out/ew.txt" 2>&1; el "elementwise hand edits rc=$?"; grep -E "^float32 " "$out/ew.txt" | tee -a "$out/summary.txt"; }
  go mma && { wg $K 90 node dist/bench/webgpu-mma-peak.js --json "$out/mma.json" > "$out/mma.txt" 2>&1; el "mma peak rc=$?"; grep -vE '^\{' "$out/mma.txt" | tail -n 24 | tee -a "$out/summary.txt"; grep -E 'error' "$out/mma.txt" | cut -c1-300 | head -4 | tee -a "$out/summary.txt"; }
elif [ "$part" = refill ]; then
  go tests && { wg $K 120 node --test dist/test/webgpu-subgroup-matrix.test.js dist/test/webgpu-linear-gelu.test.js > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail|skipped)|^not ok|differ|element|compiled" 12; }
  go gemm && { wg $K 150 node dist/bench/webgpu-gemm-shapes.js --shapes square,mlp,block,conv --plans "auto;auto+refill=words" --json "$out/gemm.json" > "$out/gemm.txt" 2>&1; el "gemm shapes rc=$?"; grep -E "^[a-z0-9]+/" "$out/gemm.txt" | cut -c1-130 | tee -a "$out/summary.txt"; grep -iE "skipped|error" "$out/gemm.txt" | cut -c1-300 | head -4 | tee -a "$out/summary.txt"; }
  # kiln bench float16: the refill (all three) and the conv's carries (conv-stack), alternating.
  abkb() {
    kb f16-halves-$1 webgpu float16 mlp-2048x4096,transformer-block,conv-stack KILN_WEBGPU_SM_REFILL=halves
    kb f16-words-$1 webgpu float16 mlp-2048x4096,transformer-block,conv-stack KILN_WEBGPU_SM_REFILL=words
    kb conv-carry-$1 webgpu float16 conv-stack KILN_WEBGPU_CONV_CARRY=1
  }
  abkb 1
  # llm.linearGelu (the GELU in the GEMM's epilogue) against linear + gelu, alternating.
  for v in 0 1; do kb gelu$v-1 webgpu float16,float32 mlp-64x512 KILN_LINEAR_GELU=$v; done
  # mlp-64x512's small product: 32x32 tiles without split K (one dispatch a linear), K steps of 64.
  go mlp64 && { wg $K 60 node dist/bench/webgpu-gemm-shapes.js --shapes mlp64 --plans "auto;2,2,1,1,2+split=32;2,2,1,1,4+split=32;2,2,2,2,4;2,2,1,1,4;2,2,2,2,4+split=16;auto+refill=words" --json "$out/mlp64.json" > "$out/mlp64.txt" 2>&1; el "gemm mlp64 plans rc=$?"; grep -E "^mlp64" "$out/mlp64.txt" | cut -c1-130 | tee -a "$out/summary.txt"; }
  for v in 0 1; do kb gelu$v-2 webgpu float16,float32 mlp-64x512 KILN_LINEAR_GELU=$v; done
  abkb 2
  go mma && { wg $K 90 node dist/bench/webgpu-mma-peak.js --json "$out/mma.json" > "$out/mma.txt" 2>&1; el "mma peak rc=$?"; grep -vE '^\{' "$out/mma.txt" | tail -n 24 | tee -a "$out/summary.txt"; grep -E 'error' "$out/mma.txt" | cut -c1-300 | head -4 | tee -a "$out/summary.txt"; }
elif [ "$part" = final ]; then
  # The small-product plans (KILN_WEBGPU_SM_SMALL_DEEP) on real matrices and in the workloads that
  # run them, alternating; then Kiln cuda on the same workloads for the ratios.
  go tests && { wg $K 60 node --test dist/test/webgpu-subgroup-matrix.test.js dist/test/webgpu-linear-gelu.test.js > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail|skipped)|^not ok|differ|element|compiled" 12; }
  for v in 0 1; do kb deep$v-1 webgpu float16 mlp-64x512,qwen3-0.6b-forward,conv-stack KILN_WEBGPU_SM_SMALL_DEEP=$v; done
  kb cuda cuda float16 mlp-64x512,qwen3-0.6b-forward,conv-stack
  for v in 0 1; do kb deep$v-2 webgpu float16 mlp-64x512,qwen3-0.6b-forward,conv-stack KILN_WEBGPU_SM_SMALL_DEEP=$v; done
else
  el "unknown part $part"
fi
finish
