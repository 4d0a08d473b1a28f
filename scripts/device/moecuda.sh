#!/usr/bin/env bash
# moecuda device round: the cuda sort/topk/scatterAdd and MoE/mHC kernel tests, then the benchmark
# (PyTorch references vs Kiln eager, one merged file $HOUT/bench.json). Runs from the build root.
set -u
export PYTHONUNBUFFERED=1
echo "--- tests (llm-moe-cuda, cuda-sort)"
timeout 34 node --test --test-concurrency=1 dist/test/llm-moe-cuda.test.js dist/test/cuda-sort.test.js 2>&1 \
  | grep -vE "^\s+(duration_ms|type|\.\.\.|---)" | head -300
echo "--- bench: pytorch"
timeout 26 python3 scripts/bench_llm_moe_pytorch.py /tmp/moecuda-torch.json --compile-modes none
echo "--- bench: kiln"
timeout 28 node dist/bench/llm-moe-cuda.js /tmp/moecuda-torch.json "$HOUT/bench.json"
