# Shared by the session device scripts (scripts/device/s19.sh, s20.sh): sourced after they set
# `session` (s19, s20...) and `part`. Sets out (the part's folder under $OUT), the step deadline
# (${SESSION}_DEADLINE, default 430 s), the helpers el / sum / go, the webgpu and cuda decode runs
# wgdec / cudadec, and starts sampling the GPU clocks (smi: its pid; finish() ends the part).
final=${OUT:-/tmp/out}; out=$final/$session-$part; mkdir -p "$out"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$out/summary.txt"; }
sum() { grep -hE "$2" "$1" | head -${3:-8} | cut -c1-400 | tee -a "$out/summary.txt"; }
dlvar="$(echo "$session" | tr a-z A-Z)_DEADLINE"
dl=${!dlvar:-430}
go() { if [ $(( $(date +%s) - t0 )) -ge $dl ]; then el "skip $1 (deadline)"; return 1; fi; echo "$(date +%s.%N) start $1" >> "$out/phases.txt"; }
K="timeout -k 5"
export KILN_CACHE_DIR=/tmp/kiln-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > "$out/gpu.txt" 2>&1
lscpu > "$out/lscpu.txt" 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,utilization.gpu,power.draw --format=csv,noheader -lms 100 > "$out/clocks.csv" 2>&1 &
smi=$!
wg() { KILN_WEBGPU_BACKEND=vulkan "$@"; }
wgdec() { # name, env..., : webgpu float16 decode at batch ${WGB:-1}
  local n=$1; shift
  go wg-$n && { env "$@" KILN_WEBGPU_BACKEND=vulkan $K 60 node dist/bench/decode.js --device webgpu --dtype float16 --batches ${WGB:-1} --new 256 --reps 2 --json "$out/decode-webgpu-$n.json" > "$out/decode-webgpu-$n.txt" 2>&1
    el "webgpu decode f16 b${WGB:-1} $n ($*) rc=$?"; sum "$out/decode-webgpu-$n.txt" "^decode +batch|rror" 2; }
}
cudadec() { # name, batches, env...
  local n=$1 b=$2; shift 2
  go cuda-$n && { env "$@" $K 80 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches $b --new 256 --reps 2 --json "$out/decode-cuda-$n.json" > "$out/decode-cuda-$n.txt" 2>&1
    el "cuda decode b$b $n ($*) rc=$?"; sum "$out/decode-cuda-$n.txt" "^decode +batch|^ttft|rror" 4; }
}
# The `ab` part: AB (space-separated NAME=OPTION pairs) each run off / on alternating, twice (wg*
# names as webgpu decode, cuda* as cuda decode at batch 1); then TESTS (test files) on webgpu, if any.
abpart() {
  local pair n opt rep v
  for pair in $1; do
    n=${pair%%=*}; opt=${pair#*=}
    for rep in 1 2; do for v in 0 1; do
      case $n in
        wg*) wgdec $n$v-$rep $opt=$v ;;
        cuda*) cudadec $n$v-$rep 1 $opt=$v ;;
      esac
    done; done
  done
  if [ -n "$2" ]; then
    go tests && { wg $K 200 node --test $2 > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail)|^not ok" 10; }
  fi
}
# The `mk` part of the megakernel sessions (s26.sh, s27.sh): the megakernel's tests (timeout $1 s,
# files MK_TESTS), a phase trace per form, then batch-1 decode of the compiled step and each form,
# alternating twice. Forms: `forms` (names) and the associative array FORM (name -> env).
mkpart() {
  local f rep
  go tests && { $K $1 node --test ${MK_TESTS:-dist/test/cuda-decode-megakernel.test.js} > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail)|^not ok|differ|rror|compared" 16; }
  for f in $forms; do
    go phases-$f && { env ${FORM[$f]} $K 90 node dist/bench/cuda-megakernel-phases.js --pos 256 --steps 40 --json "$out/phases-$f.json" > "$out/phases-$f.txt" 2>&1; el "phases $f (${FORM[$f]}) rc=$?"; tail -n 10 "$out/phases-$f.txt" | tee -a "$out/summary.txt"; }
  done
  for rep in 1 2; do
    cudadec m0-$rep 1 KILN_DECODE_MEGAKERNEL=0
    for f in $forms; do cudadec $f-$rep 1 KILN_DECODE_MEGAKERNEL=1 ${FORM[$f]}; done
  done
}
# kiln bench full size of WORKLOADS on DEVICE in DTYPE with ENV set (webgpu through Vulkan), 30 reps: kb NAME DEVICE DTYPE WORKLOADS ENV...
kb() { # name, device, dtype, workloads, env...
  local n=$1 dev=$2 dt=$3 wl=$4; shift 4
  go kb-$n && { env "$@" KILN_WEBGPU_BACKEND=vulkan $K 70 node dist/src/cli/main.js bench --device $dev --size full --dtype $dt --workload $wl --reps 30 --no-progress --json "$out/kb-$n.json" > "$out/kb-$n.txt" 2>&1; el "kiln bench $dev $dt $wl ($*) rc=$?"; grep -E "^[a-z0-9.-]+ +$dev" "$out/kb-$n.txt" | cut -c1-120 | tee -a "$out/summary.txt"; }
}
# Stops the clock sampling, summarises the clocks per phase, packs the part's folder, prints the summary.
finish() {
  kill $smi 2>/dev/null
  python3 scripts/device/clock-summary.py "$out" | tee -a "$out/summary.txt"
  tar -C "$out" -czf "$final/$session-$part.tgz" .
  echo "=== summary"; cat "$out/summary.txt"
}
