#!/usr/bin/env bash
# Device round of helper pdl (programmatic dependent launch). Each step writes its own file (no
# pipes: compile workers would hold a pipe open past a timeout), then prints a summary: the PDL
# micro-benchmark (chains of dependent kernels in CUDA graphs), the PDL tests, then the workloads
# with PDL on and off side by side in one process (bench/cuda-pdl-workloads.ts, bf16: quick subset
# and qwen3-0.6b-forward; $HOUT/bench.json), then the same with KILN_PDL=wait (no early trigger).
T=/tmp/pdl.$$; mkdir -p "$T"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
run() { local name=$1 t=$2; shift 2; timeout -k 2 "$t" "$@" > "$T/$name.txt" 2>&1; el "$name rc=$?"; }
git_rev() { cat scripts/device/REV 2>/dev/null; }
echo "build: $(git_rev)"
run micro 12 node dist/bench/cuda-pdl.js "$T/micro.json"
grep -vE '^wrote' "$T/micro.txt" | cut -c1-160
run test 12 node --test --test-concurrency=1 --test-reporter=spec dist/test/cuda-pdl.test.js
grep -E '^[✔✖]|^ℹ (pass|fail)' "$T/test.txt" | cut -c1-200; awk '/failing tests:/,0' "$T/test.txt" | grep -vE '^\s+at |^\s*$' | head -12
run work 32 node dist/bench/cuda-pdl-workloads.js --json "$HOUT/bench.json"
cut -c1-160 "$T/work.txt" | grep -vE '^\s+at ' | head -12
KILN_PDL=wait run wait 22 node dist/bench/cuda-pdl-workloads.js transformer-block qwen3-0.6b-forward
cut -c1-160 "$T/wait.txt" | grep -vE '^\s+at ' | head -8
