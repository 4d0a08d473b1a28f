#!/usr/bin/env bash
# Session 28's device calls, from the repo root through .device/run.sh with dist/ built and carried
# (bash .device/run.sh bash scripts/device/s28.sh PART):
#   prof  #17: the weight-burst bench (bench/cuda-weight-burst.ts: does one megakernel phase's
#         burst of weights stream at DRAM bandwidth, cold and hot in L2?). #20: where the webgpu
#         workloads that miss 2x of Kiln cuda spend their device time (bench/webgpu-profile.ts,
#         step by step behind a spin kernel), with Kiln cuda's own profile of the Qwen3 forward
#         and conv-stack with TF32 convolutions off (Kiln cuda's exact-float32 figure).
#   attn  #20 after the tiled flash-attention prefill (flash-attention-tiled.ts): its tests and the
#         split-K large-tile GEMM's on the GPU, then profiles of the Qwen3 forward (float32 with
#         KILN_WEBGPU_GEMM_SPLIT_TILE small / large, float16) and elementwise-4096 with kiln bench's
#         harness beside (its float16 figure read 0.272 ms in session 26, the profile 0.088); the
#         cuda runtime tests (a kernel with static plus dynamic shared memory past 48 KiB).
#   final #20 with this session's defaults (tiled attention prefill, split-K on the large tile,
#         replay of programs of many steps in every mode): the changed paths' tests on the GPU,
#         profiles of the Qwen3 forward, then the table (webgpu-table.sh webgpu,cuda) into
#         $OUT/webgpu-table.tgz.
#   settle kiln bench's timing with and without an untimed run before each timed one
#         (KILN_BENCH_SETTLE, at 5229cd6; it did not steady the figures and was replaced by
#         KILN_BENCH_WARM_MS), alternating; then the table again (webgpu,cuda).
#   warm  the same A/B for KILN_BENCH_WARM_MS (0 / 10 ms of the function's calls before each
#         timed run), webgpu and cuda, alternating twice; then the table (webgpu,cuda).
#   attn2 the tiled prefill's staged loads (KILN_WEBGPU_ATTN_PREFILL_LOADS, at c288044: no gain,
#         dropped): its tests on the GPU, bench/webgpu-attention.ts, then kiln bench's Qwen3
#         forward on webgpu with the defaults.
#   mk    #17 the megakernel A/B of s27.sh (FORMS, default "base kss") for this GPU's figures.
#   table #20's table (scripts/device/webgpu-table.sh webgpu,cuda) with this build's defaults
# A step starts only while the call is under its deadline (S28_DEADLINE s); logs and JSON under
# $OUT/s28-PART come back as one tarball, the summary printed last.
set -uo pipefail
part=${1:?usage: s28.sh prof|attn|final|settle|warm|attn2|mk|table}
if [ "$part" = table ]; then exec bash "$(dirname "$0")/webgpu-table.sh" webgpu,cuda; fi
session=s28
source "$(dirname "$0")/session-lib.sh"
declare -A FORM=(
  [base]="KILN_DECODE_MEGAKERNEL_STREAM=next KILN_DECODE_MEGAKERNEL_KV_SLOTS=registers"
  [kss]="KILN_DECODE_MEGAKERNEL_STREAM=next KILN_DECODE_MEGAKERNEL_KV_SLOTS=shared"
)
forms=${FORMS:-base kss}
wgprof() { # workload dtype [env... | --flag...]
  local w=$1 d=$2 a envs=() flags=(); shift 2
  for a in "$@"; do case $a in --*) flags+=("$a") ;; *) envs+=("$a") ;; esac; done
  go wgprof-$w-$d && { env "${envs[@]}" KILN_WEBGPU_BACKEND=vulkan $K 150 node dist/bench/webgpu-profile.js $w $d --top 30 "${flags[@]}" --json "$out/wgprof-$w-$d$*.json" > "$out/wgprof-$w-$d$*.txt" 2>&1
    el "webgpu profile $w $d ($*) rc=$?"; head -n 14 "$out/wgprof-$w-$d$*.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
}
if [ "$part" = prof ]; then
  go burst && { $K 120 node dist/bench/cuda-weight-burst.js --json "$out/burst.json" > "$out/burst.txt" 2>&1; el "burst rc=$?"; tail -n 20 "$out/burst.txt" | tee -a "$out/summary.txt"; }
  wgprof qwen3-0.6b-forward float32
  wgprof conv-stack float32
  wgprof elementwise-4096 float16
  wgprof qwen3-0.6b-forward float16
  wgprof conv-stack float16
  go cudaprof && { $K 120 node dist/bench/cuda-profile.js qwen3-0.6b-forward float32 --top 20 --json "$out/cudaprof-qwen3-f32.json" > "$out/cudaprof-qwen3-f32.txt" 2>&1; el "cuda profile qwen3 f32 rc=$?"; head -n 14 "$out/cudaprof-qwen3-f32.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
  go cudaconv && { KILN_CUDA_CONV_TF32=0 $K 120 node dist/src/cli/main.js bench --device cuda --workload conv-stack --no-progress --json "$out/cuda-conv-notf32.json" > "$out/cuda-conv-notf32.txt" 2>&1; el "cuda conv-stack TF32 off rc=$?"; tail -n 6 "$out/cuda-conv-notf32.txt" | tee -a "$out/summary.txt"; }
elif [ "$part" = attn ]; then
  go tests && { wg $K 200 node --test dist/test/webgpu-attention.test.js dist/test/webgpu-gemm-large-tile.test.js > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail)|^not ok|differ" 10; }
  go cudatests && { $K 120 node --test dist/test/cuda-runtime.test.js > "$out/cuda-tests.txt" 2>&1; el "cuda runtime tests rc=$?"; sum "$out/cuda-tests.txt" "^# (tests|pass|fail)|^not ok" 10; }
  wgprof qwen3-0.6b-forward float32
  wgprof qwen3-0.6b-forward float32 KILN_WEBGPU_GEMM_SPLIT_TILE=large
  wgprof qwen3-0.6b-forward float16
  wgprof elementwise-4096 float16 --harness
  wgprof elementwise-4096 float32 --harness
  wgprof qwen3-0.6b-forward float32 KILN_WEBGPU_ATTN_PREFILL=rows
elif [ "$part" = final ]; then
  go tests && { wg $K 200 node --test dist/test/webgpu-replay.test.js dist/test/webgpu-gemm-large-tile.test.js > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail)|^not ok|differ" 10; }
  wgprof qwen3-0.6b-forward float32
  wgprof qwen3-0.6b-forward float16
  go table && { KILN_WEBGPU_BACKEND=vulkan WT_WEBGPU_S=230 WT_CUDA_S=120 bash scripts/device/webgpu-table.sh webgpu,cuda > "$out/table.txt" 2>&1; el "table rc=$?"; grep -E "^[a-z0-9.-]+ +(webgpu|cuda)" "$out/table.txt" | cut -c1-160 | tee -a "$out/summary.txt"; }
elif [ "$part" = settle ]; then
  for rep in 1 2; do for v in 0 1; do
    go settle$v-$rep && { KILN_BENCH_SETTLE=$v KILN_WEBGPU_BACKEND=vulkan $K 90 node dist/src/cli/main.js bench --device webgpu --dtype float16 float32 --workload elementwise-4096,conv-stack --reps 30 --no-progress --json "$out/settle$v-$rep.json" > "$out/settle$v-$rep.txt" 2>&1
      el "kiln bench webgpu KILN_BENCH_SETTLE=$v rc=$?"; grep -E "^[a-z0-9.-]+ +webgpu" "$out/settle$v-$rep.txt" | cut -c1-120 | tee -a "$out/summary.txt"; }
  done; done
  go table && { KILN_WEBGPU_BACKEND=vulkan WT_WEBGPU_S=230 WT_CUDA_S=120 bash scripts/device/webgpu-table.sh webgpu,cuda > "$out/table.txt" 2>&1; el "table rc=$?"; grep -E "^[a-z0-9.-]+ +(webgpu|cuda)" "$out/table.txt" | cut -c1-160 | tee -a "$out/summary.txt"; }
elif [ "$part" = warm ]; then
  for rep in 1 2; do for v in 0 10; do for dev in webgpu cuda; do
    go warm$v-$dev-$rep && { KILN_BENCH_WARM_MS=$v KILN_WEBGPU_BACKEND=vulkan $K 90 node dist/src/cli/main.js bench --device $dev --dtype float16 float32 --workload elementwise-4096,conv-stack,mlp-2048x4096 --reps 30 --no-progress --json "$out/warm$v-$dev-$rep.json" > "$out/warm$v-$dev-$rep.txt" 2>&1
      el "kiln bench $dev KILN_BENCH_WARM_MS=$v rc=$?"; grep -E "^[a-z0-9.-]+ +$dev" "$out/warm$v-$dev-$rep.txt" | cut -c1-120 | tee -a "$out/summary.txt"; }
  done; done; done
  go table && { KILN_WEBGPU_BACKEND=vulkan WT_WEBGPU_S=230 WT_CUDA_S=120 bash scripts/device/webgpu-table.sh webgpu,cuda > "$out/table.txt" 2>&1; el "table rc=$?"; grep -E "^[a-z0-9.-]+ +(webgpu|cuda)" "$out/table.txt" | cut -c1-160 | tee -a "$out/summary.txt"; }
elif [ "$part" = attn2 ]; then
  go tests && { wg $K 120 node --test dist/test/webgpu-attention.test.js > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail)|^not ok|differ" 10; }
  go attnbench && { wg $K 90 node dist/bench/webgpu-attention.js --json "$out/attention.json" > "$out/attention.txt" 2>&1; el "attention bench rc=$?"; tail -n 12 "$out/attention.txt" | tee -a "$out/summary.txt"; }
  go qwen3 && { wg $K 120 node dist/src/cli/main.js bench --device webgpu --dtype float32 float16 --workload qwen3-0.6b-forward --include-slow --reps 30 --no-progress --json "$out/qwen3-webgpu.json" > "$out/qwen3-webgpu.txt" 2>&1; el "kiln bench qwen3 webgpu rc=$?"; grep -E "^[a-z0-9.-]+ +webgpu" "$out/qwen3-webgpu.txt" | cut -c1-120 | tee -a "$out/summary.txt"; }
elif [ "$part" = mk ]; then
  mkpart 300
else
  el "unknown part $part"
fi
finish
