/**
 * float16 stores on webgpu (kernels/webgpu/f16-store-probe.ts): the values whose rounding the rule
 * decides (ties to even, one float32 ulp either side, subnormals, the overflow threshold, zeros,
 * infinities, NaN) stored by a cast kernel give the host's float16 bits (tensor/half.ts) with the
 * integer code and with the default ('auto'); and the probe says the device's own conversion is
 * exact exactly when a kernel storing through that conversion gives those bits too (on SwiftShader
 * it is not: its conversion rounds float16 subnormals otherwise).
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import { f16ProbeValues, nativeF16Stores } from '../src/kernels/webgpu/f16-store-probe.js';
import { setOption } from '../src/runtime/config.js';
import { float32ToFloat16Bits } from '../src/tensor/half.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

const skip = webgpuSkipReason();

/** Indices where storing `xs` as float16 under store form `form` (a cast on webgpu) differs from the host's bits. */
function mismatches(xs: Float32Array, form: 'auto' | 'exact' | 'native'): string[] {
  setOption('KILN_WEBGPU_F16_STORE', form);
  try {
    const h = kiln.tensor(Array.from(xs), { dtype: 'float32' }).to('webgpu').to('float16').to('cpu');
    const bits = new Uint16Array(h.storage.cpuArrayBuffer(), 0, xs.length);
    const bad: string[] = [];
    xs.forEach((v, i) => {
      const want = float32ToFloat16Bits(v);
      if (bits[i] !== want) bad.push(`${v}: 0x${bits[i]!.toString(16)}, want 0x${want.toString(16)}`);
    });
    return bad;
  } finally {
    setOption('KILN_WEBGPU_F16_STORE', undefined);
  }
}

test('the probe values hold every rounding case: ties both ways, ulps beside them, subnormals, overflow, NaN', () => {
  const xs = f16ProbeValues();
  const bits = xs.map(float32ToFloat16Bits);
  const has = (f: (x: number, h: number) => boolean): boolean => xs.some((x, i) => f(x, bits[i]!));
  assert.ok(has((x, h) => x === 65520 && h === 0x7c00), 'the overflow threshold rounds to infinity');
  assert.ok(has((x, h) => x === 65519.99609375 && h === 0x7bff), 'just below it to 65504');
  assert.ok(has((x, h) => x === 2 ** -25 && h === 0), 'half the smallest subnormal ties to 0');
  assert.ok(has((x, h) => x === 3 * 2 ** -26 && h === 1), 'above it rounds up');
  assert.ok(has((x, h) => Number.isNaN(x) && h === 0x7e00), 'NaN');
  assert.ok(has((x, h) => Object.is(x, -0) && h === 0x8000), '-0');
  // Ties to even in both directions: 1 + 2^-11 (down to 1) and 1 + 3 2^-11 (up to 1 + 2^-9).
  assert.ok(has((x, h) => x === 1 + 2 ** -11 && h === 0x3c00));
  assert.ok(has((x, h) => x === 1 + 3 * 2 ** -11 && h === 0x3c02));
});

test('webgpu float16 stores give the host\'s bits with the integer code and by default; the probe agrees with a kernel', { skip }, () => {
  const xs = f16ProbeValues();
  assert.deepEqual(mismatches(xs, 'exact'), []);
  assert.deepEqual(mismatches(xs, 'auto'), []);
  const native = mismatches(xs, 'native');
  assert.equal(nativeF16Stores(), native.length === 0, `probe ${nativeF16Stores()}, a kernel storing by the device's conversion: ${native.length} differ (${native.slice(0, 3).join('; ')})`);
});
