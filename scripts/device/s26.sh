#!/usr/bin/env bash
# Session 26's device calls, from the repo root through .device/run.sh with dist/ built and carried
# (bash .device/run.sh bash scripts/device/s26.sh PART):
#   mk    #17 the cuda decode megakernel's forms (FORM below): its tests against the compiled
#         step, phase traces per form, then Qwen3-0.6B bfloat16 decode at batch 1: the compiled
#         step and each form, alternating twice. The variants this session measured were dropped
#         after their calls (none faster): the poll, fold and attention-input ones are in commit
#         75d4dbb, the prefetch split and the red.release arrival in 53a6a5c (this script's FORM
#         table there names them). Here: the cache slots in registers / shared memory.
#   table #20's table (scripts/device/webgpu-table.sh webgpu,cuda) with this build's defaults
# A step starts only while the call is under its deadline (S26_DEADLINE s); logs and JSON under
# $OUT/s26-PART come back as one tarball, the summary printed last.
set -uo pipefail
part=${1:?usage: s26.sh mk|table}
if [ "$part" = table ]; then exec bash "$(dirname "$0")/webgpu-table.sh" webgpu,cuda; fi
session=s26
source "$(dirname "$0")/session-lib.sh"
# name = env of each megakernel form
declare -A FORM=(
  [base]="KILN_DECODE_MEGAKERNEL_KV_SLOTS=registers"
  [kss]="KILN_DECODE_MEGAKERNEL_KV_SLOTS=shared"
)
forms=${FORMS:-base kss}
if [ "$part" = mk ]; then
  mkpart 200
else
  el "unknown part $part"
fi
finish
