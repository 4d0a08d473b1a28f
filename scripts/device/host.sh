#!/usr/bin/env bash
# Helper "host" device stage: the stored-tuning tests, qwen3's compiled start cold / warm without
# stored tuning (KILN_TUNE_STORE=0) / warm with it (one KILN_CACHE_DIR; a CPU profile of the
# last), the small workloads through kiln bench, then the cuda compile tests.
set -uo pipefail
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
timeout 25 node --test --test-concurrency=1 dist/test/cuda-graph-store.test.js dist/test/compile-fast-call.test.js 2>&1 | grep -E "^# (tests|pass|fail|skipped)|^not ok|Error|expected|actual" | head -20
el
export KILN_CACHE_DIR=/tmp/kiln-host-cache
rm -rf "$KILN_CACHE_DIR"
for k in cold warm-nostore warm warm2; do
  if [ "$k" = warm-nostore ]; then st=0; else st=1; fi
  KILN_TUNE_STORE=$st timeout 25 node dist/bench/startup-profile.js qwen3-0.6b-forward cuda bfloat16 /tmp/sp-$k.cpuprofile > /tmp/sp-$k.txt 2>&1
  echo "=== qwen3 bf16 start $k rc=$? $(el)"; head -n 1 /tmp/sp-$k.txt | cut -c1-400
done
sed -n '/self time/,+8p;/inclusive/,+26p' /tmp/sp-warm.txt
unset KILN_CACHE_DIR
el
timeout 35 node dist/src/cli/main.js bench --device cuda --size full --dtype float32 bfloat16 --workload elementwise-4096,elementwise-1024,mlp-64x512 --no-progress 2>&1 | tail -n 9
el
timeout 30 node --test --test-concurrency=1 dist/test/cuda-compile.test.js 2>&1 | grep -E "^# (tests|pass|fail|skipped)|^not ok|Error|expected|actual" | head -20
el
