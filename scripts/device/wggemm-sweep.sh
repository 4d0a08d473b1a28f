#!/usr/bin/env bash
# Device round for issue #20's float16 webgpu GEMM (branch wggemm): which staged subgroup-matrix plan
# (KILN_WEBGPU_SM_PLAN: subgroups, matrices per subgroup, K step, stages 0/1/2, workgroup bands) is
# fastest at 8192^3 and 4096^3 on the H200 through Dawn/Vulkan, each plan first checked against
# float64 and the default plan at 2048^3 and on small shapes in all four operand layouts
# (scripts/device/wggemm-sweep.mjs). Passes, each under a deadline and a hard timeout:
#   1. base: every plan of the list, Kiln's usual Dawn toggles;
#   2. norobust: the default plan and the 4 fastest of pass 1 with KILN_WEBGPU_DAWN_TOGGLES=
#      disable_robustness (what the shaders' bounds clamping costs);
#   3. range: the default and the 3 fastest with enable_integer_range_analysis_in_robustness (Tint
#      drops the clamps it can prove needless: the safe way to get part of pass 2's gain);
#   4. if time is left: scripts/bench-webgpu-matmul.mjs on the fastest plan (--check at 2048^3,
#      then 8192^3 timed), the public-API benchmark's view of the same kernel.
# A pass whose process dies (device lost, a hang killed by `timeout`) is rerun for the plans left;
# the plan that was running is marked killed. Rows: $OUT/wggemm.jsonl; the table is printed last.
# Run from the repo root with dist/ built and carried:
#   bash .device/run.sh bash scripts/device/wggemm-sweep.sh        (about 3 minutes; at most ~3.8)
set -uo pipefail
out=${OUT:-/tmp/out}; mkdir -p "$out"
rows="$out/wggemm.jsonl"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
export KILN_CACHE_DIR=/tmp/kiln-cache KILN_WEBGPU_BACKEND=vulkan KILN_WEBGPU_SM_KERNEL=staged
unset KILN_WEBGPU_SM_PLAN KILN_WEBGPU_DAWN_TOGGLES
if [ ! -f dist/src/index.js ]; then echo "dist/ is missing: npm run build, and carry dist"; exit 2; fi
nvidia-smi -L 2>/dev/null | head -2; node --version

# pass TAG END_S HARD_S ARGS...: reruns the sweep (resuming) until it exits 0, END_S (seconds after
# the start) is the deadline for starting a plan, HARD_S the hard stop of any process.
pass() {
  local tag=$1 end=$2 hard=$3; shift 3
  for attempt in 1 2 3 4; do
    local left=$(( t0 + hard - $(date +%s) ))
    [ "$left" -le 5 ] && { el "$tag: no time left"; return; }
    timeout --signal=KILL "$left" node scripts/device/wggemm-sweep.mjs --out "$rows" --tag "$tag" --deadline $(( t0 + end )) "$@" 2>&1 | grep -v "^ *at " | tail -n 60
    local rc=${PIPESTATUS[0]}
    el "$tag: attempt $attempt exited rc=$rc"
    [ "$rc" -eq 0 ] && return
    [ "$rc" -eq 2 ] && return   # no subgroup-matrix plan on this device: nothing to resume
  done
}

el "pass base"
pass base 125 150
el "pass norobust (disable_robustness)"
KILN_WEBGPU_DAWN_TOGGLES=disable_robustness pass norobust 165 180 --top 4 --from-tag base
el "pass range (enable_integer_range_analysis_in_robustness)"
KILN_WEBGPU_DAWN_TOGGLES=enable_integer_range_analysis_in_robustness pass range 195 208 --top 3 --from-tag base

best=$(node scripts/device/wggemm-sweep.mjs --table "$rows" | sed -n 's/^BEST at [0-9]*^3: \([a-z]*\) KILN_WEBGPU_SM_PLAN="\([^"]*\)".*/\1|\2/p')
left=$(( t0 + 225 - $(date +%s) ))
if [ -n "$best" ] && [ "$left" -gt 25 ]; then
  btag=${best%%|*}; bplan=${best#*|}
  toggles=""; [ "$btag" = norobust ] && toggles=disable_robustness; [ "$btag" = range ] && toggles=enable_integer_range_analysis_in_robustness
  el "bench-webgpu-matmul on the fastest plan: '$bplan' (toggles: '${toggles:-none}')"
  KILN_WEBGPU_DAWN_TOGGLES=$toggles KILN_WEBGPU_SM_PLAN=$bplan timeout --signal=KILL $(( left / 2 )) node scripts/bench-webgpu-matmul.mjs --check --shapes float16:2048:2048:2048 | tee "$out/bench-best-check.jsonl"
  left=$(( t0 + 225 - $(date +%s) ))
  [ "$left" -gt 10 ] && KILN_WEBGPU_DAWN_TOGGLES=$toggles KILN_WEBGPU_SM_PLAN=$bplan timeout --signal=KILL "$left" node scripts/bench-webgpu-matmul.mjs --shapes float16:8192:8192:8192 | tee "$out/bench-best-8192.jsonl"
fi
el "done"
echo "== wggemm sweep (err = small-shape tolerance ratio (<= 1 ok) / max diff vs default plan at 2048^3; TF = TFLOP/s) =="
node scripts/device/wggemm-sweep.mjs --table "$rows" | cut -c1-200
