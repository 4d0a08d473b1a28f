#!/usr/bin/env bash
# Session 40's device call, from the repo root through .device/run.sh with dist/ built and carried
# (bash .device/run.sh bash scripts/device/s40.sh PART):
#   wgi  #20 Dawn's workgroup-memory zero-initialisation (WGSL zero-fills every workgroup variable at
#        each workgroup's start; the Dawn toggle disable_workgroup_init skips it). On SwiftShader it is
#        most of a pipeline's compile time (session 40). Here: the webgpu tests WGI_TESTS with the
#        toggle (NVIDIA's shared memory keeps what earlier workgroups left, so a kernel that reads a
#        workgroup variable before writing it fails), then kiln bench float16 webgpu workloads with
#        and without it, alternating twice (compiled ms, and the cold compile seconds).
# A step starts only while the call is under its deadline (S40_DEADLINE s); logs and JSON under
# $OUT/s40-PART come back as one tarball, the summary printed last.
set -uo pipefail
part=${1:?usage: s40.sh wgi}
session=s40
source "$(dirname "$0")/session-lib.sh"
if [ "$part" = wgi ]; then
  tests=${WGI_TESTS:-$(ls dist/test/webgpu-*.test.js | tr '\n' ' ')}
  go tests && { wg env KILN_WEBGPU_DAWN_TOGGLES=disable_workgroup_init KILN_REQUIRE_WEBGPU=1 $K ${WGI_TEST_S:-200} node --test $tests > "$out/tests.txt" 2>&1; el "tests (disable_workgroup_init) rc=$?"; sum "$out/tests.txt" "^# (tests|pass|fail)|^not ok" 12; }
  for rep in 1 2; do
    kb init-$rep webgpu float16 ${WGI_WORKLOADS:-transformer-block,conv-stack,mlp-64x512}
    kb noinit-$rep webgpu float16 ${WGI_WORKLOADS:-transformer-block,conv-stack,mlp-64x512} KILN_WEBGPU_DAWN_TOGGLES=disable_workgroup_init
  done
else
  el "unknown part $part"
fi
finish
