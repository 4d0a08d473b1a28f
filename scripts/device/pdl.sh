#!/usr/bin/env bash
# Device round of helper pdl (programmatic dependent launch). Each step writes its own file (no
# pipes: compile workers would hold a pipe open past a timeout), then prints a summary: the PDL
# micro-benchmark (chains of dependent kernels in CUDA graphs, incl. memsets between kernels), the
# PDL tests, the workloads compiled with PDL off / default ('after-kernel') / 'all' side by side in
# one process, order rotated per rep ($HOUT/bench.json), then the official qwen3 bench, default
# and KILN_PDL=0.
T=/tmp/pdl.$$; mkdir -p "$T"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
run() { local name=$1 t=$2; shift 2; timeout -k 2 "$t" "$@" > "$T/$name.txt" 2>&1; el "$name rc=$?"; }
echo "build: $(cat scripts/device/REV 2>/dev/null)"
run micro 10 node dist/bench/cuda-pdl.js "$T/micro.json"
grep -vE '^wrote|^host' "$T/micro.txt" | grep -vE 'wait\+trig|wait/normal' | cut -c1-120
run test 12 node --test --test-concurrency=1 --test-reporter=spec dist/test/cuda-pdl.test.js
grep -E '^[✔✖]|^ℹ (pass|fail)' "$T/test.txt" | cut -c1-150; awk '/failing tests:/,0' "$T/test.txt" | grep -vE '^\s+at |^\s*$' | head -12
run work 28 node dist/bench/cuda-pdl-workloads.js --json "$HOUT/bench.json"
cut -c1-160 "$T/work.txt" | grep -vE '^\s+at ' | head -12
B="node dist/src/cli/main.js bench --device cuda --size full --no-progress --dtype bfloat16 --workload qwen3-0.6b-forward"
run q_on 14 $B; grep -E '^qwen3|rror' "$T/q_on.txt" | head -3
KILN_PDL=0 run q_off 14 $B; grep -E '^qwen3|rror' "$T/q_off.txt" | head -3
