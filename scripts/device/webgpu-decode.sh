#!/usr/bin/env bash
# Device round for issue #20's webgpu decode host cost (branch wgdecode): Qwen3-0.6B shapes, random
# float16 weights, batch 1, Dawn/Vulkan on the H200. In one run, so the ratios are side by side:
#   1. tests that compute: webgpu-replay (recorded replay against float64), the LLM op cases
#      (qkNormRotary, applyRotaryEmb, the one-dispatch cache write), the engine's float16 compiled
#      decode against transformers' tokens;
#   2. host and device per step (bench/webgpu-decode-profile.js, 50 steps): eager, compiled without
#      replay (KILN_WEBGPU_REPLAY=0: every step issues its dispatches), compiled (recorded replay,
#      a submit every 64 dispatches: the default), compiled replayed with one submit
#      (KILN_WEBGPU_REPLAY_SUBMIT=0); then the per-kernel device time of the compiled step (replay
#      off, stamps per dispatch);
#   3. decode tok/s (bench/decode.js, 128-token prompt, 64 new tokens): the same four, the compiled
#      one with --breakdown (runner host/device time, sampler, engine).
# Run from the repo root with dist/ built and carried:
#   bash .device/run.sh bash scripts/device/webgpu-decode.sh        (about 5 minutes)
set -uo pipefail
out=${OUT:-/tmp/out}; mkdir -p "$out"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
export KILN_CACHE_DIR=/tmp/kiln-cache KILN_WEBGPU_BACKEND=vulkan
if [ ! -d node_modules/webgpu ]; then echo "node_modules/webgpu is missing: npm install (package.json lists webgpu ^0.6.2)"; exit 2; fi

el "tests"
timeout 300 node --test dist/test/webgpu-replay.test.js > "$out/test-replay.txt" 2>&1; grep -E "^# (pass|fail|skipped)|^not ok" "$out/test-replay.txt"
timeout 300 node --test --test-name-pattern="match the CPU" dist/test/webgpu-llm.test.js > "$out/test-llm.txt" 2>&1; grep -E "^# (pass|fail|skipped)|^not ok|cases differ" "$out/test-llm.txt"
timeout 300 node --test --test-name-pattern="float16, compiled decode" dist/test/webgpu-generate.test.js > "$out/test-generate-f16.txt" 2>&1; grep -E "^# (pass|fail|skipped)|^not ok|steps equal" "$out/test-generate-f16.txt"

run_profile() { # name, one VAR=value, then the bench's arguments
  local name=$1 var=$2; shift 2
  el "profile $name"
  env "$var" timeout 240 node dist/bench/webgpu-decode-profile.js --dtype float16 --steps 50 --stamp-steps 0 "$@" --json "$out/profile-$name.json" 2>&1 | head -1
}
run_profile eager KILN_WEBGPU_REPLAY=1 --decode eager
run_profile compiled-noreplay KILN_WEBGPU_REPLAY=0 --decode compiled
run_profile compiled KILN_WEBGPU_REPLAY=1 --decode compiled
run_profile compiled-submit0 KILN_WEBGPU_REPLAY_SUBMIT=0 --decode compiled
el "per-kernel device time, compiled step (replay off)"
KILN_WEBGPU_REPLAY=0 timeout 240 node dist/bench/webgpu-decode-profile.js --dtype float16 --decode compiled --steps 4 --json "$out/profile-compiled-kernels.json" 2>&1 | head -24

for cfg in eager compiled-noreplay compiled compiled-submit0; do
  el "decode bench $cfg"
  case $cfg in
    eager) env_=(KILN_WEBGPU_REPLAY=1); args=(--decode eager) ;;
    compiled-noreplay) env_=(KILN_WEBGPU_REPLAY=0); args=(--decode compiled) ;;
    compiled) env_=(KILN_WEBGPU_REPLAY=1); args=(--decode compiled --breakdown) ;;
    compiled-submit0) env_=(KILN_WEBGPU_REPLAY_SUBMIT=0); args=(--decode compiled) ;;
  esac
  env "${env_[@]}" timeout 300 node dist/bench/decode.js --device webgpu --dtype float16 --batches 1 --new 64 --reps 2 "${args[@]}" --json "$out/decode-$cfg.json" 2>&1 | grep -E "batch 1|^decode|^ttft"
done
el "done"
