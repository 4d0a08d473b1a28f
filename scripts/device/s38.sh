#!/usr/bin/env bash
# Session 38's device calls, from the repo root through .device/run.sh with dist/ built and carried
# (bash .device/run.sh bash scripts/device/s38.sh PART):
#   mk   #17 the decode megakernel's forms: session 37's early loads (KILN_DECODE_MEGAKERNEL_KV_LOAD,
#        _CONST_LOAD, _RESID_LOAD = early) and session 38's joint fold loads
#        (KILN_DECODE_MEGAKERNEL_JOIN_LOADS=joint), early copies after the norm (_EARLY_AT=norm), paces: the megakernel tests (every form against the
#        compiled step, maxContext's switch), a phase trace per form, then decode at batch 1 of the
#        compiled step and each form, alternating twice. FORMS picks forms (names below).
#        If the machine has cuobjdump, the SASS of the cubins under dist/cubins (built with nvcc
#        here) is dumped for reading the fold's loads. Last, `kiln generate` start-up, cold and warm.
# A step starts only while the call is under its deadline (S38_DEADLINE s); logs and JSON under
# $OUT/s38-PART come back as one tarball, the summary printed last.
set -uo pipefail
part=${1:?usage: s38.sh mk}
session=s38
source "$(dirname "$0")/session-lib.sh"
if [ "$part" = mk ]; then
  base="KILN_DECODE_MEGAKERNEL_STREAM=next KILN_DECODE_MEGAKERNEL_KV_SLOTS=shared KILN_DECODE_MEGAKERNEL_SYNC=grid"
  e="KILN_DECODE_MEGAKERNEL_KV_LOAD=early KILN_DECODE_MEGAKERNEL_CONST_LOAD=early KILN_DECODE_MEGAKERNEL_RESID_LOAD=early"
  j="KILN_DECODE_MEGAKERNEL_JOIN_LOADS=joint"
  # Since the defaults changed (session 38): the session-37 default spelled out (s37) and the new default (new: the early forms,
  # joint fold loads, early copies after the norm).
  old="KILN_DECODE_MEGAKERNEL_KV_LOAD=barrier KILN_DECODE_MEGAKERNEL_CONST_LOAD=inline KILN_DECODE_MEGAKERNEL_RESID_LOAD=end KILN_DECODE_MEGAKERNEL_JOIN_LOADS=serial KILN_DECODE_MEGAKERNEL_EARLY_AT=start"
  declare -A FORM=(
    [s37]="$base $old"
    [new]="$base"
    [newP4]="$base KILN_DECODE_MEGAKERNEL_PACE=4"
    [newP8]="$base KILN_DECODE_MEGAKERNEL_PACE=8"
    [mk]="$base $old"
    [kve]="$base $old KILN_DECODE_MEGAKERNEL_KV_LOAD=early"
    [ce]="$base $old KILN_DECODE_MEGAKERNEL_CONST_LOAD=early"
    [re]="$base $old KILN_DECODE_MEGAKERNEL_RESID_LOAD=early"
    [all]="$base $old $e"
    [jl]="$base $old $j"
    [alljl]="$base $old $e $j"
    [alljlean]="$base $old $e $j KILN_DECODE_MEGAKERNEL_EARLY_AT=norm"
    [alljlP4]="$base $old $e $j KILN_DECODE_MEGAKERNEL_PACE=4"
    [alljlP8]="$base $old $e $j KILN_DECODE_MEGAKERNEL_PACE=8"
    [flowall]="$old KILN_DECODE_MEGAKERNEL_STREAM=next KILN_DECODE_MEGAKERNEL_KV_SLOTS=shared KILN_DECODE_MEGAKERNEL_SYNC=flow $e $j"
  )
  forms=${FORMS:-s37 new newP4}
  if ls dist/cubins/*.cubin >/dev/null 2>&1; then
    go sass && { for c in dist/cubins/*.cubin; do b=$(basename "$c" .cubin); (command -v cuobjdump >/dev/null && cuobjdump -sass "$c" > "$out/sass-$b.txt" 2>&1) || (ls /usr/local/cuda*/bin > "$out/sass-none.txt" 2>&1); done; el "sass: $(ls "$out" | grep -c '^sass-') files"; }
  fi
  MK_TESTS=${MK_TESTS:-dist/test/cuda-decode-megakernel.test.js} mkpart ${MK_TEST_S:-240}
  # Start-up with the default form: `kiln generate` with an empty kernel cache, then a warm one.
  for c in cold warm; do
    [ $c = cold ] && rm -rf /tmp/kiln-cache-gen
    go gen-$c && { s=$(date +%s.%N); env KILN_CACHE_DIR=/tmp/kiln-cache-gen $K 120 node dist/src/cli/main.js generate --random qwen3-0.6b --device cuda --dtype bfloat16 --prompt-ids 1,2,3,4,5,6,7,8 --max-tokens 64 > "$out/gen-$c.txt" 2>&1; rc=$?; e=$(date +%s.%N)
      el "generate $c rc=$rc wall $(python3 -c "print(round($e-$s,2))") s"; tail -n 3 "$out/gen-$c.txt" | cut -c1-300 | tee -a "$out/summary.txt"; }
  done
else
  el "unknown part $part"
fi
finish
