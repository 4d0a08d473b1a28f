#!/usr/bin/env bash
# Device round for the fused cuda attention (helper attn): precompile the kernels in parallel, GPU
# tests, sdpa vs torch (+ math path and a bf16 tile sweep). Results: $HOUT/bench.json (+ log.txt).
# Runs from the unpacked build root (the current directory on the device).
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader 2>/dev/null | head -1
timeout 15 node scripts/device/attn-warm.mjs 14 2>&1 | grep --line-buffered -v '^\s*at ' | tail -6
timeout 35 node --test --test-concurrency=1 dist/test/cuda-attention.test.js 2>&1 | grep --line-buffered -E '^(not )?ok|^# (tests|pass|fail)|error:|expected|cuda [-0-9N]|duration_ms: [0-9]{4}' | head -40
timeout 12 python3 scripts/device/attn_torch.py /tmp/attn_torch.json 2>&1 | tail -8
timeout 25 node dist/bench/cuda-sdpa.js /tmp/attn_torch.json "$HOUT/bench.json" 2>&1 | tail -16
timeout 8 node dist/src/cli/main.js bench --device cuda --size full --dtype float32 bfloat16 --workload transformer-block --no-progress 2>&1 | tail -6
