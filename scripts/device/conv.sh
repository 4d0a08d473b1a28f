#!/usr/bin/env bash
# Device round for the implicit-GEMM conv2d (helper "conv"): the cuda-conv tests, the per-conv
# bench (Kiln vs torch, CUDA events, medians of 100), then the conv-stack workload end to end.
# Each part has its own time cap so one slow part cannot starve the rest.
export KILN_CACHE_DIR=/tmp/kiln-conv-cache
t0=$SECONDS
timeout 36 node --test --test-concurrency=1 --test-reporter=spec dist/test/cuda-conv.test.js > /tmp/conv-tests.txt 2>&1
rc=$?; echo "== tests rc=$rc ($((SECONDS - t0)) s)"
if [ $rc -eq 0 ]; then grep -E "^[✔✖] |^ℹ (tests|pass|fail)" /tmp/conv-tests.txt
else sed '/failing tests/,$d' /tmp/conv-tests.txt | grep -vE "^\s+at |node:internal|^\s*$" | head -90; fi
t0=$SECONDS
timeout 12 python3 scripts/bench_conv_torch.py > /tmp/torch-conv.json || echo "torch bench rc=$?"
echo "== torch rows ($((SECONDS - t0)) s)"; t0=$SECONDS
timeout 36 node dist/bench/cuda-conv.js /tmp/torch-conv.json "$HOUT/bench.json" 2>&1 || echo "kiln bench rc=$?"
echo "== kiln rows done ($((SECONDS - t0)) s)"; t0=$SECONDS
echo "== conv-stack workload"
node dist/src/cli/main.js bench --device cuda --size full --dtype float32 bfloat16 --workload conv-stack --no-progress 2>&1 | tail -12
echo "workload: $((SECONDS - t0)) s"
