#!/usr/bin/env bash
# Session 19's device calls, each under the device tool's 600 s limit, from the repo root through
# .device/run.sh with dist/ built and carried (bash .device/run.sh bash scripts/device/s19.sh PART):
#   measure  #17 cpu: where a bfloat16 / float32 eager decode step's time goes on this 16-core host
#            (decode-profile by op, cpu-step-prof.mjs main thread: native calls vs JavaScript), the
#            fraction of the bound; #17 cuda: batch-1 decode with the add + RMSNorm GEMV prologue
#            (KILN_ADD_RMSNORM_LINEAR 0 / 1, alternating) under PDL, the batch-1 profile;
#            #20: webgpu float16 decode at batch 1 (the baseline for this session's changes)
#   probe    #17 cpu: the fixed cost of a GEMV call by size (gemv-sizes.mjs), per-op costs (cpu-op-costs.mjs)
#   ab       the session's changes against their off forms (set by S19_AB, see below), tests
#   fused    #20 webgpu paged attention in one dispatch A/B + tests; #17 cpu GEMV item size A/B
#   final    #20 webgpu q/k norm + rotary + cache in the attention workgroup A/B, fused attention at
#            batch 8, tests; the session's defaults on cuda and cpu
# A step starts only while the call is under its deadline (S19_DEADLINE s); logs and JSON under
# $OUT/s19-PART come back as one tarball, the summary printed last. nvidia-smi samples the clocks.
set -uo pipefail
part=${1:?usage: s19.sh measure|ab|final}
session=s19
source "$(dirname "$0")/session-lib.sh"
if [ "$part" = measure ]; then
  go cpuprof && { $K 100 node dist/bench/decode-profile.js --dtype bfloat16 --steps 8 --json "$out/cpu-profile-bf16.json" > "$out/cpu-profile-bf16.txt" 2>&1
    el "cpu decode profile bf16 rc=$?"; tail -n 18 "$out/cpu-profile-bf16.txt" | tee -a "$out/summary.txt"; }
  for dt in bfloat16; do
    go js$dt && { $K 90 node scripts/device/cpu-step-prof.mjs $dt 24 "$out/cpu-step-prof-$dt.json" > "$out/cpu-step-prof-$dt.txt" 2>&1
      el "cpu step main-thread profile $dt rc=$?"; tail -n 15 "$out/cpu-step-prof-$dt.txt" | tee -a "$out/summary.txt"; }
  done
  go cpubound && { $K 120 node dist/bench/cpu-decode-bound.js --rounds 3 --steps 6 --json "$out/cpu-bound.json" > "$out/cpu-bound.txt" 2>&1
    el "cpu decode vs bound rc=$?"; tail -n 3 "$out/cpu-bound.txt" | tee -a "$out/summary.txt"; }
  for rep in 1 2; do
    for arl in 0 1; do cudadec arl$arl-$rep 1 KILN_ADD_RMSNORM_LINEAR=$arl; done
  done
  go prof1 && { $K 110 node dist/bench/cuda-profile.js qwen3-0.6b-decode-b1 bfloat16 --pos 256 --top 30 --json "$out/cuda-profile-b1.json" > "$out/cuda-profile-b1.txt" 2>&1
    el "cuda profile decode b1 rc=$?"; head -n 40 "$out/cuda-profile-b1.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
  wgdec base
elif [ "$part" = probe ]; then
  # #17 cpu: the fixed cost of a GEMV call by weight size and thread count, per-op costs.
  for th in "" 1; do
    go gemv$th && { $K 100 node scripts/device/gemv-sizes.mjs 7 $th > "$out/gemv-sizes$th.txt" 2>&1; el "cpu GEMV call sizes threads=${th:-auto} rc=$?"; cat "$out/gemv-sizes$th.txt" | tee -a "$out/summary.txt"; }
  done
  go threads && { $K 150 node dist/bench/cpu-decode-bound.js --dtypes bfloat16 --threads ${S19_THREADS:-8,12,14,15,16} --rounds 3 --steps 6 --json "$out/cpu-threads.json" > "$out/cpu-threads.txt" 2>&1
    el "cpu decode bf16 by thread count rc=$?"; tail -n 7 "$out/cpu-threads.txt" | tee -a "$out/summary.txt"; }
  go opcost && { $K 100 node scripts/device/cpu-op-costs.mjs > "$out/op-costs.txt" 2>&1; el "cpu op costs rc=$?"; cat "$out/op-costs.txt" | tee -a "$out/summary.txt"; }
elif [ "$part" = ab ]; then
  # S19_AB: space-separated NAME=OPTION pairs, each off / on alternating, twice; S19_TESTS after.
  abpart "${S19_AB:-}" "${S19_TESTS:-}"
elif [ "$part" = fused ]; then
  # #20: webgpu paged attention in one dispatch (KILN_WEBGPU_PAGED_FUSED 0 / 1 alternating), with the
  # norm-prologue GEMV too, and its tests on the H200; #17 cpu: the GEMV's work item size.
  for rep in 1 2; do for v in 0 1; do wgdec fused$v-$rep KILN_WEBGPU_PAGED_FUSED=$v; done; done
  wgdec fused1-arl1 KILN_WEBGPU_PAGED_FUSED=1 KILN_ADD_RMSNORM_LINEAR=1
  go wgtests && { wg $K 150 node --test dist/test/webgpu-paged-fused.test.js dist/test/webgpu-paged.test.js > "$out/wg-tests.txt" 2>&1; el "webgpu paged tests rc=$?"; sum "$out/wg-tests.txt" "^# (tests|pass|fail)|^not ok" 10; }
  go gemvitems && { ITEMS=64,32,16,8 $K 100 node scripts/device/gemv-sizes.mjs 7 > "$out/gemv-items.txt" 2>&1; el "cpu GEMV by item size rc=$?"; cat "$out/gemv-items.txt" | tee -a "$out/summary.txt"; }
  go cpuitems && { $K 150 node dist/bench/cpu-decode-bound.js --dtypes bfloat16 --vary KILN_CPU_GEMV_ITEM_KIB=64,16 --rounds 4 --steps 6 --json "$out/cpu-items.json" > "$out/cpu-items.txt" 2>&1
    el "cpu decode bf16 by GEMV item size rc=$?"; tail -n 3 "$out/cpu-items.txt" | tee -a "$out/summary.txt"; }
elif [ "$part" = bound ]; then
  # #17 cpu: decode against a DRAM-sized probe (4x the last-level cache; the 256 MiB probe beside it).
  go bound && { $K 300 node dist/bench/cpu-decode-bound.js --rounds 4 --steps 6 --json "$out/cpu-bound.json" > "$out/cpu-bound.txt" 2>&1
    el "cpu decode vs DRAM-sized probe rc=$?"; tail -n 3 "$out/cpu-bound.txt" | tee -a "$out/summary.txt"; }
elif [ "$part" = cpu2 ]; then
  # #17 cpu: paged attention's key ranges across threads (KILN_CPU_PAGED_SPLIT) per call and in decode
  # at a long context, and the defaults against the bound.
  go opcost && { $K 120 node scripts/device/cpu-op-costs.mjs > "$out/op-costs.txt" 2>&1; el "cpu op costs rc=$?"; cat "$out/op-costs.txt" | tee -a "$out/summary.txt"; }
  go longctx && { $K 200 node dist/bench/cpu-decode-bound.js --dtypes bfloat16 --prompt 1536 --ab KILN_CPU_PAGED_SPLIT --rounds 3 --steps 5 --json "$out/cpu-long-split.json" > "$out/cpu-long-split.txt" 2>&1
    el "cpu decode bf16 at 1536 tokens, split off / on rc=$?"; tail -n 3 "$out/cpu-long-split.txt" | tee -a "$out/summary.txt"; }
  go bound && { $K 200 node dist/bench/cpu-decode-bound.js --rounds 4 --steps 6 --json "$out/cpu-bound.json" > "$out/cpu-bound.txt" 2>&1
    el "cpu decode vs bound (defaults) rc=$?"; tail -n 3 "$out/cpu-bound.txt" | tee -a "$out/summary.txt"; }
elif [ "$part" = wgprof ]; then
  # #20: where the webgpu batch-1 step goes now (host counters and GPU span with replays; per
  # dispatch device time without them).
  go wgprof && { wg $K 90 node dist/bench/webgpu-decode-profile.js --dtype float16 --steps 60 --stamp-steps 0 --json "$out/wgprof.json" > "$out/wgprof.txt" 2>&1
    el "webgpu decode profile rc=$?"; tail -n 3 "$out/wgprof.txt" | cut -c1-1500 | tee -a "$out/summary.txt"; }
  go wgstamps && { KILN_WEBGPU_REPLAY=0 wg $K 120 node dist/bench/webgpu-decode-profile.js --dtype float16 --steps 6 --stamp-steps 4 --json "$out/wgprof-stamps.json" > "$out/wgprof-stamps.txt" 2>&1
    el "webgpu decode profile with stamps rc=$?"; tail -n 40 "$out/wgprof-stamps.txt" | cut -c1-300 | tee -a "$out/summary.txt"; }
elif [ "$part" = arl ]; then
  # #20: the add + RMSNorm GEMV prologue on webgpu with this session's dispatch fusions (203 -> 146
  # dispatches a step), three alternating pairs.
  for rep in 1 2 3; do for v in 0 1; do wgdec arl$v-$rep KILN_ADD_RMSNORM_LINEAR=$v; done; done
elif [ "$part" = last ]; then
  # The session's last defaults: webgpu decode at batch 1 three times (the add + RMSNorm prologue now
  # on by default there), batch 8 once; webgpu and cuda tests of the changed paths.
  for rep in 1 2 3; do wgdec last-$rep; done
  WGB=8 wgdec last-b8
  go wgtests && { wg $K 200 node --test ${S19_TESTS:-} > "$out/wg-tests.txt" 2>&1; el "webgpu tests rc=$?"; sum "$out/wg-tests.txt" "^# (tests|pass|fail)|^not ok" 10; }
  go cudatests && { $K 200 node --test ${S19_CUDA_TESTS:-} > "$out/cuda-tests.txt" 2>&1; el "cuda tests rc=$?"; sum "$out/cuda-tests.txt" "^# (tests|pass|fail)|^not ok" 10; }
  cudadec last 1
elif [ "$part" = b8 ]; then
  # #20: the add + RMSNorm prologue at batch 8 on webgpu (8-row GEMVs), two alternating pairs.
  for rep in 1 2; do for v in 0 1; do WGB=8 wgdec b8-arl$v-$rep KILN_ADD_RMSNORM_LINEAR=$v; done; done
elif [ "$part" = qkv ]; then
  # #17 cpu: q, k, v in one GEMV job (KILN_DECODE_QKV off / on alternating in one process).
  go qkv && { $K 200 node dist/bench/cpu-decode-bound.js --dtypes bfloat16,float32 --ab KILN_DECODE_QKV --rounds 3 --steps 6 --json "$out/cpu-qkv.json" > "$out/cpu-qkv.txt" 2>&1
    el "cpu decode KILN_DECODE_QKV off / on rc=$?"; tail -n 5 "$out/cpu-qkv.txt" | tee -a "$out/summary.txt"; }
elif [ "$part" = final ]; then
  # #20: q/k norm + rotary + cache write inside the fused paged-attention workgroup
  # (KILN_WEBGPU_QK_ATTN 0 / 1 alternating), the fused attention at batch 8, their tests;
  # #17: the session's defaults on cuda (batch 1 / 8 / 64) and cpu (against the bound).
  for rep in 1 2; do for v in 0 1; do wgdec qk$v-$rep KILN_WEBGPU_QK_ATTN=$v; done; done
  for v in 0 1; do WGB=8 wgdec b8-fused$v KILN_WEBGPU_PAGED_FUSED=$v; done
  go wgtests && { wg $K 200 node --test ${S19_TESTS:-dist/test/webgpu-qk-attn.test.js dist/test/webgpu-paged-fused.test.js} > "$out/wg-tests.txt" 2>&1; el "webgpu tests rc=$?"; sum "$out/wg-tests.txt" "^# (tests|pass|fail)|^not ok" 10; }
  cudadec final 1,8,64
  go cpubound && { $K 150 node dist/bench/cpu-decode-bound.js --rounds 3 --steps 6 --json "$out/cpu-bound.json" > "$out/cpu-bound.txt" 2>&1
    el "cpu decode vs bound rc=$?"; tail -n 3 "$out/cpu-bound.txt" | tee -a "$out/summary.txt"; }
fi
finish
