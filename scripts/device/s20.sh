#!/usr/bin/env bash
# Session 19's device calls, each under the device tool's 600 s limit, from the repo root through
# .device/run.sh with dist/ built and carried (bash .device/run.sh bash scripts/device/s20.sh PART):
#   measure  #17 cpu: where a bfloat16 / float32 eager decode step's time goes on this 16-core host
#            (decode-profile by op, cpu-step-prof.mjs main thread: native calls vs JavaScript), the
#            fraction of the bound; #17 cuda: batch-1 decode with the add + RMSNorm GEMV prologue
#            (KILN_ADD_RMSNORM_LINEAR 0 / 1, alternating) under PDL, the batch-1 profile;
#            #20: webgpu float16 decode at batch 1 (the baseline for this session's changes)
#   probe    #17 cpu: the fixed cost of a GEMV call by size (gemv-sizes.mjs), per-op costs (cpu-op-costs.mjs)
#   lanes    #20: the lanes form of paged decode attention A/B, kernel rows, batch 8, tests
#   ab       the session's changes against their off forms (set by S20_AB, see below), tests
#   fused    #20 webgpu paged attention in one dispatch A/B + tests; #17 cpu GEMV item size A/B
#   final    #20 webgpu q/k norm + rotary + cache in the attention workgroup A/B, fused attention at
#            batch 8, tests; the session's defaults on cuda and cpu
# A step starts only while the call is under its deadline (S20_DEADLINE s); logs and JSON under
# $OUT/s20-PART come back as one tarball, the summary printed last. nvidia-smi samples the clocks.
set -uo pipefail
part=${1:?usage: s20.sh measure|lanes|gemv|measure2|hg|fab|fab2|ab|last}
session=s20
source "$(dirname "$0")/session-lib.sh"
if [ "$part" = measure ]; then
  wgdec base
  for sk in paged gemv reduce argmax gather; do wgdec skip-$sk KILN_WEBGPU_REPLAY_SKIP=$sk; done
  wgdec base2
  go pagedk && { wg $K 120 node dist/bench/webgpu-decode-kernels.js --only pagedAttention --capacity ${S20_CAP:-512} --context 300 --json "$out/paged-kernels.json" > "$out/paged-kernels.txt" 2>&1
    el "webgpu paged kernels rc=$?"; tail -n 6 "$out/paged-kernels.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
  go qkv && { $K 200 node dist/bench/cpu-decode-bound.js --dtypes bfloat16 --ab KILN_DECODE_QKV --rounds 3 --steps 6 --json "$out/cpu-qkv.json" > "$out/cpu-qkv.txt" 2>&1
    el "cpu decode KILN_DECODE_QKV off / on rc=$?"; tail -n 5 "$out/cpu-qkv.txt" | tee -a "$out/summary.txt"; }
  cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag > "$out/thp.txt" 2>&1; el "thp: $(tr '\n' ' ' < "$out/thp.txt")"
elif [ "$part" = lanes ]; then
  # #20: the lanes form of webgpu paged decode attention (KILN_WEBGPU_PAGED_LANES=0 against the
  # default, alternating), kernel rows by workgroup size, batch 8, its tests on the H200.
  go pagedk && { wg $K 120 node dist/bench/webgpu-decode-kernels.js --only pagedAttention --capacity ${S20_CAP:-512} --context 300 --json "$out/paged-kernels.json" > "$out/paged-kernels.txt" 2>&1
    el "webgpu paged kernels rc=$?"; tail -n 8 "$out/paged-kernels.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
  for rep in 1 2 3; do wgdec lanes0-$rep KILN_WEBGPU_PAGED_LANES=0; wgdec lanes1-$rep; done
  WGB=8 wgdec b8-lanes0 KILN_WEBGPU_PAGED_LANES=0; WGB=8 wgdec b8-lanes1
  wgdec lanes1-wg256 KILN_WEBGPU_PAGED_LANES_WG=256
  go wgtests && { wg $K 200 node --test ${S20_TESTS:-dist/test/webgpu-paged-fused.test.js dist/test/webgpu-qk-attn.test.js} > "$out/wg-tests.txt" 2>&1; el "webgpu tests rc=$?"; sum "$out/wg-tests.txt" "^# (tests|pass|fail)|^not ok" 10; }
elif [ "$part" = gemv ]; then
  # #20: the webgpu GEMV's K-following unroll and subgroup team sums (KILN_WEBGPU_GEMV_UNROLL=4
  # KILN_WEBGPU_GEMV_TEAM_SUBGROUP=0: the earlier kernel) against the defaults, alternating; each alone; tests.
  go gemvk && { wg $K 120 node dist/bench/webgpu-decode-kernels.js --only gemv --json "$out/gemv-kernels.json" > "$out/gemv-kernels.txt" 2>&1
    el "webgpu gemv kernels rc=$?"; grep -E "^gemv" "$out/gemv-kernels.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
  for rep in 1 2 3; do wgdec old-$rep KILN_WEBGPU_GEMV_UNROLL=4 KILN_WEBGPU_GEMV_TEAM_SUBGROUP=0; wgdec new-$rep; done
  wgdec unroll-only KILN_WEBGPU_GEMV_TEAM_SUBGROUP=0; wgdec tsg-only KILN_WEBGPU_GEMV_UNROLL=4
  WGB=8 wgdec b8-old KILN_WEBGPU_GEMV_UNROLL=4 KILN_WEBGPU_GEMV_TEAM_SUBGROUP=0; WGB=8 wgdec b8-new
  go wgtests && { wg $K 240 node --test ${S20_TESTS} > "$out/wg-tests.txt" 2>&1; el "webgpu tests rc=$?"; sum "$out/wg-tests.txt" "^# (tests|pass|fail)|^not ok" 10; }
elif [ "$part" = measure2 ]; then
  # #20: each GEMV class's cost in place (left out of the replay: the LM head, q|k|v, gate|up, o and
  # down), the subgroup team sums off / on alternating.
  wgdec base
  for sk in norm128sgpf f16,,,norm128rsgpf gated 'gemv1,f16,,)'; do wgdec "skip-${sk//[^a-z0-9]/_}" "KILN_WEBGPU_REPLAY_SKIP=$sk"; done
  for rep in 1 2 3; do wgdec tsg0-$rep KILN_WEBGPU_GEMV_TEAM_SUBGROUP=0; wgdec tsg1-$rep; done
elif [ "$part" = ab ]; then
  # S20_AB: space-separated NAME=OPTION pairs, each off / on alternating, twice; S20_TESTS after.
  abpart "${S20_AB:-}" "${S20_TESTS:-}"
elif [ "$part" = fab ]; then
  # #20: session 19's defaults (KILN_WEBGPU_PAGED_LANES=0: the fused attention) against this session's, alternating, batch 1 and 8.
  for rep in 1 2 3; do wgdec s19-$rep KILN_WEBGPU_PAGED_LANES=0; wgdec s20-$rep; done
  WGB=8 wgdec b8-s19 KILN_WEBGPU_PAGED_LANES=0; WGB=8 wgdec b8-s20
elif [ "$part" = fab2 ]; then
  # A second sample of fab at batch 1, and #17 cpu llm.qkvLinear off / on again.
  for rep in 1 2 3; do wgdec s19-$rep KILN_WEBGPU_PAGED_LANES=0; wgdec s20-$rep; done
  go qkv && { $K 100 node dist/bench/cpu-decode-bound.js --dtypes bfloat16 --ab KILN_DECODE_QKV --rounds 4 --steps 6 --json "$out/cpu-qkv.json" > "$out/cpu-qkv.txt" 2>&1
    el "cpu decode KILN_DECODE_QKV off / on rc=$?"; tail -n 5 "$out/cpu-qkv.txt" | tee -a "$out/summary.txt"; }
elif [ "$part" = hg ]; then
  # #20: one query head per workgroup in the lanes form (KILN_WEBGPU_PAGED_LANES_HG=1) against the default.
  go pagedk && { wg $K 120 node dist/bench/webgpu-decode-kernels.js --only pagedAttention --capacity 512 --context 300 --json "$out/paged-kernels.json" > "$out/paged-kernels.txt" 2>&1
    el "webgpu paged kernels rc=$?"; grep -E "^pagedAttention" "$out/paged-kernels.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
  for rep in 1 2 3; do wgdec hg1-$rep KILN_WEBGPU_PAGED_LANES_HG=1; wgdec hg0-$rep; done
elif [ "$part" = last ]; then
  # #20: one query head per workgroup in the lanes form (KILN_WEBGPU_PAGED_LANES_HG=1) against the
  # default; then the session's defaults: webgpu batch 1 (three runs) and 8, tests; cuda; cpu.
  for rep in 1 2 3; do wgdec last-$rep; done
  WGB=8 wgdec last-b8
  if [ -n "${S20_TESTS:-}" ]; then
    go wgtests && { wg $K 200 node --test ${S20_TESTS} > "$out/wg-tests.txt" 2>&1; el "webgpu tests rc=$?"; sum "$out/wg-tests.txt" "^# (tests|pass|fail)|^not ok" 10; }
  fi
  cudadec last 1,8,64
  go cpubound && { $K 150 node dist/bench/cpu-decode-bound.js --rounds 3 --steps 6 --json "$out/cpu-bound.json" > "$out/cpu-bound.txt" 2>&1
    el "cpu decode vs bound rc=$?"; tail -n 3 "$out/cpu-bound.txt" | tee -a "$out/summary.txt"; }
fi
finish
