#!/usr/bin/env bash
# Device round of helper llmcuda: the LLM library's cuda kernels (tests), then the benchmark against
# PyTorch's forward_native references (scripts/bench_llm_pytorch.py + dist/bench/llm-cuda.js),
# merged into $HOUT/bench.json. Each stage has its own time limit so a slow one leaves the rest.
T=/tmp/llmcuda.$$; mkdir -p "$T"
echo "== tests (node $(node --version))"
timeout 40 node --test --test-concurrency=1 --test-reporter=spec dist/test/llm-cuda.test.js 2>&1 | grep -vE '^\s*$' | tail -40
echo "== torch side"
timeout 22 python3 scripts/bench_llm_pytorch.py --json "$T/torch.json" --tokens 1 16 256 4096 16384 --reps 50 2>&1 | tail -3
echo "== kiln side"
timeout 22 node dist/bench/llm-cuda.js --json "$T/kiln.json" --tokens 1 16 256 4096 16384 --reps 50 2>&1 | tail -3
echo "== merged"
[ -f "$T/torch.json" ] && [ -f "$T/kiln.json" ] && python3 scripts/bench_llm_merge.py "$T/torch.json" "$T/kiln.json" "$HOUT/bench.json"
