#!/usr/bin/env bash
# Lead's stage of a device round (scripts/device-round.sh): the graph-lending / fast-math changes
# (cuda compile tests, elementwise bench), where qwen3's device time goes, and its warm start.
set -uo pipefail
node --test --test-concurrency=1 dist/test/cuda-compile.test.js 2>&1 | grep -E "^# (tests|pass|fail)|^not ok|KILN_|Error" | head -20
node dist/src/cli/main.js bench --device cuda --size full --dtype float32 bfloat16 --workload elementwise-4096,elementwise-1024,mlp-64x512 --no-progress 2>&1 | tail -n 12
for dt in bfloat16 float32; do timeout 60 node dist/bench/cuda-profile.js qwen3-0.6b-forward $dt --top 22 2>&1 | tail -n 24; done
timeout 100 node dist/src/cli/main.js bench --device cuda --size full --dtype bfloat16 --workload qwen3-0.6b-forward --startup --startup-runs 1 --reps 5 --warmup 2 --no-progress 2>&1 | tail -n 8
