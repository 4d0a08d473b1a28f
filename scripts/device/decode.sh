#!/usr/bin/env bash
# Device round for decode (issue #17): the paged ops and the engine's decode paths on cuda
# (test/decode-runner.test.ts), then bench/decode.ts (Kiln, compiled decode with CUDA graphs) and
# scripts/device/decode_torch.py (PyTorch anchors) in the same call. Run from the repo root through
# .device/run.sh with dist/ built and carried. Results under $OUT.
set -uo pipefail
out=${OUT:-/tmp/out}; mkdir -p "$out"
nvidia-smi -L; node --version
export KILN_CACHE_DIR=/tmp/kiln-cache
timeout 100 node --test dist/test/decode-runner.test.js > "$out/decode-runner-test.txt" 2>&1; echo "decode-runner tests rc=$?"
grep -E "^# (pass|fail)|^not ok" "$out/decode-runner-test.txt"
timeout 200 node dist/bench/decode.js --device cuda --dtype bfloat16 --batches ${KILN_BATCHES:-1,8,64} --json "$out/kiln-decode.json" 2>&1 | tee "$out/kiln-decode.txt"
if [ -n "${TORCH_BATCHES:-}" ]; then
  timeout 240 python scripts/device/decode_torch.py --batches "$TORCH_BATCHES" --reps 3 --json "$out/torch-decode.json" 2>&1 | grep -v Warning | tee "$out/torch-decode.txt"
fi
