/**
 * What the hand-written WGSL templates share (gather/scatter, index writes, scans, sorting,
 * pooling, convolution): pipelines compiled once per key (a repeated call renders no WGSL),
 * workgroup counts under the grid limit, the binding declarations of storage.ts's kinds plus raw
 * 32-bit words (64-bit data and int64 indices are read as words: WGSL has no 64-bit types), and
 * small host-built int32 tensors uploaded to the device (index plans, ramps).
 */
import { CPU, type Device } from '../../runtime/device.js';
import type { WebgpuKernel } from '../../runtime/webgpu/webgpu-accelerator.js';
import type { DType } from '../../tensor/dtype.js';
import { isFloating, itemSize } from '../../tensor/dtype.js';
import type { ScalarValue } from '../../ops/schema.js';
import { castValue } from '../../tensor/typed.js';
import { Tensor } from '../../tensor/tensor.js';
import { PRELUDE_MARK, withPrelude } from '../math/wgsl-prelude.js';
import { wgslMathKey } from '../math/wgsl-libm/index.js';
import { toDeviceKernel } from '../cpu/core.js';
import { unsupportedDtype, webgpu } from './device.js';
import { f16StoreKey } from './f16-store-probe.js';
import { arrayType, storageKind, storagePrelude, type StorageKind } from './storage.js';

/** Invocations per workgroup of the templates. */
export const WG = 256;
const MAX_GROUPS = 65535;

const kernels = new Map<string, WebgpuKernel>();

/** The pipeline named `key`, its source rendered and compiled on first use. */
export function kernelFor(key: string, source: () => string): WebgpuKernel {
  // A kernel rendered under another math form (KILN_WEBGPU_MATH) is another pipeline.
  const memo = key + wgslMathKey() + f16StoreKey();
  let k = kernels.get(memo);
  if (!k) {
    // The math helpers the source calls replace the header's mark (kernels carry only what they use).
    k = webgpu().kernel(withPrelude(source()), `kiln.${key}`);
    kernels.set(memo, k);
  }
  return k;
}

/** A 1-d grid for `n` work items of `per` invocations each group (kernels loop grid-stride past the limit). */
export function groupsFor(n: number, per = WG): [number, number, number] {
  return [Math.max(1, Math.min(Math.ceil(n / per), MAX_GROUPS)), 1, 1];
}

/** A binding: a storage kind of data, raw words (u32 / i32, atomic when written by atomics). */
export type BindKind = StorageKind | 'u32' | 'i32' | 'atomicU32' | 'atomicI32';

export interface Bind {
  readonly kind: BindKind;
  readonly written: boolean;
}

function bindType(b: Bind): string {
  switch (b.kind) {
    case 'u32':
    case 'i32':
      return `array<${b.kind}>`;
    case 'atomicU32':
      return 'array<atomic<u32>>';
    case 'atomicI32':
      return 'array<atomic<i32>>';
    default:
      return arrayType(b.kind, b.written);
  }
}

/** The declarations of bindings b0..b(n-1), the metadata words `kmeta` after them, and the helpers loads and stores use. */
export function header(binds: readonly Bind[], also: { f16?: boolean; bf16?: boolean } = {}): string[] {
  const lines: string[] = [];
  if (binds.some((b) => b.kind === 'f16')) lines.push('enable f16;');
  binds.forEach((b, i) => lines.push(`@group(0) @binding(${i}) var<storage, ${b.written ? 'read_write' : 'read'}> b${i}: ${bindType(b)};`));
  lines.push(`@group(0) @binding(${binds.length}) var<storage, read> kmeta: array<u32>;`);
  lines.push(PRELUDE_MARK);
  const data = binds.flatMap((b) => (b.kind === 'u32' || b.kind === 'i32' || b.kind === 'atomicU32' || b.kind === 'atomicI32' ? [] : [b.kind]));
  const pre = storagePrelude(data, also);
  if (pre) lines.push(pre);
  return lines;
}

/** How a tensor's elements are bound: its storage kind, or (64-bit data) int32 words, two per element. */
export function dataKind(op: string, t: { dtype: DType; shape: readonly number[] }): { kind: StorageKind; wide: boolean } {
  if (itemSize(t.dtype) === 8) return { kind: 'i32', wide: true };
  const kind = storageKind(t.dtype, webgpu().hasFeature('shader-f16'));
  if (kind === null) throw unsupportedDtype(op, t);
  return { kind, wide: false };
}

/** The binding kind of an int32 / int64 index tensor (int64 read as its low word, Kiln's index ranges being below 2^31). */
export const indexBind = (dtype: DType): BindKind => (dtype === 'int64' ? 'u32' : 'i32');

/** Element `e` (a u32 expression) of index binding `b` as an i32. */
export const indexLoad = (dtype: DType, b: string, e: string): string => (dtype === 'int64' ? `bitcast<i32>(${b}[2u * (${e})])` : `${b}[${e}]`);

/** Statements storing the i32 `v` as the int64 element `e` of u32 binding `b` (sign-extended). */
export const storeI64 = (b: string, e: string, v: string): string => `${b}[2u * (${e})] = bitcast<u32>(${v}); ${b}[2u * (${e}) + 1u] = select(0u, 0xffffffffu, (${v}) < 0i);`;

/** A contiguous int32 tensor of `values` on `device` (built on the host and copied over). */
export function int32On(values: ArrayLike<number>, device: Device): Tensor {
  const n = values.length;
  const host = Tensor.empty([n], 'int32', CPU);
  new Int32Array(host.storage.cpuArrayBuffer(), 0, n).set(values);
  try {
    return toDeviceKernel({ op: 'upload', out: { shape: [n], strides: [1], dtype: 'int32', device } }, host);
  } finally {
    host.dispose();
  }
}

/** Metadata words from numbers (negative strides as their two's complement bits). */
export const words = (xs: readonly number[]): Uint32Array => new Uint32Array(xs.map((x) => x | 0));

/**
 * A scalar as the metadata words of `dtype`'s compute type, rounded to `dtype` first as the CPU
 * kernels round it: f32 bits for the floating dtypes, an i32 for the others (bool 0/1), and the two
 * words of the value for 64-bit data.
 */
export function scalarWords(value: ScalarValue, dtype: DType): [number, number] {
  const v = castValue(Number(value), dtype);
  const b = new DataView(new ArrayBuffer(8));
  if (dtype === 'float64') b.setFloat64(0, v, true);
  else if (dtype === 'int64') b.setBigInt64(0, BigInt.asIntN(64, BigInt(Math.trunc(v))), true);
  else if (isFloating(dtype)) b.setFloat32(0, v, true);
  else b.setInt32(0, dtype === 'bool' ? (v !== 0 ? 1 : 0) : v, true);
  return [b.getUint32(0, true), b.getUint32(4, true)];
}
