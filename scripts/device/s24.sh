#!/usr/bin/env bash
# Session 24's device calls, from the repo root through .device/run.sh with dist/ built and carried
# (bash .device/run.sh bash scripts/device/s24.sh PART):
#   cpu   #17 cpu decode on the H200 machine's 16-core host: the whole-step decoder (one native call
#         per step, KILN_DECODE_MEGAKERNEL unset = on for the cpu) off / on alternating in one
#         process, bfloat16 and float32, against the read probe; its phase times
#         (bench/cpu-decode-phases.ts) at all threads and at 8; its tests
#   ph3   the cuda megakernel's session-23 call (scripts/device/s23.sh ph3): tests, phase traces of
#         both weight streams, decode off / next / ahead alternating twice
# A step starts only while the call is under its deadline (S24_DEADLINE s); logs and JSON under
# $OUT/s24-PART come back as one tarball, the summary printed last.
set -uo pipefail
part=${1:?usage: s24.sh cpu|ph3}
if [ "$part" = ph3 ]; then S23_DEADLINE=${S24_DEADLINE:-300} exec bash "$(dirname "$0")/s23.sh" ph3; fi
session=s24
source "$(dirname "$0")/session-lib.sh"
if [ "$part" = cpu ]; then
  go cpu-ab && { $K 300 node dist/bench/cpu-decode-bound.js --dtypes bfloat16,float32 --ab KILN_DECODE_MEGAKERNEL --rounds 4 --steps 6 --json "$out/cpu-ab.json" > "$out/cpu-ab.txt" 2>&1
    el "cpu decode whole step off / on rc=$?"; tail -n 6 "$out/cpu-ab.txt" | tee -a "$out/summary.txt"; }
  for t in auto 8; do
    go phases-$t && { $K 90 node dist/bench/cpu-decode-phases.js --dtype bfloat16 --pos 256 --steps 20 $([ $t = auto ] || echo --threads $t) --json "$out/phases-$t.json" > "$out/phases-$t.txt" 2>&1
      el "cpu phases threads $t rc=$?"; tail -n 12 "$out/phases-$t.txt" | tee -a "$out/summary.txt"; }
  done
  go tests && { $K 120 node --test dist/test/cpu-decode-step.test.js > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail)|^not ok" 10; }
else
  el "unknown part $part"
fi
finish
