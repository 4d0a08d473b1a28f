#!/usr/bin/env bash
# Lead's stage of a device round (scripts/device-round.sh): kernel-level profiles of compiled
# workloads, and a CPU profile of qwen3's cold and warm compiled start.
set -uo pipefail
node --test dist/test/llm-rotary.test.js 2>&1 | grep -E "^# (pass|fail|skip)|^not ok" ; timeout 40 node dist/bench/cuda-profile.js elementwise-4096 float32 --top 5 2>&1 | tail -n 7
for dt in bfloat16 float32; do timeout 60 node dist/bench/cuda-profile.js qwen3-0.6b-forward $dt --top 24 2>&1 | tail -n 26; done
export KILN_CACHE_DIR=/tmp/kiln-startup-cache
for k in cold warm; do echo "--- $k start"; timeout 60 node dist/bench/startup-profile.js qwen3-0.6b-forward cuda bfloat16 /tmp/sp-$k.cpuprofile 2>&1 | head -n 75; done
