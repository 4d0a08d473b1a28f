#!/usr/bin/env bash
# Device round for issue #20, branch wgdec2 (the decode step's kernel time on webgpu, H200, Dawn/Vulkan,
# Qwen3-0.6B shapes, float16). Under 5 minutes, each step under its own timeout:
#   1. tests that compute on the GPU what changed: unrolled reductions bit-identical to one element
#      per step (native f16 + subgroups, which SwiftShader lacks), the reductions and norms against
#      float64, paged attention (unrolled loads, bit-identical and against float64), the engine's
#      float16 compiled decode against transformers' tokens;
#   2. per-kernel device time, old and new in one process (bench/webgpu-decode-kernels.js: reduce
#      unroll 1 vs 4, paged unroll 0/1 x vecv 0/1), the new rows (compiled add + RMSNorm, qkNormRotaryCache,
#      embedding), paged attention at capacity 40960 over a 640-token cache (table width apart from
#      cache size) and at 4544, and the big-buffer GEMV rows;
#   3. decode tok/s: the defaults, then the old loops (KILN_WEBGPU_REDUCE_UNROLL=1 KILN_WEBGPU_PAGED_UNROLL=0).
# Run from the repo root with dist/ built and carried:
#   bash .device/run.sh bash scripts/device/wgdec2.sh
set -uo pipefail
out=${OUT:-/tmp/out}; mkdir -p "$out"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
export KILN_CACHE_DIR=/tmp/kiln-cache KILN_WEBGPU_BACKEND=vulkan
K="timeout -k 5"

el "tests"
$K 120 node --test dist/test/webgpu-reduce-unroll.test.js dist/test/webgpu-reduction.test.js dist/test/webgpu-linalg.test.js dist/test/webgpu-paged.test.js > "$out/test-kernels.txt" 2>&1; grep -E "^# (pass|fail|skipped)|^not ok" "$out/test-kernels.txt"
$K 40 node --test --test-name-pattern="float16, compiled decode" dist/test/webgpu-generate.test.js > "$out/test-generate.txt" 2>&1; grep -E "^# (pass|fail|skipped)|^not ok|steps equal" "$out/test-generate.txt"
el "kernels (all rows; capacity 40960)"
$K 90 node dist/bench/webgpu-decode-kernels.js --json "$out/kernels.json" 2>&1 | tee "$out/kernels.txt" | tail -30
el "paged attention: table 40960 wide over a 640-token cache; table 4544"
$K 30 node dist/bench/webgpu-decode-kernels.js --only pagedAttention --capacity 40960 --cache-blocks 40 --json "$out/paged-cache640.json" 2>&1 | tail -4
$K 30 node dist/bench/webgpu-decode-kernels.js --only pagedAttention --capacity 4544 --json "$out/paged-4544.json" 2>&1 | tail -4
$K 30 node dist/bench/webgpu-decode-kernels.js --only pagedAttention --capacity 40960 --context 2000 --json "$out/paged-ctx2000.json" 2>&1 | tail -4
el "decode (defaults)"
$K 45 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 2 --breakdown --json "$out/decode.json" 2>&1 | grep -E "batch 1|^decode"
el "decode (old loops: KILN_WEBGPU_REDUCE_UNROLL=1 KILN_WEBGPU_PAGED_UNROLL=0)"
KILN_WEBGPU_REDUCE_UNROLL=1 KILN_WEBGPU_PAGED_UNROLL=0 $K 45 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 2 --breakdown --json "$out/decode-old.json" 2>&1 | grep -E "batch 1|^decode"
el "done"
