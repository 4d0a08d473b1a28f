#!/usr/bin/env bash
# Device round of helper wgnormlin (issue #20: llm.addRmsNormLinear on webgpu, the add + RMSNorm in
# the skinny GEMV's prologue). Run from the repo root with dist/ built, one stage per call (each
# well under 10 minutes), results under $OUT:
#   bash .device/run.sh bash scripts/device/wgnormlin.sh tests     the kernel vs float64, opcheck, the pass
#                                                                  on a compiled tiny Qwen3 decode, tokens
#   bash .device/run.sh bash scripts/device/wgnormlin.sh kernels   fused vs separate rows (float16, float32)
#   bash .device/run.sh bash scripts/device/wgnormlin.sh decode    Qwen3-0.6B float16 decode, option off / on,
#                                                                  alternating, two runs each
#   bash .device/run.sh bash scripts/device/wgnormlin.sh decode-pf the same with the option on, weight
#                                                                  prefetch (KILN_WEBGPU_GEMV_NORM_PREFETCH) off / on
set -uo pipefail
out=${OUT:-/tmp/out}; mkdir -p "$out"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
export KILN_CACHE_DIR=/tmp/kiln-cache KILN_WEBGPU_BACKEND=vulkan
stage=${1:-tests}

case "$stage" in
  tests)
    el "tests"
    timeout 400 node --test --test-concurrency=1 dist/test/webgpu-add-rms-norm-linear.test.js dist/test/webgpu-add-rms-norm-linear-decode.test.js dist/test/webgpu-linear-silu-mul.test.js > "$out/tests.txt" 2>&1
    echo "exit $?"; grep -E "^# (pass|fail|skip)|^not ok|^ok" "$out/tests.txt"
    grep -A20 -E "^not ok" "$out/tests.txt" | grep -E "failures|got|error|Error" | head -20
    ;;
  kernels)
    for dt in float16 float32; do
      el "kernel rows $dt"
      timeout 240 node dist/bench/webgpu-decode-kernels.js --dtype $dt --only addRmsNorm --reps 50 --json "$out/kernels-$dt.json" 2>&1 | tail -20
    done
    ;;
  decode)
    for rep in 1 2; do
      for on in 0 1; do
        el "decode float16 KILN_ADD_RMSNORM_LINEAR=$on (run $rep)"
        KILN_ADD_RMSNORM_LINEAR=$on timeout 140 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 2 --json "$out/decode-f16-arl$on-run$rep.json" 2>&1 | grep -E "batch 1:|^decode|tok/s" | head -4
      done
    done
    ;;
  decode-pf)
    for rep in 1 2; do
      for pf in 0 1; do
        el "decode float16 KILN_ADD_RMSNORM_LINEAR=1 KILN_WEBGPU_GEMV_NORM_PREFETCH=$pf (run $rep)"
        KILN_ADD_RMSNORM_LINEAR=1 KILN_WEBGPU_GEMV_NORM_PREFETCH=$pf timeout 140 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 2 --json "$out/decode-f16-arl1-pf$pf-run$rep.json" 2>&1 | grep -E "tok/s" | head -4
      done
    done
    ;;
  *)
    echo "unknown stage '$stage' (tests, kernels, decode, decode-pf)"; exit 2 ;;
esac
el "done"
