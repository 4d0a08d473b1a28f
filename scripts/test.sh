#!/usr/bin/env bash
# `npm test` after the build: every test file under node --test. Tests that do not pick a cache
# folder of their own share one under the temp folder, as they did when that was Kiln's default,
# so a test run never fills (or reads stale entries from) the user's persistent ~/.cache/kiln.
#
# Issue #20: the webgpu tests compute only where Dawn finds an adapter. Where it finds none (CI has
# no GPU) and Debian's chromium ships SwiftShader, a Vulkan driver that runs on the CPU, the
# webgpu-*.test.js files run in a second node --test after the others, with SwiftShader's Vulkan
# loader on the library path, its driver as the only one, and Dawn's Vulkan backend. Only those
# files get that environment: the rest of the suite keeps the machine's own (its `kiln info` and
# probes see no adapter, as before). A KILN_WEBGPU_BACKEND or VK_ICD_FILENAMES of the caller's
# own, or KILN_TEST_SWIFTSHADER=0, leaves everything to one run as before. That run sets
# KILN_REQUIRE_WEBGPU=1, so that test/webgpu-required.test.ts fails if SwiftShader gives no adapter.
set -euo pipefail
cd "$(dirname "$0")/.."
# Test files run this many at a time (node's default is one fewer than the cores: one on CI's two).
# Many wait on child processes (cc, g++) or on files rather than compute, so as many as the
# cores: the main suite took 320 s instead of 553 on two cores, with the same results. The webgpu
# run on SwiftShader keeps node's default: SwiftShader already spreads its work over every core, and
# two files at a time took 1,303 s against 1,462 (11%, not measured side by side in one run).
# KILN_TEST_CONCURRENCY overrides.
conc="${KILN_TEST_CONCURRENCY:-$(nproc 2>/dev/null || echo 2)}"
export KILN_CACHE_DIR="${KILN_CACHE_DIR:-${TMPDIR:-/tmp}/kiln-cache-test-$(id -un)}"
SWIFTSHADER_DIR=/usr/lib/chromium
SWIFTSHADER_ICD="$SWIFTSHADER_DIR/vk_swiftshader_icd.json"

# Whether Dawn finds an adapter that computes, without help (kiln info --json, about half a second).
webgpu_adapter() {
  node dist/src/cli/main.js info --json 2>/dev/null | node -e '
    let s = "";
    process.stdin.on("data", (d) => (s += d)).on("end", () => {
      const w = JSON.parse(s).accelerators.find((a) => a.type === "webgpu");
      process.exit(w && w.available ? 0 : 1);
    });'
}

if [ "${KILN_TEST_SWIFTSHADER:-1}" = 0 ] || [ ! -f "$SWIFTSHADER_ICD" ] || [ -n "${KILN_WEBGPU_BACKEND+set}" ] || [ -n "${VK_ICD_FILENAMES+set}" ] || webgpu_adapter; then
  exec node --test --test-concurrency="$conc" dist/test/*.test.js "$@"
fi

gpu=()
rest=()
for f in dist/test/*.test.js; do
  case "$f" in
    dist/test/webgpu-*) gpu+=("$f") ;;
    *) rest+=("$f") ;;
  esac
done
status=0
node --test --test-concurrency="$conc" "${rest[@]}" "$@" || status=$?
echo "# the webgpu tests on SwiftShader ($SWIFTSHADER_ICD): ${gpu[*]}"
# Dawn's toggle disable_workgroup_init drops the zero-fill of every workgroup variable that WGSL
# otherwise puts at the start of each shader: on SwiftShader that fill was most of a pipeline's
# compile time (session 40, webgpu-add-rms-norm-linear: 82 pipelines in 165 s of compile with it,
# 49 s without; the file 207 -> 81 s). The run is no weaker for it: with the fill, a kernel reads
# zeros where it reads a workgroup variable before writing it; without, whatever the memory holds,
# so such a kernel can only fail more often here, never pass where the default would fail.
# KILN_TEST_WORKGROUP_INIT=1 keeps the fill.
wgi=disable_workgroup_init
[ "${KILN_TEST_WORKGROUP_INIT:-0}" = 1 ] && wgi=
toggles="$wgi${KILN_WEBGPU_DAWN_TOGGLES:+${wgi:+,}$KILN_WEBGPU_DAWN_TOGGLES}"
LD_LIBRARY_PATH="$SWIFTSHADER_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" VK_ICD_FILENAMES="$SWIFTSHADER_ICD" KILN_WEBGPU_BACKEND=vulkan KILN_REQUIRE_WEBGPU=1 \
  KILN_WEBGPU_DAWN_TOGGLES="$toggles" node --test "${gpu[@]}" "$@" || status=$?
exit $status
