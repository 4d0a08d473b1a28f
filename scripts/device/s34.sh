#!/usr/bin/env bash
# Session 34's device calls, from the repo root through .device/run.sh with dist/ built and carried
# (bash .device/run.sh bash scripts/device/s34.sh PART):
#   h200   #20 on the H200: the whole table (webgpu-table.sh: webgpu, cuda, PyTorch eager, webgpu
#          decode, host overhead) with this build's defaults, then bench/webgpu-mma-peak.js with the
#          whole-word refill through an untyped workgroup buffer's views (form view) beside session
#          31's forms. The table first: it is what the issue asks for.
# A step starts only while the call is under its deadline (S34_DEADLINE s); logs and JSON under
# $OUT/s34-PART come back, the summary printed last.
set -uo pipefail
part=${1:?usage: s34.sh h200}
session=s34
source "$(dirname "$0")/session-lib.sh"
if [ "$part" = h200 ]; then
  go table && { KILN_WEBGPU_BACKEND=vulkan WT_WEBGPU_S=150 WT_CUDA_S=100 WT_PT_S=80 WT_DECODE_S=70 bash scripts/device/webgpu-table.sh > "$out/table.txt" 2>&1; el "table rc=$?"; tail -n 40 "$out/table.txt" | tee -a "$out/summary.txt"; cp "$final/webgpu-table.tgz" "$out/" 2>/dev/null; }
  go mma && { wg $K 90 node dist/bench/webgpu-mma-peak.js --json "$out/mma.json" > "$out/mma.txt" 2>&1; el "mma peak rc=$?"; grep -vE '^\{' "$out/mma.txt" | tail -n 24 | tee -a "$out/summary.txt"; grep -E 'error' "$out/mma.txt" | cut -c1-300 | head -4 | tee -a "$out/summary.txt"; }
else
  el "unknown part $part"
fi
finish
