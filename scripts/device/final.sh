#!/usr/bin/env bash
# The session's final device run, in two calls of the device tool (each under its 600 s limit),
# from the repo root via .device/run.sh with .device and dist carried. At most 8 files come back
# per call, so everything lands in one tarball ($OUT/final-<part>.tgz) and a summary prints last.
#   part a: the whole test suite on the H200, the elementwise-4096 copy-bandwidth reference
#           (bench/cuda-copy-reference.ts), and issue #6's benchmark (llm-cuda + MoE/mHC vs the
#           PyTorch references, merged by scripts/bench_llm_merge.py).
#   part b: every workload in both dtypes, Kiln then PyTorch 2.11 in the same call
#           (scripts/cuda-compile-device.sh), then qwen3-0.6b's compiled start (cold / warm, new
#           processes) and its cold compile with the worker pool, one worker and in-process.
# Usage: bash scripts/device/final.sh a|b
set -uo pipefail
part=${1:?usage: final.sh a|b}
final=${OUT:-/tmp/out}
out=/tmp/final-$part; rm -rf "$out"; mkdir -p "$out"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
if [ "$part" = a ]; then
  # FINAL_BENCH_ONLY=1: only #6's benchmark (the suite and copy reference already ran on this code).
  if [ -z "${FINAL_BENCH_ONLY:-}" ]; then
    KILN_CACHE_DIR=/tmp/kiln-suite-cache timeout 120 node --test dist/test/*.test.js > "$out/suite.txt" 2>&1
    el "suite rc=$?"; grep -E "^# (tests|pass|fail|skipped)|^not ok" "$out/suite.txt" | head -20
    timeout 30 node dist/bench/cuda-copy-reference.js --json "$out/copy-reference.json" > "$out/copy-reference.txt" 2>&1
    el "copy reference rc=$?"
  fi
  # Uncompiled references and F.rms_norm only (45 s): the torch.compile forms take several calls of
  # their own, scripts/device/llm-torch-forms.sh, merged with this call's llm-kiln.json afterwards.
  timeout 45 python3 scripts/bench_llm_pytorch.py --compile-modes none --json "$out/llm-torch.json" --reps 50 > "$out/llm-torch.txt" 2>&1; el "llm torch rc=$?"
  timeout 30 python3 scripts/bench_llm_moe_pytorch.py "$out/moe-torch.json" --compile-modes none > "$out/moe-torch.txt" 2>&1; el "moe torch rc=$?"
  timeout 45 node dist/bench/llm-cuda.js --json "$out/llm-kiln.json" --reps 50 > "$out/llm-kiln.txt" 2>&1; el "llm kiln rc=$?"
  timeout 30 node dist/bench/llm-moe-cuda.js "$out/moe-torch.json" "$out/moe-kiln.json" > "$out/moe-kiln.txt" 2>&1; el "moe kiln rc=$?"
  python3 scripts/bench_llm_merge.py "$out/llm-torch.json" "$out/llm-kiln.json" "$out/llm-bench.json" --moe "$out/moe-kiln.json" --command "scripts/device/final.sh a" > "$out/llm-merge.txt" 2>&1
  el "llm merge rc=$?"; grep -E "rows|BELOW" "$out/llm-merge.txt" | head -12
  [ -f "$out/copy-reference.txt" ] && tail -n 3 "$out/copy-reference.txt"
else
  OUT="$out" bash scripts/cuda-compile-device.sh kiln,pytorch 300 > "$out/bench-steps.txt" 2>&1; el "bench rc=$?"
  timeout 75 node dist/src/cli/main.js bench --device cuda --size full --dtype bfloat16 --workload qwen3-0.6b-forward \
    --startup --startup-runs 1 --compile-report --report-workload qwen3-0.6b-forward --reps 5 --warmup 2 --no-progress \
    --json "$out/qwen3-startup.json" > "$out/qwen3-startup.txt" 2>&1
  el "qwen3 startup rc=$?"; tail -n 10 "$out/qwen3-startup.txt"
  python3 scripts/h200-table.py "$out/kiln-cuda.json" "$out/pytorch.json" 2>&1 | tail -n 16
fi
tar -C "$out" -czf "$final/final-$part.tgz" .
