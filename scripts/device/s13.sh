#!/usr/bin/env bash
# Session 13's two A/B calls of the helpers' opt-in work, each under the device tool's 600 s limit,
# from the repo root through .device/run.sh with dist/ built and carried:
#   bash .device/run.sh bash scripts/device/s13.sh cuda     # #19 train step, #17 decode fusions, MoE decode
#   bash .device/run.sh bash scripts/device/s13.sh webgpu   # #20 GEMV, staged subgroup-matrix GEMM, conv GEMM; #17 serve
#   bash .device/run.sh bash scripts/device/s13.sh final    # the new defaults: train step, cuda tests, GEMM kernels, webgpu table rows
# Every step has its own cap; logs and JSON under $OUT/s13 come back as one tarball, a summary last.
set -uo pipefail
part=${1:?usage: s13.sh cuda|webgpu}
final=${OUT:-/tmp/out}; out=$final/s13; mkdir -p "$out"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$out/summary.txt"; }
sum() { grep -hE "$2" "$1" | head -${3:-8} | cut -c1-300 | tee -a "$out/summary.txt"; }
export KILN_CACHE_DIR=/tmp/kiln-cache
if [ "$part" = final ]; then
  # The defaults after the A/Bs (KILN_CUDA_COL_FEW_ROWS, KILN_WEBGPU_GEMV on): the train step twice,
  # the cuda reduction/compile tests, the float16 GEMM kernels, and the webgpu rows of #20's table.
  for r in 1 2; do
    KILN_CACHE_DIR=/tmp/kiln-train-final-$r timeout 45 node dist/bench/train-step.js --device cuda --size full --reps 30 --warmup 3 \
      --out "$out/train-step-final-$r.json" > "$out/train-step-final-$r.txt" 2>&1
    el "train-step (defaults) run $r rc=$?"; sum "$out/train-step-final-$r.txt" '"(eager_ms|compiled_ms|speedup|max_param_diff)"|rror' 6
  done
  timeout 150 node --test dist/test/cuda-colred.test.js dist/test/cuda-col-rows.test.js dist/test/cuda-reductions.test.js dist/test/cuda-compile.test.js dist/test/compile-cnn-train.test.js > "$out/cuda-tests-final.txt" 2>&1
  el "cuda reduction/compile tests rc=$?"; sum "$out/cuda-tests-final.txt" "^# (pass|fail|skipped)|^not ok" 12
  export KILN_WEBGPU_BACKEND=vulkan
  for k in staged v1; do
    KILN_WEBGPU_SM_KERNEL=$k timeout 45 node scripts/bench-webgpu-matmul.mjs dist --shapes float16:8192:8192:8192,float16:4096:4096:4096 > "$out/matmul-$k.jsonl" 2> "$out/matmul-$k.err"
    el "matmul float16 $k rc=$?"; sum "$out/matmul-$k.jsonl" "tflops" 3
  done
  KILN_WEBGPU_SM_KERNEL=staged timeout 40 node scripts/bench-webgpu-matmul.mjs dist --check --shapes float16:2048:2048:2048 > "$out/matmul-staged-check.jsonl" 2>&1
  el "matmul staged --check rc=$?"; sum "$out/matmul-staged-check.jsonl" "tflops" 2
  timeout 150 node dist/src/cli/main.js bench --device webgpu --size full --dtype float32 float16 --workload all --include-slow --reps 30 --no-progress \
    --json "$out/kiln-webgpu.json" > "$out/kiln-webgpu.txt" 2>&1
  el "kiln bench webgpu rc=$?"; sum "$out/kiln-webgpu.txt" "webgpu:0|FAILED" 16
elif [ "$part" = staged ]; then
  # After KILN_WEBGPU_SM_KERNEL defaulted to staged: the float16 GEMM tests, the float16 webgpu rows, decode.
  export KILN_WEBGPU_BACKEND=vulkan
  timeout 150 node --test dist/test/webgpu-subgroup-matrix.test.js dist/test/webgpu-linalg.test.js dist/test/webgpu-llm.test.js > "$out/webgpu-tests-staged.txt" 2>&1
  el "webgpu subgroup-matrix, linalg, llm tests rc=$?"; sum "$out/webgpu-tests-staged.txt" "^# (pass|fail|skipped)|^not ok" 10
  timeout 120 node dist/src/cli/main.js bench --device webgpu --size full --dtype float16 --workload all --include-slow --reps 30 --no-progress \
    --json "$out/kiln-webgpu-f16.json" > "$out/kiln-webgpu-f16.txt" 2>&1
  el "kiln bench webgpu float16 rc=$?"; sum "$out/kiln-webgpu-f16.txt" "webgpu:0|FAILED" 8
  timeout 90 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 2 --json "$out/webgpu-decode-f16.json" > "$out/webgpu-decode-f16.txt" 2>&1
  el "webgpu decode float16 rc=$?"; sum "$out/webgpu-decode-f16.txt" "^decode +batch|^ttft|rror" 3
elif [ "$part" = cuda ]; then
  timeout 60 node --test dist/test/cuda-col-rows.test.js dist/test/cuda-qk-norm-rotary-cache.test.js dist/test/cuda-linear-silu-mul.test.js > "$out/cuda-tests.txt" 2>&1
  el "cuda tests (col rows, qkNormRotaryCache, linearSiluAndMul) rc=$?"; sum "$out/cuda-tests.txt" "^# (pass|fail|skipped)|^not ok" 12
  KILN_QK_NORM_ROTARY_CACHE=1 KILN_LINEAR_SILU_MUL=1 timeout 60 node --test dist/test/decode-runner.test.js > "$out/decode-runner-fused.txt" 2>&1
  el "decode-runner with both decode fusions rc=$?"; sum "$out/decode-runner-fused.txt" "^# (pass|fail|skipped)|^not ok"
  for cfg in default fewrows both; do
    case $cfg in
      default) envs=() ;;
      fewrows) envs=(KILN_CUDA_COL_FEW_ROWS=1) ;;
      both) envs=(KILN_CUDA_COL_REDUCE=1 KILN_CUDA_COL_FEW_ROWS=1) ;;
    esac
    env "${envs[@]}" KILN_CACHE_DIR=/tmp/kiln-train-$cfg timeout 45 node dist/bench/train-step.js --device cuda --size full --reps 20 --warmup 3 \
      --out "$out/train-step-$cfg.json" > "$out/train-step-$cfg.txt" 2>&1
    el "train-step $cfg rc=$?"; sum "$out/train-step-$cfg.txt" '"(eager_ms|compiled_ms|speedup|max_param_diff)"|rror' 6
  done
  KILN_CUDA_COL_REDUCE=1 KILN_CUDA_COL_FEW_ROWS=1 timeout 50 node dist/bench/cuda-profile.js conv-stack-train --top 30 --json "$out/train-profile-both.json" > "$out/train-profile-both.txt" 2>&1
  el "train profile (both options) rc=$?"; head -n 24 "$out/train-profile-both.txt" | cut -c1-250 | tee -a "$out/summary.txt"
  for cfg in off fused; do
    if [ $cfg = off ]; then envs=(); else envs=(KILN_QK_NORM_ROTARY_CACHE=1 KILN_LINEAR_SILU_MUL=1); fi
    env "${envs[@]}" timeout 80 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 1,8,64 --new 128 --reps 2 \
      --json "$out/decode-$cfg.json" > "$out/decode-$cfg.txt" 2>&1
    el "decode $cfg rc=$?"; sum "$out/decode-$cfg.txt" "^decode +batch|rror" 4
  done
  timeout 100 node dist/bench/decode.js --config qwen3-30b-a3b-4l --device cuda --dtype bfloat16 --batches 1,32 --new 128 --reps 2 \
    --json "$out/decode-moe.json" > "$out/decode-moe.txt" 2>&1
  el "moe decode rc=$?"; sum "$out/decode-moe.txt" "^decode +batch|^ttft|rror" 4
else
  export KILN_WEBGPU_BACKEND=vulkan
  KILN_WEBGPU_GEMV=1 timeout 60 node --test dist/test/webgpu-gemv.test.js dist/test/webgpu-subgroup-matrix.test.js > "$out/webgpu-tests.txt" 2>&1
  el "webgpu gemv + subgroup-matrix tests rc=$?"; sum "$out/webgpu-tests.txt" "^# (pass|fail|skipped)|^not ok" 10
  for g in 1 0; do
    KILN_WEBGPU_CONV_GEMM=$g timeout 50 node dist/src/cli/main.js bench --device webgpu --size full --dtype float32 float16 --workload conv-stack --reps 20 --no-progress \
      --json "$out/conv-stack-gemm$g.json" > "$out/conv-stack-gemm$g.txt" 2>&1
    el "webgpu conv-stack KILN_WEBGPU_CONV_GEMM=$g rc=$?"; sum "$out/conv-stack-gemm$g.txt" "^conv-stack|FAILED" 3
  done
  for g in 1 0; do
    KILN_WEBGPU_GEMV=$g timeout 80 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 2 \
      --json "$out/webgpu-decode-gemv$g.json" > "$out/webgpu-decode-gemv$g.txt" 2>&1
    el "webgpu decode float16 KILN_WEBGPU_GEMV=$g rc=$?"; sum "$out/webgpu-decode-gemv$g.txt" "^decode +batch|rror" 3
  done
  for k in staged v1; do
    KILN_WEBGPU_SM_KERNEL=$k timeout 50 node scripts/bench-webgpu-matmul.mjs dist --shapes float16:8192:8192:8192,float16:4096:4096:4096 > "$out/matmul-$k.jsonl" 2> "$out/matmul-$k.err"
    el "matmul float16 $k rc=$?"; sum "$out/matmul-$k.jsonl" "tflops" 3
  done
  timeout 40 node scripts/bench-webgpu-store-forms.mjs dist > "$out/store-forms.jsonl" 2>&1; el "store forms rc=$?"; sum "$out/store-forms.jsonl" "variant" 10
  unset KILN_WEBGPU_BACKEND
  timeout 100 node dist/bench/serve.js --config qwen3-0.6b --device cuda --dtype bfloat16 --clients 16 --prompt 128 --new 64 --reps 2 \
    --json "$out/serve.json" > "$out/serve.txt" 2>&1
  el "serve (cuda) rc=$?"; grep -vE "^\s*$" "$out/serve.txt" | tail -n 6 | cut -c1-250 | tee -a "$out/summary.txt"
fi
tar -C "$out" -czf "$final/s13-$part.tgz" .
echo "=== summary"; cat "$out/summary.txt"
