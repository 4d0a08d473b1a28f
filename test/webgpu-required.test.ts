/**
 * The webgpu numeric tests must not be skipped silently: they compute only where Dawn finds an
 * adapter, and a skip reads as a pass. scripts/test.sh runs the webgpu-*.test.js files on
 * SwiftShader (Chromium's CPU Vulkan driver) where no GPU is found, and sets KILN_REQUIRE_WEBGPU=1
 * for that run: a machine whose SwiftShader or Dawn broke would otherwise stop testing the WGSL
 * numerics without a failure. This test reads the variable itself: it is a test switch, not a
 * runtime option.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';

const required = process.env.KILN_REQUIRE_WEBGPU === '1';

test('KILN_REQUIRE_WEBGPU=1: Dawn finds an adapter that computes (the webgpu tests ran, not skipped)', { skip: required ? false : 'KILN_REQUIRE_WEBGPU is not 1' }, () => {
  const probe = kiln.probeAccelerators().find((p) => p.type === 'webgpu');
  assert.ok(probe?.available, `KILN_REQUIRE_WEBGPU=1 but webgpu is unavailable, so every webgpu numeric test skipped: ${probe?.reason ?? 'webgpu not registered'}`);
  assert.notEqual(kiln.getAccelerator('webgpu').properties(0).backend, 'null', "KILN_REQUIRE_WEBGPU=1 but Dawn's null backend computes nothing");
});
