#!/usr/bin/env bash
# Device round for issue #20, branch wgrow (register-resident one-row kernels on webgpu, H200,
# Dawn/Vulkan, Qwen3-0.6B shapes, float16). About 7 minutes in all, each step under its own timeout;
# a part alone with its name as the argument (tests, rowbench, kernels, decode; default all):
#   1. tests that compute on the GPU what changed (native f16 + subgroups, which SwiftShader lacks):
#      the register-form reductions and the reduction forms against float64, the q/k norm + rotary
#      forms against float64, the engine's float16 compiled decode against transformers' tokens;
#   2. the plain-Dawn microbenchmark of one-row forms (scripts/device/wg-rowbench.mjs);
#   3. per-kernel device time of every form in one process (webgpu-decode-kernels.js --only Norm:
#      rmsNorm, compiled add + RMSNorm (loop / unroll 4 / registers), qkNormRotaryCache (loop / registers));
#   4. decode tok/s alternating the new forms (defaults) and the old (both options off), twice.
# Run from the repo root with dist/ built and carried:
#   bash .device/run.sh bash scripts/device/wgrow.sh [PART]
set -uo pipefail
part=${1:-all}
on() { [ "$part" = all ] || [ "$part" = "$1" ]; }
out=${OUT:-/tmp/out}; mkdir -p "$out"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
export KILN_CACHE_DIR=/tmp/kiln-cache KILN_WEBGPU_BACKEND=vulkan
K="timeout -k 5"
OLD="KILN_WEBGPU_REDUCE_REGISTERS=0 KILN_WEBGPU_ROTARY_REGISTERS=0"

if on tests; then
el "tests"
$K 150 node --test dist/test/webgpu-reduce-registers.test.js dist/test/webgpu-reduce-unroll.test.js dist/test/webgpu-rotary-registers.test.js dist/test/webgpu-qk-norm-rotary-cache.test.js > "$out/test-kernels.txt" 2>&1; grep -E "^# (pass|fail|skipped)|^not ok|error:" "$out/test-kernels.txt" | head -20
$K 40 node --test --test-name-pattern="float16, compiled decode" dist/test/webgpu-generate.test.js > "$out/test-generate.txt" 2>&1; grep -E "^# (pass|fail|skipped)|^not ok|steps equal" "$out/test-generate.txt"
fi
if on rowbench; then
el "row microbenchmark"
$K 180 node scripts/device/wg-rowbench.mjs --json "$out/rowbench.json" 2>&1 | grep -v "^ - " | tee "$out/rowbench.txt" | tail -70
fi
if on kernels; then
el "kernels per form"
$K 60 node dist/bench/webgpu-decode-kernels.js --only Norm --json "$out/kernels.json" 2>&1 | tee "$out/kernels.txt" | tail -20
fi
if on decode; then
for r in 1 2; do
  el "decode (new forms, run $r)"
  $K 45 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 2 --breakdown --json "$out/decode-new-$r.json" 2>&1 | grep -E "batch 1|^decode"
  el "decode (old: $OLD, run $r)"
  env $OLD $K 45 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 2 --breakdown --json "$out/decode-old-$r.json" 2>&1 | grep -E "batch 1|^decode"
done
fi
el "done"
