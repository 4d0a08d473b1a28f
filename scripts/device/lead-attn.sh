#!/usr/bin/env bash
# Lead check of the grid-fill tile rule for the fused attention: tests, sdpa sweep vs torch, qwen3.
timeout 60 node --test --test-concurrency=1 dist/test/cuda-attention.test.js 2>&1 | grep -E '^(not )?ok|^# (tests|pass|fail)|error:|expected|actual' | head -30
timeout 20 python3 scripts/device/attn_torch.py /tmp/attn_torch.json 2>&1 | tail -3
timeout 60 node dist/bench/cuda-sdpa.js /tmp/attn_torch.json "$OUT/sdpa.json" 2>&1 | tail -16
timeout 60 node dist/src/cli/main.js bench --device cuda --size full --dtype float32 bfloat16 --workload qwen3-0.6b-forward,transformer-block --no-progress 2>&1 | tail -6
