/**
 * Whether float16 stores may round by the device's own conversion (WGSL's pack2x16float) instead
 * of Kiln's integer code (storage.ts: kiln_f16_bits, round to nearest even with subnormals).
 *
 * Why: WGSL leaves the rounding of an inexact f32 -> f16 conversion to the implementation, so
 * Kiln rounds with integer code, which gives torch's bits everywhere. That code has branches and
 * costs a kernel more than its instructions: the tiled attention prefill in float16 took 1623 us
 * at 1024 tokens with it and 643 us with WGSL's f16() (the float32 kernel: 640), on an H100
 * (issue #20, session 29), presumably from registers the branches hold across the whole kernel.
 *
 * How: once per process (at the first float16 kernel rendered outside a replay recording; the
 * test helpers run it up front, so that kernel counts in tests do not see it), a probe kernel
 * stores float32 values that decide the rounding (each float16 exponent's ties to even both ways,
 * one float32 ulp either side of a tie, the subnormal range and its ties down to 2^-25, values at
 * the overflow threshold, +-0, +-inf, NaN) through the native store form below, and its bits are
 * compared with the host's rounding (half.ts). Only if every one agrees do kernels store that way;
 * otherwise, without shader-f16 or without a GPU that computes (Dawn's null backend), the integer
 * code stays. KILN_WEBGPU_F16_STORE forces either.
 *
 * The native form clamps to the finite float16 range before converting (WGSL leaves an
 * out-of-range conversion indeterminate) and selects infinity past the overflow threshold and a
 * quiet NaN from the bits, so only the in-range rounding is the device's, and that is what the
 * probe checks. In-kernel float16 casts keep the integer code: a driver may fold
 * unpack2x16float(pack2x16float(x)) to x (storage.ts).
 */
import { getOption } from '../../runtime/config.js';
import { CPU, Device } from '../../runtime/device.js';
import { float32ToFloat16Bits } from '../../tensor/half.js';
import { Tensor } from '../../tensor/tensor.js';
import { toDeviceKernel } from '../cpu/core.js';
import { webgpu } from './device.js';

/** kiln_f16_store (the bits a float16 store writes) by the device's conversion; see the header. */
export const F16_STORE_NATIVE = `fn kiln_f16_store(v: f32) -> u32 {
  let u = bitcast<u32>(v);
  let a = u & 0x7fffffffu;
  let s = (u >> 16u) & 0x8000u;
  let h = pack2x16float(vec2<f32>(clamp(v, -65504.0f, 65504.0f), 0.0f)) & 0xffffu;
  return select(select(h, s | 0x7c00u, a >= 0x477ff000u), s | 0x7e00u, a > 0x7f800000u);
}
`;

/** The probe's inputs: the float32 values whose float16 rounding is decided by the rounding rule. */
export function f16ProbeValues(): Float32Array {
  const bits: number[] = [];
  // Per float16 binade (exponents -24 .. 15, subnormals included): a few mantissas, the float32
  // midpoints to their neighbours (even and odd lower neighbour) and one float32 ulp either side.
  for (let e = -25; e <= 15; e++) {
    const ulp16 = 2 ** Math.max(e - 10, -24);
    for (const m of [0, 1, 2, 3, 511, 512, 1021, 1022, 1023]) {
      const lo = 2 ** e + m * ulp16;
      if (lo > 65504) continue;
      const mid = lo + ulp16 / 2;
      const f = new Float32Array([lo, mid]);
      const u = new Uint32Array(f.buffer);
      bits.push(u[0]!, u[1]!, u[1]! - 1, u[1]! + 1);
    }
  }
  // The overflow threshold (65520 rounds to infinity, just below it to 65504), the largest float16,
  // zeros, infinities, NaN, float32's extremes.
  const f = new Float32Array([65504, 65519.99609375, 65520, 65536, 1e30, 0, 1e-30, 2 ** -25, 3 * 2 ** -26, 2 ** -24, Infinity]);
  bits.push(...new Uint32Array(f.buffer), 0x7fc00000, 0x7f800001, 0x7f7fffff, 0x00000001);
  const all = [...bits, ...bits.map((b) => (b ^ 0x80000000) >>> 0)];
  return new Float32Array(new Uint32Array(all).buffer);
}

let probed: boolean | undefined;

/** What a kernel cache key adds for the store form: nothing under 'auto' (constant in a process), else the forced form. */
export function f16StoreKey(): string {
  const opt = getOption('KILN_WEBGPU_F16_STORE');
  return opt === 'auto' ? '' : `|f16${opt}`;
}

/** Whether float16 stores use F16_STORE_NATIVE (KILN_WEBGPU_F16_STORE, else the probe's answer). */
export function nativeF16Stores(): boolean {
  const opt = getOption('KILN_WEBGPU_F16_STORE');
  if (opt !== 'auto') return opt === 'native';
  if (probed === undefined) {
    // WGSL rendered with no webgpu device (codegen tests, validation) stores with the integer code.
    let acc: ReturnType<typeof webgpu>;
    try {
      acc = webgpu();
    } catch {
      return false;
    }
    // Never inside a recording (compile/codegen/wgsl/replay.ts): the probe's dispatch would be
    // replayed. Until it has run, kernels store with the integer code (the same bits, if slower).
    if (acc.recording) return false;
    // Any failure of the probe itself (a browser that refuses a synchronous read, a lost device)
    // leaves the integer code: it is always right, the probe only makes stores cheaper.
    try {
      probed = runProbe(acc);
    } catch {
      probed = false;
    }
  }
  return probed;
}

// The upload is template.ts's int32On for float32: that module imports storage.ts, which imports
// this one, so it cannot be called from here.
function runProbe(acc: ReturnType<typeof webgpu>): boolean {
  if (acc.computesNothing) return false;
  const xs = f16ProbeValues();
  const n = xs.length;
  const device = new Device('webgpu', 0);
  const host = Tensor.empty([n], 'float32', CPU);
  new Float32Array(host.storage.cpuArrayBuffer(), 0, n).set(xs);
  const input = toDeviceKernel({ op: 'upload', out: { shape: [n], strides: [1], dtype: 'float32', device } }, host);
  host.dispose();
  const out = Tensor.empty([n], 'int32', device);
  try {
    const source = [
      '@group(0) @binding(0) var<storage, read_write> o: array<u32>;',
      '@group(0) @binding(1) var<storage, read> x: array<f32>;',
      '@group(0) @binding(2) var<storage, read> kmeta: array<u32>;',
      F16_STORE_NATIVE,
      '@compute @workgroup_size(64)',
      'fn main(@builtin(global_invocation_id) g: vec3u) { if (g.x < kmeta[0]) { o[g.x] = kiln_f16_store(x[g.x]); } }',
    ].join('\n');
    acc.dispatch(acc.kernel(source, 'kiln.f16-store-probe'), [out.storage.buffer, input.storage.buffer], new Uint32Array([n]), [Math.ceil(n / 64), 1, 1]);
    const got = out.toFlatArray();
    return got.every((b, i) => b === float32ToFloat16Bits(xs[i]!));
  } finally {
    input.dispose();
    out.dispose();
  }
}
