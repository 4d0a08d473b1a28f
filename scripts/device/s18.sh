#!/usr/bin/env bash
# Session 18's device calls, each under the device tool's 600 s limit, from the repo root through
# .device/run.sh with dist/ built and carried (bash .device/run.sh bash scripts/device/s18.sh PART):
#   measure  #20: the GPU's clocks while webgpu and cuda decode run (nvidia-smi every 100 ms), raw
#            Dawn encode + submit cost per dispatch (wg-encode.mjs), the webgpu step's host counters
#            and GPU span, decode with the next replay encoded ahead (KILN_WEBGPU_ENCODE_AHEAD 0 / 1);
#            #17: where the cuda decode step's device time goes at batch 1 / 64 (cuda-profile.ts)
#   probe2   ncu on paged attention v3 at batch 64 / 1; webgpu submit chunks with encoding ahead
#   ab1      paged attention v3's address forms (KILN_CUDA_PAGED_INDEX fast / div): kernel, ncu,
#            decode, tests; webgpu encoding ahead with and without the norm-prologue GEMV
#   final    defaults: cuda decode twice, webgpu async steps on / off, v3 pins, ncu's SASS source
#            counters, webgpu tests, cpu decode against the bound
#   final2   v3 with the table row once and 32-bit element offsets: kernel, ncu SASS, decode, tests
#   final3   the session's last defaults (v3 rule at most 2 token batches): kernel, decode, webgpu
#            decode, tests
#   pp       v3's ping-pong chunk loop (KILN_CUDA_PAGED_PIPE) against the copy form, and its tests
# Every part also samples the GPU's clocks and prints them per step at the end.
# A step starts only while the call is under its deadline (S18_DEADLINE s), so the tail is what gets cut;
# logs and JSON under $OUT/s18-PART come back as one tarball, the summary printed last.
set -uo pipefail
part=${1:?usage: s18.sh measure|...}
final=${OUT:-/tmp/out}; out=$final/s18-$part; mkdir -p "$out"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$out/summary.txt"; }
sum() { grep -hE "$2" "$1" | head -${3:-8} | cut -c1-400 | tee -a "$out/summary.txt"; }
dl=${S18_DEADLINE:-430}
go() { if [ $(( $(date +%s) - t0 )) -ge $dl ]; then el "skip $1 (deadline)"; return 1; fi; echo "$(date +%s.%N) start $1" >> "$out/phases.txt"; }
K="timeout -k 5"
export KILN_CACHE_DIR=/tmp/kiln-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > "$out/gpu.txt" 2>&1
# Clocks through the whole call: SM / memory clock, utilisation, power, every 100 ms.
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,utilization.gpu,power.draw --format=csv,noheader -lms 100 > "$out/clocks.csv" 2>&1 &
smi=$!
wg() { KILN_WEBGPU_BACKEND=vulkan "$@"; }
# The cuda paged-attention tests in three processes by test name (each with its own kernel cache):
# the single file outran 200 s on kernel compiles.
attn_tests() {
  local i=0 pids=() pat f
  for pat in "batch 1, Qwen3|GQA ratios" "batches 8 and 64|in a CUDA graph|is reported" "v3 on cuda"; do
    i=$((i+1)); ( KILN_CACHE_DIR=/tmp/kiln-cache-$i $K 200 node --test --test-name-pattern "$pat" dist/test/cuda-paged-attention.test.js > "$out/attn-test-$i.txt" 2>&1; echo "rc=$?" >> "$out/attn-test-$i.txt" ) &
    pids+=($!)
  done
  wait "${pids[@]}"  # not the clock sampler
  el "paged attention tests"; for f in attn-test-1 attn-test-2 attn-test-3; do echo "-- $f" | tee -a "$out/summary.txt"; sum "$out/$f.txt" "^# (pass|fail|skipped|todo)|^not ok|^rc=" 8; done
}
if [ "$part" = measure ]; then
  for v in "1 0" "1 1" "6 0" "6 1"; do
    set -- $v
    go enc$1$2 && { BK=vulkan NB=$1 ALT=$2 EVERY=0,64 KILN_WEBGPU_BACKEND=vulkan $K 40 node scripts/device/wg-encode.mjs >> "$out/wg-encode.txt" 2>&1; el "raw Dawn encode bindings=$1 alt=$2 rc=$?"; }
  done
  sum "$out/wg-encode.txt" "backend" 8
  for ah in 0 1; do
    go wgprof$ah && { KILN_WEBGPU_ENCODE_AHEAD=$ah wg $K 60 node dist/bench/webgpu-decode-profile.js --dtype float16 --steps 60 --stamp-steps 0 --json "$out/wgprof-ahead$ah.json" > "$out/wgprof-ahead$ah.txt" 2>&1
      el "webgpu decode profile KILN_WEBGPU_ENCODE_AHEAD=$ah rc=$?"; tail -n 2 "$out/wgprof-ahead$ah.txt" | cut -c1-900 | tee -a "$out/summary.txt"; }
  done
  for rep in 1 2; do
    for ah in 0 1; do
      go wgdec$ah-$rep && { KILN_WEBGPU_ENCODE_AHEAD=$ah wg $K 45 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 2 --json "$out/decode-webgpu-ahead$ah-$rep.json" > "$out/decode-webgpu-ahead$ah-$rep.txt" 2>&1
        el "webgpu decode f16 KILN_WEBGPU_ENCODE_AHEAD=$ah rep $rep rc=$?"; sum "$out/decode-webgpu-ahead$ah-$rep.txt" "^decode +batch|rror" 2; }
    done
  done
  for b in 1 64; do
    go prof$b && { $K 110 node dist/bench/cuda-profile.js qwen3-0.6b-decode-b$b bfloat16 --pos 256 --top 30 --json "$out/cuda-profile-b$b.json" > "$out/cuda-profile-b$b.txt" 2>&1
      el "cuda profile decode b$b rc=$?"; head -n 45 "$out/cuda-profile-b$b.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
  done
  go cudadec && { $K 70 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 1,64 --new 256 --reps 2 --json "$out/decode-cuda.json" > "$out/decode-cuda.txt" 2>&1
    el "cuda decode b1/b64 rc=$?"; sum "$out/decode-cuda.txt" "^decode +batch|rror" 4; }
elif [ "$part" = probe2 ]; then
  # #17: why paged attention v3 reads K/V at ~1.6 TB/s at batch 64 (40 us a layer) and takes 13 us
  # at batch 1: Nsight Compute sections on one launch each; #20: the webgpu replay's GPU span with
  # its next replay encoded ahead, by submit chunk (KILN_WEBGPU_REPLAY_SUBMIT 64 / 0 / 128), and raw
  # Dawn encode cost on this host.
  NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  for b in 64 1; do
    go ncu$b && { $K 150 "$NCU" --target-processes all --kernel-name regex:paged_attn_v3 --launch-skip 4 --launch-count 1 \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats \
        node dist/bench/cuda-paged-attention.js --batch $b --context 256 --kernels v3 --runs 3 --batches 1 --rounds 1 --budget-s 100 --watchdog-s 140 > "$out/ncu-b$b.txt" 2>&1
      el "ncu paged attention v3 b$b rc=$?"; grep -E "Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Stall|Warp Cycles Per Issued|Issued Warp|No Eligible|Active Warps Per|Eligible Warps|L2 Hit|Mem Busy|Max Bandwidth|Grid Size|Waves|==ERR|==WARN" "$out/ncu-b$b.txt" | head -40 | cut -c1-160 | tee -a "$out/summary.txt"; }
  done
  for v in "1 0" "1 1" "6 1"; do
    set -- $v
    go enc$1$2 && { BK=vulkan NB=$1 ALT=$2 EVERY=0,64 KILN_WEBGPU_BACKEND=vulkan $K 40 node scripts/device/wg-encode.mjs >> "$out/wg-encode.txt" 2>&1; el "raw Dawn encode bindings=$1 alt=$2 rc=$?"; }
  done
  sum "$out/wg-encode.txt" "backend" 8
  for se in 64 0 128; do
    go wgprof$se && { KILN_WEBGPU_ENCODE_AHEAD=1 KILN_WEBGPU_REPLAY_SUBMIT=$se wg $K 60 node dist/bench/webgpu-decode-profile.js --dtype float16 --steps 60 --stamp-steps 0 --json "$out/wgprof-submit$se.json" > "$out/wgprof-submit$se.txt" 2>&1
      el "webgpu decode profile ahead, KILN_WEBGPU_REPLAY_SUBMIT=$se rc=$?"; tail -n 1 "$out/wgprof-submit$se.txt" | cut -c1-900 | tee -a "$out/summary.txt"; }
  done
  for rep in 1 2; do
    for se in 64 0 128; do
      go wgdec$se-$rep && { KILN_WEBGPU_ENCODE_AHEAD=1 KILN_WEBGPU_REPLAY_SUBMIT=$se wg $K 45 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 2 --json "$out/decode-webgpu-submit$se-$rep.json" > "$out/decode-webgpu-submit$se-$rep.txt" 2>&1
        el "webgpu decode f16 ahead, KILN_WEBGPU_REPLAY_SUBMIT=$se rep $rep rc=$?"; sum "$out/decode-webgpu-submit$se-$rep.txt" "^decode +batch|step median|rror" 3; }
    done
  done
elif [ "$part" = ab1 ]; then
  # #17: paged attention v3 with a shift/mask block index and 32-bit addresses (KILN_CUDA_PAGED_INDEX
  # fast, the new default) against the division form (div): the paged-attention tests (three
  # processes by test name), the kernel at batch 64 / 1, ncu at batch 64, decode b1/b8/b64;
  # #20: webgpu decode with encoding ahead and the norm-prologue GEMV (KILN_ADD_RMSNORM_LINEAR).
  for ix in fast div; do
    go attn-$ix && { KILN_CUDA_PAGED_INDEX=$ix $K 100 node dist/bench/cuda-paged-attention.js --batch 64,1 --context 256,128-384 --kernels v3 --json "$out/attn-$ix.json" > "$out/attn-$ix.txt" 2>&1
      el "attention bench KILN_CUDA_PAGED_INDEX=$ix rc=$?"; grep -vE "^\\s*$" "$out/attn-$ix.txt" | tail -n 8 | cut -c1-200 | tee -a "$out/summary.txt"; }
  done
  NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  go ncu64 && { $K 100 "$NCU" --target-processes all --kernel-name regex:paged_attn_v3 --launch-skip 4 --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
      node dist/bench/cuda-paged-attention.js --batch 64 --context 256 --kernels v3 --runs 3 --batches 1 --rounds 1 --budget-s 80 --watchdog-s 95 > "$out/ncu-b64.txt" 2>&1
    el "ncu paged attention v3 (fast) b64 rc=$?"; grep -E "Duration|DRAM Throughput|Registers Per|Issued Warp|No Eligible|Eligible Warps|Warp Cycles Per Issued|Achieved Occupancy|==ERR" "$out/ncu-b64.txt" | head -12 | cut -c1-160 | tee -a "$out/summary.txt"; }
  for ix in fast div; do
    go dec-$ix && { KILN_CUDA_PAGED_INDEX=$ix $K 80 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 1,64 --new 256 --reps 2 --json "$out/decode-cuda-$ix.json" > "$out/decode-cuda-$ix.txt" 2>&1
      el "cuda decode KILN_CUDA_PAGED_INDEX=$ix rc=$?"; sum "$out/decode-cuda-$ix.txt" "^decode +batch|rror" 4; }
  done
  for rep in 1 2; do
    for v in "0 0" "1 0" "1 1"; do
      set -- $v
      go wg$1$2-$rep && { KILN_WEBGPU_ENCODE_AHEAD=$1 KILN_ADD_RMSNORM_LINEAR=$2 wg $K 45 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 128 --reps 2 --json "$out/decode-webgpu-ahead$1-arl$2-$rep.json" > "$out/decode-webgpu-ahead$1-arl$2-$rep.txt" 2>&1
        el "webgpu decode f16 KILN_WEBGPU_ENCODE_AHEAD=$1 KILN_ADD_RMSNORM_LINEAR=$2 rep $rep rc=$?"; sum "$out/decode-webgpu-ahead$1-arl$2-$rep.txt" "step median|rror" 2; }
    done
  done
  go tests && attn_tests
elif [ "$part" = final ]; then
  # The session's defaults (paged attention index 'fast', webgpu encoding ahead): cuda decode
  # b1/b8/b64 twice; webgpu decode with async steps on and off (alternating), and a submit every 32
  # dispatches; paged attention v3 pins at batch 64; ncu's SASS-level source counters of v3 at batch
  # 64 (for the next step on it); webgpu tests of encoding ahead, replay and async steps on the H200.
  for rep in 1 2; do
    go dec$rep && { $K 80 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 1,8,64 --new 256 --reps 2 --json "$out/decode-cuda-$rep.json" > "$out/decode-cuda-$rep.txt" 2>&1
      el "cuda decode (defaults) rep $rep rc=$?"; sum "$out/decode-cuda-$rep.txt" "^decode +batch|^ttft|rror" 6; }
  done
  for rep in 1 2; do
    go wgasync$rep && { wg $K 60 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 256 --reps 2 --async on,off --json "$out/decode-webgpu-async-$rep.json" > "$out/decode-webgpu-async-$rep.txt" 2>&1
      el "webgpu decode f16 (ahead) async on,off rep $rep rc=$?"; sum "$out/decode-webgpu-async-$rep.txt" "step median|^decode +batch|rror" 4; }
  done
  go wgsub32 && { KILN_WEBGPU_REPLAY_SUBMIT=32 wg $K 60 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 256 --reps 2 --async on,off --json "$out/decode-webgpu-submit32.json" > "$out/decode-webgpu-submit32.txt" 2>&1
    el "webgpu decode f16 (ahead) submit 32, async on,off rc=$?"; sum "$out/decode-webgpu-submit32.txt" "step median|rror" 2; }
  go attnpins && { $K 90 node dist/bench/cuda-paged-attention.js --batch 64 --context 256,128-384 --kernels v3,v3:u2,v3:u4,v3:s2 --json "$out/attn-pins.json" > "$out/attn-pins.txt" 2>&1
    el "attention pins b64 rc=$?"; grep -vE "^\\s*$" "$out/attn-pins.txt" | tail -n 10 | cut -c1-200 | tee -a "$out/summary.txt"; }
  NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  go ncusrc && { $K 100 "$NCU" --target-processes all --kernel-name regex:paged_attn_v3 --launch-skip 4 --launch-count 1 --section SourceCounters --section InstructionStats --section WarpStateStats \
      --page source --print-source sass --csv node dist/bench/cuda-paged-attention.js --batch 64 --context 256 --kernels v3 --runs 3 --batches 1 --rounds 1 --budget-s 80 --watchdog-s 95 > "$out/ncu-src-b64.csv" 2>&1
    el "ncu source page v3 b64 rc=$? ($(wc -l < "$out/ncu-src-b64.csv") lines)"; grep -E "==ERR|==WARN" "$out/ncu-src-b64.csv" | head -3 | cut -c1-200 | tee -a "$out/summary.txt"; }
  go wgtests && {
    wg $K 150 node --test dist/test/webgpu-encode-ahead.test.js dist/test/webgpu-replay.test.js > "$out/wg-tests.txt" 2>&1; echo "rc=$?" >> "$out/wg-tests.txt"
    wg $K 90 node --test --test-name-pattern "webgpu" dist/test/engine-async.test.js > "$out/wg-async-tests.txt" 2>&1; echo "rc=$?" >> "$out/wg-async-tests.txt"
    el "webgpu tests"; for f in wg-tests wg-async-tests; do echo "-- $f" | tee -a "$out/summary.txt"; sum "$out/$f.txt" "^# (pass|fail|skipped|todo)|^not ok|^rc=" 8; done; }
  go cpubound && { $K 150 node dist/bench/cpu-decode-bound.js --rounds 3 --steps 6 --json "$out/cpu-bound.json" > "$out/cpu-bound.txt" 2>&1
    el "cpu decode bound rc=$?"; tail -n 6 "$out/cpu-bound.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
elif [ "$part" = pp ]; then
  # v3's ping-pong chunk loop with predicated loads (KILN_CUDA_PAGED_PIPE=pingpong) against the
  # copy form: the kernel at batch 64 / 1, decode b1/b8/b64 each way, the paged-attention tests
  # with pingpong.
  for pp in copy pingpong; do
    go attn-$pp && { KILN_CUDA_PAGED_PIPE=$pp $K 60 node dist/bench/cuda-paged-attention.js --batch 64,1 --context 256,128-384 --kernels v3 --json "$out/attn-$pp.json" > "$out/attn-$pp.txt" 2>&1
      el "attention bench KILN_CUDA_PAGED_PIPE=$pp rc=$?"; grep -vE "^\\s*$" "$out/attn-$pp.txt" | tail -n 5 | cut -c1-200 | tee -a "$out/summary.txt"; }
  done
  for pp in pingpong copy; do
    go dec-$pp && { KILN_CUDA_PAGED_PIPE=$pp $K 60 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 1,8,64 --new 256 --reps 2 --json "$out/decode-cuda-$pp.json" > "$out/decode-cuda-$pp.txt" 2>&1
      el "cuda decode KILN_CUDA_PAGED_PIPE=$pp rc=$?"; sum "$out/decode-cuda-$pp.txt" "^decode +batch|rror" 4; }
  done
  export KILN_CUDA_PAGED_PIPE=pingpong
  go tests && attn_tests
elif [ "$part" = final3 ]; then
  # The session's last defaults (v3's rule at most 2 token batches): the kernel (and the division
  # form as the same-call anchor), decode b1/b8/b64 twice, webgpu decode twice, the paged-attention tests.
  go attn && { $K 90 node dist/bench/cuda-paged-attention.js --batch 64,1 --context 256,128-384 --kernels v3,v3:u3 --json "$out/attn-fast3.json" > "$out/attn-fast3.txt" 2>&1
    el "attention bench (rule u2, pinned u3) rc=$?"; grep -vE "^\\s*$" "$out/attn-fast3.txt" | tail -n 10 | cut -c1-200 | tee -a "$out/summary.txt"; }
  for rep in 1 2; do
    go dec$rep && { $K 80 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 1,8,64 --new 256 --reps 2 --json "$out/decode-cuda-$rep.json" > "$out/decode-cuda-$rep.txt" 2>&1
      el "cuda decode (defaults) rep $rep rc=$?"; sum "$out/decode-cuda-$rep.txt" "^decode +batch|^ttft|rror" 6; }
  done
  for rep in 1 2; do
    go wg$rep && { wg $K 60 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 256 --reps 2 --json "$out/decode-webgpu-$rep.json" > "$out/decode-webgpu-$rep.txt" 2>&1
      el "webgpu decode f16 (defaults) rep $rep rc=$?"; sum "$out/decode-webgpu-$rep.txt" "step median|rror" 2; }
  done
  go tests && attn_tests
elif [ "$part" = final2 ]; then
  # Paged attention v3's hot loop with fewer address instructions (ncu's SASS of the final call:
  # block sizes and head counts reloaded from the parameter bank, 64-bit address arithmetic and the
  # table row's address per token): the kernel at batch 64 / 1 (and the division form as the
  # same-call anchor), ncu's source counters again, decode b1/b8/b64 twice, the paged-attention tests.
  go attn && { $K 90 node dist/bench/cuda-paged-attention.js --batch 64,1 --context 256,128-384 --kernels v3,v3:u2 --json "$out/attn-fast2.json" > "$out/attn-fast2.txt" 2>&1
    el "attention bench (fast, new loop) rc=$?"; grep -vE "^\\s*$" "$out/attn-fast2.txt" | tail -n 10 | cut -c1-200 | tee -a "$out/summary.txt"; }
  go attndiv && { KILN_CUDA_PAGED_INDEX=div $K 90 node dist/bench/cuda-paged-attention.js --batch 64,1 --context 256,128-384 --kernels v3 --json "$out/attn-div.json" > "$out/attn-div.txt" 2>&1
    el "attention bench (div) rc=$?"; grep -vE "^\\s*$" "$out/attn-div.txt" | tail -n 6 | cut -c1-200 | tee -a "$out/summary.txt"; }
  NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  go ncusrc && { $K 100 "$NCU" --target-processes all --kernel-name regex:paged_attn_v3 --launch-skip 4 --launch-count 1 --section SourceCounters --section WarpStateStats --section SpeedOfLight \
      --page source --print-source sass --csv node dist/bench/cuda-paged-attention.js --batch 64 --context 256 --kernels v3 --runs 3 --batches 1 --rounds 1 --budget-s 80 --watchdog-s 95 > "$out/ncu-src-b64.csv" 2>&1
    el "ncu source page v3 b64 rc=$?"; }
  for rep in 1 2; do
    go dec$rep && { $K 80 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 1,8,64 --new 256 --reps 2 --json "$out/decode-cuda-$rep.json" > "$out/decode-cuda-$rep.txt" 2>&1
      el "cuda decode (defaults) rep $rep rc=$?"; sum "$out/decode-cuda-$rep.txt" "^decode +batch|^ttft|rror" 6; }
  done
  go tests && attn_tests
fi
kill $smi 2>/dev/null
# Clock summary per phase: median and max SM clock while each phase ran.
python3 scripts/device/clock-summary.py "$out" | tee -a "$out/summary.txt"
tar -C "$out" -czf "$final/s18-$part.tgz" .
echo "=== summary"; cat "$out/summary.txt"
