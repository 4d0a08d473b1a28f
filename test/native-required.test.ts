/**
 * The native cpu path must not be skipped silently. About 36 tests (native-*.test.ts, the native
 * rows of pointwise-table.test.ts) skip when no C compiler works, and a skip reads as a pass: a CI
 * image that lost its compiler, or a broken one, would stop testing the default cpu path without a
 * failure. This file turns that into one:
 *   - KILN_REQUIRE_NATIVE=1 (set by .ci/run): the toolchain probe must succeed and the native GEMM
 *     must build and load;
 *   - otherwise, when a C compiler candidate (KILN_CC, else cc, gcc, clang) is on PATH,
 *     its probe must succeed too: a compiler that is there but fails is a broken setup, not an
 *     absent one. KILN_REQUIRE_NATIVE=0 opts out of this (a machine whose cc is known broken).
 * This test reads the variable itself: it is a test switch, not a runtime option.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { compilerCandidates, loadNativeGemm, probeToolchain } from '../src/kernels/cpu/native/index.js';

const required = process.env.KILN_REQUIRE_NATIVE;

/** The first compiler candidate found on PATH (what the probe would try), or null. */
function compilerOnPath(): string | null {
  for (const name of compilerCandidates()) {
    const dirs = name.includes('/') ? [''] : (process.env.PATH ?? '').split(path.delimiter).filter((d) => d !== '');
    for (const d of dirs) {
      const exe = d === '' ? name : path.join(d, name);
      try {
        fs.accessSync(exe, fs.constants.X_OK);
        return exe;
      } catch {
        // not here; the next folder
      }
    }
  }
  return null;
}

test('KILN_REQUIRE_NATIVE=1: the native cpu path is available (its tests ran, not skipped)', { skip: required === '1' ? false : 'KILN_REQUIRE_NATIVE is not 1' }, () => {
  const probe = probeToolchain();
  assert.ok(probe.ok, `KILN_REQUIRE_NATIVE=1 but no C compiler works, so every native test skipped: ${probe.ok ? '' : probe.reason}`);
  assert.doesNotThrow(() => loadNativeGemm(), 'the native GEMM builds and loads');
});

test('a C compiler on PATH works for the native path (else its tests would skip silently)', { skip: required === '0' ? 'KILN_REQUIRE_NATIVE=0' : false }, () => {
  const cc = compilerOnPath();
  if (cc === null) return; // no compiler at all: the skips say why, and CI sets KILN_REQUIRE_NATIVE=1
  const probe = probeToolchain();
  assert.ok(probe.ok, `${cc} is on PATH but the native cpu path's probe failed, so its tests skipped: ${probe.ok ? '' : probe.reason} (fix the compiler, set KILN_CC, or KILN_REQUIRE_NATIVE=0)`);
});
