#!/usr/bin/env bash
# Issue #20's benchmark table in one device call: every `kiln bench` workload in float32 and float16
# on webgpu (Dawn/Vulkan), then on Kiln cuda, then PyTorch eager (scripts/bench_pytorch.py with no
# torch.compile mode), all full size on the same GPU; Qwen3-0.6B decode at batch 1 on webgpu
# (float16 weights) and the per-call host overhead of a tiny webgpu dispatch. Each step has its own
# time cap (WT_*_S) so a slow one leaves the others' rows. Run from the repo root through
# .device/run.sh with dist/ built and carried:
#   bash .device/run.sh bash scripts/device/webgpu-table.sh [steps]
# steps: comma-separated from webgpu,cuda,pytorch,decode,host (default all); WT_DTYPES: the kiln bench
# dtypes (default "float32 float16"). Everything lands in
# $OUT/webgpu-table.tgz; a summary prints last. scripts/webgpu-table-merge.py builds the JSON.
set -uo pipefail
steps=${1:-webgpu,cuda,pytorch,decode,host}
final=${OUT:-/tmp/out}; out=$final/wt; mkdir -p "$out"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$out/summary.txt"; }
has() { [[ ",$steps," == *",$1,"* ]]; }
export KILN_CACHE_DIR=/tmp/kiln-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$out/smi.txt" 2>&1
git rev-parse --short HEAD > "$out/commit.txt" 2>/dev/null || true
wl=${WT_WORKLOADS:-all}
if has webgpu; then
  timeout ${WT_WEBGPU_S:-240} node dist/src/cli/main.js bench --device webgpu --size full --dtype ${WT_DTYPES:-float32 float16} --workload "$wl" \
    --include-slow --reps ${WT_REPS:-30} --no-progress --json "$out/kiln-webgpu.json" > "$out/kiln-webgpu.txt" 2>&1
  el "kiln bench webgpu rc=$?"; grep -E "^[a-z0-9.-]+ +webgpu|FAILED" "$out/kiln-webgpu.txt" | cut -c1-200 | tee -a "$out/summary.txt"
fi
if has cuda; then
  timeout ${WT_CUDA_S:-150} node dist/src/cli/main.js bench --device cuda --size full --dtype ${WT_DTYPES:-float32 float16} --workload "$wl" \
    --include-slow --reps ${WT_REPS:-30} --no-progress --json "$out/kiln-cuda.json" > "$out/kiln-cuda.txt" 2>&1
  el "kiln bench cuda rc=$?"; grep -E "^[a-z0-9.-]+ +cuda|FAILED" "$out/kiln-cuda.txt" | cut -c1-200 | tee -a "$out/summary.txt"
fi
if has pytorch; then
  # Eager only: the table compares webgpu with PyTorch eager (no torch.compile mode).
  timeout ${WT_PT_S:-90} python3 scripts/bench_pytorch.py --json "$out/pytorch-eager.json" --dtype float32 float16 --modes --reps ${WT_REPS:-30} \
    > "$out/pytorch-eager.txt" 2>&1
  el "pytorch eager rc=$?"; grep -E "eager" "$out/pytorch-eager.txt" | cut -c1-200 | tee -a "$out/summary.txt"
fi
if has decode; then
  timeout ${WT_DECODE_S:-150} node dist/bench/decode.js --device webgpu --dtype float16 --batches ${WT_BATCHES:-1} \
    --json "$out/kiln-decode-webgpu.json" > "$out/kiln-decode-webgpu.txt" 2>&1
  el "webgpu decode rc=$?"; grep -E "tok/s|rror" "$out/kiln-decode-webgpu.txt" | head -6 | cut -c1-200 | tee -a "$out/summary.txt"
fi
if has host; then
  timeout 90 node dist/bench/host-overhead.js --device webgpu --calls 5000 > "$out/host-webgpu.txt" 2>&1
  el "host overhead webgpu rc=$?"; tail -n 6 "$out/host-webgpu.txt" | cut -c1-200 | tee -a "$out/summary.txt"
fi
tar -C "$out" -czf "$final/webgpu-table.tgz" .
echo "=== summary"; cat "$out/summary.txt"
