#!/usr/bin/env bash
# Final device run, part 1 (from the merged build, run via .device/run.sh from the repo root):
# the whole test suite on the H200, then every helper area's device script (scripts/device/*.sh
# other than the lead's), each writing its benchmark JSON to $OUT/<name>/bench.json; their logs
# go to one file. Usage: bash scripts/device/final-checks.sh [seconds per area script]
set -uo pipefail
per=${1:-75}
out=${OUT:-/tmp/out}
mkdir -p "$out"
export KILN_CACHE_DIR=/tmp/kiln-final-cache
t0=$(date +%s)
timeout 150 node --test dist/test/*.test.js > "$out/suite.txt" 2>&1
echo "suite rc=$? $(( $(date +%s) - t0 )) s"; grep -E "^# (tests|pass|fail|skipped)|^not ok" "$out/suite.txt" | head -30
for f in scripts/device/*.sh; do
  n=$(basename "$f" .sh)
  case "$n" in lead|final-*) continue ;; esac
  export HOUT="$out/$n"; mkdir -p "$HOUT"
  t1=$(date +%s)
  echo "=== $n" >> "$out/areas-log.txt"
  timeout "$per" bash "$f" >> "$out/areas-log.txt" 2>&1
  echo "$n rc=$? $(( $(date +%s) - t1 )) s"
  rm -f "$HOUT/log.txt"
done
tail -n 60 "$out/areas-log.txt"
