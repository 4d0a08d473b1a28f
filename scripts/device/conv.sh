#!/usr/bin/env bash
# Device round for the implicit-GEMM conv2d (helper "conv"): conv bench (Kiln vs torch, per conv),
# the cuda-conv tests, then the conv-stack workload end to end. Each part has its own time cap so
# one slow part cannot starve the rest; the compact table is printed at the end.
export KILN_CACHE_DIR=/tmp/kiln-conv-cache
echo "== torch conv rows"; t0=$SECONDS
timeout 25 python3 scripts/bench_conv_torch.py > /tmp/torch-conv.json || echo "torch bench failed rc=$?"
echo "torch: $((SECONDS - t0)) s"; t0=$SECONDS
echo "== kiln conv rows"
timeout 30 node dist/bench/cuda-conv.js /tmp/torch-conv.json "$HOUT/bench.json" > /tmp/conv-table.txt 2>&1 || echo "kiln bench rc=$?"
echo "kiln bench: $((SECONDS - t0)) s"; t0=$SECONDS
echo "== tests"
timeout 25 node --test --test-concurrency=1 dist/test/cuda-conv.test.js > /tmp/conv-tests.txt 2>&1; echo "tests rc=$? $((SECONDS - t0)) s"
grep -E "^not ok|^# (tests|pass|fail|skipped)|error:|Error|expected|actual|got " /tmp/conv-tests.txt | head -40
t0=$SECONDS
echo "== conv-stack workload"
timeout 20 node dist/src/cli/main.js bench --device cuda --size full --dtype float32 bfloat16 --workload conv-stack --no-progress 2>&1 | tail -15
echo "workload: $((SECONDS - t0)) s"
echo "== conv table"
cat /tmp/conv-table.txt
