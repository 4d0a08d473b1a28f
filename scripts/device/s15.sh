#!/usr/bin/env bash
# Session 15's device calls, each under the device tool's 600 s limit, from the repo root through
# .device/run.sh with dist/ built and carried:
#   bash .device/run.sh bash scripts/device/s15.sh measure   # where things stand: #20 webgpu tests with
#       robustness off, webgpu decode, kiln bench webgpu vs cuda; #17 dense decode b1/8/64 and its profile
# Every step has its own cap; logs and JSON under $OUT/s15-PART come back as one tarball, a summary last.
set -uo pipefail
part=${1:?usage: s15.sh measure}
final=${OUT:-/tmp/out}; out=$final/s15-$part; mkdir -p "$out"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$out/summary.txt"; }
sum() { grep -hE "$2" "$1" | head -${3:-8} | cut -c1-300 | tee -a "$out/summary.txt"; }
export KILN_CACHE_DIR=/tmp/kiln-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > "$out/gpu.txt" 2>&1
if [ "$part" = measure ]; then
  timeout 75 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 1,8,64 --new 128 --reps 2 \
    --json "$out/decode-cuda.json" > "$out/decode-cuda.txt" 2>&1
  el "cuda decode rc=$?"; sum "$out/decode-cuda.txt" "^decode +batch|rror" 4
  timeout 45 node dist/bench/cuda-profile.js qwen3-0.6b-decode-b1 bfloat16 --top 30 --json "$out/profile-b1.json" > "$out/profile-b1.txt" 2>&1
  el "profile b1 rc=$?"; head -n 12 "$out/profile-b1.txt" | cut -c1-200 | tee -a "$out/summary.txt"
  export KILN_WEBGPU_BACKEND=vulkan
  timeout 130 node --test dist/test/webgpu-llm.test.js dist/test/webgpu-pointwise.test.js dist/test/webgpu-linalg.test.js dist/test/webgpu-generate.test.js dist/test/webgpu-replay.test.js dist/test/webgpu-vector-pointwise.test.js dist/test/webgpu-subgroup-matrix.test.js > "$out/webgpu-tests.txt" 2>&1
  el "webgpu tests (robustness off) rc=$?"; sum "$out/webgpu-tests.txt" "^# (pass|fail|skipped)|^not ok" 10
  timeout 70 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 2 --breakdown \
    --json "$out/decode-webgpu-f16.json" > "$out/decode-webgpu-f16.txt" 2>&1
  el "webgpu decode float16 rc=$?"; sum "$out/decode-webgpu-f16.txt" "^decode +batch|rror|host|device" 6
  timeout 20 node scripts/bench-webgpu-matmul.mjs dist --shapes float16:8192:8192:8192,float32:4096:4096:4096 > "$out/matmul.jsonl" 2> "$out/matmul.err"
  el "matmul rc=$?"; sum "$out/matmul.jsonl" "tflops" 2
  timeout 110 node dist/src/cli/main.js bench --device webgpu --size full --dtype float32 float16 --workload all --include-slow --reps 20 --no-progress \
    --json "$out/kiln-webgpu.json" > "$out/kiln-webgpu.txt" 2>&1
  el "kiln bench webgpu rc=$?"; sum "$out/kiln-webgpu.txt" "^[a-z0-9.-]+ +webgpu|FAILED" 16
  unset KILN_WEBGPU_BACKEND
  timeout 70 node dist/src/cli/main.js bench --device cuda --size full --dtype float32 float16 --workload all --include-slow --reps 20 --no-progress \
    --json "$out/kiln-cuda.json" > "$out/kiln-cuda.txt" 2>&1
  el "kiln bench cuda rc=$?"; sum "$out/kiln-cuda.txt" "^[a-z0-9.-]+ +cuda|FAILED" 16
elif [ "$part" = fusions ]; then
  # #17: the decode fusions that landed default-off (KILN_LINEAR_SILU_MUL, KILN_QK_NORM_ROTARY_CACHE), A/B in one
  # process order base / lsm / qnrc / both, twice; then the GEMV per shape and the batch-64 profile.
  for rep in 1 2; do
    for v in base lsm qnrc both; do
      case $v in base) e=();; lsm) e=(KILN_LINEAR_SILU_MUL=1);; qnrc) e=(KILN_QK_NORM_ROTARY_CACHE=1);; both) e=(KILN_LINEAR_SILU_MUL=1 KILN_QK_NORM_ROTARY_CACHE=1);; esac
      env "${e[@]}" timeout 45 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 1,8,64 --new 128 --reps 2 \
        --json "$out/decode-$v-$rep.json" > "$out/decode-$v-$rep.txt" 2>&1
      el "decode $v rep $rep rc=$?"; sum "$out/decode-$v-$rep.txt" "^decode +batch|rror" 4
    done
  done
  timeout 40 node dist/bench/cuda-gemv.js --rows 1,8 --runs 20 --batches 5 --json "$out/gemv.json" > "$out/gemv.txt" 2>&1
  el "gemv rc=$?"; tail -n 24 "$out/gemv.txt" | cut -c1-200 | tee -a "$out/summary.txt"
  timeout 45 node dist/bench/cuda-profile.js qwen3-0.6b-decode-b64 bfloat16 --top 16 --json "$out/profile-b64.json" > "$out/profile-b64.txt" 2>&1
  el "profile b64 rc=$?"; head -n 16 "$out/profile-b64.txt" | cut -c1-200 | tee -a "$out/summary.txt"
elif [ "$part" = final ]; then
  # Everything the helpers built, in one call ordered by priority; a step starts only while the call
  # is under its deadline (S15_DEADLINE s), so the tail is what gets cut.
  dl=${S15_DEADLINE:-280}
  go() { if [ $(( $(date +%s) - t0 )) -ge $dl ]; then el "skip $1 (deadline)"; return 1; fi; }
  K="timeout -k 5"
  go tests && { $K 80 node --test dist/test/cuda-linear-silu-mul.test.js dist/test/cuda-qk-norm-rotary-cache.test.js dist/test/cuda-paged-attention.test.js \
      dist/test/cuda-random-draw.test.js dist/test/engine-async.test.js dist/test/sampler-cuda.test.js dist/test/cuda-add-rms-norm-linear.test.js > "$out/cuda-tests.txt" 2>&1
    el "cuda tests rc=$?"; sum "$out/cuda-tests.txt" "^# (pass|fail|skipped)|^not ok" 10; }
  go decode && { $K 85 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 1,8,64 --new 128 --reps 2 --async on,off \
      --json "$out/decode-async.json" > "$out/decode-async.txt" 2>&1
    el "cuda decode async on,off rc=$?"; sum "$out/decode-async.txt" "^decode +batch|rror" 8; }
  go wgdecode && { export KILN_WEBGPU_BACKEND=vulkan; $K 40 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 2 --breakdown \
      --json "$out/decode-webgpu-f16.json" > "$out/decode-webgpu-f16.txt" 2>&1
    el "webgpu decode float16 rc=$?"; sum "$out/decode-webgpu-f16.txt" "^decode +batch|rror|breakdown" 4; unset KILN_WEBGPU_BACKEND; }
  go start && { $K 45 node dist/bench/serve.js --config qwen3-0.6b --device cuda --dtype bfloat16 --prompt 128 --start-only --reps 3 \
      --json "$out/serve-start.json" > "$out/serve-start.txt" 2>&1
    el "serve start rc=$?"; grep -vE "^\s*$" "$out/serve-start.txt" | tail -n 3 | cut -c1-400 | tee -a "$out/summary.txt"; }
  go arl && { KILN_ADD_RMSNORM_LINEAR=1 $K 50 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 1,8 --new 128 --reps 2 --async on,off \
      --json "$out/decode-arl.json" > "$out/decode-arl.txt" 2>&1
    el "cuda decode KILN_ADD_RMSNORM_LINEAR=1 async on,off rc=$?"; sum "$out/decode-arl.txt" "^decode +batch|rror" 4; }
  go wgtests && { export KILN_WEBGPU_BACKEND=vulkan; $K 60 node --test dist/test/webgpu-argmax-split.test.js dist/test/webgpu-paged.test.js dist/test/webgpu-linear-silu-mul.test.js \
      dist/test/webgpu-qk-norm-rotary-cache.test.js dist/test/webgpu-gemv.test.js dist/test/webgpu-subgroup-matrix.test.js dist/test/webgpu-linalg.test.js \
      dist/test/webgpu-conv-gemm.test.js > "$out/webgpu-tests.txt" 2>&1
    el "webgpu kernel tests rc=$?"; sum "$out/webgpu-tests.txt" "^# (pass|fail|skipped)|^not ok" 10; unset KILN_WEBGPU_BACKEND; }
  go wggen && { export KILN_WEBGPU_BACKEND=vulkan; $K 30 node --test --test-name-pattern="float16, compiled decode" dist/test/webgpu-generate.test.js > "$out/webgpu-generate.txt" 2>&1
    el "webgpu generate float16 compiled rc=$?"; sum "$out/webgpu-generate.txt" "^# (pass|fail|skipped)|^not ok|steps equal" 4; unset KILN_WEBGPU_BACKEND; }
  go http && { $K 90 node dist/bench/serve.js --config qwen3-0.6b --device cuda --dtype bfloat16 --clients 16 --prompt 128 --new 128 --reps 2 --no-start \
      --batch-window-ms 0,2 --replay --trace "$out/trace.json" --json "$out/serve.json" > "$out/serve.txt" 2> "$out/serve-trace.txt"
    el "serve http rc=$?"; cut -c1-300 "$out/serve.txt" | tail -n 4 | tee -a "$out/summary.txt"; grep -E "^(engine|http)" "$out/serve-trace.txt" | cut -c1-300 | head -6 | tee -a "$out/summary.txt"; }
  go wgkernels && { export KILN_WEBGPU_BACKEND=vulkan; $K 25 node dist/bench/webgpu-decode-kernels.js --json "$out/webgpu-decode-kernels.json" > "$out/webgpu-decode-kernels.txt" 2>&1
    el "webgpu decode kernels rc=$?"; tail -n 12 "$out/webgpu-decode-kernels.txt" | cut -c1-200 | tee -a "$out/summary.txt"; unset KILN_WEBGPU_BACKEND; }
  go pagedv2 && { KILN_CUDA_PAGED_ATTN=v2 $K 40 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 1,8,64 --new 128 --reps 2 \
      --json "$out/decode-v2.json" > "$out/decode-v2.txt" 2>&1
    el "cuda decode paged v2 rc=$?"; sum "$out/decode-v2.txt" "^decode +batch|rror" 4; }
  go wgbench && { export KILN_WEBGPU_BACKEND=vulkan; $K 90 node dist/src/cli/main.js bench --device webgpu --size full --dtype float32 float16 --workload all --include-slow --reps 10 --no-progress \
      --json "$out/kiln-webgpu.json" > "$out/kiln-webgpu.txt" 2>&1
    el "kiln bench webgpu rc=$?"; sum "$out/kiln-webgpu.txt" "^[a-z0-9.-]+ +webgpu|FAILED" 16; unset KILN_WEBGPU_BACKEND; }
  go robust && { export KILN_WEBGPU_BACKEND=vulkan; KILN_WEBGPU_ROBUSTNESS=1 $K 30 node dist/src/cli/main.js bench --device webgpu --size full --dtype float16 --workload mlp-2048x4096,mlp-64x512,conv-stack,elementwise-4096 --reps 10 --no-progress \
      --json "$out/wg-robust.json" > "$out/wg-robust.txt" 2>&1
    el "webgpu float16 robustness on rc=$?"; sum "$out/wg-robust.txt" "^[a-z0-9.-]+ +webgpu|FAILED" 4; unset KILN_WEBGPU_BACKEND; }
  go wgmath && { export KILN_WEBGPU_BACKEND=vulkan; $K 40 node dist/bench/webgpu-elementwise-math.js --json "$out/ew-math.json" > "$out/ew-math.txt" 2>&1
    el "webgpu elementwise math forms rc=$?"; tail -n 12 "$out/ew-math.txt" | cut -c1-200 | tee -a "$out/summary.txt"; unset KILN_WEBGPU_BACKEND; }

fi
tar -C "$out" -czf "$final/s15-$part.tgz" .
echo "=== summary"; cat "$out/summary.txt"
