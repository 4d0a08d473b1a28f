#!/usr/bin/env bash
# Device round of helper qwen3 (qwen3-0.6b-forward): horizontal linear fusion, cuBLASLt split-K
# candidates, rotary kernel, smaller attention query blocks for small launches. Tests first, then
# kiln bench, cuda-profile bf16 (with the GEMM autotune log: $HOUT/tune.txt) and f32, then bf16
# again with the cuBLASLt algorithm search (KILN_GEMM_SEARCH=1).
T=/tmp/qwen3.$$; mkdir -p "$T"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s]"; }
B="node dist/src/cli/main.js bench --device cuda --size full --workload qwen3-0.6b-forward --no-progress"
echo "== tests"
timeout 30 node --test --test-concurrency=1 --test-reporter=spec --test-name-pattern='Qwen3 \(cuda|cuda: llm.applyRotaryEmb|fused sdpa: causal and full|fused sdpa: grouped' \
  dist/test/compile-horizontal.test.js dist/test/llm-rotary.test.js dist/test/cuda-attention.test.js > "$T/test.txt" 2>&1
grep -E '^[✔✖]|^ℹ (tests|pass|fail)' "$T/test.txt" | cut -c1-160; awk '/failing tests:/,0' "$T/test.txt" | grep -vE '^\s+at |^\s*$' | head -20
el; echo "== bench (all on)"
timeout 22 $B --dtype bfloat16 float32 2>&1 | tail -6
el; echo "== profile bf16 (tune log in tune.txt)"
KILN_GEMM_TUNE_LOG=1 timeout 18 node dist/bench/cuda-profile.js qwen3-0.6b-forward bfloat16 --top 12 > "$T/pb.txt" 2> "$HOUT/tune.txt"
cut -c1-300 "$T/pb.txt"; grep '^\[kiln gemm tune\]' "$HOUT/tune.txt" | head -8
el; echo "== profile f32"
KILN_GEMM_TUNE_LOG=1 timeout 14 node dist/bench/cuda-profile.js qwen3-0.6b-forward float32 --top 10 2>> "$HOUT/tune.txt" | cut -c1-300
el; echo "== profile bf16 with KILN_GEMM_SEARCH=1 (algorithm search; tune log appended)"
echo "==== SEARCH" >> "$HOUT/tune.txt"
KILN_GEMM_SEARCH=1 KILN_GEMM_TUNE_LOG=1 timeout 18 node dist/bench/cuda-profile.js qwen3-0.6b-forward bfloat16 --top 3 2>> "$HOUT/tune.txt" | cut -c1-300
el
