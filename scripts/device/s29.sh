#!/usr/bin/env bash
# Session 29's device calls, from the repo root through .device/run.sh with dist/ built and carried
# (bash .device/run.sh bash scripts/device/s29.sh PART):
#   explore  #20: the float16 GEMM on the workloads' shapes under several staged plans
#            (bench/webgpu-gemm-shapes.ts); the attention prefill float32 / float16 with the float16
#            kernel also reading u32 words (KILN_WEBGPU_ATTN_F16=packed, a diagnostic); the WGSL math
#            library's forms on elementwise-4096 (bench/webgpu-elementwise-math.ts), now with
#            KILN_BENCH_WARM_MS before each batch (its session 15 figures were at an idle clock).
#   explore2 the same after steady warm-up (src/bench/steady.ts: explore's clock samples showed the
#            SM clock at 345 MHz through most timings), the plans cut to those not clearly slower;
#            the Qwen3 float16 forward's step profile; kiln bench's elementwise-4096 and Qwen3 rows.
#   words    the tiled prefill's word copies (KILN_WEBGPU_ATTN_WORDS): its tests on the GPU (float16
#            words only run where shader-f16 exists), bench/webgpu-attention.ts (scalar / word
#            copies), the math forms again under the windowed steady warm-up, the Qwen3 float16
#            profile and kiln bench's elementwise-4096 and Qwen3 rows with this build's defaults.
#   final    the attention bench with a diagnostic float16 store by WGSL's f16() (at bb32f91),
#            then the table (webgpu-table.sh webgpu,cuda) with this build's defaults into
#            $OUT/webgpu-table.tgz.
#   store    float16 stores by the device's conversion where a probe shows it exact
#            (KILN_WEBGPU_F16_STORE, kernels/webgpu/f16-store-probe.ts): every webgpu test file on
#            the GPU, the attention and math-forms benches, kiln bench's float16 webgpu rows.
#   store2   after the test fixes (the probe up front in the test helpers, never inside a recording;
#            the rounding tests read kiln_f16_store): every webgpu test file on the GPU; kiln bench's
#            Qwen3 float16 forward with KILN_WEBGPU_F16_STORE exact / auto, alternating twice.
#   table    #20's table (scripts/device/webgpu-table.sh webgpu,cuda) with this build's defaults.
# A step starts only while the call is under its deadline (S29_DEADLINE s); logs and JSON under
# $OUT/s29-PART come back as one tarball, the summary printed last.
set -uo pipefail
part=${1:?usage: s29.sh explore|explore2|words|final|store|store2|table}
if [ "$part" = table ]; then exec bash "$(dirname "$0")/webgpu-table.sh" webgpu,cuda; fi
session=s29
source "$(dirname "$0")/session-lib.sh"
wgprof() { # workload dtype [env... | --flag...]: bench/webgpu-profile.ts, step by step
  local w=$1 d=$2 a envs=() flags=(); shift 2
  for a in "$@"; do case $a in --*) flags+=("$a") ;; *) envs+=("$a") ;; esac; done
  go wgprof-$w-$d && { env "${envs[@]}" KILN_WEBGPU_BACKEND=vulkan $K 150 node dist/bench/webgpu-profile.js $w $d --top 30 "${flags[@]}" --json "$out/wgprof-$w-$d$*.json" > "$out/wgprof-$w-$d$*.txt" 2>&1
    el "webgpu profile $w $d ($*) rc=$?"; head -n 16 "$out/wgprof-$w-$d$*.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
}
if [ "$part" = explore ]; then
  go gemm && { wg $K 200 node dist/bench/webgpu-gemm-shapes.js --json "$out/gemm-shapes.json" > "$out/gemm-shapes.txt" 2>&1; el "gemm shapes rc=$?"; grep -E "best|skipped" "$out/gemm-shapes.txt" | cut -c1-150 | tee -a "$out/summary.txt"; }
  go attn && { wg $K 100 node dist/bench/webgpu-attention.js --json "$out/attention.json" > "$out/attention.txt" 2>&1; el "attention bench rc=$?"; tail -n 12 "$out/attention.txt" | tee -a "$out/summary.txt"; }
  go math && { wg $K 150 node dist/bench/webgpu-elementwise-math.js --forms v2,v3,fast --json "$out/math-forms.json" > "$out/math-forms.txt" 2>&1; el "math forms rc=$?"; sum "$out/math-forms.txt" "^(float32|float16|dtype) " 16; }
elif [ "$part" = explore2 ]; then
  go gemm && { wg $K 200 node dist/bench/webgpu-gemm-shapes.js --plans "auto;nosplit;2,2,2,2,4;2,2,4,4,2;2,2,4,2,2;2,4,2,2,2" --json "$out/gemm-shapes.json" > "$out/gemm-shapes.txt" 2>&1; el "gemm shapes rc=$?"; grep -E "TFLOP|skipped" "$out/gemm-shapes.txt" | cut -c1-150 | tee -a "$out/summary.txt"; }
  go attn && { wg $K 100 node dist/bench/webgpu-attention.js --json "$out/attention.json" > "$out/attention.txt" 2>&1; el "attention bench rc=$?"; tail -n 12 "$out/attention.txt" | tee -a "$out/summary.txt"; }
  go math && { wg $K 150 node dist/bench/webgpu-elementwise-math.js --forms v2,v3,fast --json "$out/math-forms.json" > "$out/math-forms.txt" 2>&1; el "math forms rc=$?"; sum "$out/math-forms.txt" "^(float32|float16|dtype) " 16; }
  wgprof qwen3-0.6b-forward float16
  go bench && { wg $K 200 node dist/src/cli/main.js bench --device webgpu --dtype float32 float16 --workload elementwise-4096,qwen3-0.6b-forward --include-slow --reps 30 --no-progress --json "$out/bench-webgpu.json" > "$out/bench-webgpu.txt" 2>&1; el "kiln bench webgpu rc=$?"; grep -E "^[a-z0-9.-]+ +webgpu" "$out/bench-webgpu.txt" | cut -c1-120 | tee -a "$out/summary.txt"; }
elif [ "$part" = words ]; then
  go tests && { wg $K 200 node --test dist/test/webgpu-attention.test.js > "$out/tests.txt" 2>&1; el "tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail)|^not ok|differ" 10; }
  go attn && { wg $K 100 node dist/bench/webgpu-attention.js --json "$out/attention.json" > "$out/attention.txt" 2>&1; el "attention bench rc=$?"; grep -E "^float" "$out/attention.txt" | tee -a "$out/summary.txt"; }
  go math && { wg $K 150 node dist/bench/webgpu-elementwise-math.js --forms v2,v3,fast --json "$out/math-forms.json" > "$out/math-forms.txt" 2>&1; el "math forms rc=$?"; sum "$out/math-forms.txt" "^(float32|float16|dtype) |steady" 18; }
  wgprof qwen3-0.6b-forward float16
  go bench && { wg $K 200 node dist/src/cli/main.js bench --device webgpu --dtype float32 float16 --workload elementwise-4096,transformer-block,qwen3-0.6b-forward --include-slow --reps 30 --no-progress --json "$out/bench-webgpu.json" > "$out/bench-webgpu.txt" 2>&1; el "kiln bench webgpu rc=$?"; grep -E "^[a-z0-9.-]+ +webgpu" "$out/bench-webgpu.txt" | cut -c1-120 | tee -a "$out/summary.txt"; }
elif [ "$part" = final ]; then
  go attn && { wg $K 100 node dist/bench/webgpu-attention.js --json "$out/attention.json" > "$out/attention.txt" 2>&1; el "attention bench rc=$?"; grep -E "^float" "$out/attention.txt" | tee -a "$out/summary.txt"; }
  go table && { KILN_WEBGPU_BACKEND=vulkan WT_WEBGPU_S=290 WT_CUDA_S=130 bash scripts/device/webgpu-table.sh webgpu,cuda > "$out/table.txt" 2>&1; el "table rc=$?"; grep -E "^[a-z0-9.-]+ +(webgpu|cuda)" "$out/table.txt" | cut -c1-160 | tee -a "$out/summary.txt"; }
elif [ "$part" = store ]; then
  go tests && { wg $K 330 node --test --test-concurrency=4 dist/test/webgpu-*.test.js > "$out/tests.txt" 2>&1; el "webgpu tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail|skipped)|^not ok|differ" 14; }
  go attn && { wg $K 100 node dist/bench/webgpu-attention.js --json "$out/attention.json" > "$out/attention.txt" 2>&1; el "attention bench rc=$?"; grep -E "^float" "$out/attention.txt" | tee -a "$out/summary.txt"; }
  go math && { wg $K 120 node dist/bench/webgpu-elementwise-math.js --forms v2,v3,fast --json "$out/math-forms.json" > "$out/math-forms.txt" 2>&1; el "math forms rc=$?"; sum "$out/math-forms.txt" "^(float32|float16|dtype) " 16; }
  go bench && { wg $K 200 node dist/src/cli/main.js bench --device webgpu --size full --dtype float16 --workload all --include-slow --reps 30 --no-progress --json "$out/bench-webgpu-f16.json" > "$out/bench-webgpu-f16.txt" 2>&1; el "kiln bench webgpu float16 rc=$?"; grep -E "^[a-z0-9.-]+ +webgpu" "$out/bench-webgpu-f16.txt" | cut -c1-120 | tee -a "$out/summary.txt"; }
elif [ "$part" = store2 ]; then
  go tests && { wg $K 330 node --test --test-concurrency=4 dist/test/webgpu-*.test.js > "$out/tests.txt" 2>&1; el "webgpu tests rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail|skipped)|^not ok|differ" 14; }
  for rep in 1 2; do for v in exact auto; do
    go qwen3-$v-$rep && { KILN_WEBGPU_F16_STORE=$v wg $K 100 node dist/src/cli/main.js bench --device webgpu --size full --dtype float16 --workload qwen3-0.6b-forward,elementwise-4096 --include-slow --reps 30 --no-progress --json "$out/qwen3-$v-$rep.json" > "$out/qwen3-$v-$rep.txt" 2>&1; el "kiln bench webgpu f16 store $v rc=$?"; grep -E "^[a-z0-9.-]+ +webgpu" "$out/qwen3-$v-$rep.txt" | cut -c1-120 | tee -a "$out/summary.txt"; }
  done; done
else
  el "unknown part $part"
fi
finish
