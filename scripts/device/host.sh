#!/usr/bin/env bash
# Helper "host" device stage: host cost of a compiled call (fast path on/off), then qwen3's
# compiled start cold / warm without stored GEMM winners / warm with them (one KILN_CACHE_DIR),
# with a CPU profile of the last, then the cuda compile tests (CUDA graph program changed).
set -uo pipefail
echo "=== fast path A/B (KILN_COMPILE_FAST_CALL)"
timeout 35 node scripts/device/host-ew.mjs 2>&1 | grep -v Warning
export KILN_CACHE_DIR=/tmp/kiln-host-cache
rm -rf "$KILN_CACHE_DIR"
for k in cold warm-nostore warm; do
  echo "=== qwen3 bf16 start: $k"
  if [ "$k" = warm-nostore ]; then st=0; else st=1; fi
  KILN_TUNE_STORE=$st timeout 25 node dist/bench/startup-profile.js qwen3-0.6b-forward cuda bfloat16 /tmp/sp-$k.cpuprofile > /tmp/sp-$k.txt 2>&1
  echo "rc=$?"; head -n 1 /tmp/sp-$k.txt
done
sed -n '/self time/,+14p;/inclusive/,+34p' /tmp/sp-warm.txt
echo "=== tests"
timeout 60 node --test --test-concurrency=1 dist/test/compile-fast-call.test.js dist/test/cuda-compile.test.js 2>&1 | grep -E "^# (tests|pass|fail|skipped)|^not ok|Error|expected|actual" | head -30
