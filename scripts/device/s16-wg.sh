#!/usr/bin/env bash
# Session 16's webgpu step of the final call (run by s16.sh final through S16_WG, vulkan backend): the
# one-row reduce and paged-attention load unrolling (helper wgdec2) on the H200: their bit-identity
# tests, every decode kernel's device time, attention with a 40960-wide table over a small cache, and
# decode with the new loops against the old (KILN_WEBGPU_REDUCE_UNROLL=1 KILN_WEBGPU_PAGED_UNROLL=0),
# alternating twice.
K="timeout -k 5"
o=${OUT:-/tmp/out}/s16-final
$K 70 node --test dist/test/webgpu-reduce-unroll.test.js dist/test/webgpu-paged.test.js > "$o/wg-tests.txt" 2>&1; grep -E "^# (pass|fail|skipped)|^not ok" "$o/wg-tests.txt"
$K 45 node dist/bench/webgpu-decode-kernels.js --json "$o/wg-kernels.json" 2>&1 | tee "$o/wg-kernels.txt" | tail -40
$K 20 node dist/bench/webgpu-decode-kernels.js --only pagedAttention --capacity 40960 --cache-blocks 40 --json "$o/wg-paged-cache640.json" 2>&1 | tail -6
for rep in 1 2; do
  $K 30 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 2 --json "$o/wg-decode-new-$rep.json" 2>&1 | grep -E "^decode"
  KILN_WEBGPU_REDUCE_UNROLL=1 KILN_WEBGPU_PAGED_UNROLL=0 $K 30 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 2 --json "$o/wg-decode-old-$rep.json" 2>&1 | grep -E "^decode" | sed 's/^/old loops: /'
done
