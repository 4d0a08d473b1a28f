#!/usr/bin/env bash
# The device-machine runs behind bench/results/h200-*-2026-11-30.json and the cuda compile tests.
# Run from the staged tree (scripts/cuda-device-stage.sh) on the device tool, e.g.
#   cd .device/wt-cudaint && bash .device/run.sh bash scripts/cuda-compile-device.sh tests,kiln 250
# Steps (comma-separated): tests (GPU tests of kiln.compile on cuda), kiln (kiln bench, full size,
# both dtypes, every workload), pytorch (scripts/bench_pytorch.py, one process per workload and
# torch.compile mode so a time limit keeps the finished ones; PT_MODES, PT_WORKLOADS narrow it).
# The second argument is the seconds the steps may take.
set -uo pipefail
steps=${1:-tests,kiln}
budget=${2:-550}
out=${OUT:-/tmp/out}
mkdir -p "$out"
start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - start) )); }
export KILN_CACHE_DIR=/tmp/kiln-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$out/smi.txt" 2>&1
if [[ ,$steps, == *,tests,* ]]; then
  timeout $(( $(left) < 120 ? $(left) : 120 )) node --test --test-concurrency=1 dist/test/cuda-compile.test.js dist/test/cuda-compile-cpu.test.js > "$out/tests.txt" 2>&1
  echo "tests rc=$? after $(( $(date +%s) - start )) s"
  grep -E "^# (tests|pass|fail|skipped)|^not ok" "$out/tests.txt"
fi
if [[ ,$steps, == *,kiln,* ]]; then
  wl=${KILN_WORKLOADS:-all}
  timeout $(( $(left) - ${RESERVE_S:-0} )) node dist/src/cli/main.js bench --device cuda --size full --dtype float32 bfloat16 --workload "$wl" --include-slow --no-progress --json "$out/kiln-cuda.json" > "$out/kiln-bench.txt" 2>&1
  echo "kiln bench rc=$? after $(( $(date +%s) - start )) s"
  tail -n 20 "$out/kiln-bench.txt"
fi
if [[ ,$steps, == *,pytorch,* ]]; then
  # One process per workload and torch.compile mode, each under the time left, so a slow
  # max-autotune compile keeps the finished rows; the merge fails when any (workload, dtype, mode)
  # is missing, rather than quoting a weaker mode as PyTorch's number.
  modes=${PT_MODES:-default reduce-overhead max-autotune}
  wls=${PT_WORKLOADS:-elementwise-1024 elementwise-4096 mlp-64x512 mlp-2048x4096 conv-stack transformer-block qwen3-0.6b-forward}
  for w in $wls; do
    for m in $modes; do
      l=$(left); [ "$l" -lt 20 ] && { echo "pytorch: no time left for $w $m" | tee -a "$out/pytorch.log"; continue; }
      timeout "$l" python3 scripts/bench_pytorch.py --workload "$w" --modes "$m" --json "$out/pt-$w-$m.json" >> "$out/pytorch.log" 2>&1 || echo "pytorch $w $m rc=$?" >> "$out/pytorch.log"
    done
  done
  python3 scripts/bench_pytorch_merge.py "$out/pytorch.json" "$out"/pt-*.json --modes "${modes// /,}" --workloads "${wls// /,}"
  echo "pytorch merge rc=$?"
  cat "$out/pytorch.log"
fi
echo "done after $(( $(date +%s) - start )) s"
