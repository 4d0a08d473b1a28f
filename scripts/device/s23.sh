#!/usr/bin/env bash
# Session 23's device calls, from the repo root through .device/run.sh with dist/ built and carried
# (bash .device/run.sh bash scripts/device/s23.sh PART):
#   mk    #17 the whole-step decode kernel (KILN_DECODE_MEGAKERNEL): its tests first (against the
#         compiled step), then Qwen3-0.6B bfloat16 decode at batch 1 off / on alternating, twice
#   mkb   the same A/B three times at batch 1, and batch 8 with it on (its batches keep the compiled step)
#   ph    the kernel's phases from its barrier stamps (bench/cuda-megakernel-phases.ts) with volatile
#         (asm) and plain (ldg) weight loads; decode off / asm / ldg alternating twice; its tests
# A step starts only while the call is under its deadline (S23_DEADLINE s); logs and JSON under
# $OUT/s23-PART come back as one tarball, the summary printed last.
set -uo pipefail
part=${1:?usage: s23.sh mk|mkb|ph|ph3}
session=s23
source "$(dirname "$0")/session-lib.sh"
if [ "$part" = mk ]; then
  go tests && { $K 200 node --test ${MK_TESTS:-dist/test/cuda-decode-megakernel.test.js} > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail)|^not ok|differ|rror" 14; }
  for rep in 1 2; do cudadec m0-$rep 1 KILN_DECODE_MEGAKERNEL=0; cudadec m1-$rep 1 KILN_DECODE_MEGAKERNEL=1; done
  sum "$out/decode-cuda-m1-1.txt" "whole-step" 2
elif [ "$part" = mkb ]; then
  for rep in 1 2 3; do cudadec m0-$rep 1 KILN_DECODE_MEGAKERNEL=0; cudadec m1-$rep 1 KILN_DECODE_MEGAKERNEL=1; done
  cudadec m1-b8 8 KILN_DECODE_MEGAKERNEL=1
  go tests && { $K 200 node --test ${MK_TESTS:-dist/test/cuda-decode-megakernel.test.js dist/test/decode-runner.test.js} > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail)|^not ok|differ|rror" 14; }
elif [ "$part" = ph3 ]; then
  go tests && { $K 200 node --test ${MK_TESTS:-dist/test/cuda-decode-megakernel.test.js} > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail)|^not ok|differ|rror|compared" 16; }
  for st in next ahead; do
    go phases-$st && { KILN_DECODE_MEGAKERNEL_STREAM=$st $K 90 node dist/bench/cuda-megakernel-phases.js --pos 256 --steps 40 --json "$out/phases-$st.json" > "$out/phases-$st.txt" 2>&1; el "phases $st rc=$?"; tail -n 14 "$out/phases-$st.txt" | tee -a "$out/summary.txt"; }
  done
  for rep in 1 2; do cudadec m0-$rep 1 KILN_DECODE_MEGAKERNEL=0; cudadec mn-$rep 1 KILN_DECODE_MEGAKERNEL=1; cudadec ma-$rep 1 KILN_DECODE_MEGAKERNEL=1 KILN_DECODE_MEGAKERNEL_STREAM=ahead; done
elif [ "$part" = ph ]; then
  go tests && { $K 200 node --test ${MK_TESTS:-dist/test/cuda-decode-megakernel.test.js} > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail)|^not ok|differ|rror|compared" 16; }
  for l in asm ldg; do
    go phases-$l && { KILN_DECODE_MEGAKERNEL_LOADS=$l $K 90 node dist/bench/cuda-megakernel-phases.js --pos 256 --steps 40 --json "$out/phases-$l.json" > "$out/phases-$l.txt" 2>&1; el "phases loads=$l rc=$?"; cat "$out/phases-$l.txt" | tail -n 9 | tee -a "$out/summary.txt"; }
  done
  for rep in 1 2; do cudadec m0-$rep 1 KILN_DECODE_MEGAKERNEL=0; cudadec ma-$rep 1 KILN_DECODE_MEGAKERNEL=1; cudadec ml-$rep 1 KILN_DECODE_MEGAKERNEL=1 KILN_DECODE_MEGAKERNEL_LOADS=ldg; done
else
  el "unknown part $part"
fi
finish
