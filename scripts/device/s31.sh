#!/usr/bin/env bash
# Session 31's device calls, from the repo root through .device/run.sh with dist/ built and carried
# (bash .device/run.sh bash scripts/device/s31.sh PART):
#   prof   #20: where the float16 rows furthest from 2x spend their device time, webgpu and cuda
#          step profiles side by side (bench/webgpu-profile.js, bench/cuda-profile.js):
#          transformer-block, conv-stack, mlp-2048x4096, qwen3-0.6b-forward. On an H200 the
#          table follows (webgpu-table.sh webgpu,cuda,pytorch,decode,host into $OUT/wt).
#   mma    #20: the float16 subgroup-matrix ceiling through WGSL (bench/webgpu-mma-peak.js: multiplies
#          from registers, with workgroup-memory matrix loads, with the staged kernel's refill),
#          then the float16 GEMM shapes at the planner's plans (bench/webgpu-gemm-shapes.js).
#   attn   #20: the float16 attention prefill on subgroup matrices (flash-attention-matrix.ts): its
#          tests on the real matrices and the attention suite, the prefill forms side by side
#          (bench/webgpu-attention.js: Qwen3 shapes at 128 / 1024 tokens, the transformer block's
#          at 512), then kiln bench float16 transformer-block and Qwen3 with the tiled and the
#          matrix prefill (the same call, alternating); then the mma part. (In session 31 it
#          also A/B-tested the staged GEMM at depth 2, since dropped: code in 460aec4.)
#   final  #20: the matrix prefill's tests and the attention suite; the prefill forms at 128 / 256 /
#          512 / 1024 rows (Qwen3 heads) and the block's shape; float16 GEMM plans of one-subgroup
#          workgroups on the Qwen3 (cold weights), mlp and block shapes (NO_SWEEP skips); the table
#          (webgpu-table.sh webgpu,cuda into $OUT/wt) with the build's defaults. (As it ran in
#          session 31, with NO_TABLE and NO_SWEEP, it also timed a 'matrix ahead' form and would
#          have run the table with it where faster; that form measured slower and was dropped,
#          code in 70dd1d3.)
#   table  #20's table (scripts/device/webgpu-table.sh webgpu,cuda) with this build's defaults.
# A step starts only while the call is under its deadline (S31_DEADLINE s); logs and JSON under
# $OUT/s31-PART come back as one tarball, the summary printed last.
set -uo pipefail
part=${1:?usage: s31.sh prof|attn|mma|final|table}
if [ "$part" = table ]; then exec bash "$(dirname "$0")/webgpu-table.sh" webgpu,cuda; fi
session=s31
source "$(dirname "$0")/session-lib.sh"
if [ "$part" = prof ]; then
  for w in ${PROF_WORKLOADS:-conv-stack transformer-block mlp-2048x4096 qwen3-0.6b-forward}; do
    go wg-$w && { wg $K 90 node dist/bench/webgpu-profile.js $w float16 --top 25 --json "$out/wgprof-$w.json" > "$out/wgprof-$w.txt" 2>&1; el "webgpu profile $w rc=$?"; }
    go cu-$w && { $K 60 node dist/bench/cuda-profile.js $w float16 --top 25 --json "$out/cuprof-$w.json" > "$out/cuprof-$w.txt" 2>&1; el "cuda profile $w rc=$?"; }
  done
  if grep -q H200 "$out/gpu.txt" && [ -z "${NO_TABLE:-}" ]; then
    go table && { WT_WEBGPU_S=200 WT_CUDA_S=130 bash scripts/device/webgpu-table.sh webgpu,cuda > "$out/table.txt" 2>&1; el "table rc=$?"; }
  fi
elif [ "$part" = final ]; then
  go tests && { wg $K 120 node --test dist/test/webgpu-attention-matrix.test.js dist/test/webgpu-attention.test.js > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail|skipped)|^not ok|differ|element" 12; }
  go attn-qwen && { wg $K 100 node dist/bench/webgpu-attention.js --dtypes float16 --lengths 128,256,512,1024 --forms "tiled, word copies;matrix" --json "$out/attn-qwen.json" > "$out/attn-qwen.txt" 2>&1; el "attention qwen3 heads rc=$?"; grep -E "^float" "$out/attn-qwen.txt" | tee -a "$out/summary.txt"; }
  go attn-block && { wg $K 60 node dist/bench/webgpu-attention.js --dtypes float16 --lengths 512 --shape 8,16,16,64 --forms "tiled, word copies;matrix" --json "$out/attn-block.json" > "$out/attn-block.txt" 2>&1; el "attention block shape rc=$?"; grep -E "^float" "$out/attn-block.txt" | tee -a "$out/summary.txt"; }
  # One-subgroup workgroups: a barrier stalls one warp while other workgroups' warps multiply
  # (webgpu-mma-peak: a 4-subgroup step with two barriers per 16 multiplies reads 220 of 656 TFLOP/s).
  plans=${SWEEP_PLANS:-"auto;1,1,4,4,2;1,1,4,4,4;1,1,2,4,2;1,2,4,4,2;2,2,4,4,4"}
  [ -z "${NO_SWEEP:-}" ] && go gemm-qwen && { wg $K 90 node dist/bench/webgpu-gemm-shapes.js --shapes qwen3 --plans "$plans" --cold 8 --json "$out/gemm-qwen.json" > "$out/gemm-qwen.txt" 2>&1; el "gemm qwen3 plans (cold) rc=$?"; grep -E "^qwen3" "$out/gemm-qwen.txt" | cut -c1-120 | tee -a "$out/summary.txt"; }
  [ -z "${NO_SWEEP:-}" ] && go gemm-big && { wg $K 90 node dist/bench/webgpu-gemm-shapes.js --shapes mlp,block --plans "$plans" --json "$out/gemm-big.json" > "$out/gemm-big.txt" 2>&1; el "gemm mlp/block plans rc=$?"; grep -E "^(mlp|block)" "$out/gemm-big.txt" | cut -c1-120 | tee -a "$out/summary.txt"; }
  [ -z "${NO_TABLE:-}" ] && go table && { KILN_WEBGPU_BACKEND=vulkan WT_WEBGPU_S=200 WT_CUDA_S=130 bash scripts/device/webgpu-table.sh webgpu,cuda > "$out/table.txt" 2>&1; el "table rc=$?"; tail -n 32 "$out/table.txt" | tee -a "$out/summary.txt"; }
elif [ "$part" = attn ] || [ "$part" = mma ]; then
  if [ "$part" = attn ]; then
    go tests && { wg $K 150 node --test dist/test/webgpu-attention-matrix.test.js dist/test/webgpu-attention.test.js > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail|skipped)|^not ok|differ|element" 12; }
    go attn-qwen && { wg $K 90 node dist/bench/webgpu-attention.js --dtypes float16 --lengths 128,1024 --forms "tiled, word copies;matrix" --json "$out/attn-qwen.json" > "$out/attn-qwen.txt" 2>&1; el "attention qwen3 shapes rc=$?"; grep -E "^float" "$out/attn-qwen.txt" | tee -a "$out/summary.txt"; }
    go attn-block && { wg $K 90 node dist/bench/webgpu-attention.js --dtypes float16 --lengths 512 --shape 8,16,16,64 --forms "tiled, word copies;matrix" --json "$out/attn-block.json" > "$out/attn-block.txt" 2>&1; el "attention block shape rc=$?"; grep -E "^float" "$out/attn-block.txt" | tee -a "$out/summary.txt"; }
    go gemm-qwen && { wg $K 100 node dist/bench/webgpu-gemm-shapes.js --shapes qwen3 --plans "auto" --cold 8 --json "$out/gemm-qwen-cold.json" > "$out/gemm-qwen-cold.txt" 2>&1; el "gemm qwen3 shapes cold rc=$?"; grep -E "^qwen3" "$out/gemm-qwen-cold.txt" | cut -c1-120 | tee -a "$out/summary.txt"; }
    [ -z "${NO_SWEEP:-}" ] && go gemm-big && { wg $K 100 node dist/bench/webgpu-gemm-shapes.js --shapes mlp,block --plans "auto" --json "$out/gemm-big.json" > "$out/gemm-big.txt" 2>&1; el "gemm mlp/block shapes rc=$?"; grep -E "^(mlp|block)" "$out/gemm-big.txt" | cut -c1-120 | tee -a "$out/summary.txt"; }
    declare -A V=([tiled]="KILN_WEBGPU_ATTN_PREFILL=tiled" [matrix]="KILN_WEBGPU_ATTN_PREFILL=matrix")
    for rep in 1 2; do for f in tiled matrix; do
      go bench-$f-$rep && { env ${V[$f]} KILN_WEBGPU_BACKEND=vulkan $K 100 node dist/src/cli/main.js bench --device webgpu --size full --dtype float16 --workload transformer-block,qwen3-0.6b-forward --include-slow --reps 30 --no-progress --json "$out/bench-$f-$rep.json" > "$out/bench-$f-$rep.txt" 2>&1; el "kiln bench f16 $f (${V[$f]}) rc=$?"; grep -E "^[a-z0-9.-]+ +webgpu" "$out/bench-$f-$rep.txt" | cut -c1-120 | tee -a "$out/summary.txt"; }
    done; done
  fi
  go mma && { wg $K 120 node dist/bench/webgpu-mma-peak.js --json "$out/mma-peak.json" > "$out/mma-peak.txt" 2>&1; el "mma peak rc=$?"; grep -vE '^\{|^\(' "$out/mma-peak.txt" | cut -c1-200 | tee -a "$out/summary.txt"; grep error "$out/mma-peak.txt" | cut -c1-600 | tee -a "$out/summary.txt"; }
  go mma-long && { wg $K 120 node dist/bench/webgpu-mma-peak.js --iters 16384 --groups 264 --json "$out/mma-peak-long.json" > "$out/mma-peak-long.txt" 2>&1; el "mma peak (fewer groups, longer) rc=$?"; grep -vE '^\{|^\(' "$out/mma-peak-long.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
  go shapes && { wg $K 150 node dist/bench/webgpu-gemm-shapes.js --plans "auto" --json "$out/gemm-shapes.json" > "$out/gemm-shapes.txt" 2>&1; el "gemm shapes rc=$?"; grep -vE '^\{|^\(' "$out/gemm-shapes.txt" | cut -c1-160 | tail -14 | tee -a "$out/summary.txt"; }
else
  el "unknown part $part"
fi
finish
