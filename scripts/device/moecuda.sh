#!/usr/bin/env bash
# moecuda device round: the cuda sort/topk and MoE/mHC kernel tests, then the benchmark
# (PyTorch references vs Kiln eager, one merged file $HOUT/bench.json). Runs from the build root.
set -u
export PYTHONUNBUFFERED=1
echo "--- tests (llm-moe-cuda, cuda-sort)"
timeout 45 node --test --test-concurrency=1 dist/test/llm-moe-cuda.test.js dist/test/cuda-sort.test.js 2>&1 \
  | grep -vE "^\s+(duration_ms|type|\.\.\.|---)" | head -300
echo "--- bench: pytorch"
timeout 20 python3 scripts/bench_llm_moe_pytorch.py /tmp/moecuda-torch.json --quick
echo "--- bench: kiln"
timeout 20 node dist/bench/llm-moe-cuda.js /tmp/moecuda-torch.json "$HOUT/bench.json"
