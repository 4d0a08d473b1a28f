#!/usr/bin/env bash
# Lead's stage of a device round (scripts/device-round.sh): the attention tile rule's tests, the
# sdpa benchmark (rule vs sweep, vs torch), and the qwen3 / transformer-block rows.
set -uo pipefail
timeout 60 node --test --test-concurrency=1 dist/test/cuda-attention.test.js 2>&1 | grep -E '^not ok|^# (tests|pass|fail)|error:' | head -20
timeout 20 python3 scripts/device/attn_torch.py /tmp/attn_torch.json > /dev/null 2>&1
timeout 60 node dist/bench/cuda-sdpa.js /tmp/attn_torch.json "$HOUT/sdpa.json" 2>&1 | grep -v "^  sweep" | tail -8
timeout 60 node dist/src/cli/main.js bench --device cuda --size full --dtype float32 bfloat16 --workload qwen3-0.6b-forward,transformer-block --no-progress 2>&1 | tail -5
