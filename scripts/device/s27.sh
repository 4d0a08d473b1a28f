#!/usr/bin/env bash
# Session 27's device calls, from the repo root through .device/run.sh with dist/ built and carried
# (bash .device/run.sh bash scripts/device/s27.sh PART):
#   mk    #17 the cuda decode megakernel's forms (FORM below): its tests against the compiled
#         step, phase traces per form, then Qwen3-0.6B bfloat16 decode at batch 1: the compiled
#         step and each form, alternating twice. The first call (commit a856ed5) measured the
#         cache slots in registers / shared memory and an L2 bulk prefetch of the weights one or
#         two phases ahead (KILN_DECODE_MEGAKERNEL_L2, slower: dropped, its code is in a856ed5);
#         the second (f7a88f7) the weights as bulk copies into shared memory
#         (KILN_DECODE_MEGAKERNEL_STREAM=tma, tma-ahead; not faster: dropped, code in f7a88f7,
#         so those forms run only at that commit).
#   table #20's table (scripts/device/webgpu-table.sh webgpu,cuda) with this build's defaults
# A step starts only while the call is under its deadline (S27_DEADLINE s); logs and JSON under
# $OUT/s27-PART come back as one tarball, the summary printed last.
set -uo pipefail
part=${1:?usage: s27.sh mk|table}
if [ "$part" = table ]; then exec bash "$(dirname "$0")/webgpu-table.sh" webgpu,cuda; fi
session=s27
source "$(dirname "$0")/session-lib.sh"
# name = env of each megakernel form
declare -A FORM=(
  [base]="KILN_DECODE_MEGAKERNEL_STREAM=next KILN_DECODE_MEGAKERNEL_KV_SLOTS=registers"
  [kss]="KILN_DECODE_MEGAKERNEL_STREAM=next KILN_DECODE_MEGAKERNEL_KV_SLOTS=shared"
  [tma]="KILN_DECODE_MEGAKERNEL_STREAM=tma KILN_DECODE_MEGAKERNEL_KV_SLOTS=shared"
  [tmaa]="KILN_DECODE_MEGAKERNEL_STREAM=tma-ahead KILN_DECODE_MEGAKERNEL_KV_SLOTS=shared"
  [tmar]="KILN_DECODE_MEGAKERNEL_STREAM=tma KILN_DECODE_MEGAKERNEL_KV_SLOTS=registers"
)
forms=${FORMS:-kss tma tmaa tmar}
if [ "$part" = mk ]; then
  mkpart 300
else
  el "unknown part $part"
fi
finish
