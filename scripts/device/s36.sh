#!/usr/bin/env bash
# Session 36's device calls, from the repo root through .device/run.sh with dist/ built and carried
# (bash .device/run.sh bash scripts/device/s36.sh PART):
#   ew16  #20 the workgroup cap of float16 vectorised webgpu launches (KILN_WEBGPU_VEC16_GROUPS):
#         the vector-pointwise tests on real hardware (shader-f16), then kiln bench elementwise
#         float16 / float32 with the cap at 8192 (default) and 65535 (none), alternating twice.
#   mk    #17 the cuda decode megakernel with three grid barriers a layer instead of five
#         (KILN_DECODE_MEGAKERNEL_SYNC=flow: attention waits on a counter per kv head, the MLP in
#         KILN_DECODE_MEGAKERNEL_GROUPS groups of blocks with the down projection split along K):
#         its tests against the compiled step, a phase trace per form, then Qwen3-0.6B bfloat16
#         decode at batch 1 of the compiled step and each form, alternating twice.
# A step starts only while the call is under its deadline (S36_DEADLINE s); logs and JSON under
# $OUT/s36-PART come back as one tarball, the summary printed last.
set -uo pipefail
part=${1:?usage: s36.sh mk|ew16}
session=s36
source "$(dirname "$0")/session-lib.sh"
# name = env of each megakernel form (kss: the default five-barrier form)
base="KILN_DECODE_MEGAKERNEL_STREAM=next KILN_DECODE_MEGAKERNEL_KV_SLOTS=shared"
declare -A FORM=(
  [kss]="$base KILN_DECODE_MEGAKERNEL_SYNC=grid"
  [flow4]="$base KILN_DECODE_MEGAKERNEL_SYNC=flow KILN_DECODE_MEGAKERNEL_GROUPS=4 KILN_DECODE_MEGAKERNEL_DOWN=group"
  [flow6]="$base KILN_DECODE_MEGAKERNEL_SYNC=flow KILN_DECODE_MEGAKERNEL_GROUPS=6 KILN_DECODE_MEGAKERNEL_DOWN=group"
  [flow12]="$base KILN_DECODE_MEGAKERNEL_SYNC=flow KILN_DECODE_MEGAKERNEL_GROUPS=12 KILN_DECODE_MEGAKERNEL_DOWN=group"
  [flow2]="$base KILN_DECODE_MEGAKERNEL_SYNC=flow KILN_DECODE_MEGAKERNEL_GROUPS=2 KILN_DECODE_MEGAKERNEL_DOWN=group"
  [flow4e]="$base KILN_DECODE_MEGAKERNEL_SYNC=flow KILN_DECODE_MEGAKERNEL_GROUPS=4 KILN_DECODE_MEGAKERNEL_DOWN=early"
  [flow2e]="$base KILN_DECODE_MEGAKERNEL_SYNC=flow KILN_DECODE_MEGAKERNEL_GROUPS=2 KILN_DECODE_MEGAKERNEL_DOWN=early"
  [kssT]="$base KILN_DECODE_MEGAKERNEL_SYNC=grid KILN_DECODE_MEGAKERNEL_POLL=tma"
  [aheadT]="KILN_DECODE_MEGAKERNEL_STREAM=ahead KILN_DECODE_MEGAKERNEL_KV_SLOTS=shared KILN_DECODE_MEGAKERNEL_SYNC=grid KILN_DECODE_MEGAKERNEL_POLL=tma"
  [flow4T]="$base KILN_DECODE_MEGAKERNEL_SYNC=flow KILN_DECODE_MEGAKERNEL_GROUPS=4 KILN_DECODE_MEGAKERNEL_DOWN=group KILN_DECODE_MEGAKERNEL_POLL=tma"
  [flow4eT]="$base KILN_DECODE_MEGAKERNEL_SYNC=flow KILN_DECODE_MEGAKERNEL_GROUPS=4 KILN_DECODE_MEGAKERNEL_DOWN=early KILN_DECODE_MEGAKERNEL_POLL=tma"
  [kssP2]="$base KILN_DECODE_MEGAKERNEL_SYNC=grid KILN_DECODE_MEGAKERNEL_PACE=2"
  [kssP4]="$base KILN_DECODE_MEGAKERNEL_SYNC=grid KILN_DECODE_MEGAKERNEL_PACE=4"
  [kssP6]="$base KILN_DECODE_MEGAKERNEL_SYNC=grid KILN_DECODE_MEGAKERNEL_PACE=6"
  [flow4P4]="$base KILN_DECODE_MEGAKERNEL_SYNC=flow KILN_DECODE_MEGAKERNEL_GROUPS=4 KILN_DECODE_MEGAKERNEL_PACE=4"
  [kssP8]="$base KILN_DECODE_MEGAKERNEL_SYNC=grid KILN_DECODE_MEGAKERNEL_PACE=8"
  [kssP12]="$base KILN_DECODE_MEGAKERNEL_SYNC=grid KILN_DECODE_MEGAKERNEL_PACE=12"
  [ring]="KILN_DECODE_MEGAKERNEL_STREAM=ring KILN_DECODE_MEGAKERNEL_KV_SLOTS=shared KILN_DECODE_MEGAKERNEL_SYNC=grid"
  [ring32]="KILN_DECODE_MEGAKERNEL_STREAM=ring KILN_DECODE_MEGAKERNEL_KV_SLOTS=shared KILN_DECODE_MEGAKERNEL_SYNC=grid KILN_DECODE_MEGAKERNEL_RING_KIB=32"
  [ring64]="KILN_DECODE_MEGAKERNEL_STREAM=ring KILN_DECODE_MEGAKERNEL_KV_SLOTS=shared KILN_DECODE_MEGAKERNEL_SYNC=grid KILN_DECODE_MEGAKERNEL_RING_KIB=64"
)
# First call (commit 2a5c7a8): kss flow4 flow6 flow12 (counters sharing one line); second (2a5d935):
# kss flow4 flow2 flow4e flow2e (counters on lines of their own); third (055bbe4): the polls as bulk
# copies (POLL=tma); the DOWN and POLL options were dropped after (slower). Fourth (35dd4b0): paced
# weight loads (kss kssP2 kssP4 kssP6 flow4 flow4P4); fifth: more paces, and the step's breakdown;
# sixth and seventh (fbae93e, 5ec40fe): STREAM=ring (dropped after: slower; RING_KIB went with it).
forms=${FORMS:-kss kssP6 kssP8 kssP12}
if [ "$part" = mk ]; then
  MK_TESTS=${MK_TESTS:-dist/test/cuda-decode-megakernel.test.js} mkpart ${MK_TEST_S:-200}
  # Where a batch-1 step's time goes with the megakernel (kernel, sampling, host), at the first and the last form.
  for f in kss ${forms##* }; do
    go breakdown-$f && { env KILN_DECODE_MEGAKERNEL=1 ${FORM[$f]} $K 80 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 1 --new 256 --reps 1 --breakdown --json "$out/breakdown-$f.json" > "$out/breakdown-$f.txt" 2>&1; el "breakdown $f rc=$?"; sum "$out/breakdown-$f.txt" "breakdown|^decode" 4; }
  done
elif [ "$part" = ew16 ]; then
  go tests && { wg $K 150 node --test dist/test/webgpu-vector-pointwise.test.js > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail|skipped)|^not ok|SKIP the" 8; }
  for rep in 1 2; do for cap in 8192 65535; do kb cap$cap-$rep webgpu float16,float32 elementwise-4096,elementwise-1024 KILN_WEBGPU_VEC16_GROUPS=$cap; done; done
else
  el "unknown part $part"
fi
finish
