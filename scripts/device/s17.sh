#!/usr/bin/env bash
# Session 17's device calls, each under the device tool's 600 s limit, from the repo root through
# .device/run.sh with dist/ built and carried:
#   bash .device/run.sh bash scripts/device/s17.sh measure   # #17: where the cuda decode step's device
#       time goes kernel by kernel inside the replayed CUDA graph (Nsight Systems, graph nodes traced)
#       at batch 1 / 8 / 64; the tensor-core skinny GEMM's configurations at 8 rows
# A step starts only while the call is under its deadline (S17_DEADLINE s), so the tail is what gets cut;
# logs and JSON under $OUT/s17-PART come back as one tarball, the summary printed last.
set -uo pipefail
part=${1:?usage: s17.sh measure|...}
final=${OUT:-/tmp/out}; out=$final/s17-$part; mkdir -p "$out"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$out/summary.txt"; }
sum() { grep -hE "$2" "$1" | head -${3:-8} | cut -c1-300 | tee -a "$out/summary.txt"; }
dl=${S17_DEADLINE:-430}
go() { if [ $(( $(date +%s) - t0 )) -ge $dl ]; then el "skip $1 (deadline)"; return 1; fi; }
K="timeout -k 5"
export KILN_CACHE_DIR=/tmp/kiln-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > "$out/gpu.txt" 2>&1
wg() { KILN_WEBGPU_BACKEND=vulkan "$@"; }
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda*/nsight-systems*/bin/nsys 2>/dev/null | head -1)
if [ "$part" = measure ]; then
  el "nsys: ${NSYS:-none}; ncu: $(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || echo none)"
  if [ -n "$NSYS" ]; then
    for b in 1 8 64; do
      go nsys$b && { $K 120 "$NSYS" profile -t cuda --cuda-graph-trace=node -o "$out/decode-b$b" --force-overwrite true \
          node dist/bench/decode.js --device cuda --dtype bfloat16 --batches $b --new 64 --reps 1 --no-bound > "$out/nsys-b$b.txt" 2>&1
        el "nsys decode b$b rc=$?"; sum "$out/nsys-b$b.txt" "^decode +batch|rror" 2
        $K 60 "$NSYS" stats -r cuda_gpu_kern_sum -f csv -o "$out/kern-b$b" "$out/decode-b$b.nsys-rep" > "$out/stats-b$b.txt" 2>&1
        el "nsys stats b$b rc=$?"; head -n 14 "$out"/kern-b${b}*.csv | cut -c1-220 | tee -a "$out/summary.txt"
        rm -f "$out/decode-b$b.nsys-rep" "$out/decode-b$b.sqlite"; }
    done
  fi
  go mmasweep && { $K 150 node dist/bench/cuda-mma-gemv.js --rows 8 --json "$out/mma-sweep.json" > "$out/mma-sweep.txt" 2>&1
    el "mma sweep rows 8 rc=$?"; tail -n 40 "$out/mma-sweep.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
fi
tar -C "$out" -czf "$final/s17-$part.tgz" .
echo "=== summary"; cat "$out/summary.txt"
