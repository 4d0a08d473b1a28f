#!/usr/bin/env bash
# conv-stack on the native CPU path vs onnxruntime-node (issue #7), one command: the whole stack
# (scripts/bench-cpu-ort-models.mjs --only conv-stack: Kiln eager, compiled, compiled without the
# conv+BN fold, onnxruntime; 2 threads) and layer by layer at 1 and 2 threads
# (scripts/bench-cpu-conv-layers.mjs). Installs onnxruntime-node into the peers directory
# (as scripts/bench-cpu-peers.sh does) when it is missing, builds Kiln, writes
# bench/results/cpu-conv-stack-<date>[-rt].json and cpu-conv-layers-<date>[-rt].json.
#
#   scripts/bench-cpu-conv.sh [--rt] [--reps 20]
#
# --rt runs both under SCHED_FIFO (chrt -f 10, needs root): on the shared 2-core machine other
# processes otherwise take the second core for milliseconds at a time, and neither engine's second
# thread shows (both engines equally; the scheduling is recorded in the JSON). On a quiet machine
# run without it. Never run two real-time benchmarks at once: their spinning threads starve each
# other (and everything else) on 2 cores.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${KILN_PEERS_DIR:-${TMPDIR:-/tmp}/kiln-peers}"
rt=""
reps=20
while [ $# -gt 0 ]; do
  case "$1" in
    --rt) rt="chrt -f 10"; shift ;;
    --reps) reps="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$dir"
if [ ! -f "$dir/package.json" ]; then echo '{"name":"kiln-peers","private":true,"type":"module"}' > "$dir/package.json"; fi
if [ ! -d "$dir/node_modules/onnxruntime-node" ]; then (cd "$dir" && npm install --no-audit --no-fund --ignore-scripts onnxruntime-node@1.30.0 >/dev/null); fi
(cd "$root" && npx tsc -p tsconfig.json)
cp "$root/scripts/bench-cpu-ort-models.mjs" "$root/scripts/bench-cpu-conv-layers.mjs" "$dir/"
mkdir -p "$root/bench/results"
tag="$(date -u +%Y-%m-%d)${rt:+-rt}"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
# shellcheck disable=SC2086
(cd "$dir" && KILN_DIST="$root/dist" $rt node bench-cpu-ort-models.mjs --reps "$reps" --block 5 --only conv-stack --out "$root/bench/results/cpu-conv-stack-$tag.json")
# shellcheck disable=SC2086
(cd "$dir" && KILN_DIST="$root/dist" $rt node bench-cpu-conv-layers.mjs --reps $((reps * 2)) --block 10 --out "$root/bench/results/cpu-conv-layers-$tag.json")
