#!/usr/bin/env bash
# Device round of helper f32 (qwen3-0.6b-forward in float32, issue #5): where the fp32 GEMM time
# goes (cuBLASLt autotune log per problem, torch's fp32/TF32 GEMMs on the same shapes, the SIMT
# kernel experiment), the cp.async fp32 attention kernel (tests + device-time sweep vs torch), and
# the block-per-row reduction default (compiled add+RMSNorm), and the qwen3 profile with linears on
# the SIMT kernel (KILN_SGEMM=1). The profile's GEMMs time every
# candidate: heuristic offers, split-K variants even where the first offer looks occupied
# (KILN_GEMM_SPLIT_WAVES=4) and the algorithm search (KILN_GEMM_SEARCH=1), each labelled in the
# tune log, so one run shows what each source of candidates is worth. Every step writes to its own file (no pipes: compile
# workers could hold a pipe open past a timeout); details are appended to $HOUT/f32.txt, a compact
# summary goes to stdout as each step ends.
T=/tmp/f32.$$; mkdir -p "$T"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
run() { local name=$1 t=$2; shift 2; timeout -k 2 "$t" "$@" > "$T/$name.txt" 2>&1; el "$name rc=$?"; }
keep() { { echo "=== $1"; cat "$T/$1.txt"; } >> "$HOUT/f32.txt"; }
# Tune every GEMM problem in this process (stored winners from another helper's run would hide the log).
export KILN_TUNE_STORE=0
P="node dist/bench/cuda-profile.js qwen3-0.6b-forward float32 --top 8"

KILN_GEMM_SEARCH=1 KILN_GEMM_SPLIT_WAVES=4 KILN_GEMM_TUNE_LOG=1 run prof 30 $P; keep prof
grep -E '^\{' "$T/prof.txt" | grep -oE '"(device_ms_sum|plain_ms|compiled_ms)":[0-9.]+' | tr '\n' ' '; echo
grep -E '^ +[0-9.]+ +[0-9]+ ' "$T/prof.txt" | head -8
grep -E '^\[kiln gemm tune\]' "$T/prof.txt" | cut -c1-200

run sgemm 15 node dist/bench/cuda-sgemm.js; keep sgemm
grep -E '^BEST|cublaslt' "$T/sgemm.txt" | cut -c1-140

KILN_SGEMM=1 run simt 16 $P; keep simt
grep -E '^\{' "$T/simt.txt" | grep -oE '"(device_ms_sum|plain_ms|compiled_ms)":[0-9.]+' | tr '\n' ' '; echo
grep -E '^ +[0-9.]+ +[0-9]+ +extern linear' "$T/simt.txt"; grep -iE 'error' "$T/simt.txt" | head -3

run test 22 node --test --test-concurrency=1 --test-reporter=spec --test-name-pattern="^fused sdpa: (causal|every|grouped|bool|L |a transposed)|float32 (matmul|linear)|SIMT" dist/test/cuda-attention.test.js dist/test/cuda-matmul-precision.test.js dist/test/cuda-sgemm.test.js; keep test
grep -E '^[✔✖]|^ℹ (pass|fail)' "$T/test.txt" | cut -c1-160; awk '/failing tests:/,0' "$T/test.txt" | grep -vE '^\s+at |^\s*$' | head -10

run torch 13 python3 scripts/device/f32_torch.py "$T/torch.json"; keep torch
grep -E '^torch' "$T/torch.txt"

KILN_SDPA_DTYPES=float32 KILN_SDPA_CASES=qwen3 run sdpa 7 node dist/bench/cuda-sdpa.js; keep sdpa
cut -c1-400 "$T/sdpa.txt" | head -4

run comp 14 node --test --test-concurrency=1 --test-reporter=spec --test-name-pattern="every test model" dist/test/cuda-compile.test.js; keep comp
grep -E '^[✔✖]|^ℹ (pass|fail)' "$T/comp.txt" | cut -c1-160; awk '/failing tests:/,0' "$T/comp.txt" | grep -vE '^\s+at |^\s*$' | head -6
