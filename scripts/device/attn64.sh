#!/usr/bin/env bash
# The attn64 helper's device calls (issue #17: cuda paged decode attention v3), each under the
# device tool's 600 s limit, from the repo root through .device/run.sh with dist/ built and carried:
#   bash .device/run.sh bash scripts/device/attn64.sh check    # v1/v2/v3 paged attention tests on cuda,
#       then bench/cuda-paged-attention.ts: v1 vs v3 at batch 1 / 8 / 64, contexts 128, 256, 384,
#       128..384 mixed; then batch 64 only with v3's pins (splits 2, token batches 2 and 4)
#   bash .device/run.sh bash scripts/device/attn64.sh decode   # Qwen3-0.6B bf16 decode, 256 new tokens,
#       batch 1 / 8 / 64: default (v1) and KILN_CUDA_PAGED_ATTN=v3, alternating, twice each
# A step starts only while the call is under its deadline (ATTN64_DEADLINE s); logs and JSON under
# $OUT/attn64-PART come back, with a tarball and the summary printed last.
set -uo pipefail
part=${1:?usage: attn64.sh check|decode}
final=${OUT:-/tmp/out}; out=$final/attn64-$part; mkdir -p "$out"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$out/summary.txt"; }
sum() { grep -hE "$2" "$1" | head -${3:-8} | cut -c1-300 | tee -a "$out/summary.txt"; }
dl=${ATTN64_DEADLINE:-480}
go() { if [ $(( $(date +%s) - t0 )) -ge $dl ]; then el "skip $1 (deadline)"; return 1; fi; }
K="timeout -k 5"
export KILN_CACHE_DIR=/tmp/kiln-cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > "$out/gpu.txt" 2>&1
if [ "$part" = check ]; then
  go test && { $K 240 node --test dist/test/cuda-paged-attention.test.js > "$out/test.txt" 2>&1
    el "test cuda-paged-attention rc=$?"; sum "$out/test.txt" "^# (pass|fail|skipped)|not ok|rror" 12; }
  go bench && { $K 100 node dist/bench/cuda-paged-attention.js --json "$out/bench.json" > "$out/bench.txt" 2>&1
    el "bench v1 vs v3 rc=$?"; tail -n 30 "$out/bench.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
  go bench64 && { $K 100 node dist/bench/cuda-paged-attention.js --batch 64 --context 256,128-384 --kernels v1,v3,v3:s2,v3:u2,v3:u4,v2 --json "$out/bench64.json" > "$out/bench64.txt" 2>&1
    el "bench batch 64 pins rc=$?"; tail -n 22 "$out/bench64.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
fi
if [ "$part" = decode ]; then
  for rep in 1 2; do
    for v in v1 v3; do
      go "decode $v $rep" && { KILN_CUDA_PAGED_ATTN=$v $K 140 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 1,8,64 --new 256 --reps 2 \
          --json "$out/decode-$v-$rep.json" > "$out/decode-$v-$rep.txt" 2>&1
        el "decode $v rep $rep rc=$?"; sum "$out/decode-$v-$rep.txt" "^decode|tok/s|rror" 6; }
    done
  done
fi
tar -C "$out" -czf "$final/attn64-$part.tgz" .
echo "=== summary"; cat "$out/summary.txt"
