#!/usr/bin/env bash
# Runs on the device machine (through .device/run.sh): for each .device/stage-<name>/ (see
# device-stage-helper.sh) unpacks the build into /tmp/stage-<name>, links the carried node_modules,
# and runs its device.sh there with HOUT=$OUT/<name> (at most 2 files each come back) under its
# budget. Usage: bash .device/run.sh bash scripts/device-round.sh [names...]
set -uo pipefail
root=$(pwd)
names=("$@")
[ ${#names[@]} -eq 0 ] && for d in .device/stage-*/; do n=${d%/}; names+=("${n#.device/stage-}"); done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
summary=()
for n in "${names[@]}"; do
  d="$root/.device/stage-$n"; w="/tmp/stage-$n"
  [ -d "$d" ] || { summary+=("$n: not staged"); continue; }
  rm -rf "$w" && mkdir -p "$w" && tar -C "$w" -xJf "$d/dist.tar.xz"
  ln -sfn /tmp/device-app/node_modules "$w/node_modules"
  export HOUT="${OUT:-/tmp/out}/$n"; mkdir -p "$HOUT"
  b=$(cat "$d/budget"); t0=$(date +%s)
  echo "=== $n (budget ${b}s) ==="
  (cd "$w" && KILN_CACHE_DIR="/tmp/kiln-cache-$n" timeout "$b" bash "$d/device.sh") > "$HOUT/log.txt" 2>&1
  rc=$?; dt=$(( $(date +%s) - t0 ))
  tail -n 15 "$HOUT/log.txt"
  summary+=("$n: rc=$rc ${dt}s")
done
echo "=== round summary ==="; printf '%s\n' "${summary[@]}"
