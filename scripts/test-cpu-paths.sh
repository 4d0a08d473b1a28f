#!/usr/bin/env bash
# Runs the whole test suite once per non-default CPU code path (issue #7: "all CPU tests pass on
# each path in CI"). `npm test` already covers the automatic path (native where a C compiler works);
# here KILN_CPU_PATH forces the WebAssembly and the pure-JavaScript kernels in turn. Expects dist/.
set -uo pipefail
cd "$(dirname "$0")/.."
# The same temp cache folder as scripts/test.sh, not the user's persistent one; as many test files at
# a time as cores (scripts/test.sh says why; KILN_TEST_CONCURRENCY overrides).
export KILN_CACHE_DIR="${KILN_CACHE_DIR:-${TMPDIR:-/tmp}/kiln-cache-test-$(id -un)}"
status=0
for path in ${KILN_TEST_PATHS:-wasm js}; do
  echo "=== KILN_CPU_PATH=$path: $(KILN_CPU_PATH=$path node dist/src/cli/main.js info 2>/dev/null | grep '^CPU code path')"
  log=$(mktemp)
  KILN_CPU_PATH=$path node --test --test-concurrency="${KILN_TEST_CONCURRENCY:-$(nproc 2>/dev/null || echo 2)}" dist/test/*.test.js > "$log" 2>&1
  rc=$?
  # The TAP summary, and every failing test with its error, are what a CI reader needs.
  grep -E '^# (tests|pass|fail|skipped|duration_ms)' "$log"
  if [ $rc -ne 0 ]; then
    grep -E -A12 '^not ok' "$log" | head -n 200
    status=1
  fi
  rm -f "$log"
done
exit $status
