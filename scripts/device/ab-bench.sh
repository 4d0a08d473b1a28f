#!/usr/bin/env bash
# Old-vs-new `kiln bench` on one GPU in one device call: two builds of Kiln run every workload
# (full size, float32 and bfloat16, eager and compiled) in alternating order (old, new, new, old by
# default), each build with its own compile cache, so drift of the machine over the call hits both
# sides alike. scripts/ab-bench-merge.py then takes each row's median over a build's rounds and
# prints new/old ratios. Run from the repo root on the device machine:
#   bash .device/run.sh bash scripts/device/ab-bench.sh OLD_DIST_ROOT NEW_DIST_ROOT [ORDER] [BUDGET_S]
# where *_DIST_ROOT holds dist/ and package.json (e.g. .device/old and .), ORDER like "old new new old";
# AB_WORKLOADS=a,b limits the workloads (default all); AB_WARMUP=0 skips the discarded first round.
set -uo pipefail
old=${1:?old build root}; new=${2:?new build root}
order=${3:-old new new old}; budget=${4:-560}
out=${OUT:-/tmp/out}; mkdir -p "$out"
start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - start) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > "$out/smi.txt" 2>&1
# A throw-away round first (AB_WARMUP=0 skips it): in session 12 the first Kiln process of a call
# was slow on the tiny rows (compiled elementwise-1024 0.038 ms against 0.011 later, same kernels),
# whichever build it was, and biased a short A/B against the side that went first.
if [ "${AB_WARMUP:-1}" = 1 ]; then
  KILN_CACHE_DIR=/tmp/kiln-ab-cache-warmup timeout "$(left)" node "$new/dist/src/cli/main.js" bench --device cuda --size full \
    --dtype float32 bfloat16 --workload "${AB_WORKLOADS:-all}" --include-slow --no-progress > "$out/warmup.txt" 2>&1
  echo "warm-up round (new, discarded) rc=$? after $(( $(date +%s) - start )) s"
fi
i=0
for side in $order; do
  i=$((i + 1))
  root=$old; [ "$side" = new ] && root=$new
  l=$(left); [ "$l" -lt 30 ] && { echo "round $i ($side): no time left"; continue; }
  KILN_CACHE_DIR=/tmp/kiln-ab-cache-$side timeout "$l" node "$root/dist/src/cli/main.js" bench --device cuda --size full \
    --dtype float32 bfloat16 --workload "${AB_WORKLOADS:-all}" --include-slow --no-progress --json "$out/ab-$i-$side.json" > "$out/ab-$i-$side.txt" 2>&1
  echo "round $i ($side) rc=$? after $(( $(date +%s) - start )) s"
done
python3 scripts/ab-bench-merge.py "$out" > "$out/ab-summary.txt" 2>&1; cat "$out/ab-summary.txt"
