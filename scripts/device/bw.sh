#!/usr/bin/env bash
# Device round of helper bw (issue #6 bf16 rmsNorm bandwidth, issue #5 elementwise-4096): the LLM
# norm tests and the cuda compile tests, then the norm benchmark against PyTorch in one run (with the
# norm-knob sweep), cuda-profile of elementwise-4096 and the config sweep of its generated kernel.
# Each stage has its own time limit; results print as they come.
T=/tmp/bw.$$; mkdir -p "$T"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s]"; }
tests() { timeout "$1" node --test --test-concurrency=1 --test-reporter=spec "${@:2}" > "$T/test.txt" 2>&1; echo "exit $?"
  grep -E '^[✔✖]|^ℹ (tests|pass|fail|skipped|duration)' "$T/test.txt"; awk '/failing tests:/,0' "$T/test.txt" | grep -vE '^\s+at |^\s*$' | head -30; }
echo "== tests (node $(node --version))"
tests 48 dist/test/llm-cuda.test.js; el
tests 14 dist/test/cuda-compile.test.js; el
echo "== torch side (norms)"
timeout 10 python3 scripts/bench_llm_pytorch.py --compile-modes none --json "$T/torch.json" --tokens 1 16 256 4096 16384 --reps 50 --only llm.rmsNorm llm.fusedAddRmsNorm > "$T/torch.txt" 2>&1; tail -1 "$T/torch.txt"; el
echo "== kiln side (norms)"
timeout 14 node dist/bench/llm-cuda.js --json "$T/kiln.json" --tokens 1 16 256 4096 16384 --reps 50 --sweep --only llm.rmsNorm llm.fusedAddRmsNorm > "$T/kiln.txt" 2>&1; grep -E '^sweep' "$T/kiln.txt"; tail -1 "$T/kiln.txt"; el
echo "== merged"
[ -f "$T/torch.json" ] && [ -f "$T/kiln.json" ] && python3 scripts/bench_llm_merge.py "$T/torch.json" "$T/kiln.json" "$HOUT/bench.json"
el
echo "== cuda-profile elementwise-4096"
for d in float32 bfloat16; do timeout 5 node dist/bench/cuda-profile.js elementwise-4096 $d --top 3 2>&1 | tail -3; done; el
echo "== pointwise configs (fp32)"
timeout 6 node dist/bench/cuda-pointwise-configs.js elementwise-4096 float32 --runs 20 --waves inf 2>&1 | grep -E "default|e1v4|e2v4|fastest"; el
