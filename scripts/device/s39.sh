#!/usr/bin/env bash
# Session 39's device calls, from the repo root through .device/run.sh with dist/ built and carried
# (bash .device/run.sh bash scripts/device/s39.sh PART):
#   mk   #17 the decode megakernel's grid barrier forms (KILN_DECODE_MEGAKERNEL_ARRIVE=release: one
#        red.release add instead of __threadfence + atomic add; KILN_DECODE_MEGAKERNEL_POLL=relaxed:
#        relaxed polls then one fence.acq_rel; KILN_DECODE_MEGAKERNEL_ARRIVE=flag: the block completing the
#        count raises a flag on its own line, the others poll it; KILN_DECODE_MEGAKERNEL_JOIN_LOADS=hoist: the
#        fold's first loads issued before the maxima and sums are read): first the barrier bench (cuda-sync-under-load: the
#        forms at 0-8 loads in flight per lane), then the tests (TESTS; the default form, then the
#        megakernel tests again under the FORM_TEST form), a phase trace per form, batch-1 decode of
#        the compiled step and each form alternating twice, and `kiln generate` cold and warm. If
#        the machine has cuobjdump, the SASS of dist/cubins/*.cubin (built with nvcc here by
#        scripts/cuda-megakernel-cubins.mjs) is dumped.
#   attn #20 the one-pass float16 webgpu attention prefill (KILN_WEBGPU_ATTN_MATRIX_FORM=online) against the
#        two-pass kernel: tests on the device's matrices, device time per call, kiln bench transformer-block.
# SKIP="sync" leaves the barrier bench out (a short call).
# A step starts only while the call is under its deadline (S39_DEADLINE s); logs and JSON under
# $OUT/s39-PART come back as one tarball, the summary printed last.
set -uo pipefail
part=${1:?usage: s39.sh mk|attn}
session=s39
source "$(dirname "$0")/session-lib.sh"
if [ "$part" = mk ]; then
  declare -A FORM=(
    [new]=""
    [rel]="KILN_DECODE_MEGAKERNEL_ARRIVE=release"
    [rlx]="KILN_DECODE_MEGAKERNEL_POLL=relaxed"
    [relrlx]="KILN_DECODE_MEGAKERNEL_ARRIVE=release KILN_DECODE_MEGAKERNEL_POLL=relaxed"
    [flag]="KILN_DECODE_MEGAKERNEL_ARRIVE=flag"
    [flagrlx]="KILN_DECODE_MEGAKERNEL_ARRIVE=flag KILN_DECODE_MEGAKERNEL_POLL=relaxed"
    [hoist]="KILN_DECODE_MEGAKERNEL_JOIN_LOADS=hoist"
    [p4]="KILN_DECODE_MEGAKERNEL_PACE=4"
    [p3]="KILN_DECODE_MEGAKERNEL_PACE=3"
    [relhoist]="KILN_DECODE_MEGAKERNEL_ARRIVE=release KILN_DECODE_MEGAKERNEL_JOIN_LOADS=hoist"
    [flaghoist]="KILN_DECODE_MEGAKERNEL_ARRIVE=flag KILN_DECODE_MEGAKERNEL_JOIN_LOADS=hoist"
  )
  forms=${FORMS:-new rel relrlx flag flagrlx hoist p4 p3 relhoist flaghoist}
  if ls dist/cubins/*.cubin >/dev/null 2>&1; then
    go sass && { for c in dist/cubins/*.cubin; do b=$(basename "$c" .cubin); (command -v cuobjdump >/dev/null && cuobjdump -sass "$c" > "$out/sass-$b.txt" 2>&1) || (ls /usr/local/cuda*/bin > "$out/sass-none.txt" 2>&1); done; el "sass: $(ls "$out" | grep -c '^sass-') files"; }
  fi
  [[ " ${SKIP:-} " == *" sync "* ]] || { go sync && { $K 120 node dist/bench/cuda-sync-under-load.js --reps ${SYNC_REPS:-9} --json "$out/sync.json" > "$out/sync.txt" 2>&1; el "sync bench rc=$?"; grep -A 17 '^barrier form' "$out/sync.txt" | tee -a "$out/summary.txt"; } }
  MK_TESTS=${TESTS:-dist/test/cuda-decode-megakernel.test.js} mkpart ${MK_TEST_S:-240}
  if [ -n "${FORM_TEST:-}" ]; then
    go tests-form && { env ${FORM[$FORM_TEST]} $K ${MK_TEST_S:-240} node --test dist/test/cuda-decode-megakernel.test.js > "$out/tests-$FORM_TEST.txt" 2>&1; el "tests ($FORM_TEST: ${FORM[$FORM_TEST]}) rc=$?"; sum "$out/tests-$FORM_TEST.txt" "^# (tests|pass|fail)|^not ok" 8; }
  fi
  for c in cold warm; do
    [ $c = cold ] && rm -rf /tmp/kiln-cache-gen
    go gen-$c && { s=$(date +%s.%N); env KILN_CACHE_DIR=/tmp/kiln-cache-gen $K 120 node dist/src/cli/main.js generate --random qwen3-0.6b --device cuda --dtype bfloat16 --prompt-ids 1,2,3,4,5,6,7,8 --max-tokens 64 > "$out/gen-$c.txt" 2>&1; rc=$?; e=$(date +%s.%N)
      el "generate $c rc=$rc wall $(python3 -c "print(round($e-$s,2))") s"; tail -n 3 "$out/gen-$c.txt" | cut -c1-300 | tee -a "$out/summary.txt"; }
  done
elif [ "$part" = attn ]; then
  # #20 the one-pass float16 attention prefill on subgroup matrices (KILN_WEBGPU_ATTN_MATRIX_FORM=online)
  # against the two-pass kernel: its tests on the device's matrices, device time per call at the
  # transformer block's shape and Qwen3 heads, and `kiln bench` transformer-block float16 with each
  # form, alternating twice.
  go tests && { wg $K 240 node --test dist/test/webgpu-attention-matrix.test.js > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail)|^not ok" 10; }
  go attn-block && { wg $K 120 node dist/bench/webgpu-attention.js --dtypes float16 --lengths 512 --shape 8,16,16,64 --forms "matrix;matrix-online" --json "$out/attn-block.json" > "$out/attn-block.txt" 2>&1; el "attention, block shape rc=$?"; sum "$out/attn-block.txt" "^float16" 4; }
  go attn-qwen && { wg $K 120 node dist/bench/webgpu-attention.js --dtypes float16 --lengths 512,1024,2048 --shape 1,16,8,128 --forms "matrix;matrix-online" --json "$out/attn-qwen.json" > "$out/attn-qwen.txt" 2>&1; el "attention, Qwen3 heads rc=$?"; sum "$out/attn-qwen.txt" "^float16" 8; }
  for rep in 1 2; do
    kb block2p-$rep webgpu float16 transformer-block KILN_WEBGPU_ATTN_MATRIX_FORM=two-pass
    kb block1p-$rep webgpu float16 transformer-block KILN_WEBGPU_ATTN_MATRIX_FORM=online
  done
else
  el "unknown part $part"
fi
finish
