#!/usr/bin/env bash
# Device round for generation (issue #17): the cuda checks of scripts/device/generate-cuda.mjs,
# then `kiln generate --random qwen3-0.6b` on cuda. Run from the repo root with dist/ built and
# carried, and node_modules/koffi carried (node_modules is a link here).
set -uo pipefail
out=${OUT:-/tmp/out}; mkdir -p "$out"
nvidia-smi -L; node --version
timeout 420 node scripts/device/generate-cuda.mjs 2>&1 | tee "$out/generate-cuda.txt"
for d in bfloat16 float32; do
  timeout 90 node dist/src/cli/main.js generate --random qwen3-0.6b --device cuda --dtype $d --prompt-ids 1,2,3,4,5,6,7,8 --max-tokens 32 2>&1 | tee -a "$out/generate-cli.txt"
done
