#!/usr/bin/env bash
# The Wasm cpu path against TensorFlow.js (wasm backend) and jax-js (wasm, jit, Web Workers) on every
# benchmark workload: installs the peers into a temporary directory (never into Kiln's
# package.json), builds Kiln, and runs scripts/bench-wasm-peers.mjs there with Kiln's cpu path
# forced to wasm. Writes bench/results/wasm-peers-<date>.json.
#
#   scripts/bench-wasm-peers.sh [--reps 11] [--threads 2] [--only matmul-1024,conv-stack]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${KILN_PEERS_DIR:-${TMPDIR:-/tmp}/kiln-peers}"
mkdir -p "$dir"
if [ ! -f "$dir/package.json" ]; then echo '{"name":"kiln-peers","private":true,"type":"module"}' > "$dir/package.json"; fi
(cd "$dir" && npm install --no-audit --no-fund --ignore-scripts @tensorflow/tfjs@4.22.0 @tensorflow/tfjs-backend-wasm@4.22.0 @jax-js/jax@0.1.25 >/dev/null)
if [ -z "${KILN_SKIP_BUILD:-}" ]; then (cd "$root" && npx tsc -p tsconfig.json); fi
cp "$root/scripts/bench-wasm-peers.mjs" "$root/scripts/web-worker-shim.mjs" "$dir/"
mkdir -p "$root/bench/results"
out="$root/bench/results/wasm-peers-$(date -u +%Y-%m-%d).json"
(cd "$dir" && KILN_CPU_PATH=wasm KILN_DIST="$root/dist" node bench-wasm-peers.mjs --out "$out" "$@")
