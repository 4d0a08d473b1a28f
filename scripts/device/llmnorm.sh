#!/usr/bin/env bash
# Device round of helper llmnorm (issue #6): the LLM library's cuda tests (norm kernels at every
# knob setting, compiled == eager on cuda f32/bf16, the contract validator for every manifest entry
# on cuda), then the #6 benchmark: every op of bench/llm-cuda.ts against
# scripts/bench_llm_pytorch.py (norm rows also against a copy_ of their own bytes), with the norm
# knob sweep when LLMNORM_SWEEP=1, and bench/llm-moe-cuda.ts against
# scripts/bench_llm_moe_pytorch.py, merged into $HOUT/bench.json. Stages have their own limits and
# print as they go; the merged table prints last.
T=/tmp/llmnorm.$$; mkdir -p "$T"; t0=$(date +%s)
export PYTHONUNBUFFERED=1
el() { echo "[$(( $(date +%s) - t0 ))s]"; }
tests() { timeout "$1" node --test --test-concurrency=1 --test-reporter=spec "${@:2}" > "$T/test.txt" 2>&1; echo "exit $?"
  grep -E '^[✔✖﹣]|^ℹ (tests|pass|fail|skipped|duration)' "$T/test.txt" | sed -E 's/^(.{150}).*(\([0-9.]+ms\))$/\1... \2/'
  awk '/failing tests:/,0' "$T/test.txt" | grep -vE '^\s+at |^\s*$' | head -30; }
STAGE=${LLMNORM_STAGE:-r1}
echo "== llmnorm $STAGE (node $(node --version)) $(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader 2>/dev/null)"
if [ "$STAGE" = r1 ]; then
  tests 44 dist/test/llm-cuda.test.js; el
  echo "== kiln side (llm-cuda ops, norm sweep)"
  timeout 28 node dist/bench/llm-cuda.js --json "$T/kiln.json" --reps 50 --sweep > "$T/kiln.txt" 2>&1; grep -E '^sweep' "$T/kiln.txt"; tail -1 "$T/kiln.txt"; el
  echo "== torch side (llm-cuda ops)"
  timeout 15 python3 scripts/bench_llm_pytorch.py --json "$T/torch.json" --reps 50 > "$T/torch.txt" 2>&1; tail -1 "$T/torch.txt"; el
  echo "== merged"
  python3 scripts/bench_llm_merge.py "$T/torch.json" "$T/kiln.json" "$HOUT/bench.json" --command "LLMNORM_STAGE=r1 bash scripts/device/llmnorm.sh"; el
  tests 12 dist/test/llm-contracts.test.js; el
else
  tests 14 dist/test/llm-contracts.test.js; el
  tests 20 --test-name-pattern='compiled on cuda|opcheck|match the float64' dist/test/llm-cuda.test.js; el
  tests 16 --test-name-pattern='kiln.compile on cuda|opcheck' dist/test/llm-moe-cuda.test.js; el
  echo "== torch side (llm-cuda ops; MoE, mHC)"
  timeout 14 python3 scripts/bench_llm_pytorch.py --json "$T/torch.json" --reps 50 > "$T/torch.txt" 2>&1; tail -1 "$T/torch.txt"; el
  timeout 12 python3 scripts/bench_llm_moe_pytorch.py "$T/moe-torch.json" > "$T/moe-torch.txt" 2>&1; tail -1 "$T/moe-torch.txt"; el
  echo "== kiln side"
  timeout 10 node dist/bench/llm-cuda.js --json "$T/kiln.json" --reps 50 > "$T/kiln.txt" 2>&1; tail -1 "$T/kiln.txt"; el
  timeout 12 node dist/bench/llm-moe-cuda.js "$T/moe-torch.json" "$T/moe.json" > "$T/moe.txt" 2>&1; tail -1 "$T/moe.txt"; el
  echo "== merged"
  python3 scripts/bench_llm_merge.py "$T/torch.json" "$T/kiln.json" "$HOUT/bench.json" --moe "$T/moe.json" --command "LLMNORM_STAGE=r2 bash scripts/device/llmnorm.sh"; el
fi
