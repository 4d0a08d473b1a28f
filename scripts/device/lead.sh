#!/usr/bin/env bash
# Lead's part of a helper round: the fast-math test and the cuda compile tests, the elementwise-4096
# copy-bandwidth reference (per call and device time, same process), then the generated kernel's
# configs in bfloat16 and float32 (device time).
T=/tmp/lead.$$; mkdir -p "$T"
timeout 60 node --test --test-concurrency=1 dist/test/cuda-fast-math.test.js dist/test/cuda-compile.test.js > "$T/test.txt" 2>&1; echo "tests rc=$?"
grep -E "^# (tests|pass|fail)|^not ok" "$T/test.txt"; grep -E "at x =|AssertionError" "$T/test.txt" | head -8
timeout 40 node dist/bench/cuda-copy-reference.js --json "$HOUT/copy-reference.json" > "$T/copy.txt" 2>&1; echo "copy rc=$?"
for d in bfloat16 float32; do timeout 20 node dist/bench/cuda-pointwise-configs.js elementwise-4096 $d --runs 20 --waves inf > "$T/pw-$d.txt" 2>&1; echo "pw $d rc=$?"; grep -vE '^\s*$' "$T/pw-$d.txt" | cut -c1-120 | grep -E "default|fastest|b256e1v8|b256e2v4"; done
tail -n 3 "$T/copy.txt"
