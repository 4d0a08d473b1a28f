#!/usr/bin/env bash
# CPU peers benchmark: installs onnxruntime-node, @tensorflow/tfjs (+ tfjs-backend-wasm) and
# @jax-js/jax into a temporary directory (never into Kiln's package.json), builds Kiln, and runs
# scripts/bench-cpu-peers.mjs there: matmul-1024 and elementwise-1024 side by side with Kiln's
# native and wasm CPU paths, then scripts/bench-cpu-ort-models.mjs: mlp-64x512, transformer-block,
# conv-stack and elementwise-4096, Kiln eager / compiled vs onnxruntime-node on the same weights
# (rep by rep; `--block 5` there gives the steady-state comparison). Writes
# bench/results/cpu-peers-<date>.json and bench/results/cpu-ort-models-<date>.json.
#
#   scripts/bench-cpu-peers.sh [--reps 15] [--threads 2]
#
# onnxruntime-node is installed with --ignore-scripts: its install script only fetches the optional
# CUDA provider (from api.nuget.org); the CPU binaries ship inside the package.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${KILN_PEERS_DIR:-${TMPDIR:-/tmp}/kiln-peers}"
mkdir -p "$dir"
if [ ! -f "$dir/package.json" ]; then echo '{"name":"kiln-peers","private":true,"type":"module"}' > "$dir/package.json"; fi
(cd "$dir" && npm install --no-audit --no-fund --ignore-scripts \
  onnxruntime-node@1.30.0 @tensorflow/tfjs@4.22.0 @tensorflow/tfjs-backend-wasm@4.22.0 @jax-js/jax@0.1.25 >/dev/null)
(cd "$root" && npx tsc -p tsconfig.json)
cp "$root/scripts/bench-cpu-peers.mjs" "$root/scripts/web-worker-shim.mjs" "$dir/"
cp "$root/scripts/bench-cpu-ort-models.mjs" "$dir/bench-cpu-ort-models.mjs"
mkdir -p "$root/bench/results"
out="$root/bench/results/cpu-peers-$(date -u +%Y-%m-%d).json"
(cd "$dir" && KILN_DIST="$root/dist" node bench-cpu-peers.mjs --out "$out" "$@")
threads=""
for ((i = 1; i <= $#; i++)); do if [ "${!i}" = "--threads" ]; then j=$((i + 1)); threads="--threads ${!j}"; fi; done
# shellcheck disable=SC2086
(cd "$dir" && KILN_DIST="$root/dist" node bench-cpu-ort-models.mjs --out "$root/bench/results/cpu-ort-models-$(date -u +%Y-%m-%d).json" $threads)
