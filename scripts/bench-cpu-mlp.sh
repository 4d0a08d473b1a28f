#!/usr/bin/env bash
# Issue #7's MLP rows in one command: Kiln eager and kiln.compile (native CPU path) against
# onnxruntime-node on mlp-64x512 and mlp-2048x4096 (x [256, 1024]), the same weights, 2 threads,
# blocks of 5 back-to-back calls after a 300 ms idle gap, engines alternating block by block
# (scripts/bench-cpu-ort-models.mjs; it also prints medians by block position and Kiln's
# thread-pool counters). Installs onnxruntime-node into the peers directory when missing (as
# scripts/bench-cpu-peers.sh does, never into Kiln's package.json), builds Kiln, and writes
# bench/results/cpu-ort-models-mlp-<date>.json. Extra arguments go to the .mjs script first (its
# options take the first occurrence, so `--reps 20` overrides the default 40).
#
#   bash scripts/bench-cpu-mlp.sh [--reps 40] [--note 'quiet machine']
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${KILN_PEERS_DIR:-${TMPDIR:-/tmp}/kiln-peers}"
mkdir -p "$dir"
if [ ! -f "$dir/package.json" ]; then echo '{"name":"kiln-peers","private":true,"type":"module"}' > "$dir/package.json"; fi
if [ ! -d "$dir/node_modules/onnxruntime-node" ]; then
  (cd "$dir" && npm install --no-audit --no-fund --ignore-scripts onnxruntime-node@1.30.0 >/dev/null)
fi
(cd "$root" && npx tsc -p tsconfig.json)
cp "$root/scripts/bench-cpu-ort-models.mjs" "$dir/bench-cpu-ort-models.mjs"
mkdir -p "$root/bench/results"
out="$root/bench/results/cpu-ort-models-mlp-$(date -u +%Y-%m-%d).json"
(cd "$dir" && KILN_DIST="$root/dist" node bench-cpu-ort-models.mjs "$@" --only mlp-64x512,mlp-2048x4096 --reps 40 --block 5 --out "$out")
