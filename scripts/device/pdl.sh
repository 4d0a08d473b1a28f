#!/usr/bin/env bash
# Device round of helper pdl (programmatic dependent launch). Each step writes its own file (no
# pipes: the bench's compile workers would hold a pipe open past a timeout), then prints a summary:
# the PDL micro-benchmark (chains of dependent kernels in CUDA graphs, $HOUT/bench.json), the PDL
# tests, then kiln bench A/B with PDL on (default) and KILN_PDL=0 on the quick subset in bf16
# (qwen3-0.6b-forward needs ~18 s per run: R2).
T=/tmp/pdl.$$; mkdir -p "$T"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
run() { local name=$1 t=$2; shift 2; timeout -k 2 "$t" "$@" > "$T/$name.txt" 2>&1; el "$name rc=$?"; }
rows() { grep -E '^\s*(elementwise|mlp|transformer|qwen3)' "$T/$1.txt" | cut -c1-160; grep -iE 'error' "$T/$1.txt" | head -3; }
run micro 20 node dist/bench/cuda-pdl.js "$HOUT/bench.json"
grep -vE '^wrote' "$T/micro.txt" | cut -c1-160
run test 15 node --test --test-concurrency=1 --test-reporter=spec dist/test/cuda-pdl.test.js
grep -E '^[✔✖]|^ℹ (pass|fail)' "$T/test.txt" | cut -c1-200; awk '/failing tests:/,0' "$T/test.txt" | grep -vE '^\s+at |^\s*$' | head -12
B="node dist/src/cli/main.js bench --device cuda --size full --no-progress --dtype bfloat16"
run quick_on 12 $B --workload elementwise-1024,mlp-64x512,transformer-block --reps 100; rows quick_on
KILN_PDL=0 run quick_off 12 $B --workload elementwise-1024,mlp-64x512,transformer-block --reps 100; rows quick_off
