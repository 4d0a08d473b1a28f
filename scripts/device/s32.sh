#!/usr/bin/env bash
# Session 32's device calls, from the repo root through .device/run.sh with dist/ built and carried
# (bash .device/run.sh bash scripts/device/s32.sh PART):
#   sweep  #20: the float16 subgroup-matrix tests (conv2dBatchNorm's fold, the key-split attention);
#          kiln bench float16 conv-stack with the BatchNorm fold and the in-place A (KILN_WEBGPU_CONV_BN_FOLD,
#          KILN_WEBGPU_CONV_IMPLICIT) on and off, alternating; attention prefill forms at 128-512
#          rows (tiled, matrix, matrix-split); float16 GEMM plans side by side (bench/webgpu-gemm-shapes.js, KILN_WEBGPU_SM_PLAN)
#          on the Qwen3 prefill shapes (cold weights) and the mlp / block shapes: one-subgroup
#          workgroups, double-buffered tiles and (Qwen3) more K slices (+split=N) against the planner's
#          plan (SWEEP_PLANS, QWEN_PLANS override);
#          conv-stack's im2col GEMMs (N = 64) under taller plans (CONV_PLANS); the conv profile.
#   final  #20: the attention and conv tests, kiln bench float16 Qwen3 with the attention prefill
#          auto / tiled alternating, then the float16 half of the table (webgpu and cuda).
#   epi    #20: the staged GEMM's all-at-once epilogue (KILN_WEBGPU_SM_EPILOGUE=all) against the
#          default: its tests on real matrices, GEMM shapes, kiln bench float16 alternating. It ran
#          at 702ce56; the form measured slower and was dropped (code in b8f6690), so at later
#          commits the option is unknown and this part no longer runs as written.
#   table  #20's table (scripts/device/webgpu-table.sh webgpu,cuda) with this build's defaults.
# A step starts only while the call is under its deadline (S32_DEADLINE s); logs and JSON under
# $OUT/s32-PART come back as one tarball, the summary printed last.
set -uo pipefail
part=${1:?usage: s32.sh sweep|epi|final|table}
if [ "$part" = table ]; then exec bash "$(dirname "$0")/webgpu-table.sh" webgpu,cuda; fi
session=s32
source "$(dirname "$0")/session-lib.sh"
if [ "$part" = sweep ]; then
  go tests && { wg $K 150 node --test dist/test/webgpu-subgroup-matrix.test.js dist/test/webgpu-attention-matrix.test.js > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail|skipped)|^not ok|differ|element" 12; }
  # conv-stack float16: fold + implicit A (the defaults) against session 31's route, alternating.
  declare -A CV=([new]="KILN_WEBGPU_CONV_BN_FOLD=1 KILN_WEBGPU_CONV_IMPLICIT=1" [old]="KILN_WEBGPU_CONV_BN_FOLD=0 KILN_WEBGPU_CONV_IMPLICIT=0")
  for rep in 1 2; do for v in new old; do
    go conv-$v-$rep && { env ${CV[$v]} KILN_WEBGPU_BACKEND=vulkan $K 100 node dist/src/cli/main.js bench --device webgpu --size full --dtype float16 --workload conv-stack --reps 30 --no-progress --json "$out/conv-$v-$rep.json" > "$out/conv-$v-$rep.txt" 2>&1; el "kiln bench f16 conv-stack $v (${CV[$v]}) rc=$?"; grep -E "^[a-z0-9.-]+ +webgpu" "$out/conv-$v-$rep.txt" | cut -c1-120 | tee -a "$out/summary.txt"; }
  done; done
  go attn && { wg $K 100 node dist/bench/webgpu-attention.js --dtypes float16 --lengths 128,256,512 --forms "tiled, word copies;matrix;matrix-split" --json "$out/attn.json" > "$out/attn.txt" 2>&1; el "attention forms rc=$?"; grep -E "^float" "$out/attn.txt" | tee -a "$out/summary.txt"; }
  plans=${SWEEP_PLANS:-"auto;1,1,4,4,2;1,1,4,4,4;1,1,4,4,8;1,1,4,4,2,stages=0;2,2,4,4,2,stages=0;1,2,4,4,2;2,2,4,4,4;1,2,4,4,2,stages=2;2,2,4,4,2,stages=2"}
  qplans=${QWEN_PLANS:-"auto;auto+split=1024;1,1,4,4,2,stages=0;1,1,4,4,2;1,1,4,4,2+split=1024;1,1,4,4,4+split=1024;1,1,2,4,2+split=1024;1,2,4,4,2;2,2,4,4,2,stages=2+split=1024"}
  go gemm-qwen && { wg $K 150 node dist/bench/webgpu-gemm-shapes.js --shapes qwen3 --plans "$qplans" --cold 8 --json "$out/gemm-qwen.json" > "$out/gemm-qwen.txt" 2>&1; el "gemm qwen3 plans (cold) rc=$?"; grep -E "^qwen3" "$out/gemm-qwen.txt" | cut -c1-160 | tee -a "$out/summary.txt"; }
  go gemm-big && { wg $K 150 node dist/bench/webgpu-gemm-shapes.js --shapes mlp,block --plans "$plans" --json "$out/gemm-big.json" > "$out/gemm-big.txt" 2>&1; el "gemm mlp/block plans rc=$?"; grep -E "^(mlp|block)" "$out/gemm-big.txt" | cut -c1-160 | tee -a "$out/summary.txt"; }
  cplans=${CONV_PLANS:-"auto;1,1,4,4,2;1,1,4,4,2,stages=0;2,1,4,4,2,stages=0;2,1,4,4,2;4,1,4,4,2;2,1,4,4,2,stages=2;4,1,4,4,2,stages=2;2,2,4,2,2,stages=2"}
  go gemm-conv && { wg $K 120 node dist/bench/webgpu-gemm-shapes.js --shapes conv --plans "$cplans" --json "$out/gemm-conv.json" > "$out/gemm-conv.txt" 2>&1; el "gemm conv plans rc=$?"; grep -E "^conv" "$out/gemm-conv.txt" | cut -c1-160 | tee -a "$out/summary.txt"; }
  go conv-prof && { wg $K 90 node dist/bench/webgpu-profile.js conv-stack float16 --top 25 --json "$out/wgprof-conv.json" > "$out/wgprof-conv.txt" 2>&1; el "webgpu conv profile rc=$?"; tail -n 8 "$out/wgprof-conv.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
elif [ "$part" = epi ]; then
  # The staged GEMM's all-at-once epilogue (KILN_WEBGPU_SM_EPILOGUE=all) against the default.
  go tests && { KILN_WEBGPU_SM_EPILOGUE=all wg $K 90 node --test dist/test/webgpu-subgroup-matrix.test.js > "$out/tests.txt" 2>&1; el "tests (epilogue all) rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail|skipped)|^not ok|differ|element" 8; }
  go gemm && { wg $K 120 node dist/bench/webgpu-gemm-shapes.js --shapes conv,qwen3,block,mlp --plans "auto;auto+epi=all" --cold 2 --json "$out/gemm.json" > "$out/gemm.txt" 2>&1; el "gemm shapes epilogue each / all rc=$?"; grep -E "^(conv|qwen3|block|mlp)" "$out/gemm.txt" | cut -c1-120 | tee -a "$out/summary.txt"; }
  for rep in 1 2; do for v in each all; do
    go bench-$v-$rep && { KILN_WEBGPU_SM_EPILOGUE=$v KILN_WEBGPU_BACKEND=vulkan $K 80 node dist/src/cli/main.js bench --device webgpu --size full --dtype float16 --workload conv-stack,mlp-2048x4096,transformer-block,qwen3-0.6b-forward --include-slow --reps 30 --no-progress --json "$out/bench-$v-$rep.json" > "$out/bench-$v-$rep.txt" 2>&1; el "kiln bench f16 KILN_WEBGPU_SM_EPILOGUE=$v rc=$?"; grep -E "^[a-z0-9.-]+ +webgpu" "$out/bench-$v-$rep.txt" | cut -c1-120 | tee -a "$out/summary.txt"; }
  done; done
elif [ "$part" = final ]; then
  go tests && { wg $K 120 node --test dist/test/webgpu-attention-matrix.test.js dist/test/webgpu-subgroup-matrix.test.js > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail|skipped)|^not ok|differ|element" 12; }
  for rep in 1 2; do for f in auto tiled; do
    go qwen-$f-$rep && { KILN_WEBGPU_ATTN_PREFILL=$f KILN_WEBGPU_BACKEND=vulkan $K 60 node dist/src/cli/main.js bench --device webgpu --size full --dtype float16 --workload qwen3-0.6b-forward --include-slow --reps 30 --no-progress --json "$out/qwen-$f-$rep.json" > "$out/qwen-$f-$rep.txt" 2>&1; el "kiln bench f16 qwen3 KILN_WEBGPU_ATTN_PREFILL=$f rc=$?"; grep -E "^[a-z0-9.-]+ +webgpu" "$out/qwen-$f-$rep.txt" | cut -c1-120 | tee -a "$out/summary.txt"; }
  done; done
  go table && { KILN_WEBGPU_BACKEND=vulkan WT_DTYPES=float16 WT_WEBGPU_S=120 WT_CUDA_S=100 bash scripts/device/webgpu-table.sh webgpu,cuda > "$out/table.txt" 2>&1; el "table (float16) rc=$?"; tail -n 20 "$out/table.txt" | tee -a "$out/summary.txt"; cp "$final/webgpu-table.tgz" "$out/" 2>/dev/null; }
else
  el "unknown part $part"
fi
finish
