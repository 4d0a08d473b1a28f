#!/usr/bin/env bash
# PyTorch 2.11's max-autotune on the Qwen3-0.6B forward (#18 item 9's missing form), beside Kiln's
# own rows in the same call. Its compile autotunes every GEMM shape (about 30 s each), so each dtype
# is its own process under the time left, float32 first; a process that runs out leaves its
# Inductor caches under /tmp, and a second call on the still-warm machine finishes from them.
#   bash .device/run.sh bash scripts/device/qwen3-max-autotune.sh [DTYPES] [BUDGET_S]
# KILN=0 skips Kiln's rows (when an earlier call of the same machine made them).
set -uo pipefail
dtypes=${1:-float32 bfloat16}; budget=${2:-540}
final=${OUT:-/tmp/out}; out=$final/ma; mkdir -p "$out"
# The device tool returns at most 8 files: everything comes back as one tarball, packed after each step.
pack() { tar -C "$out" -czf "$final/ma.tgz" .; }
start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - start) )); }
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > "$out/smi.txt" 2>&1
if [ "${KILN:-1}" = 1 ]; then
  KILN_CACHE_DIR=/tmp/kiln-ma-cache timeout 120 node dist/src/cli/main.js bench --device cuda --size full --dtype float32 bfloat16 \
    --workload qwen3-0.6b-forward --include-slow --no-progress --json "$out/kiln-qwen3.json" > "$out/kiln-qwen3.txt" 2>&1
  echo "kiln rc=$? after $(( $(date +%s) - start )) s"; tail -n 6 "$out/kiln-qwen3.txt"; pack
fi
for dt in $dtypes; do
  l=$(left); [ "$l" -lt 30 ] && { echo "pytorch $dt: no time left"; continue; }
  timeout "$l" python3 scripts/bench_pytorch.py --workload qwen3-0.6b-forward --modes max-autotune --dtype "$dt" \
    --json "$out/pt-qwen3-max-autotune-$dt.json" > "$out/pt-$dt.log" 2>&1
  echo "pytorch max-autotune $dt rc=$? after $(( $(date +%s) - start )) s"; tail -n 3 "$out/pt-$dt.log"; pack
done
