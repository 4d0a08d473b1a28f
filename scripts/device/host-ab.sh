#!/usr/bin/env bash
# Old-vs-new host time on the GPU machine in one device call (the rows of `kiln bench` that are
# host-bound swing by 1.5x between processes, so they need measures that alternate builds inside
# one run): eager host time per small cuda op (bench/cuda-launch.ts) and the compiled-call host
# path (bench/host-overhead.ts --device cuda), each build twice in the order old new new old, then
# the small `kiln bench` workloads through scripts/device/ab-bench.sh. Run from the repo root:
#   bash .device/run.sh bash scripts/device/host-ab.sh OLD_ROOT NEW_ROOT
set -uo pipefail
old=${1:?old build root}; new=${2:?new build root}
out=${OUT:-/tmp/out}; mkdir -p "$out/host"
i=0
for side in old new new old; do
  i=$((i + 1)); root=$old; [ "$side" = new ] && root=$new
  KILN_CACHE_DIR=/tmp/host-ab-$side timeout 90 node "$root/dist/bench/cuda-launch.js" "$out/host/launch-$i-$side.json" > "$out/host/launch-$i-$side.txt" 2>&1
  KILN_CACHE_DIR=/tmp/host-ab-$side timeout 90 node "$root/dist/bench/host-overhead.js" --device cuda --calls 20000 > "$out/host/overhead-$i-$side.txt" 2>&1
  echo "== round $i ($side)"; tail -n 6 "$out/host/launch-$i-$side.txt"; cat "$out/host/overhead-$i-$side.txt"
done
AB_WORKLOADS=${AB_WORKLOADS:-elementwise-1024,elementwise-4096,mlp-64x512} bash "$(dirname "$0")/ab-bench.sh" "$old" "$new" "new old new old" 150
