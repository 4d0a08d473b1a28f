#!/usr/bin/env bash
# Lead's stage of a device round (scripts/device-round.sh): the whole suite on the merged main,
# then the sdpa benchmark (device time, vs torch).
set -uo pipefail
t0=$(date +%s)
timeout 150 node --test dist/test/*.test.js > /tmp/lead-suite.txt 2>&1
echo "suite rc=$? $(( $(date +%s) - t0 )) s"; grep -E "^# (tests|pass|fail|skipped)" /tmp/lead-suite.txt
grep -E -A14 "^not ok" /tmp/lead-suite.txt | grep -v "^    at " | head -60
timeout 20 python3 scripts/device/attn_torch.py /tmp/attn_torch.json > /dev/null 2>&1
timeout 40 node dist/bench/cuda-sdpa.js /tmp/attn_torch.json "$HOUT/sdpa.json" 2>&1 | tail -12
