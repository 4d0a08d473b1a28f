#!/usr/bin/env bash
# Issue #17, KILN_GEMV_PREFETCH (the decode GEMVs prefetch their weight into L2 before the PDL wait).
# Two device calls, each under the device tool's 600 s limit, from the repo root through .device/run.sh
# with dist/ built and carried:
#   bash .device/run.sh bash scripts/device/pdlgemv.sh check    # cuda tests (prefetch off, then PDL + prefetch
#       over the GEMV suites), the GEMV chain bench (PDL off / on / on + prefetch), the guarded cuda-gemv bench
#   bash .device/run.sh bash scripts/device/pdlgemv.sh decode   # decode b1,8 A/B: KILN_PDL=0 / 1 / 1 + prefetch,
#       order rotated per rep, then the same three with KILN_ADD_RMSNORM_LINEAR=1, then a b1 profile of each
# A step starts only while the call is under its deadline (PDLGEMV_DEADLINE s); logs and JSON under
# $OUT/pdlgemv-PART, the summary in $OUT/pdlgemv-PART/summary.txt.
set -uo pipefail
part=${1:?usage: pdlgemv.sh check|decode}
final=${OUT:-/tmp/out}; out=$final/pdlgemv-$part; mkdir -p "$out"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$out/summary.txt"; }
sum() { grep -hE "$2" "$1" | head -${3:-8} | cut -c1-300 | tee -a "$out/summary.txt"; }
dl=${PDLGEMV_DEADLINE:-480}
go() { if [ $(( $(date +%s) - t0 )) -ge $dl ]; then el "skip $1 (deadline)"; return 1; fi; }
K="timeout -k 5"
export KILN_CACHE_DIR=/tmp/kiln-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > "$out/gpu.txt" 2>&1
if [ "$part" = check ]; then
  T="dist/test/cuda-gemv-prefetch.test.js dist/test/cuda-pdl.test.js dist/test/cuda-gemv.test.js dist/test/cuda-linear-silu-mul.test.js dist/test/cuda-add-rms-norm-linear.test.js"
  go tests && { $K 120 node --test $T > "$out/tests.txt" 2>&1
    el "cuda tests rc=$?"; sum "$out/tests.txt" "^# (pass|fail|skipped)|^not ok" 10; }
  go tests-pf && { KILN_PDL=1 KILN_GEMV_PREFETCH=1 $K 100 node --test dist/test/cuda-gemv.test.js dist/test/cuda-linear-silu-mul.test.js dist/test/cuda-add-rms-norm-linear.test.js > "$out/tests-pdl-prefetch.txt" 2>&1
    el "cuda GEMV tests with KILN_PDL=1 KILN_GEMV_PREFETCH=1 rc=$?"; sum "$out/tests-pdl-prefetch.txt" "^# (pass|fail|skipped)|^not ok" 10; }
  go chain && { $K 150 node dist/bench/cuda-gemv-chain.js --layers 28 --reps 41 --timeout-ms 10000 --json "$out/gemv-chain.json" > "$out/gemv-chain.txt" 2>&1
    el "gemv chain rc=$?"; tail -n 14 "$out/gemv-chain.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
  go gemv && { $K 120 node dist/bench/cuda-gemv.js --rows 1 --runs 20 --batches 5 --timeout-ms 10000 --budget-s 90 --json "$out/gemv.json" > "$out/gemv.txt" 2>&1
    el "gemv per shape rc=$?"; tail -n 8 "$out/gemv.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
elif [ "$part" = decode ]; then
  # One decode run per variant and rep, the order rotated so drift does not favour one.
  run() { # name, env...
    local name=$1; shift
    go "$name" && { env "$@" $K 60 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 1,8 --new 128 --reps 2 \
        --json "$out/decode-$name.json" > "$out/decode-$name.txt" 2>&1
      el "decode $name ($*) rc=$?"; sum "$out/decode-$name.txt" "^decode +batch|rror" 4; }
  }
  for rep in 1 2; do
    if [ $rep = 1 ]; then order="off pdl pf"; else order="pf pdl off"; fi
    for v in $order; do
      case $v in
        off) run "off-$rep" KILN_PDL=0;;
        pdl) run "pdl-$rep" KILN_PDL=1;;
        pf) run "pdlpf-$rep" KILN_PDL=1 KILN_GEMV_PREFETCH=1;;
      esac
    done
  done
  for v in off pdl pf; do
    case $v in
      off) run "arl-off" KILN_ADD_RMSNORM_LINEAR=1 KILN_PDL=0;;
      pdl) run "arl-pdl" KILN_ADD_RMSNORM_LINEAR=1 KILN_PDL=1;;
      pf) run "arl-pdlpf" KILN_ADD_RMSNORM_LINEAR=1 KILN_PDL=1 KILN_GEMV_PREFETCH=1;;
    esac
  done
  for v in pdl pf; do
    e=(KILN_PDL=1); [ $v = pf ] && e+=(KILN_GEMV_PREFETCH=1)
    go "profile-$v" && { env "${e[@]}" $K 45 node dist/bench/cuda-profile.js qwen3-0.6b-decode-b1 bfloat16 --top 12 --json "$out/profile-$v.json" > "$out/profile-$v.txt" 2>&1
      el "profile b1 ${e[*]} rc=$?"; head -n 14 "$out/profile-$v.txt" | cut -c1-200 | tee -a "$out/summary.txt"; }
  done
else
  echo "pdlgemv.sh: unknown part '$part' (check, decode)" >&2; exit 2
fi
el "done"
