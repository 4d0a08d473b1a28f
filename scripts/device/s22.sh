#!/usr/bin/env bash
# Session 22's device calls, from the repo root through .device/run.sh with dist/ built and carried
# (bash .device/run.sh bash scripts/device/s22.sh PART):
#   cpu   #17 cpu decode on the H200 machine's 16-core host: session 21's GEMV split and huge-page
#         weights (KILN_CPU_GEMV_SPLIT, KILN_CPU_HUGE_PAGES) off against on, bfloat16 and float32,
#         alternating in one process; the THP settings; the huge-page and GEMV tests
#   cpu1  the same A/B for each option alone (which one costs on a 16-core host)
#   wg    #20 webgpu float16 decode at batch 1: the GEMV at 4 columns a workgroup for N <= 2048
#         (KILN_WEBGPU_GEMV_COLS4_MAX_N=2048) against 8, alternating twice
#   pf    #17 cuda bfloat16 decode: the L2 weight prefetch during attention (KILN_CUDA_L2_PREFETCH)
#         off / on (24 MiB) / on with 32 MiB (the next layer's qkv too), alternating twice at batch 1;
#         off / on at batch 8 and 64; its cuda tests
#   cpupf #17 cpu decode on the 16-core host: idle pool workers prefetching the next weights
#         (KILN_CPU_WEIGHT_PREFETCH_MB 0 / 32 / 128), bfloat16 and float32, alternating in one process
#   trig  #17 cuda bfloat16 decode: the GEMVs' one-wave early PDL trigger alone (KILN_GEMV_PREFETCH=trigger)
#         against off, alternating, batch 1 three times, batch 8 and 64 once; the GEMV prefetch tests
#   final #17 the session's defaults on cuda (KILN_GEMV_PREFETCH=trigger) against =0 at batch 1, twice
#         alternating; batch 8 and 64 with the defaults; the cuda tests of the changed paths
#   skip  #17 where the cuda batch-1 decode step's graph replay goes, class by class: bench/cuda-profile.ts's
#         compiled_ms with each class of steps left out (KILN_CUDA_REPLAY_SKIP; measurement only), twice
#         alternating; the replay-skip and L2-prefetch tests
# A step starts only while the call is under its deadline (S22_DEADLINE s); logs and JSON under
# $OUT/s22-PART come back as one tarball, the summary printed last.
set -uo pipefail
part=${1:?usage: s22.sh cpu|cpu1|cpupf|wg|pf|trig|final|skip}
session=s22
source "$(dirname "$0")/session-lib.sh"
if [ "$part" = cpu ]; then
  cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag > "$out/thp.txt" 2>&1; el "thp: $(tr '\n' ' ' < "$out/thp.txt")"
  ab=KILN_CPU_GEMV_SPLIT,KILN_CPU_HUGE_PAGES
  go "cpu-ab" && { $K 240 node dist/bench/cpu-decode-bound.js --dtypes bfloat16,float32 --ab "$ab" --rounds 3 --steps 6 --json "$out/cpu-ab.json" > "$out/cpu-ab.txt" 2>&1
    el "cpu decode $ab off / on rc=$?"; tail -n 6 "$out/cpu-ab.txt" | tee -a "$out/summary.txt"; }
  go tests && { $K 120 node --test dist/test/cpu-huge-pages.test.js dist/test/native-gemv.test.js > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail)|^not ok" 10; }
elif [ "$part" = cpu1 ]; then
  for ab in KILN_CPU_HUGE_PAGES KILN_CPU_GEMV_SPLIT; do
    go "cpu-$ab" && { $K 200 node dist/bench/cpu-decode-bound.js --dtypes bfloat16,float32 --ab "$ab" --rounds 3 --steps 6 --json "$out/cpu-$ab.json" > "$out/cpu-$ab.txt" 2>&1
      el "cpu decode $ab off / on rc=$?"; tail -n 6 "$out/cpu-$ab.txt" | tee -a "$out/summary.txt"; }
  done
elif [ "$part" = wg ]; then
  for rep in 1 2; do wgdec c8-$rep; wgdec c4-$rep KILN_WEBGPU_GEMV_COLS4_MAX_N=2048; done
elif [ "$part" = pf ]; then
  for rep in 1 2; do cudadec pf0-$rep 1 KILN_CUDA_L2_PREFETCH=0; cudadec pf1-$rep 1 KILN_CUDA_L2_PREFETCH=attn; cudadec pf32-$rep 1 KILN_CUDA_L2_PREFETCH=attn KILN_CUDA_L2_PREFETCH_MB=32; done
  for b in 8 64; do cudadec pf0-b$b $b KILN_CUDA_L2_PREFETCH=0; cudadec pf1-b$b $b KILN_CUDA_L2_PREFETCH=attn; done
  for v in 0 attn; do # where the step's time goes, kernel by kernel (events between steps), off / on
    go prof-$v && { KILN_CUDA_L2_PREFETCH=$v $K 90 node dist/bench/cuda-profile.js qwen3-0.6b-decode-b1 bfloat16 --pos 256 > "$out/profile-$v.txt" 2>&1; el "profile b1 prefetch=$v rc=$?"; tail -n 25 "$out/profile-$v.txt" >> "$out/summary.txt"; }
  done
  go tests && { $K 200 node --test ${PF_TESTS:-dist/test/cuda-l2-prefetch.test.js} > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail)|^not ok" 10; }
elif [ "$part" = cpupf ]; then
  go cpupf && { $K 240 node dist/bench/cpu-decode-bound.js --dtypes bfloat16,float32 --vary KILN_CPU_WEIGHT_PREFETCH_MB=${PF_MB:-0,32,128} --rounds 3 --steps 6 --json "$out/cpupf.json" > "$out/cpupf.txt" 2>&1
    el "cpu decode weight prefetch rc=$?"; tail -n 8 "$out/cpupf.txt" | tee -a "$out/summary.txt"; }
  go tests && { $K 120 node --test dist/test/cpu-weight-prefetch.test.js dist/test/native-gemv.test.js > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail)|^not ok" 10; }
elif [ "$part" = trig ]; then
  for rep in 1 2 3; do cudadec t0-$rep 1 KILN_GEMV_PREFETCH=0; cudadec t1-$rep 1 KILN_GEMV_PREFETCH=trigger; done
  for b in 8 64; do cudadec t0-b$b $b KILN_GEMV_PREFETCH=0; cudadec t1-b$b $b KILN_GEMV_PREFETCH=trigger; done
  go tests && { $K 120 node --test dist/test/cuda-gemv-prefetch.test.js dist/test/cuda-gemv.test.js > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail)|^not ok" 10; }
elif [ "$part" = final ]; then
  for rep in 1 2; do cudadec f0-$rep 1 KILN_GEMV_PREFETCH=0; cudadec fd-$rep 1; done
  for b in 8 64; do cudadec fd-b$b $b; done
  go tests && { $K 200 node --test dist/test/cuda-gemv-prefetch.test.js dist/test/cuda-gemv.test.js dist/test/cuda-l2-prefetch.test.js dist/test/cuda-replay-skip.test.js dist/test/decode-runner.test.js > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail)|^not ok" 10; }
elif [ "$part" = skip ]; then
  classes=("" "reduce add+mul+mean" "extern llm.qkNormRotaryCache" "extern llm.pagedAttention" "extern linear" "extern llm.linearSiluAndMul" "extern linear|extern llm.linearSiluAndMul" "reduce add+mul+mean|extern llm.qkNormRotaryCache|extern llm.pagedAttention")
  for rep in 1 2; do
    for i in "${!classes[@]}"; do
      c=${classes[$i]}
      go skip$i-$rep && { KILN_CUDA_REPLAY_SKIP="$c" $K 60 node dist/bench/cuda-profile.js qwen3-0.6b-decode-b1 bfloat16 --pos 256 --json "$out/skip$i-$rep.json" > "$out/skip$i-$rep.txt" 2>&1
        el "skip[$i] '${c:-none}' rc=$? compiled_ms $(grep -o '"compiled_ms":[0-9.]*' "$out/skip$i-$rep.txt" | head -1 | cut -d: -f2) nodes $(grep -o '"lastNodeCount":[0-9]*' "$out/skip$i-$rep.txt" | head -1 | cut -d: -f2)"; }
    done
  done
  go tests && { $K 120 node --test dist/test/cuda-replay-skip.test.js dist/test/cuda-l2-prefetch.test.js > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail)|^not ok" 10; }
else
  el "unknown part $part"
fi
finish
