#!/usr/bin/env bash
# Lead's part of a helper round: the elementwise-4096 copy-bandwidth reference (per call and device
# time, same process), compact table last.
timeout 40 node dist/bench/cuda-copy-reference.js --json "$HOUT/copy-reference.json" 2>&1 | tail -n 4
