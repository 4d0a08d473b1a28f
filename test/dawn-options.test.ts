/**
 * The Dawn toggles Kiln asks for (src/runtime/webgpu/dawn-options.ts): robustness off unless
 * KILN_WEBGPU_ROBUSTNESS, extra toggles from KILN_WEBGPU_DAWN_TOGGLES joined to the enable and
 * disable lists, and a clear error for a name that is not a toggle.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DAWN_TOGGLES, dawnToggles } from '../src/runtime/webgpu/dawn-options.js';

const enabled = (t: string[]): string[] => t.find((x) => x.startsWith('enable-dawn-features='))!.slice('enable-dawn-features='.length).split(',');
const disabled = (t: string[]): string[] => t.find((x) => x.startsWith('disable-dawn-features='))!.slice('disable-dawn-features='.length).split(',');

test('dawn toggles: robustness is disabled unless asked for; Kiln\'s own toggles stay', () => {
  const off = dawnToggles(undefined, false);
  assert.ok(enabled(off).includes('disable_robustness'));
  assert.ok(enabled(off).includes('allow_unsafe_apis') && enabled(off).includes('vulkan_enable_f16_on_nvidia'));
  const on = dawnToggles(undefined, true);
  assert.ok(!enabled(on).includes('disable_robustness'));
  assert.deepEqual(on, [...DAWN_TOGGLES]);
});

test('dawn toggles: KILN_WEBGPU_DAWN_TOGGLES names join the enable list, -names the disable list; bad names are refused', () => {
  const t = dawnToggles('use_dxc, -lazy_clear_resource_on_first_use', true);
  assert.deepEqual(enabled(t), ['vulkan_enable_f16_on_nvidia', 'allow_unsafe_apis', 'use_dxc']);
  assert.deepEqual(disabled(t), ['timestamp_quantization', 'lazy_clear_resource_on_first_use']);
  assert.throws(() => dawnToggles('Bad Name', false), /KILN_WEBGPU_DAWN_TOGGLES: "Bad Name" is not a Dawn toggle name/);
});
