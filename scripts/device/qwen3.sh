#!/usr/bin/env bash
# Device round of helper qwen3: horizontal linear fusion + cuBLASLt split-K candidates for the
# qwen3-0.6b-forward workload. Tests (cuda parity of the fused program), then the GEMM autotune's
# candidates and times (KILN_GEMM_TUNE_LOG, full log in $HOUT/tune.txt), cuda-profile bf16/f32,
# and kiln bench with everything on vs both off (KILN_HORIZONTAL_FUSION=0 KILN_GEMM_SPLITK=0).
T=/tmp/qwen3.$$; mkdir -p "$T"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s]"; }
B="node dist/src/cli/main.js bench --device cuda --size full --workload qwen3-0.6b-forward --no-progress"
echo "== tests"
timeout 25 node --test --test-concurrency=1 --test-reporter=spec dist/test/compile-horizontal.test.js dist/test/llm-rotary.test.js > "$T/test.txt" 2>&1
grep -E '^[✔✖]|^ℹ (tests|pass|fail)' "$T/test.txt"; awk '/failing tests:/,0' "$T/test.txt" | grep -vE '^\s+at |^\s*$' | head -20
el; echo "== profile bf16 (fusion + split-K; tune log)"
KILN_GEMM_TUNE_LOG=1 timeout 22 node dist/bench/cuda-profile.js qwen3-0.6b-forward bfloat16 --top 12 > "$T/pb.txt" 2> "$HOUT/tune.txt"
cat "$T/pb.txt" | cut -c1-400; grep '^\[kiln gemm tune\]' "$HOUT/tune.txt" | head -12
el; echo "== bench (fusion + split-K)"
timeout 25 $B --dtype bfloat16 float32 2>&1 | tail -8
el; echo "== bench (both off)"
KILN_HORIZONTAL_FUSION=0 KILN_GEMM_SPLITK=0 timeout 18 $B --dtype bfloat16 float32 2>&1 | tail -8
el; echo "== profile f32"
KILN_GEMM_TUNE_LOG=1 timeout 15 node dist/bench/cuda-profile.js qwen3-0.6b-forward float32 --top 10 2>> "$HOUT/tune.txt" | cut -c1-400
el
