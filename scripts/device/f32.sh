#!/usr/bin/env bash
# Device round of helper f32 (qwen3-0.6b-forward in float32, issue #5). R3 (last): precompile the
# attention kernels the tests use (fp32 cp.async tiles, the SIMT GEMM, and scripts/device/attn-warm.mjs's
# tensor-core and register-staged kernels: R1 and R2's test steps ran out of time in NVRTC), the
# qwen3 f32 attention sweep (with the key-split tiles), the GPU tests of everything this helper
# touched, kiln bench qwen3 f32 (the acceptance number), and the same with
# KILN_CUDA_MATMUL_TF32=1 (TF32 GEMMs; reported apart, not for the exact-fp32 target).
# Every step writes to its own file (no pipes: compile workers could hold a pipe open past a
# timeout); details are appended to $HOUT/f32.txt, a compact summary goes to stdout as steps end.
T=/tmp/f32.$$; mkdir -p "$T"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
run() { local name=$1 t=$2; shift 2; timeout -k 2 "$t" "$@" > "$T/$name.txt" 2>&1; el "$name rc=$?"; }
keep() { { echo "=== $1"; cat "$T/$1.txt"; } >> "$HOUT/f32.txt"; }
# Tune every GEMM problem in this process (another helper's stored winners would hide the search).
export KILN_TUNE_STORE=0

run warm 8 node scripts/device/f32-warm.mjs 14; keep warm; tail -1 "$T/warm.txt"
run warm2 14 node scripts/device/attn-warm.mjs 14; keep warm2; tail -1 "$T/warm2.txt"

KILN_SDPA_DTYPES=float32 KILN_SDPA_CASES=qwen3 run sdpa 9 node dist/bench/cuda-sdpa.js; keep sdpa
cut -c1-700 "$T/sdpa.txt" | head -4

run test 36 node --test --test-concurrency=1 --test-reporter=spec dist/test/cuda-attention.test.js dist/test/cuda-matmul-precision.test.js dist/test/cuda-sgemm.test.js; keep test
grep -E '^ *[✔✖]|^ℹ (pass|fail)' "$T/test.txt" | cut -c1-140; awk '/failing tests:/,0' "$T/test.txt" | grep -vE '^\s+at |^\s*$' | head -10

run bench 24 node dist/src/cli/main.js bench --device cuda --size full --workload qwen3-0.6b-forward --dtype float32 --reps 30 --warmup 5 --no-progress; keep bench
grep -E 'qwen3|Error|error' "$T/bench.txt" | cut -c1-200 | head -4

KILN_CUDA_MATMUL_TF32=1 run tf32 14 node dist/bench/cuda-profile.js qwen3-0.6b-forward float32 --top 4; keep tf32
grep -E '^\{' "$T/tf32.txt" | grep -oE '"(device_ms_sum|compiled_ms)":[0-9.]+' | tr '\n' ' '; echo
grep -E '^ +[0-9.]+ +[0-9]+ ' "$T/tf32.txt" | head -2
