#!/usr/bin/env bash
# Device round for the fused cuda attention (helper attn): GPU tests, then sdpa vs torch, then the
# transformer-block workload if time is left. Results: $HOUT/bench.json (+ log.txt).
cd "$(dirname "$0")/../.." || exit 1
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader 2>/dev/null | head -1
timeout 40 node --test --test-concurrency=1 dist/test/cuda-attention.test.js 2>&1 | grep -E '^(not )?ok|^# (tests|pass|fail)|expected|Error|cuda |element' | head -40
timeout 15 python3 scripts/device/attn_torch.py /tmp/attn_torch.json 2>&1 | tail -8
timeout 20 node dist/bench/cuda-sdpa.js /tmp/attn_torch.json "$HOUT/bench.json" 2>&1 | tail -12
timeout 20 node dist/src/cli/main.js bench --device cuda --size full --dtype float32 bfloat16 --workload transformer-block --no-progress 2>&1 | tail -8
