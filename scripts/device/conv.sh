#!/usr/bin/env bash
# Device run for helper "conv" (session 4): conv2dBatchNorm tests (the conv + eval BatchNorm + ReLU
# fold on cuda), a block-tile sweep of the fused conv (scripts/device/conv-tiles.mjs), where
# conv-stack's device time goes (cuda-profile; its first step, the stem conv, is not shown), the
# conv-stack workload end to end, then PyTorch eager + torch.compile on the same workload.
# $HOUT/bench.json: the Kiln workload rows.
export KILN_CACHE_DIR=/tmp/kiln-conv-cache
t0=$SECONDS
summ() { if [ "$1" -eq 0 ]; then grep -E "^[✔✖] |^ℹ (tests|pass|fail)" "$2"; else sed '/failing tests/,$d' "$2" | grep -vE "^\s+at |node:internal|^\s*$" | head -60; fi; }
timeout 25 node --test --test-concurrency=1 --test-reporter=spec dist/test/cuda-conv-bn.test.js > /tmp/t1.txt 2>&1
rc=$?; echo "== cuda-conv-bn tests rc=$rc ($((SECONDS - t0)) s)"; summ $rc /tmp/t1.txt; t0=$SECONDS
timeout 10 node dist/src/cli/main.js bench --device cuda --size full --dtype float32 bfloat16 --workload conv-stack --no-progress --json "$HOUT/bench.json" 2>&1 | tail -4
echo "== kiln workload ($((SECONDS - t0)) s)"; t0=$SECONDS
for dt in float32 bfloat16; do
  timeout 9 node dist/bench/cuda-profile.js conv-stack $dt --top 6 2>&1 | grep -v Warning | tail -8
done
echo "== profiles ($((SECONDS - t0)) s)"; t0=$SECONDS
timeout 22 node scripts/device/conv-tiles.mjs 2>&1 | grep -v Warning
echo "== tile sweep ($((SECONDS - t0)) s)"; t0=$SECONDS
PYTHONUNBUFFERED=1 timeout 20 python3 scripts/bench_pytorch.py --workload conv-stack --json /tmp/pt.json 2>&1 | grep -v Warning | tail -4
echo "== pytorch ($((SECONDS - t0)) s)"
