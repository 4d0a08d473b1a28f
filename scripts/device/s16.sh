#!/usr/bin/env bash
# Session 16's device calls, each under the device tool's 600 s limit, from the repo root through
# .device/run.sh with dist/ built and carried:
#   bash .device/run.sh bash scripts/device/s16.sh measure   # what session 15 merged unmeasured (#20: webgpu
#       paged attention vector value pass A/B, rmsNorm kernel, readback; #17: decode, HTTP with async steps,
#       batch-64 profile, MoE decode, cpu decode against the bandwidth bound)
# A step starts only while the call is under its deadline (S16_DEADLINE s), so the tail is what gets cut;
# logs and JSON under $OUT/s16-PART come back as one tarball, the summary printed last.
set -uo pipefail
part=${1:?usage: s16.sh measure|probe|probe2|ab|mma|pdl|final}
final=${OUT:-/tmp/out}; out=$final/s16-$part; mkdir -p "$out"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$out/summary.txt"; }
sum() { grep -hE "$2" "$1" | head -${3:-8} | cut -c1-300 | tee -a "$out/summary.txt"; }
dl=${S16_DEADLINE:-430}
go() { if [ $(( $(date +%s) - t0 )) -ge $dl ]; then el "skip $1 (deadline)"; return 1; fi; }
K="timeout -k 5"
export KILN_CACHE_DIR=/tmp/kiln-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > "$out/gpu.txt" 2>&1
wg() { KILN_WEBGPU_BACKEND=vulkan "$@"; }
if [ "$part" = measure ]; then
  for v in 1 0; do
    go wgk$v && { KILN_WEBGPU_PAGED_VECV=$v wg $K 30 node dist/bench/webgpu-decode-kernels.js --json "$out/wgk-vecv$v.json" > "$out/wgk-vecv$v.txt" 2>&1
      el "webgpu decode kernels VECV=$v rc=$?"; grep -vE "^\s*$" "$out/wgk-vecv$v.txt" | tail -n 10 | cut -c1-160 | tee -a "$out/summary.txt"; }
  done
  for v in 1 0; do
    go wgdec$v && { KILN_WEBGPU_PAGED_VECV=$v wg $K 45 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 2 --breakdown \
        --json "$out/decode-webgpu-vecv$v.json" > "$out/decode-webgpu-vecv$v.txt" 2>&1
      el "webgpu decode f16 VECV=$v rc=$?"; sum "$out/decode-webgpu-vecv$v.txt" "^decode +batch|rror|breakdown" 4; }
  done
  go readback && { wg $K 25 node dist/bench/webgpu-readback.js > "$out/readback.txt" 2>&1
    el "webgpu readback rc=$?"; tail -n 6 "$out/readback.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
  go wgtests && { wg $K 75 node --test dist/test/webgpu-paged.test.js dist/test/webgpu-readback.test.js dist/test/webgpu-llm.test.js \
      dist/test/webgpu-argmax-split.test.js > "$out/webgpu-tests.txt" 2>&1
    el "webgpu tests rc=$?"; sum "$out/webgpu-tests.txt" "^# (pass|fail|skipped)|^not ok" 10; }
  go decode && { $K 90 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 1,8,64 --new 256 --reps 2 \
      --json "$out/decode-cuda.json" > "$out/decode-cuda.txt" 2>&1
    el "cuda decode rc=$?"; sum "$out/decode-cuda.txt" "^decode +batch|^ttft|rror" 8; }
  go http && { $K 90 node dist/bench/serve.js --config qwen3-0.6b --device cuda --dtype bfloat16 --clients 16 --prompt 128 --new 128 --reps 3 --no-start \
      --batch-window-ms 2 --json "$out/serve.json" > "$out/serve.txt" 2> "$out/serve-err.txt"
    el "serve http (async steps) rc=$?"; cut -c1-300 "$out/serve.txt" | tail -n 4 | tee -a "$out/summary.txt"; }
  go prof64 && { $K 45 node dist/bench/cuda-profile.js qwen3-0.6b-decode-b64 bfloat16 --top 16 --json "$out/profile-b64.json" > "$out/profile-b64.txt" 2>&1
    el "profile b64 rc=$?"; head -n 16 "$out/profile-b64.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
  go moe && { $K 100 node dist/bench/decode.js --config qwen3-30b-a3b-4l --device cuda --dtype bfloat16 --batches 1,32 --new 128 --reps 2 \
      --json "$out/decode-moe.json" > "$out/decode-moe.txt" 2>&1
    el "moe decode rc=$?"; sum "$out/decode-moe.txt" "^decode +batch|^ttft|rror" 4; }
  go cpubound && { $K 90 node dist/bench/cpu-decode-bound.js --rounds 3 --steps 6 --json "$out/cpu-bound.json" > "$out/cpu-bound.txt" 2>&1
    el "cpu decode bound rc=$?"; tail -n 6 "$out/cpu-bound.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
elif [ "$part" = probe ]; then
  # #20: where the webgpu batch-1 decode step's time goes (runner vs sampler parts; submit chunking;
  # context length; paged attention alone at three contexts; host counters of the device thread).
  go wgstep && { wg $K 60 node scripts/device/wg-step.mjs float16 > "$out/wg-step.txt" 2>&1
    el "wg-step rc=$?"; cut -c1-120 "$out/wg-step.txt" | tail -n 14 | tee -a "$out/summary.txt"; }
  for se in 0 16 64; do
    go sub$se && { KILN_WEBGPU_REPLAY_SUBMIT=$se wg $K 40 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 2 \
        --json "$out/decode-submit$se.json" > "$out/decode-submit$se.txt" 2>&1
      el "webgpu decode f16 REPLAY_SUBMIT=$se rc=$?"; sum "$out/decode-submit$se.txt" "^decode +batch|rror" 2; }
  done
  for pl in 16 1024; do
    go prompt$pl && { wg $K 40 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --prompt $pl --new 64 --reps 2 \
        --json "$out/decode-prompt$pl.json" > "$out/decode-prompt$pl.txt" 2>&1
      el "webgpu decode f16 prompt $pl rc=$?"; sum "$out/decode-prompt$pl.txt" "^decode +batch|rror" 2; }
  done
  for c in 64 2000; do
    go attn$c && { wg $K 25 node dist/bench/webgpu-decode-kernels.js --only pagedAttention --context $c --json "$out/wgk-attn$c.json" > "$out/wgk-attn$c.txt" 2>&1
      el "webgpu paged attention ctx $c rc=$?"; tail -n 2 "$out/wgk-attn$c.txt" | cut -c1-160 | tee -a "$out/summary.txt"; }
  done
  go wgprof && { wg $K 60 node dist/bench/webgpu-decode-profile.js --dtype float16 --steps 30 --stamp-steps 0 --json "$out/wgprof.json" > "$out/wgprof.txt" 2>&1
    el "webgpu decode profile (host) rc=$?"; tail -n 25 "$out/wgprof.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
elif [ "$part" = probe2 ]; then
  # #20: does the webgpu paged attention's cost follow the table's capacity (the engine's tables are
  # min(40960, cache blocks) wide)? Dawn toggles that cut the device thread's encode/submit cost or
  # the shaders' workgroup-memory zeroing; the step's kernels one by one (stamped, no replay).
  for cap in 336 1024 4544 40960; do
    go cap$cap && { wg $K 25 node dist/bench/webgpu-decode-kernels.js --only pagedAttention --context 300 --capacity $cap --json "$out/wgk-cap$cap.json" > "$out/wgk-cap$cap.txt" 2>&1
      el "paged attention ctx 300 capacity $cap rc=$?"; tail -n 1 "$out/wgk-cap$cap.txt" | cut -c1-160 | tee -a "$out/summary.txt"; }
  done
  for nb in 40 284; do
    go step$nb && { WG_STEP_BLOCKS=$nb wg $K 60 node scripts/device/wg-step.mjs float16 > "$out/wg-step-$nb.txt" 2>&1
      el "wg-step $nb blocks rc=$?"; grep -E "engine.step|runner.run \+ sync|runner device" "$out/wg-step-$nb.txt" | cut -c1-120 | tee -a "$out/summary.txt"; }
  done
  for tg in none skip_validation disable_workgroup_init skip_validation,disable_workgroup_init; do
    t=$tg; [ $tg = none ] && t=
    go tg-$tg && { KILN_WEBGPU_DAWN_TOGGLES=$t wg $K 40 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 2 \
        --json "$out/decode-tg-$tg.json" > "$out/decode-tg-$tg.txt" 2>&1
      el "webgpu decode f16 toggles $tg rc=$?"; sum "$out/decode-tg-$tg.txt" "^decode +batch|rror" 2; }
  done
  go stamped && { KILN_WEBGPU_REPLAY=0 wg $K 90 node dist/bench/webgpu-decode-profile.js --dtype float16 --prompt 128 --steps 3 --stamp-steps 3 --json "$out/wgprof-stamped.json" > "$out/wgprof-stamped.txt" 2>&1
    el "webgpu decode profile stamped rc=$?"; head -c 3000 "$out/wgprof-stamped.txt" | tee -a "$out/summary.txt"; echo; }
elif [ "$part" = ab ]; then
  # #20: KILN_WEBGPU_MATH v3 (helper wgew) on the GPU: its bounds test and elementwise-4096 per form;
  # the Dawn skip_validation toggle on decode, alternating 3 times; #17: batch-64 decode with the
  # warm-up that captures the full-batch graph first, with its step breakdown.
  go mathtest && { wg $K 60 node --test dist/test/webgpu-math.test.js > "$out/webgpu-math-test.txt" 2>&1
    el "webgpu-math test rc=$?"; sum "$out/webgpu-math-test.txt" "^# (pass|fail)|^not ok|^# v3" 14; }
  for form in v2 v3 fast; do
    go ew-$form && { KILN_WEBGPU_MATH=$form wg $K 40 node dist/src/cli/main.js bench --device webgpu --size full --dtype float32 float16 --workload elementwise-4096 --reps 30 --no-progress \
        --json "$out/kiln-ew-$form.json" > "$out/kiln-ew-$form.txt" 2>&1
      el "kiln bench elementwise-4096 KILN_WEBGPU_MATH=$form rc=$?"; sum "$out/kiln-ew-$form.txt" "^[a-z0-9.-]+ +webgpu|FAILED" 4; }
  done
  for rep in 1 2 3; do
    for tg in none skip_validation; do
      t=$tg; [ $tg = none ] && t=
      go tg-$tg-$rep && { KILN_WEBGPU_DAWN_TOGGLES=$t wg $K 40 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 2 \
          --json "$out/decode-tg-$tg-$rep.json" > "$out/decode-tg-$tg-$rep.txt" 2>&1
        el "webgpu decode f16 toggles $tg rep $rep rc=$?"; sum "$out/decode-tg-$tg-$rep.txt" "^decode +batch|rror" 2; }
    done
  done
  go b64 && { $K 90 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 8,64 --new 256 --reps 2 --breakdown \
      --json "$out/decode-cuda-b64.json" > "$out/decode-cuda-b64.txt" 2>&1
    el "cuda decode b8/b64 (warm-up fix) rc=$?"; sum "$out/decode-cuda-b64.txt" "^decode +batch|breakdown|rror" 8; }
elif [ "$part" = mma ]; then
  # #17: the tensor-core skinny GEMM (helper mmagemv, KILN_MMA_GEMV_MAX_ROWS, off by default): its
  # test against float64, its bench against cuBLASLt, and decode at batch 8 / 64 with it on and off.
  go mmatest && { $K 150 node --test dist/test/cuda-mma-gemv.test.js > "$out/mma-test.txt" 2>&1
    el "mma gemv test rc=$?"; sum "$out/mma-test.txt" "^# (pass|fail|skipped)|^not ok|worst error" 16; }
  go mmabench && { $K 120 node dist/bench/cuda-mma-gemv.js --no-sweep --rows 8,64 --json "$out/mma-bench.json" > "$out/mma-bench.txt" 2>&1
    el "mma gemv bench rc=$?"; tail -n 30 "$out/mma-bench.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
  for rep in 1 2; do
    for v in 64 0; do
      go mma$v-$rep && { KILN_MMA_GEMV_MAX_ROWS=$v $K 70 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 8,64 --new 256 --reps 2 \
          --json "$out/decode-mma$v-$rep.json" > "$out/decode-mma$v-$rep.txt" 2>&1
        el "decode KILN_MMA_GEMV_MAX_ROWS=$v rep $rep rc=$?"; sum "$out/decode-mma$v-$rep.txt" "^decode +batch|rror" 4; }
    done
  done
elif [ "$part" = pdl ]; then
  # #17: GEMV weight prefetch into L2 before the PDL wait (helper pdlgemv, KILN_GEMV_PREFETCH) and the
  # mma GEMM's gated test after its fix: tests (plain, then PDL + prefetch), the 28-layer GEMV chain
  # bench, and decode b1/b8 with PDL off / on / on + prefetch, twice in reversed order.
  go tests && { $K 150 node --test dist/test/cuda-gemv-prefetch.test.js dist/test/cuda-pdl.test.js dist/test/cuda-gemv.test.js dist/test/cuda-linear-silu-mul.test.js \
      dist/test/cuda-add-rms-norm-linear.test.js dist/test/cuda-mma-gemv.test.js > "$out/tests.txt" 2>&1
    el "cuda tests rc=$?"; sum "$out/tests.txt" "^# (pass|fail|skipped)|^not ok" 10; }
  go testspf && { KILN_PDL=1 KILN_GEMV_PREFETCH=1 $K 100 node --test dist/test/cuda-gemv.test.js dist/test/cuda-linear-silu-mul.test.js dist/test/cuda-add-rms-norm-linear.test.js > "$out/tests-pf.txt" 2>&1
    el "cuda tests with PDL + prefetch rc=$?"; sum "$out/tests-pf.txt" "^# (pass|fail|skipped)|^not ok" 10; }
  go chain && { $K 100 node dist/bench/cuda-gemv-chain.js --layers 28 --reps 41 --json "$out/gemv-chain.json" > "$out/gemv-chain.txt" 2>&1
    el "gemv chain rc=$?"; tail -n 22 "$out/gemv-chain.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
  for order in "off pdl pf" "pf pdl off"; do
    for v in $order; do
      case $v in off) e=(KILN_PDL=0);; pdl) e=(KILN_PDL=1);; pf) e=(KILN_PDL=1 KILN_GEMV_PREFETCH=1);; esac
      go dec-$v && { env "${e[@]}" $K 50 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 1,8 --new 256 --reps 2 \
          --json "$out/decode-$v-${order%% *}.json" > "$out/decode-$v-${order%% *}.txt" 2>&1
        el "decode $v (${e[*]}) rc=$?"; sum "$out/decode-$v-${order%% *}.txt" "^decode +batch|rror" 3; }
    done
  done
elif [ "$part" = final ]; then
  # The session's defaults (PDL on, tensor-core skinny GEMM for 2..8 rows, wgdec2's webgpu kernels):
  # cuda tests under them, final decode numbers, MoE with more weight-streaming pairs, webgpu decode
  # and its kernels, cpu decode against the bound with the residual folded into the next norm.
  go tests && { $K 150 node --test dist/test/cuda-pdl.test.js dist/test/cuda-random-draw.test.js dist/test/cuda-mma-gemv.test.js \
      dist/test/llm-moe-cuda.test.js > "$out/cuda-tests.txt" 2>&1
    el "cuda tests (PDL on by default) rc=$?"; sum "$out/cuda-tests.txt" "^# (pass|fail|skipped)|^not ok" 10; }
  go decode && { $K 60 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 1,8,64 --new 256 --reps 2 \
      --json "$out/decode-cuda.json" > "$out/decode-cuda.txt" 2>&1
    el "cuda decode rc=$?"; sum "$out/decode-cuda.txt" "^decode +batch|^ttft|rror" 8; }
  if [ -n "${S16_WG:-}" ]; then
    go wg && { wg $K 100 bash -c "$S16_WG" > "$out/webgpu.txt" 2>&1
      el "webgpu (wgdec2) rc=$?"; grep -vE "^\s*$" "$out/webgpu.txt" | grep -E "^# (pass|fail)|^not ok|decode +batch|us|rror" | head -30 | cut -c1-160 | tee -a "$out/summary.txt"; }
  fi
  for pairs in 256; do
    go moe$pairs && { KILN_MOE_GEMV_MAX_PAIRS=$pairs $K 50 node dist/bench/decode.js --config qwen3-30b-a3b-4l --device cuda --dtype bfloat16 --batches 32 --new 128 --reps 2 \
        --json "$out/decode-moe-pairs$pairs.json" > "$out/decode-moe-pairs$pairs.txt" 2>&1
      el "moe decode b32 KILN_MOE_GEMV_MAX_PAIRS=$pairs rc=$?"; sum "$out/decode-moe-pairs$pairs.txt" "^decode +batch|rror" 2; }
  done
  go moetest && { KILN_MOE_GEMV_MAX_PAIRS=256 $K 60 node --test dist/test/llm-moe-cuda.test.js > "$out/moe-test-256.txt" 2>&1
    el "llm-moe-cuda test with 256 pairs rc=$?"; sum "$out/moe-test-256.txt" "^# (pass|fail|skipped)|^not ok" 6; }
  go cpubound && { $K 90 node dist/bench/cpu-decode-bound.js --rounds 2 --steps 6 --ab KILN_DECODE_NORM_CHAIN --json "$out/cpu-bound.json" > "$out/cpu-bound.txt" 2>&1
    el "cpu decode bound (norm chain A/B) rc=$?"; tail -n 8 "$out/cpu-bound.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
fi
tar -C "$out" -czf "$final/s16-$part.tgz" .
echo "=== summary"; cat "$out/summary.txt"
