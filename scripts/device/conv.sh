#!/usr/bin/env bash
# Device run for helper "conv" (session 4, R2): the cuda-conv tests that cover every block tile
# (two new ones), the stem/body shapes, the fused epilogue and compile; the conv2dBatchNorm tests
# (the conv + eval BatchNorm + ReLU fold, now on the re-picked tiles); the conv-stack workload end
# to end; PyTorch eager + torch.compile on the same workload; then the block-tile sweep of the
# fused conv (scripts/device/conv-tiles.mjs). $HOUT/bench.json: the Kiln workload rows.
export KILN_CACHE_DIR=/tmp/kiln-conv-cache
t0=$SECONDS
summ() { if [ "$1" -eq 0 ]; then grep -E "^[✔✖] |^ℹ (tests|pass|fail)" "$2"; else sed '/failing tests/,$d' "$2" | grep -vE "^\s+at |node:internal|^\s*$" | head -60; fi; }
timeout 36 node --test --test-concurrency=1 --test-reporter=spec --test-name-pattern="every block tile|stem Cin 3|body Cin 64|kiln.compile|epilogue" dist/test/cuda-conv.test.js > /tmp/t2.txt 2>&1
rc=$?; echo "== cuda-conv tests rc=$rc ($((SECONDS - t0)) s)"; summ $rc /tmp/t2.txt; t0=$SECONDS
timeout 18 node --test --test-concurrency=1 --test-reporter=spec dist/test/cuda-conv-bn.test.js > /tmp/t1.txt 2>&1
rc=$?; echo "== cuda-conv-bn tests rc=$rc ($((SECONDS - t0)) s)"; summ $rc /tmp/t1.txt; t0=$SECONDS
timeout 9 node dist/src/cli/main.js bench --device cuda --size full --dtype float32 bfloat16 --workload conv-stack --no-progress --json "$HOUT/bench.json" 2>&1 | tail -4
echo "== kiln workload ($((SECONDS - t0)) s)"; t0=$SECONDS
PYTHONUNBUFFERED=1 timeout 18 python3 scripts/bench_pytorch.py --workload conv-stack --json /tmp/pt.json 2>&1 | grep -v Warning | tail -3
echo "== pytorch ($((SECONDS - t0)) s)"; t0=$SECONDS
timeout 12 node scripts/device/conv-tiles.mjs 2>&1 | grep -v Warning
echo "== tile sweep ($((SECONDS - t0)) s)"
