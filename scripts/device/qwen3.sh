#!/usr/bin/env bash
# Device round of helper qwen3 (qwen3-0.6b-forward): horizontal linear fusion, cuBLASLt split-K
# candidates, rotary kernel, smaller attention query blocks for small launches. Every step writes
# to its own file (no pipes: the bench's compile workers would hold a pipe open past a timeout):
# the M=128 GEMM test, cuda-profile bf16 with the GEMM autotune log ($HOUT/tune.txt), kiln bench
# bf16 + f32, then A/B profiles with split-K off and fusion off, and f32.
T=/tmp/qwen3.$$; mkdir -p "$T"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
run() { local name=$1 t=$2; shift 2; timeout -k 2 "$t" "$@" > "$T/$name.txt" 2>&1; el "$name rc=$?"; }
summary() { grep -E '^\{' "$T/$1.txt" | cut -c1-400; }
B="node dist/src/cli/main.js bench --device cuda --size full --workload qwen3-0.6b-forward --no-progress"
run test 20 node --test --test-concurrency=1 --test-reporter=spec dist/test/cuda-gemm-candidates.test.js
grep -E '^[✔✖]|^ℹ (pass|fail)' "$T/test.txt" | cut -c1-200; awk '/failing tests:/,0' "$T/test.txt" | grep -vE '^\s+at |^\s*$' | head -12
KILN_GEMM_TUNE_LOG=1 timeout -k 2 22 node dist/bench/cuda-profile.js qwen3-0.6b-forward bfloat16 --top 14 > "$T/pb.txt" 2> "$HOUT/tune.txt"; el "pb rc=$?"
cut -c1-400 "$T/pb.txt" | head -20; grep '^\[kiln gemm tune\]' "$HOUT/tune.txt" | head -10; grep -iE 'error' "$HOUT/tune.txt" | head -3
run bench 36 $B --dtype bfloat16 float32
grep -E 'workload|qwen3|Error|error' "$T/bench.txt" | cut -c1-200 | head -8
KILN_GEMM_SPLITK=0 run nosplit 12 node dist/bench/cuda-profile.js qwen3-0.6b-forward bfloat16 --top 1; summary nosplit
KILN_HORIZONTAL_FUSION=0 run nofuse 12 node dist/bench/cuda-profile.js qwen3-0.6b-forward bfloat16 --top 1; summary nofuse
run pf 14 node dist/bench/cuda-profile.js qwen3-0.6b-forward float32 --top 10; cut -c1-400 "$T/pf.txt" | head -14
