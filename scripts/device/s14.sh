#!/usr/bin/env bash
# Session 14's device calls, each under the device tool's 600 s limit, from the repo root through
# .device/run.sh with dist/ built and carried:
#   bash .device/run.sh bash scripts/device/s14.sh cuda     # #17: paged attention v2, MoE decode form, decode A/Bs
#   bash .device/run.sh bash scripts/device/s14.sh serve    # #17 serve start and HTTP overlap; #20 float16 GEMM plan sweep
# Every step has its own cap; logs and JSON under $OUT/s14 come back as one tarball, a summary last.
set -uo pipefail
part=${1:?usage: s14.sh cuda}
final=${OUT:-/tmp/out}; out=$final/s14-$part; mkdir -p "$out"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$out/summary.txt"; }
sum() { grep -hE "$2" "$1" | head -${3:-8} | cut -c1-300 | tee -a "$out/summary.txt"; }
export KILN_CACHE_DIR=/tmp/kiln-cache
# moe_decode MAXPAIRS:BATCHES ...: the MoE decode rows under each KILN_MOE_GEMV_MAX_PAIRS.
moe_decode() {
  local run mp b
  for run in "$@"; do
    mp=${run%%:*}; b=${run#*:}
    KILN_MOE_GEMV_MAX_PAIRS=$mp timeout 70 node dist/bench/decode.js --config qwen3-30b-a3b-4l --device cuda --dtype bfloat16 --batches $b --new 128 --reps 2 \
      --json "$out/decode-moe-$mp.json" > "$out/decode-moe-$mp.txt" 2>&1
    el "moe decode maxpairs=$mp batches=$b rc=$?"; sum "$out/decode-moe-$mp.txt" "^decode +batch|rror" 4
  done
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > "$out/gpu.txt" 2>&1
if [ "$part" = cuda ]; then
  timeout 150 node --test dist/test/cuda-paged-attention.test.js dist/test/llm-moe-cuda.test.js dist/test/decode-runner.test.js dist/test/llm-contracts.test.js > "$out/tests.txt" 2>&1
  el "tests rc=$?"; sum "$out/tests.txt" "^# (pass|fail|skipped)|^not ok" 12
  timeout 60 node dist/bench/cuda-paged-attention.js --json "$out/pa.json" > "$out/pa.txt" 2>&1
  el "paged attention bench rc=$?"; tail -n 20 "$out/pa.txt" | cut -c1-200 | tee -a "$out/summary.txt"
  for v in v2 v1; do
    KILN_CUDA_PAGED_ATTN=$v timeout 75 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 1,8,64 --new 128 --reps 2 \
      --json "$out/decode-$v.json" > "$out/decode-$v.txt" 2>&1
    el "decode attn=$v rc=$?"; sum "$out/decode-$v.txt" "^decode +batch|rror" 4
  done
  timeout 50 node dist/bench/cuda-profile.js qwen3-0.6b-decode-b1 bfloat16 --top 30 --json "$out/profile-b1.json" > "$out/profile-b1.txt" 2>&1
  el "profile b1 rc=$?"; head -n 16 "$out/profile-b1.txt" | cut -c1-200 | tee -a "$out/summary.txt"
  # KILN_MOE_GEMV_MAX_PAIRS: 64 (default; batch 1 = 8 pairs on the decode form, batch 32 = 256 pairs
  # grouped), 256 (batch 32 on the decode form), 0 (batch 1 grouped: the decode form's A/B).
  moe_decode 64:1,32 256:32 0:1
elif [ "$part" = final ]; then
  # After the first call (pagedAttention v2 failed its graph test and hung its benchmark; reverted):
  # #17 MoE decode form A/B, serve start and HTTP overlap A/B; #20 vectorised pointwise tests and A/B.
  moe_decode 64:1,32 0:1
  timeout 80 node dist/bench/serve.js --config qwen3-0.6b --device cuda --dtype bfloat16 --prompt 128 --start-only --reps 2 \
    --json "$out/serve-start.json" > "$out/serve-start.txt" 2>&1
  el "serve start rc=$?"; grep -vE "^\s*$" "$out/serve-start.txt" | tail -n 3 | cut -c1-400 | tee -a "$out/summary.txt"
  timeout 130 node dist/bench/serve.js --config qwen3-0.6b --device cuda --dtype bfloat16 --clients 16 --prompt 128 --new 128 --reps 2 --overlap on,off --no-start \
    --json "$out/serve.json" > "$out/serve.txt" 2>&1
  el "serve throughput rc=$?"; grep -vE "^\s*$" "$out/serve.txt" | tail -n 3 | cut -c1-300 | tee -a "$out/summary.txt"
  export KILN_WEBGPU_BACKEND=vulkan
  timeout 60 node --test dist/test/webgpu-vector-pointwise.test.js dist/test/webgpu-int64.test.js > "$out/wgvec-tests.txt" 2>&1
  el "webgpu vector pointwise + int64 tests rc=$?"; sum "$out/wgvec-tests.txt" "^# (pass|fail|skipped)|^not ok" 6
  timeout 60 node dist/bench/webgpu-elementwise-vec.js --json "$out/ew-vec.json" > "$out/ew-vec.txt" 2>&1
  el "elementwise vec bench rc=$?"; grep -vE '^\{"dtype"' "$out/ew-vec.txt" | tail -n 14 | cut -c1-200 | tee -a "$out/summary.txt"
  for v in 1 0; do
    KILN_WEBGPU_VEC_POINTWISE=$v timeout 45 node dist/src/cli/main.js bench --device webgpu --workload elementwise-4096 --dtype float32 float16 --no-progress \
      --json "$out/ew-bench-vec$v.json" > "$out/ew-bench-vec$v.txt" 2>&1
    el "kiln bench elementwise-4096 vec=$v rc=$?"; sum "$out/ew-bench-vec$v.txt" "elementwise|FAILED" 4
  done
elif [ "$part" = verify ]; then
  # #20 with shader robustness off by default (KILN_WEBGPU_ROBUSTNESS): GPU tests of the webgpu
  # kernels, kiln bench rows of every workload (float32, float16), the GEMM shapes, float16 decode.
  export KILN_WEBGPU_BACKEND=vulkan
  timeout 110 node --test dist/test/webgpu-subgroup-matrix.test.js dist/test/webgpu-linalg.test.js dist/test/webgpu-pointwise.test.js dist/test/webgpu-vector-pointwise.test.js dist/test/webgpu-llm.test.js dist/test/webgpu-generate.test.js > "$out/webgpu-tests.txt" 2>&1
  el "webgpu tests rc=$?"; sum "$out/webgpu-tests.txt" "^# (pass|fail|skipped)|^not ok" 8
  timeout 35 node scripts/bench-webgpu-matmul.mjs dist --shapes float16:8192:8192:8192,float16:4096:4096:4096,float32:4096:4096:4096 > "$out/matmul.jsonl" 2> "$out/matmul.err"
  el "matmul rc=$?"; sum "$out/matmul.jsonl" "tflops" 3
  timeout 120 node dist/src/cli/main.js bench --device webgpu --size full --dtype float32 float16 --workload all --include-slow --reps 20 --no-progress \
    --json "$out/kiln-webgpu.json" > "$out/kiln-webgpu.txt" 2>&1
  el "kiln bench webgpu rc=$?"; sum "$out/kiln-webgpu.txt" "webgpu:0|FAILED" 16
  timeout 50 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 2 --json "$out/webgpu-decode-f16.json" > "$out/webgpu-decode-f16.txt" 2>&1
  el "webgpu decode float16 rc=$?"; sum "$out/webgpu-decode-f16.txt" "^decode +batch|rror" 3
elif [ "$part" = mini ]; then
  # What the device budget left allows: robustness off by default, checked by the webgpu tests on the GPU.
  export KILN_WEBGPU_BACKEND=vulkan
  timeout 90 node --test dist/test/webgpu-llm.test.js dist/test/webgpu-pointwise.test.js dist/test/webgpu-linalg.test.js dist/test/webgpu-generate.test.js > "$out/webgpu-tests.txt" 2>&1
  el "webgpu tests (robustness off) rc=$?"; sum "$out/webgpu-tests.txt" "^# (pass|fail|skipped)|^not ok" 8
  timeout 25 node scripts/bench-webgpu-matmul.mjs dist --shapes float16:8192:8192:8192,float32:4096:4096:4096 > "$out/matmul.jsonl" 2> "$out/matmul.err"
  el "matmul rc=$?"; sum "$out/matmul.jsonl" "tflops" 2
elif [ "$part" = serve ]; then
  # #17 serve: start to first token (cold, then 3 warm starts), HTTP vs engine with the write overlap on and off.
  timeout 150 node dist/bench/serve.js --config qwen3-0.6b --device cuda --dtype bfloat16 --prompt 128 --start-only --reps 3 \
    --json "$out/serve-start.json" > "$out/serve-start.txt" 2>&1
  el "serve start rc=$?"; grep -vE "^\s*$" "$out/serve-start.txt" | tail -n 4 | cut -c1-300 | tee -a "$out/summary.txt"
  timeout 170 node dist/bench/serve.js --config qwen3-0.6b --device cuda --dtype bfloat16 --clients 16 --prompt 128 --new 128 --reps 3 --overlap on,off --no-start \
    --json "$out/serve.json" > "$out/serve.txt" 2>&1
  el "serve throughput rc=$?"; grep -vE "^\s*$" "$out/serve.txt" | tail -n 4 | cut -c1-300 | tee -a "$out/summary.txt"
  # #20 float16 subgroup-matrix GEMM plans (its own cap, about 3.8 min).
  OUT="$out" bash scripts/device/wggemm-sweep.sh > "$out/wggemm.txt" 2>&1
  el "wggemm sweep rc=$?"; tail -n 14 "$out/wggemm.txt" | cut -c1-200 | tee -a "$out/summary.txt"
fi
tar -C "$out" -czf "$final/s14-$part.tgz" .
echo "=== summary"; cat "$out/summary.txt"
