#!/usr/bin/env bash
# Session 37's device calls, from the repo root through .device/run.sh with dist/ built and carried
# (bash .device/run.sh bash scripts/device/s37.sh PART):
#   coop  #17 the decode megakernel launched cooperatively (KILN_DECODE_MEGAKERNEL_COOPERATIVE):
#         the cooperative-launch and megakernel tests, then Qwen3-0.6B bfloat16 decode at batch 1
#         of the compiled step, the kernel launched cooperatively and plainly, alternating twice;
#         then `kiln generate --random qwen3-0.6b` on cuda with an empty kernel cache and a warm
#         one, with the kernel on and off (start-up cost of compiling it).
#   kve   #17 attention's keys and values (KILN_DECODE_MEGAKERNEL_KV_LOAD=early) and the small DRAM rows
#         (KILN_DECODE_MEGAKERNEL_CONST_LOAD=early) and the residuals (KILN_DECODE_MEGAKERNEL_RESID_LOAD=early) loaded early: the
#         megakernel tests, a phase trace per form, decode of the compiled step and each form, alternating twice.
# A step starts only while the call is under its deadline (S37_DEADLINE s); logs and JSON under
# $OUT/s37-PART come back as one tarball, the summary printed last.
set -uo pipefail
part=${1:?usage: s37.sh coop|kve}
session=s37
source "$(dirname "$0")/session-lib.sh"
if [ "$part" = coop ]; then
  go tests && { $K ${MK_TEST_S:-240} node --test dist/test/cuda-cooperative-launch.test.js dist/test/cuda-decode-megakernel.test.js > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail)|^not ok|differ|rror|compared" 16; }
  for rep in 1 2; do
    cudadec m0-$rep 1 KILN_DECODE_MEGAKERNEL=0
    cudadec coop-$rep 1 KILN_DECODE_MEGAKERNEL=1 KILN_DECODE_MEGAKERNEL_COOPERATIVE=1
    cudadec plain-$rep 1 KILN_DECODE_MEGAKERNEL=1 KILN_DECODE_MEGAKERNEL_COOPERATIVE=0
  done
  # Start-up: a cold kernel cache (NVRTC compiles everything), then warm, with the kernel on and off.
  for mk in 1 0; do for c in cold warm; do
    [ $c = cold ] && rm -rf /tmp/kiln-cache-gen$mk
    go gen-$mk-$c && { s=$(date +%s.%N); env KILN_DECODE_MEGAKERNEL=$mk KILN_CACHE_DIR=/tmp/kiln-cache-gen$mk $K 120 node dist/src/cli/main.js generate --random qwen3-0.6b --device cuda --dtype bfloat16 --prompt-ids 1,2,3,4,5,6,7,8 --max-tokens 64 > "$out/gen-$mk-$c.txt" 2>&1; rc=$?; e=$(date +%s.%N)
      el "generate mk=$mk $c rc=$rc wall $(python3 -c "print(round($e-$s,2))") s"; tail -n 3 "$out/gen-$mk-$c.txt" | cut -c1-300 | tee -a "$out/summary.txt"; }
  done; done
elif [ "$part" = kve ]; then
  # #17 attention's prefetched keys and values loaded at the start of the layer (cp.async into shared
  # memory) instead of at the barrier before attention: tests, a phase trace per form, decode A/B.
  base="KILN_DECODE_MEGAKERNEL_STREAM=next KILN_DECODE_MEGAKERNEL_KV_SLOTS=shared"
  e="KILN_DECODE_MEGAKERNEL_KV_LOAD=early KILN_DECODE_MEGAKERNEL_CONST_LOAD=early KILN_DECODE_MEGAKERNEL_RESID_LOAD=early"
  declare -A FORM=(
    [mk]="$base KILN_DECODE_MEGAKERNEL_SYNC=grid"
    [kve]="$base KILN_DECODE_MEGAKERNEL_SYNC=grid KILN_DECODE_MEGAKERNEL_KV_LOAD=early"
    [ce]="$base KILN_DECODE_MEGAKERNEL_SYNC=grid KILN_DECODE_MEGAKERNEL_CONST_LOAD=early"
    [re]="$base KILN_DECODE_MEGAKERNEL_SYNC=grid KILN_DECODE_MEGAKERNEL_RESID_LOAD=early"
    [all]="$base KILN_DECODE_MEGAKERNEL_SYNC=grid $e"
    [flowall]="$base KILN_DECODE_MEGAKERNEL_SYNC=flow $e"
  )
  forms=${FORMS:-mk kve ce re all flowall}
  MK_TESTS=${MK_TESTS:-dist/test/cuda-decode-megakernel.test.js} mkpart ${MK_TEST_S:-240}
else
  el "unknown part $part"
fi
finish
