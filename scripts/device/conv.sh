#!/usr/bin/env bash
# Device run for the implicit-GEMM conv2d (helper "conv"): the cuda-conv tests, the per-conv bench
# (Kiln vs torch, CUDA events, medians of 100, with the block-tile sweep behind pickTile), the
# conv-stack workload end to end (Kiln, then PyTorch eager + torch.compile), and one merged table.
# $HOUT/bench.json: the per-conv rows plus the conv-stack rows. Each part has its own time cap.
export KILN_CACHE_DIR=/tmp/kiln-conv-cache
t0=$SECONDS
timeout 30 node --test --test-concurrency=1 --test-reporter=spec dist/test/cuda-conv.test.js > /tmp/conv-tests.txt 2>&1
rc=$?; echo "== tests rc=$rc ($((SECONDS - t0)) s)"
if [ $rc -eq 0 ]; then grep -E "^[✔✖] |^ℹ (tests|pass|fail)" /tmp/conv-tests.txt
else sed '/failing tests/,$d' /tmp/conv-tests.txt | grep -vE "^\s+at |node:internal|^\s*$" | head -90; fi
t0=$SECONDS
timeout 12 python3 scripts/bench_conv_torch.py > /tmp/torch-conv.json || echo "torch bench rc=$?"
echo "== torch rows ($((SECONDS - t0)) s)"; t0=$SECONDS
timeout 34 node dist/bench/cuda-conv.js /tmp/torch-conv.json "$HOUT/bench.json" 2>&1 || echo "kiln bench rc=$?"
echo "== kiln rows done ($((SECONDS - t0)) s)"; t0=$SECONDS
cp "$HOUT/bench.json" /tmp/conv-rows.json 2>/dev/null
echo "== conv-stack workload"
timeout 8 node dist/src/cli/main.js bench --device cuda --size full --dtype float32 bfloat16 --workload conv-stack --no-progress --json /tmp/kiln-e2e.json 2>&1 | tail -5
node scripts/device/conv-merge.mjs "$HOUT/bench.json" /tmp/kiln-e2e.json /tmp/none.json
echo "workload: $((SECONDS - t0)) s"; t0=$SECONDS
PYTHONUNBUFFERED=1 timeout 25 python3 scripts/bench_pytorch.py --workload conv-stack --json /tmp/pt.json 2>&1 | grep -v Warning | tail -3
cp /tmp/conv-rows.json /tmp/merged.json 2>/dev/null && node scripts/device/conv-merge.mjs /tmp/merged.json /tmp/kiln-e2e.json /tmp/pt.json && cp /tmp/merged.json "$HOUT/bench.json"
echo "pytorch workload: $((SECONDS - t0)) s"
