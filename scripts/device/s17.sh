#!/usr/bin/env bash
# Session 17's device calls, each under the device tool's 600 s limit, from the repo root through
# .device/run.sh with dist/ built and carried:
#   bash .device/run.sh bash scripts/device/s17.sh measure   # #17: where the cuda decode step's device
#       time goes kernel by kernel inside the replayed CUDA graph (Nsight Systems, graph nodes traced)
#       at batch 1 / 8 / 64; the tensor-core skinny GEMM's configurations at 8 rows
# A step starts only while the call is under its deadline (S17_DEADLINE s), so the tail is what gets cut;
# logs and JSON under $OUT/s17-PART come back as one tarball, the summary printed last.
set -uo pipefail
part=${1:?usage: s17.sh measure|...}
final=${OUT:-/tmp/out}; out=$final/s17-$part; mkdir -p "$out"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$out/summary.txt"; }
sum() { grep -hE "$2" "$1" | head -${3:-8} | cut -c1-300 | tee -a "$out/summary.txt"; }
dl=${S17_DEADLINE:-430}
go() { if [ $(( $(date +%s) - t0 )) -ge $dl ]; then el "skip $1 (deadline)"; return 1; fi; }
K="timeout -k 5"
export KILN_CACHE_DIR=/tmp/kiln-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > "$out/gpu.txt" 2>&1
wg() { KILN_WEBGPU_BACKEND=vulkan "$@"; }
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda*/nsight-systems*/bin/nsys 2>/dev/null | head -1)
if [ "$part" = measure ]; then
  el "nsys: ${NSYS:-none}; ncu: $(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || echo none)"
  if [ -n "$NSYS" ]; then
    for b in 1 8 64; do
      go nsys$b && { $K 120 "$NSYS" profile -t cuda --cuda-graph-trace=node -o "$out/decode-b$b" --force-overwrite true \
          node dist/bench/decode.js --device cuda --dtype bfloat16 --batches $b --new 64 --reps 1 --no-bound > "$out/nsys-b$b.txt" 2>&1
        el "nsys decode b$b rc=$?"; sum "$out/nsys-b$b.txt" "^decode +batch|rror" 2
        $K 60 "$NSYS" stats -r cuda_gpu_kern_sum -f csv -o "$out/kern-b$b" "$out/decode-b$b.nsys-rep" > "$out/stats-b$b.txt" 2>&1
        el "nsys stats b$b rc=$?"; head -n 14 "$out"/kern-b${b}*.csv | cut -c1-220 | tee -a "$out/summary.txt"
        rm -f "$out/decode-b$b.nsys-rep" "$out/decode-b$b.sqlite"; }
    done
  fi
  go mmasweep && { $K 150 node dist/bench/cuda-mma-gemv.js --rows 8 --json "$out/mma-sweep.json" > "$out/mma-sweep.txt" 2>&1
    el "mma sweep rows 8 rc=$?"; tail -n 40 "$out/mma-sweep.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
elif [ "$part" = wg1 ]; then
  # #20 (helper wgrow): the one-row kernel microbench (why [1, 1024] add + RMSNorm took 15-18 us),
  # register-resident 'workgroup' reductions (KILN_WEBGPU_REDUCE_REGISTERS 8 vs 0): their tests on
  # the H200, kernel rows, decode A/B alternating; #17: cuda decode b1/b8 with the M = 8 config rule.
  go rowbench && { wg $K 120 node scripts/device/wg-rowbench.mjs --json "$out/rowbench.json" > "$out/rowbench.txt" 2>&1
    el "wg-rowbench rc=$?"; grep -vE "^\s*$" "$out/rowbench.txt" | tail -n 45 | cut -c1-160 | tee -a "$out/summary.txt"; }
  go wgtests && { wg $K 90 node --test dist/test/webgpu-reduce-registers.test.js dist/test/webgpu-reduce-unroll.test.js > "$out/wg-tests.txt" 2>&1
    el "webgpu reduce tests rc=$?"; sum "$out/wg-tests.txt" "^# (pass|fail|skipped|todo)|^not ok" 10; }
  for r in 8 0; do
    go wgk$r && { KILN_WEBGPU_REDUCE_REGISTERS=$r wg $K 40 node dist/bench/webgpu-decode-kernels.js --only Norm --json "$out/wgk-reg$r.json" > "$out/wgk-reg$r.txt" 2>&1
      el "webgpu norm kernels REDUCE_REGISTERS=$r rc=$?"; grep -vE "^\s*$" "$out/wgk-reg$r.txt" | tail -n 8 | cut -c1-160 | tee -a "$out/summary.txt"; }
  done
  for rep in 1 2; do
    for r in 8 0; do
      go wgdec$r-$rep && { KILN_WEBGPU_REDUCE_REGISTERS=$r wg $K 45 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 2 \
          --json "$out/decode-webgpu-reg$r-$rep.json" > "$out/decode-webgpu-reg$r-$rep.txt" 2>&1
        el "webgpu decode f16 REDUCE_REGISTERS=$r rep $rep rc=$?"; sum "$out/decode-webgpu-reg$r-$rep.txt" "^decode +batch|rror" 2; }
    done
  done
  go cudadec && { $K 70 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 1,8 --new 256 --reps 2 \
      --json "$out/decode-cuda.json" > "$out/decode-cuda.txt" 2>&1
    el "cuda decode b1/b8 rc=$?"; sum "$out/decode-cuda.txt" "^decode +batch|rror" 4; }
elif [ "$part" = ab3 ]; then
  # #17 (helper attn64): paged attention v3 on the H200: its tests, the kernel bench v1 vs v3 and
  # batch-64 pins, decode v1 vs v3 (b1/8/64); #20: webgpu decode with async steps on vs off.
  go attntest && { $K 170 node --test dist/test/cuda-paged-attention.test.js > "$out/attn-test.txt" 2>&1
    el "test cuda-paged-attention rc=$?"; sum "$out/attn-test.txt" "^# (pass|fail|skipped)|not ok|rror" 12; }
  go attnbench && { $K 100 node dist/bench/cuda-paged-attention.js --json "$out/attn-bench.json" > "$out/attn-bench.txt" 2>&1
    el "bench v1 vs v3 rc=$?"; tail -n 30 "$out/attn-bench.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
  go attn64 && { $K 90 node dist/bench/cuda-paged-attention.js --batch 64 --context 256,128-384 --kernels v1,v3,v3:s2,v3:u2,v3:u4,v2 --json "$out/attn-bench64.json" > "$out/attn-bench64.txt" 2>&1
    el "bench batch 64 pins rc=$?"; tail -n 22 "$out/attn-bench64.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
  for v in v3 v1; do
    go dec-$v && { KILN_CUDA_PAGED_ATTN=$v $K 80 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 1,8,64 --new 256 --reps 2 \
        --json "$out/decode-$v.json" > "$out/decode-$v.txt" 2>&1
      el "decode KILN_CUDA_PAGED_ATTN=$v rc=$?"; sum "$out/decode-$v.txt" "^decode +batch|rror" 4; }
  done
  for rep in 1 2; do
    go wgasync$rep && { wg $K 60 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 2 --async on,off \
        --json "$out/decode-webgpu-async-$rep.json" > "$out/decode-webgpu-async-$rep.txt" 2>&1
      el "webgpu decode f16 async on,off rep $rep rc=$?"; sum "$out/decode-webgpu-async-$rep.txt" "^decode +batch|rror" 3; }
  done
elif [ "$part" = ab4 ]; then
  # Helpers' work merged for measurement (dev17): cuda tests of mma-skinny (9..64 rows) and paged
  # attention v3; webgpu tests of the register forms, the norm-prologue GEMV (addRmsNormLinear) and
  # async steps; decode A/Bs on cuda (default vs v3 + skinny, and each alone at batch 64) and webgpu
  # (KILN_ADD_RMSNORM_LINEAR 0/1, each with async steps on and off); kernel benches last.
  go tests && {
    ( $K 200 node --test --test-concurrency=1 dist/test/cuda-mma-skinny.test.js dist/test/cuda-paged-attention.test.js > "$out/cuda-tests.txt" 2>&1; echo "rc=$?" >> "$out/cuda-tests.txt" ) &
    ( wg $K 200 node --test --test-concurrency=1 dist/test/webgpu-add-rms-norm-linear.test.js dist/test/webgpu-add-rms-norm-linear-decode.test.js \
        dist/test/webgpu-rotary-registers.test.js dist/test/webgpu-reduce-registers.test.js dist/test/webgpu-qk-norm-rotary-cache.test.js > "$out/wg-tests.txt" 2>&1; echo "rc=$?" >> "$out/wg-tests.txt"
      wg $K 60 node --test --test-name-pattern "webgpu|cuda, compiled" dist/test/engine-async.test.js > "$out/async-tests.txt" 2>&1; echo "rc=$?" >> "$out/async-tests.txt" ) &
    wait
    el "tests"; for f in cuda-tests wg-tests async-tests; do echo "-- $f" | tee -a "$out/summary.txt"; sum "$out/$f.txt" "^# (pass|fail|skipped|todo)|^not ok|^rc=" 10; done; }
  for v in base new; do
    case $v in base) e=(KILN_CUDA_PAGED_ATTN=v1);; new) e=(KILN_CUDA_PAGED_ATTN=v3 KILN_MMA_SKINNY_MAX_ROWS=64);; esac
    go dec-$v && { env "${e[@]}" $K 80 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 1,8,64 --new 256 --reps 2 \
        --json "$out/decode-cuda-$v.json" > "$out/decode-cuda-$v.txt" 2>&1
      el "cuda decode ${e[*]} rc=$?"; sum "$out/decode-cuda-$v.txt" "^decode +batch|rror" 4; }
  done
  for v in v3 skinny; do
    case $v in v3) e=(KILN_CUDA_PAGED_ATTN=v3);; skinny) e=(KILN_MMA_SKINNY_MAX_ROWS=64);; esac
    go dec64-$v && { env "${e[@]}" $K 50 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 64 --new 256 --reps 2 \
        --json "$out/decode-cuda64-$v.json" > "$out/decode-cuda64-$v.txt" 2>&1
      el "cuda decode b64 ${e[*]} rc=$?"; sum "$out/decode-cuda64-$v.txt" "^decode +batch|rror" 2; }
  done
  for arl in 1 0; do
    go wg-arl$arl && { KILN_ADD_RMSNORM_LINEAR=$arl wg $K 60 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 2 --async on,off \
        --json "$out/decode-webgpu-arl$arl.json" > "$out/decode-webgpu-arl$arl.txt" 2>&1
      el "webgpu decode f16 KILN_ADD_RMSNORM_LINEAR=$arl async on,off rc=$?"; sum "$out/decode-webgpu-arl$arl.txt" "^decode +batch|rror" 3; }
  done
  go mmabench && { $K 90 node dist/bench/cuda-mma-gemv.js --rows 64 --no-sweep --json "$out/mma-bench64.json" > "$out/mma-bench64.txt" 2>&1
    el "mma bench rows 64 rc=$?"; grep -E "skinny|cublaslt|^M=" "$out/mma-bench64.txt" | head -20 | cut -c1-160 | tee -a "$out/summary.txt"; }
  go attn64 && { $K 70 node dist/bench/cuda-paged-attention.js --batch 64 --context 256,128-384 --kernels v1,v3,v3:s2,v3:u4 --json "$out/attn-bench64.json" > "$out/attn-bench64.txt" 2>&1
    el "attention bench batch 64 rc=$?"; tail -n 12 "$out/attn-bench64.txt" | cut -c1-160 | tee -a "$out/summary.txt"; }
  go wgk && { KILN_ADD_RMSNORM_LINEAR=1 wg $K 40 node dist/bench/webgpu-decode-kernels.js --only addRmsNorm --json "$out/wgk-arl.json" > "$out/wgk-arl.txt" 2>&1
    el "webgpu addRmsNorm(+linear) kernel rows rc=$?"; grep -vE "^\s*$" "$out/wgk-arl.txt" | tail -n 10 | cut -c1-160 | tee -a "$out/summary.txt"; }
elif [ "$part" = final ]; then
  # The session's defaults (paged attention v3, register-resident webgpu one-row kernels, the cpu
  # decode fusions and GEMV stream order): paged attention tests on cuda (three processes by test
  # name, each with its own kernel cache), the cpu kernels' tests on the 16-core host, final cuda
  # decode, cpu decode against the bound (the cpubf16 options all off vs all on), webgpu decode
  # with KILN_ADD_RMSNORM_LINEAR 0 / 1 alternating.
  go tests && {
    i=0
    for pat in "batch 1, Qwen3|GQA ratios" "batches 8 and 64|in a CUDA graph|is reported" "v3 on cuda"; do
      i=$((i+1)); ( KILN_CACHE_DIR=/tmp/kiln-cache-$i $K 190 node --test --test-name-pattern "$pat" dist/test/cuda-paged-attention.test.js > "$out/attn-test-$i.txt" 2>&1; echo "rc=$?" >> "$out/attn-test-$i.txt" ) &
    done
    ( wg $K 150 node --test dist/test/webgpu-add-rms-norm-linear.test.js dist/test/webgpu-add-rms-norm-linear-decode.test.js > "$out/wg-tests.txt" 2>&1; echo "rc=$?" >> "$out/wg-tests.txt" ) &
    ( $K 150 node --test dist/test/native-gemv.test.js dist/test/llm-gate-up-silu-mul.test.js dist/test/llm-qk-norm-rotary-cache.test.js > "$out/cpu-tests.txt" 2>&1; echo "rc=$?" >> "$out/cpu-tests.txt" ) &
    wait
    el "tests"; for f in attn-test-1 attn-test-2 attn-test-3 cpu-tests wg-tests; do echo "-- $f" | tee -a "$out/summary.txt"; sum "$out/$f.txt" "^# (pass|fail|skipped|todo)|^not ok|^rc=" 8; done; }
  go cpubound && { $K 110 node dist/bench/cpu-decode-bound.js --rounds 2 --steps 4 --ab KILN_DECODE_QK_CACHE,KILN_DECODE_GATE_UP,KILN_CPU_GEMV_STREAM --json "$out/cpu-bound.json" > "$out/cpu-bound.txt" 2>&1
    el "cpu decode bound (cpubf16 options off vs on) rc=$?"; tail -n 8 "$out/cpu-bound.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
  go decode && { $K 80 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 1,8,64 --new 256 --reps 2 \
      --json "$out/decode-cuda.json" > "$out/decode-cuda.txt" 2>&1
    el "cuda decode (defaults) rc=$?"; sum "$out/decode-cuda.txt" "^decode +batch|^ttft|rror" 6; }
  for arl in 0 1; do
    go wg-arl$arl && { KILN_ADD_RMSNORM_LINEAR=$arl wg $K 45 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 2 \
        --json "$out/decode-webgpu-arl$arl.json" > "$out/decode-webgpu-arl$arl.txt" 2>&1
      el "webgpu decode f16 KILN_ADD_RMSNORM_LINEAR=$arl rc=$?"; sum "$out/decode-webgpu-arl$arl.txt" "^decode +batch|rror" 2; }
  done
  for arl in 0 1; do
    go wgprof$arl && { KILN_ADD_RMSNORM_LINEAR=$arl wg $K 50 node dist/bench/webgpu-decode-profile.js --dtype float16 --steps 40 --stamp-steps 0 --json "$out/wgprof-arl$arl.json" > "$out/wgprof-arl$arl.txt" 2>&1
      el "webgpu decode profile (host counters) KILN_ADD_RMSNORM_LINEAR=$arl rc=$?"; tail -n 3 "$out/wgprof-arl$arl.txt" | cut -c1-600 | tee -a "$out/summary.txt"; }
  done
fi
tar -C "$out" -czf "$final/s17-$part.tgz" .
echo "=== summary"; cat "$out/summary.txt"
