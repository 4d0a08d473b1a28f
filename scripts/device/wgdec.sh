#!/usr/bin/env bash
# Device round for issue #20's webgpu decode device time (branch wgdec): Qwen3-0.6B shapes, random
# float16 weights, batch 1, Dawn/Vulkan on the H200. Under 3 minutes (each step has a timeout):
#   1. tests that compute (split argmax, paged attention with length-spread splits and word key
#      loads, the gated GEMV and the rotary kernel writing the caches, the plain GEMV, the engine's float16 compiled decode against
#      transformers' tokens: native f16, which SwiftShader lacks);
#   2. decode tok/s with --breakdown (runner host/device time, sampler, engine), the defaults (the
#      gate/up GEMV stores silu(g) * u, the rotary kernel writes the caches);
#   3. per-kernel device time without stamp overhead (bench/webgpu-decode-kernels.js);
#   4. decode with both fusions off (KILN_LINEAR_SILU_MUL=0 KILN_QK_NORM_ROTARY_CACHE=0: 56
#      dispatches more per step);
#   5. the per-dispatch profile of the compiled step (replay off, stamps per dispatch; last: the
#      stamps distort it, see bench/webgpu-decode-kernels.ts).
# Run from the repo root with dist/ built and carried:
#   bash .device/run.sh bash scripts/device/wgdec.sh
set -uo pipefail
out=${OUT:-/tmp/out}; mkdir -p "$out"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
export KILN_CACHE_DIR=/tmp/kiln-cache KILN_WEBGPU_BACKEND=vulkan

el "tests"
timeout 35 node --test dist/test/webgpu-argmax-split.test.js dist/test/webgpu-paged.test.js dist/test/webgpu-linear-silu-mul.test.js dist/test/webgpu-qk-norm-rotary-cache.test.js dist/test/webgpu-gemv.test.js > "$out/test-kernels.txt" 2>&1; grep -E "^# (pass|fail|skipped)|^not ok" "$out/test-kernels.txt"
timeout 30 node --test --test-name-pattern="float16, compiled decode" dist/test/webgpu-generate.test.js > "$out/test-generate.txt" 2>&1; grep -E "^# (pass|fail|skipped)|^not ok|steps equal" "$out/test-generate.txt"
el "decode"
timeout 40 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 2 --breakdown --json "$out/decode.json" 2>&1 | grep -E "batch 1|^decode"
el "kernels"
timeout 25 node dist/bench/webgpu-decode-kernels.js --json "$out/kernels.json" 2>&1 | tail -12
el "decode, KILN_LINEAR_SILU_MUL=0 KILN_QK_NORM_ROTARY_CACHE=0"
KILN_LINEAR_SILU_MUL=0 KILN_QK_NORM_ROTARY_CACHE=0 timeout 25 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 2 --breakdown --json "$out/decode-unfused.json" 2>&1 | grep -E "batch 1|^decode"
el "profile (replay off, stamps per dispatch)"
KILN_WEBGPU_REPLAY=0 timeout 25 node dist/bench/webgpu-decode-profile.js --dtype float16 --decode compiled --steps 4 --json "$out/profile.json" 2>&1 | head -12
el "done"
