#!/usr/bin/env bash
# Device round of helper qwen3 (session 5): device-side gather index checks, so the compiled
# qwen3-0.6b forward is captured as one CUDA graph (no piecewise split around the embedding), and
# the fused per-head q/k RMSNorm + rotary kernel. Every step writes to its own file (no pipes: the
# bench's compile workers would hold a pipe open past a timeout). Order: cuda tests, cuda-profile
# bf16 (graph stats as one JSON line), kiln bench bf16 + f32 (the table last).
T=/tmp/qwen3.$$; mkdir -p "$T"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
run() { local name=$1 t=$2; shift 2; timeout -k 2 "$t" "$@" > "$T/$name.txt" 2>&1; el "$name rc=$?"; }
tests() { grep -E '^[✔✖]|^ℹ (pass|fail)' "$T/$1.txt" | cut -c1-220; awk '/failing tests:/,0' "$T/$1.txt" | grep -vE '^\s+at |^\s*$' | head -16; }
TESTS="dist/test/cuda-index-check.test.js dist/test/cuda-qk-norm-rotary.test.js dist/test/compile-horizontal.test.js"
run test 45 node --test --test-concurrency=1 --test-reporter=spec $TESTS
tests test
run pb 25 node dist/bench/cuda-profile.js qwen3-0.6b-forward bfloat16 --top 12
grep -E '^\{' "$T/pb.txt" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{for(const l of s.split("\n").filter(Boolean)){const j=JSON.parse(l);console.log(JSON.stringify({plain_ms:j.plain_ms,compiled_ms:j.compiled_ms,steps:j.steps,device_ms_sum:j.device_ms_sum,captures:j.graph.captures,replays:j.graph.replays,plainRuns:j.graph.plainRuns,nodes:j.graph.lastNodeCount,disabled:j.graph.disabled,pieces:j.pieces}))}})'
grep -vE '^\{' "$T/pb.txt" | cut -c1-300 | head -24
B="node dist/src/cli/main.js bench --device cuda --size full --workload qwen3-0.6b-forward --no-progress"
run bench 40 $B --dtype bfloat16 float32
grep -E 'workload|qwen3|Error|error' "$T/bench.txt" | cut -c1-200 | head -8
# A/B (if the budget lasts): the same profile without the q/k norm + rotary fusion.
KILN_QK_NORM_ROTARY=0 run nofuse 20 node dist/bench/cuda-profile.js qwen3-0.6b-forward bfloat16 --top 0
grep -E '^\{' "$T/nofuse.txt" | cut -c1-160
run pf 16 node dist/bench/cuda-profile.js qwen3-0.6b-forward float32 --top 6
grep -E '^\{' "$T/pf.txt" | cut -c1-200; grep -vE '^\{' "$T/pf.txt" | cut -c1-200 | head -8
