#!/usr/bin/env bash
# `npm test` after the build: every test file under node --test. Tests that do not pick a cache
# folder of their own share one under the temp folder, as they did when that was Kiln's default,
# so a test run never fills (or reads stale entries from) the user's persistent ~/.cache/kiln.
set -euo pipefail
cd "$(dirname "$0")/.."
export KILN_CACHE_DIR="${KILN_CACHE_DIR:-${TMPDIR:-/tmp}/kiln-cache-test-$(id -un)}"
exec node --test dist/test/*.test.js "$@"
