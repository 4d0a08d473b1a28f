#!/usr/bin/env bash
# Device round of helper llmcuda: the LLM library's cuda kernels (tests), then the benchmark against
# PyTorch's forward_native references (scripts/bench_llm_pytorch.py + dist/bench/llm-cuda.js with
# the norm-knob sweep), merged into $HOUT/bench.json. Each stage has its own time limit.
T=/tmp/llmcuda.$$; mkdir -p "$T"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s]"; }
echo "== tests (node $(node --version))"
timeout 38 node --test --test-concurrency=1 --test-reporter=spec dist/test/llm-cuda.test.js > "$T/test.txt" 2>&1
grep -E '^[✔✖]|^ℹ (tests|pass|fail|skipped|duration)' "$T/test.txt"
awk '/failing tests:/,0' "$T/test.txt" | grep -vE '^\s+at |^\s*$' | head -40
el; echo "== torch side"
timeout 22 python3 scripts/bench_llm_pytorch.py --compile-modes none --json "$T/torch.json" --tokens 1 16 256 4096 16384 --reps 50 > "$T/torch.txt" 2>&1; tail -2 "$T/torch.txt"
el; echo "== kiln side"
timeout 26 node dist/bench/llm-cuda.js --json "$T/kiln.json" --tokens 1 16 256 4096 16384 --reps 50 --sweep > "$T/kiln.txt" 2>&1; grep -E '^sweep' "$T/kiln.txt"; tail -2 "$T/kiln.txt"
el; echo "== merged"
[ -f "$T/torch.json" ] && [ -f "$T/kiln.json" ] && python3 scripts/bench_llm_merge.py "$T/torch.json" "$T/kiln.json" "$HOUT/bench.json"
