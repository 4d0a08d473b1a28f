#!/usr/bin/env bash
# Device round of helper llmnorm (issue #6). Stage "sweep": the norm knob sweep and the llm-cuda
# table against PyTorch (norm rows also against a copy_ of their own bytes), then the llm-cuda
# tests (norm kernels at every knob setting). Stage "final": the cuda parity tests (compiled ==
# eager, kernels vs float64), the whole #6 benchmark: bench/llm-cuda.ts vs scripts/bench_llm_pytorch.py and bench/llm-moe-cuda.ts
# vs scripts/bench_llm_moe_pytorch.py, merged into $HOUT/bench.json, then the contract validator
# for every manifest entry on cpu and cuda. Stages have their own time
# limits and print as they go (TAP lines stream, so a test run cut short still shows what passed).
T=/tmp/llmnorm.$$; mkdir -p "$T"; t0=$(date +%s)
export PYTHONUNBUFFERED=1
el() { echo "[$(( $(date +%s) - t0 ))s]"; }
tests() { timeout "$1" node --test --test-concurrency=1 --test-reporter=tap "${@:2}" > "$T/test.txt" 2>&1; echo "exit $? (${*:2})"
  grep -E '^(not )?ok |^# (tests|pass|fail|skipped|duration)' "$T/test.txt" | cut -c1-160
  grep -A12 -E '^not ok' "$T/test.txt" | grep -E 'error|expected|actual|message|Error' | head -20; }
STAGE=final
echo "== llmnorm $STAGE (node $(node --version)) $(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader 2>/dev/null)"
if [ "$STAGE" = sweep ]; then
  echo "== kiln side (llm-cuda ops, norm sweep)"
  timeout 40 node dist/bench/llm-cuda.js --json "$T/kiln.json" --reps 50 --sweep > "$T/kiln.txt" 2>&1; grep -E '^sweep' "$T/kiln.txt"; tail -1 "$T/kiln.txt"; el
  echo "== torch side (llm-cuda ops)"
  timeout 15 python3 scripts/bench_llm_pytorch.py --compile-modes none --json "$T/torch.json" --reps 50 > "$T/torch.txt" 2>&1; tail -1 "$T/torch.txt"; el
  echo "== merged"
  python3 scripts/bench_llm_merge.py "$T/torch.json" "$T/kiln.json" "$HOUT/bench.json" --command "scripts/device/llmnorm.sh (stage sweep)"; el
  tests 40 dist/test/llm-cuda.test.js; el
else
  tests 24 --test-name-pattern='on cuda match|compiled on cuda|opcheck|backward' dist/test/llm-cuda.test.js; el
  tests 12 --test-name-pattern='kiln.compile on cuda' dist/test/llm-moe-cuda.test.js; el
  echo "== torch side (llm-cuda ops; MoE, mHC)"
  timeout 14 python3 scripts/bench_llm_pytorch.py --compile-modes none --json "$T/torch.json" --reps 50 > "$T/torch.txt" 2>&1; tail -1 "$T/torch.txt"; el
  timeout 12 python3 scripts/bench_llm_moe_pytorch.py "$T/moe-torch.json" --compile-modes none > "$T/moe-torch.txt" 2>&1; tail -1 "$T/moe-torch.txt"; el
  echo "== kiln side"
  timeout 12 node dist/bench/llm-cuda.js --json "$T/kiln.json" --reps 50 > "$T/kiln.txt" 2>&1; tail -1 "$T/kiln.txt"; el
  timeout 12 node dist/bench/llm-moe-cuda.js "$T/moe-torch.json" "$T/moe.json" > "$T/moe.txt" 2>&1; tail -1 "$T/moe.txt"; el
  echo "== merged"
  python3 scripts/bench_llm_merge.py "$T/torch.json" "$T/kiln.json" "$HOUT/bench.json" --moe "$T/moe.json" --command "scripts/device/llmnorm.sh (stage final)"; el
  # Last, with the rest of the budget: opcheck of every manifest entry on cpu and cuda compiles
  # every library kernel (s5 R3: not done within 14 s).
  tests 45 dist/test/llm-contracts.test.js; el
fi
