#!/usr/bin/env bash
# Builds the do-nothing libcuda.so.1, libnvrtc.so.13 and libcublasLt.so.13 of fake-cuda.c (see its header) into
# ${1:-/tmp/kiln-fake-cuda}/lib64. Needs a C compiler.
set -euo pipefail
out=${1:-/tmp/kiln-fake-cuda}
mkdir -p "$out/lib64"
cc -O2 -shared -fPIC "$(dirname "$0")/fake-cuda.c" -o "$out/lib64/libcuda.so.1"
cp "$out/lib64/libcuda.so.1" "$out/lib64/libnvrtc.so.13"
cp "$out/lib64/libcuda.so.1" "$out/lib64/libcublasLt.so.13"
echo "built $out/lib64 (libcuda.so.1, libnvrtc.so.13, libcublasLt.so.13)"
