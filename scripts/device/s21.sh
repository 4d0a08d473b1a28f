#!/usr/bin/env bash
# Session 21's device calls (planned; no device machine was lent in session 21, so the next session
# runs them), from the repo root through .device/run.sh with dist/ built and carried
# (bash .device/run.sh bash scripts/device/s21.sh PART):
#   cpu   #17 cpu on the H200 machine's 16-core host: the GEMV split and huge-page weights of session
#         21 against their off forms (KILN_CPU_GEMV_SPLIT, KILN_CPU_HUGE_PAGES together, then each
#         alone), bfloat16 and float32, alternating in one process; the THP settings; the huge-page
#         and GEMV tests
#   wg    #20 webgpu float16 decode at batch 1 and 8: the GEMV at 4 columns a workgroup for N <= 2048
#         (KILN_WEBGPU_GEMV_COLS4_MAX_N=2048: o, down and k/v of Qwen3-0.6B) against 8, alternating
#         three times; the webgpu GEMV tests on the H200
# A step starts only while the call is under its deadline (S21_DEADLINE s); logs and JSON under
# $OUT/s21-PART come back as one tarball, the summary printed last.
set -uo pipefail
part=${1:?usage: s21.sh cpu|wg}
session=s21
source "$(dirname "$0")/session-lib.sh"
if [ "$part" = cpu ]; then
  cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag > "$out/thp.txt" 2>&1; el "thp: $(tr '\n' ' ' < "$out/thp.txt")"
  for ab in KILN_CPU_GEMV_SPLIT,KILN_CPU_HUGE_PAGES KILN_CPU_HUGE_PAGES KILN_CPU_GEMV_SPLIT; do
    go "cpu-$ab" && { $K 240 node dist/bench/cpu-decode-bound.js --dtypes bfloat16,float32 --ab "$ab" --rounds 3 --steps 6 --json "$out/cpu-${ab//,/-}.json" > "$out/cpu-${ab//,/-}.txt" 2>&1
      el "cpu decode $ab off / on rc=$?"; tail -n 5 "$out/cpu-${ab//,/-}.txt" | tee -a "$out/summary.txt"; }
  done
  go tests && { $K 200 node --test dist/test/cpu-huge-pages.test.js dist/test/native-gemv.test.js dist/test/llm-qkv-linear.test.js dist/test/llm-gate-up-silu-mul.test.js > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail)|^not ok" 10; }
elif [ "$part" = wg ]; then
  for rep in 1 2 3; do wgdec c8-$rep; wgdec c4-$rep KILN_WEBGPU_GEMV_COLS4_MAX_N=2048; done
  WGB=8 wgdec b8-c8; WGB=8 wgdec b8-c4 KILN_WEBGPU_GEMV_COLS4_MAX_N=2048
  go wgtests && { wg $K 200 node --test dist/test/webgpu-gemv.test.js dist/test/webgpu-add-rms-norm-linear.test.js > "$out/wg-tests.txt" 2>&1; el "webgpu tests rc=$?"; sum "$out/wg-tests.txt" "^# (tests|pass|fail)|^not ok" 10; }
else
  el "unknown part $part"
fi
finish
