/**
 * Runs one pointwise node on webgpu: turns the op's arguments into the math table's view of them
 * (tensors become values v0..v(k-1), everything else a constant baked into the source, as is a cpu
 * scalar tensor's value), asks `render` for the element expression, lays the tensors out as
 * bindings (the output first; an input on the output's buffer reads that binding, since WebGPU
 * forbids binding a written buffer twice), coalesces dims, and dispatches the generated program.
 * Programs are memoised by what their source depends on, so a repeated op renders no WGSL.
 *
 * Constants in the source mean a new pipeline per distinct scalar (x * 0.5, x * 0.25); passing
 * them as metadata words is the next step once a workload shows the cost.
 */
import type { DeviceBuffer } from '../../runtime/accelerator.js';
import type { WebgpuKernel } from '../../runtime/webgpu/webgpu-accelerator.js';
import { broadcastStrides, contiguousStrides, fmtShape } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import type { MathArg } from '../math/args.js';
import { generatePointwise, metaWords, WORKGROUP, type PwBinding } from './codegen.js';
import { allocOut, unsupportedDtype, webgpu } from './device.js';
import { storageKind } from './storage.js';

const programs = new Map<string, WebgpuKernel>();

/** Merges dims that every tensor walks contiguously, and drops size-1 dims. */
export function coalesce(shape: readonly number[], strides: readonly (readonly number[])[]): { shape: number[]; strides: number[][] } {
  const outShape: number[] = [];
  const outStrides: number[][] = strides.map(() => []);
  for (let d = 0; d < shape.length; d++) {
    const size = shape[d]!;
    if (size === 1) continue;
    const p = outShape.length - 1;
    if (p >= 0 && strides.every((s, t) => outStrides[t]![p] === s[d]! * size)) {
      outShape[p]! *= size;
      strides.forEach((s, t) => (outStrides[t]![p] = s[d]!));
      continue;
    }
    outShape.push(size);
    strides.forEach((s, t) => outStrides[t]!.push(s[d]!));
  }
  return { shape: outShape, strides: outStrides };
}

/** Dispatches `out[...] = render(args)` elementwise; returns `out`. */
export function runPointwise(label: string, out: Tensor, args: readonly unknown[], render: (margs: readonly MathArg[]) => string | null): Tensor {
  const acc = webgpu();
  const n = out.numel();
  const nativeF16 = acc.hasFeature('shader-f16');
  const outKind = storageKind(out.dtype, nativeF16);
  if (outKind === null) throw unsupportedDtype(label, out);
  const tensors: Tensor[] = [];
  const margs: MathArg[] = args.map((a): MathArg => {
    if (!(a instanceof Tensor)) return { kind: 'const', value: a };
    if (a.device.type === 'webgpu') {
      tensors.push(a);
      return { kind: 'value', expr: `v${tensors.length - 1}`, dtype: a.dtype, shape: a.shape };
    }
    if (a.device.type === 'cpu' && a.numel() === 1) return { kind: 'const', value: a.item() };
    throw new Error(`${label}: expected webgpu tensors (or cpu scalars), got a ${fmtShape(a.shape)} tensor on ${a.device.toString()}`);
  });
  const expr = render(margs);
  if (expr === null) {
    const dts = tensors.map((t) => t.dtype).join(', ');
    throw new TypeError(`${label}: the WGSL math table has no form for these operands (tensor dtypes ${dts || 'none'}, output ${out.dtype}); webgpu computes ${'float32, float16, bfloat16, int32, uint8, bool'}`);
  }
  if (n === 0) return out;

  const bindings: PwBinding[] = [{ kind: outKind, written: true }];
  const buffers: DeviceBuffer[] = [out.storage.buffer];
  const inputs: number[] = [];
  const staged: Tensor[] = [];
  for (let t of tensors) {
    const kind = storageKind(t.dtype, nativeF16);
    if (kind === null) throw unsupportedDtype(label, t);
    if (t.storage.buffer === out.storage.buffer && kind !== outKind) {
      // The output's buffer read as another type: read a copy instead of binding it twice.
      const copy = allocOut({ shape: t.shape, strides: contiguousStrides(t.shape), dtype: t.dtype, device: t.device });
      runPointwise('copy', copy, [t], (m) => (m[0]?.kind === 'value' ? m[0].expr : null));
      staged.push(copy);
      t = copy;
    }
    let b = buffers.findIndex((x, i) => x === t.storage.buffer && bindings[i]!.kind === kind);
    if (b < 0) {
      b = buffers.length;
      buffers.push(t.storage.buffer);
      bindings.push({ kind, written: false });
    }
    inputs.push(b);
    tensors[inputs.length - 1] = t;
  }
  const limit = acc.bridge.adapter.limits.maxStorageBufferBindingSize ?? 2 ** 27;
  for (const b of buffers) if (b.capacity > limit) throw new RangeError(`${label}: a webgpu buffer of ${b.capacity} bytes exceeds the device's maxStorageBufferBindingSize (${limit}); tensors that large need chunked kernels (not yet)`);

  const { shape, strides } = coalesce(out.shape, [out.strides, ...tensors.map((t) => broadcastStrides(t.shape, t.strides, out.shape))]);
  const rank = shape.length;
  const meta = new Uint32Array(metaWords(rank, strides.length));
  meta[0] = n;
  shape.forEach((s, d) => (meta[1 + d] = s));
  const offsets = [out.offset, ...tensors.map((t) => t.offset)];
  strides.forEach((st, t) => {
    const base = 1 + rank + t * (1 + rank);
    meta[base] = offsets[t]!;
    st.forEach((s, d) => (meta[base + 1 + d] = s | 0));
  });

  const key = `${expr}|${rank}|${bindings.map((b) => `${b.kind}${b.written ? 'w' : ''}`).join(',')}|${inputs.join(',')}`;
  let kernel = programs.get(key);
  if (!kernel) {
    kernel = acc.kernel(generatePointwise({ rank, bindings, inputs, expr }), `kiln.${label} (${out.dtype})`);
    programs.set(key, kernel);
  }
  acc.dispatch(kernel, buffers, meta, [Math.min(Math.ceil(n / WORKGROUP), 65535), 1, 1]);
  for (const s of staged) s.dispose();
  return out;
}

