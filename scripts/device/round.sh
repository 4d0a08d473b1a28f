#!/usr/bin/env bash
# One batched device round (session 10): the PyTorch fuzz fixture (#18 item 7), the webgpu probe and
# numeric tests on Dawn/Vulkan (#20), Kiln's compiled decode (#17), then the whole test suite on the
# H200, each under its own time cap so the call fits the device tool's 600 s limit. Run from the repo
# root through .device/run.sh with dist/ built and carried:
#   bash .device/run.sh bash scripts/device/round.sh [trainstep,trainstepcol,trainab,trainprof,colrows,wgpumm,moe,serve,fuzz,webgpu,decode,breakdown,abab,prefill,prof,torch,tests,train,suite,cudaprof,fuzzcuda]
# (TESTS: files for 'tests'; TORCH_BATCHES, TORCH_S, TRAIN_S, SUITE_S: sizes and caps.)
# Logs and JSON under $OUT; a summary table prints last.
set -uo pipefail
parts=${1:-fuzz,webgpu,decode,suite}
# Everything goes under $OUT/round/ and comes back as one tarball (the device tool returns at most 8
# files), with summary.txt beside it.
final=${OUT:-/tmp/out}; out=$final/round; mkdir -p "$out"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$out/summary.txt"; }
has() { [[ ",$parts," == *",$1,"* ]]; }
nvidia-smi -L; node --version; python3 -c 'import torch; print("torch", torch.__version__)'
export KILN_CACHE_DIR=/tmp/kiln-cache
if has fuzz; then
  timeout 60 python3 scripts/fuzz/gen_cases.py --seed 18 --cases 3000 --out "$out/fuzz-cases.json.gz" > "$out/fuzz-gen.txt" 2>&1
  el "fuzz fixture rc=$? $(tail -n 1 "$out/fuzz-gen.txt")"
fi
if has webgpu; then
  OUT=$out timeout ${WEBGPU_S:-240} bash scripts/device/webgpu.sh > "$out/webgpu.txt" 2>&1; el "webgpu rc=$?"
  grep -E "^\[|probe|# (pass|fail)|not ok|differ" "$out/webgpu.txt" | head -20 | tee -a "$out/summary.txt"
fi
if has decode; then
  timeout ${DECODE_S:-160} node dist/bench/decode.js --device cuda --dtype bfloat16 --batches ${KILN_BATCHES:-1,8,64} \
    --json "$out/kiln-decode.json" > "$out/kiln-decode.txt" 2>&1; el "kiln decode rc=$?"
  tail -n 8 "$out/kiln-decode.txt" | tee -a "$out/summary.txt"
fi
if has breakdown; then
  timeout 150 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches ${KILN_BATCHES:-1,8,64} --new 64 --reps 1 --breakdown \
    --json "$out/kiln-breakdown.json" > "$out/kiln-breakdown.txt" 2>&1; el "kiln breakdown rc=$?"
  grep -E "breakdown:|tok/s decode" "$out/kiln-breakdown.txt" | tee -a "$out/summary.txt"
fi
if has abab; then
  # Decode at batch 1 with prompts as rows, then through forwardStep, twice each (does the prefill path move decode?).
  for p in rows step rows step; do
    timeout 60 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 1 --reps 1 --prefill $p > "$out/abab-$p.txt" 2>&1
    el "abab prefill $p: $(grep -m1 'tok/s decode' "$out/abab-$p.txt")"
  done
fi
if has abgemv; then
  # Decode with the GEMV kernel off and on, alternating, at the batch sizes given (KILN_GEMV).
  for g in 0 1 0 1; do
    KILN_GEMV=$g timeout 60 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches ${AB_BATCHES:-1,8} --reps 1 --new 128 \
      --json "$out/abgemv-$g-$RANDOM.json" > "$out/abgemv-$g.txt" 2>&1
    el "KILN_GEMV=$g: $(grep 'tok/s decode' "$out/abgemv-$g.txt" | tr '\n' ' ')"
  done
fi
if has prefill; then
  # TTFT and decode with prompts through forwardStep (the old path), side by side with the default rows.
  timeout 120 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 1 --prefill step \
    --json "$out/kiln-decode-prefill-step.json" > "$out/kiln-decode-prefill-step.txt" 2>&1; el "kiln decode prefill step rc=$?"
  tail -n 3 "$out/kiln-decode-prefill-step.txt" | tee -a "$out/summary.txt"
fi
if has prof; then
  # Host profile of decode steps at batch 1 and 64 (self time per function), as text.
  for b in 1 64; do
    rm -rf /tmp/prof-$b; timeout 120 node --cpu-prof --cpu-prof-dir=/tmp/prof-$b dist/bench/decode.js --device cuda --dtype bfloat16 \
      --batches $b --new 128 --reps 2 > "$out/prof-$b-run.txt" 2>&1; el "profile batch $b rc=$?"
    node scripts/prof/top-self.mjs /tmp/prof-$b/*.cpuprofile 40 > "$out/prof-$b.txt" 2>&1
    head -n 16 "$out/prof-$b.txt" | tee -a "$out/summary.txt"
  done
fi
if has torch; then
  timeout ${TORCH_S:-200} python3 scripts/device/decode_torch.py --batches "${TORCH_BATCHES:-1,8}" --forms "${TORCH_FORMS:-hf-static-compiled}" --reps 3 --json "$out/torch-decode.json" 2>&1 | grep -v Warning > "$out/torch-decode.txt"
  el "torch decode rc=$?"; tail -n 6 "$out/torch-decode.txt" | tee -a "$out/summary.txt"
fi
if has tests; then
  KILN_CACHE_DIR=/tmp/kiln-suite-cache timeout ${TESTS_S:-200} node --test ${TESTS:-} > "$out/tests.txt" 2>&1
  el "tests rc=$?"; grep -E "^# (tests|pass|fail|skipped|todo)|^not ok" "$out/tests.txt" | head -30 | tee -a "$out/summary.txt"
  grep -A14 "^not ok" "$out/tests.txt" | grep -E "error:|^ +- |^ +\[" | head -20 | cut -c1-400 | tee -a "$out/summary.txt"
fi
if has train; then
  OUT=$out timeout ${TRAIN_S:-300} bash scripts/device/train.sh $(( ${TRAIN_S:-300} - 20 )) > "$out/train.txt" 2>&1; el "train rc=$?"
  tail -n 12 "$out/train.txt" | tee -a "$out/summary.txt"
fi
if has suite; then
  # The fuzz replay's cuda modes on a bounded, evenly spread subset (each new op/layout builds an
  # NVRTC kernel); their mismatch reports land in fuzz/.
  mkdir -p "$out/fuzz"
  KILN_FUZZ_CUDA=${SUITE_FUZZ_CUDA:-400} KILN_FUZZ_COMPILE=${SUITE_FUZZ_COMPILE:-200} KILN_FUZZ_REPORT="$out/fuzz" \
  KILN_CACHE_DIR=/tmp/kiln-suite-cache timeout ${SUITE_S:-240} node --test dist/test/*.test.js > "$out/suite.txt" 2>&1
  el "suite rc=$?"; grep -E "^# (tests|pass|fail|skipped|todo)|^not ok" "$out/suite.txt" | head -30 | tee -a "$out/summary.txt"
  grep -A14 "^not ok" "$out/suite.txt" | grep -E "error:|^ +- |^ +\[" | head -30 | cut -c1-400 | tee -a "$out/summary.txt"
  grep -E "^# [0-9]+ cases \(torch|^# compile counters" "$out/suite.txt" | tee -a "$out/summary.txt"
fi
if has cudaprof; then
  for b in $(echo "${PROF_BATCHES:-1,64}" | tr , ' '); do
    timeout 120 node dist/bench/cuda-profile.js qwen3-0.6b-decode-b$b bfloat16 --top 30 --json "$out/cuda-profile-b$b.json" > "$out/cuda-profile-b$b.txt" 2>&1
    el "cuda profile decode b$b rc=$?"; grep -v -i warn "$out/cuda-profile-b$b.txt" | head -22 | cut -c1-220 | tee -a "$out/summary.txt"
  done
fi
if has fuzzcuda; then
  mkdir -p "$out/fuzz"
  KILN_FUZZ_COMPILE=${FUZZ_COMPILE:-150} KILN_FUZZ_REPORT="$out/fuzz" KILN_CACHE_DIR=/tmp/kiln-fuzz-cache timeout ${FUZZ_S:-200} node --test dist/test/fuzz-replay.test.js > "$out/fuzz-replay.txt" 2>&1
  el "fuzz replay rc=$?"; grep -E "^# |^not ok|^ok|differs from torch|^ +[a-zA-Z0-9_.]+: [0-9]+ \(" "$out/fuzz-replay.txt" | head -40 | cut -c1-300 | tee -a "$out/summary.txt"
fi
if has trainstep; then
  # conv-stack's training step eager vs compiled on cuda (#19 item 6), with a full stack on failure.
  KILN_CACHE_DIR=/tmp/kiln-train-cache timeout ${TRAINSTEP_S:-90} node --stack-trace-limit=60 dist/bench/train-step.js --device cuda --size full \
    --reps ${TRAINSTEP_REPS:-20} --warmup 3 --out "$out/h200-train-step-conv-stack.json" > "$out/train-step.txt" 2>&1
  el "train-step rc=$?"; grep -E '_ms|speedup|fallbacks|rror' "$out/train-step.txt" | head -12 | tee -a "$out/summary.txt"
fi
if has trainstepcol; then
  # The same step with the coalesced 'col' reduction strategy allowed (KILN_CUDA_COL_REDUCE=1, #19 item 6).
  KILN_CUDA_COL_REDUCE=1 KILN_CACHE_DIR=/tmp/kiln-train-cache-col timeout ${TRAINSTEP_S:-90} node --stack-trace-limit=60 dist/bench/train-step.js --device cuda --size full \
    --reps ${TRAINSTEP_REPS:-20} --warmup 3 --out "$out/h200-train-step-conv-stack-col.json" > "$out/train-step-col.txt" 2>&1
  el "train-step col rc=$?"; grep -E '_ms|speedup|fallbacks|rror' "$out/train-step-col.txt" | head -12 | tee -a "$out/summary.txt"
fi
if has trainab; then
  # The train step A/B over the opt-in reduction options (#19 item 6): default, KILN_CUDA_COL_FEW_ROWS
  # (the loss group on a wave of blocks instead of one), KILN_CUDA_COL_REDUCE, both.
  for cfg in default fewrows col both; do
    case $cfg in
      default) envs=() ;;
      fewrows) envs=(KILN_CUDA_COL_FEW_ROWS=1) ;;
      col) envs=(KILN_CUDA_COL_REDUCE=1) ;;
      both) envs=(KILN_CUDA_COL_REDUCE=1 KILN_CUDA_COL_FEW_ROWS=1) ;;
    esac
    env "${envs[@]}" KILN_CACHE_DIR=/tmp/kiln-train-cache-$cfg timeout ${TRAINSTEP_S:-90} node dist/bench/train-step.js --device cuda --size full \
      --reps ${TRAINSTEP_REPS:-20} --warmup 3 --out "$out/h200-train-step-conv-stack-$cfg.json" > "$out/train-step-$cfg.txt" 2>&1
    el "train-step $cfg rc=$?"; grep -E '_ms|speedup|max_param|rror' "$out/train-step-$cfg.txt" | head -8 | tee -a "$out/summary.txt"
  done
fi
if has trainprof; then
  # Where the train step's device time goes, compiled step by step and eager op by op (bench/cuda-profile-train.ts), default and both options.
  timeout ${TRAINPROF_S:-90} node dist/bench/cuda-profile.js conv-stack-train --top 40 --json "$out/h200-train-profile-default.json" > "$out/train-profile-default.txt" 2>&1
  el "train profile default rc=$?"; head -n 30 "$out/train-profile-default.txt" | cut -c1-400 | tee -a "$out/summary.txt"
  KILN_CUDA_COL_REDUCE=1 KILN_CUDA_COL_FEW_ROWS=1 timeout ${TRAINPROF_S:-90} node dist/bench/cuda-profile.js conv-stack-train --top 40 --json "$out/h200-train-profile-both.json" > "$out/train-profile-both.txt" 2>&1
  el "train profile both options rc=$?"; head -n 30 "$out/train-profile-both.txt" | cut -c1-400 | tee -a "$out/summary.txt"
fi
if has colrows; then
  # KILN_CUDA_COL_FEW_ROWS's kernels on the device against float64, and the reduction tests with both col options on.
  timeout 120 node --test dist/test/cuda-col-rows.test.js > "$out/col-rows-test.txt" 2>&1; el "cuda-col-rows test rc=$?"
  KILN_CUDA_COL_REDUCE=1 KILN_CUDA_COL_FEW_ROWS=1 timeout 240 node --test dist/test/cuda-reductions.test.js dist/test/cuda-compile.test.js > "$out/col-both-tests.txt" 2>&1; el "reductions+compile tests, both col options rc=$?"
  grep -hE "^# (pass|fail|skipped)|^not ok" "$out/col-rows-test.txt" "$out/col-both-tests.txt" | head -12 | tee -a "$out/summary.txt"
fi
if has wgpumm; then
  # The float16 subgroup-matrix GEMM against float64 references, then matmul throughput rows (#20).
  KILN_WEBGPU_BACKEND=vulkan timeout ${WGPUMM_S:-150} node --test dist/test/webgpu-subgroup-matrix.test.js > "$out/webgpu-subgroup-matrix.txt" 2>&1
  el "subgroup-matrix test rc=$?"; grep -E "^# (pass|fail|skipped)|^not ok|# SKIP|max \|err|error" "$out/webgpu-subgroup-matrix.txt" | head -12 | cut -c1-300 | tee -a "$out/summary.txt"
  KILN_WEBGPU_BACKEND=vulkan timeout 150 node scripts/bench-webgpu-matmul.mjs dist --shapes float32:4096:4096:4096,float16:8192:8192:8192,float16:4096:4096:4096 > "$out/webgpu-matmul.jsonl" 2> "$out/webgpu-matmul.err"
  el "webgpu matmul rc=$?"; cat "$out/webgpu-matmul.jsonl" | cut -c1-300 | tee -a "$out/summary.txt"; tail -n 5 "$out/webgpu-matmul.err" | cut -c1-300 | tee -a "$out/summary.txt"
  KILN_WEBGPU_SUBGROUP_MATRIX=0 KILN_WEBGPU_BACKEND=vulkan timeout 90 node scripts/bench-webgpu-matmul.mjs dist --shapes float16:8192:8192:8192 >> "$out/webgpu-matmul.jsonl" 2>> "$out/webgpu-matmul.err"
  el "webgpu matmul tiled f16 rc=$?"; tail -n 1 "$out/webgpu-matmul.jsonl" | cut -c1-300 | tee -a "$out/summary.txt"
fi
if has moe; then
  # Qwen3-30B-A3B's layer shapes, 4 layers, compiled decode at batch 1 and 32 (#17's MoE rows).
  timeout ${MOE_S:-150} node dist/bench/decode.js --config qwen3-30b-a3b-4l --device cuda --dtype bfloat16 --batches ${MOE_BATCHES:-1,32} --reps 2 \
    --json "$out/kiln-decode-moe.json" > "$out/kiln-decode-moe.txt" 2>&1; el "moe decode rc=$?"
  grep -E "tok/s|rror" "$out/kiln-decode-moe.txt" | head -6 | cut -c1-250 | tee -a "$out/summary.txt"
fi
if has serve; then
  # Engine vs streaming HTTP throughput, and kiln serve's cold/warm start to first token (#17).
  timeout ${SERVE_S:-150} node dist/bench/serve.js --config qwen3-0.6b --device cuda --dtype bfloat16 --clients ${SERVE_CLIENTS:-16} --prompt 128 --new 64 --reps 3 \
    --json "$out/kiln-serve.json" > "$out/kiln-serve.txt" 2>&1; el "serve rc=$?"
  grep -vE "^\s*$" "$out/kiln-serve.txt" | tail -n 8 | cut -c1-250 | tee -a "$out/summary.txt"
fi
if has ab; then
  # Old vs new build (AB_OLD holds the old dist/ and package.json), every workload, AB_ORDER rounds.
  OUT=$out/ab timeout ${AB_S:-120} bash scripts/device/ab-bench.sh "${AB_OLD:-.device/old}" . "${AB_ORDER:-old new}" $(( ${AB_S:-120} - 5 )) > "$out/ab.txt" 2>&1
  el "ab rc=$?"; tail -n 32 "$out/ab.txt" | tee -a "$out/summary.txt"
fi
cp "$out/summary.txt" "$final/summary.txt"
tar -C "$out" -czf "$final/round.tgz" .
echo "=== summary"; cat "$out/summary.txt"
