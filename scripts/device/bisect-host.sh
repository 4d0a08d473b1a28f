#!/usr/bin/env bash
# Host time per call of bench/host-overhead.js (compiled and eager, cuda) for several builds of
# Kiln in one device call, in a palindromic order so drift hits every build alike:
#   bash .device/run.sh bash scripts/device/bisect-host.sh ROOT_A ROOT_B ROOT_C   (each holds dist/)
set -uo pipefail
roots=("$@"); order=("${roots[@]}"); for ((i=${#roots[@]}-1; i>=0; i--)); do order+=("${roots[$i]}"); done
for r in "${order[@]}"; do
  echo "== $r"; KILN_CACHE_DIR=/tmp/bisect-$(basename "$r") timeout 90 node "$r/dist/bench/host-overhead.js" --device cuda --calls 20000 2>&1 | tail -n 2
  KILN_GEMM_AUTOTUNE=0 KILN_CACHE_DIR=/tmp/bisect-nt-$(basename "$r") timeout 90 node "$r/dist/bench/host-overhead.js" --device cuda --calls 20000 2>&1 | tail -n 1 | sed 's/^/(no gemm autotune) /'
done
