#!/usr/bin/env bash
# Lead's stage of a device round (scripts/device-round.sh): cuda tests of this round's changes,
# the small workloads, kernel-level profiles of qwen3, and a CPU profile of its warm start.
set -uo pipefail
node --test --test-concurrency=1 dist/test/cuda-compile.test.js dist/test/llm-rotary.test.js dist/test/cuda-nn-extra.test.js dist/test/cuda-scatter.test.js 2>&1 | grep -E "^# (tests|pass|fail|skipped)|^not ok|Error|expected|actual" | head -40
node dist/src/cli/main.js bench --device cuda --size full --dtype float32 bfloat16 --workload elementwise-4096,elementwise-1024,mlp-64x512 --no-progress 2>&1 | tail -n 9
for dt in bfloat16 float32; do timeout 60 node dist/bench/cuda-profile.js qwen3-0.6b-forward $dt --top 22 2>&1 | grep -v KILN_ | tail -n 24; done
export KILN_CACHE_DIR=/tmp/kiln-startup-cache
for k in cold warm; do echo "--- $k start"; timeout 60 node dist/bench/startup-profile.js qwen3-0.6b-forward cuda bfloat16 /tmp/sp-$k.cpuprofile 2>&1 | sed -n '1p;/inclusive/,+30p'; done
