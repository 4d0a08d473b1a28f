/**
 * Runs one pointwise node on webgpu: turns the op's arguments into the math table's view of them
 * (tensors become values v0..v(k-1), everything else a constant baked into the source, as is a cpu
 * scalar tensor's value), asks `render` for the element expression, and runs it as a one-node
 * program of the fused-group renderer the webgpu compile target uses (fused/: bindings with the
 * output first, an input on the output's buffer reading that binding since WebGPU forbids binding
 * a written buffer twice; coalesced dims; pipelines memoised by what their source depends on, so a
 * repeated op renders no WGSL).
 *
 * Constants in the source mean a new pipeline per distinct scalar (x * 0.5, x * 0.25); passing
 * them as metadata words is the next step once a workload shows the cost.
 */
import { broadcastStrides, contiguousStrides, fmtShape } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import type { MathArg } from '../math/args.js';
import { allocOut, unsupportedDtype, webgpu } from './device.js';
import { type FusedGroup, type FusedValue, groupKey } from './fused/group.js';
import { fusedLayout } from './fused/layout.js';
import { launchFused, prepareFused } from './fused/run.js';
import { storageKind } from './storage.js';

const OUT = 100;
const NONE: ReadonlySet<number> = new Set();

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

  const staged: Tensor[] = [];
  for (let i = 0; i < tensors.length; i++) {
    const t = tensors[i]!;
    const kind = storageKind(t.dtype, nativeF16);
    if (kind === null) throw unsupportedDtype(label, t);
    if (t.storage.buffer === out.storage.buffer && kind !== outKind) {
      // The output's buffer read as another type: read a copy instead of binding it twice.
      const copy = allocOut({ shape: t.shape, strides: contiguousStrides(t.shape), dtype: t.dtype, device: t.device });
      runPointwise('copy', copy, [t], (m) => (m[0]?.kind === 'value' ? m[0].expr : null));
      staged.push(copy);
      tensors[i] = copy;
    }
  }

  // A one-node program for the shared fused-group renderer (fused/render.ts): inputs are values
  // 0..k-1 (the v0..v(k-1) the expression reads), the output is value OUT.
  const values = new Map<number, FusedValue>(tensors.map((t, i) => [i, { dtype: t.dtype, shape: t.shape }]));
  values.set(OUT, { dtype: out.dtype, shape: out.shape });
  const ids = tensors.map((_, i) => i);
  const g: FusedGroup = {
    kind: 'pointwise',
    nodes: [{ kind: 'pointwise', op: label, args: ids.map((id) => ({ kind: 'value', id })), outputs: [OUT], expr }],
    rowScalars: NONE,
    inputs: ids,
    outputs: [OUT],
    value: (id) => values.get(id)!,
  };
  const strides = [[...out.strides], ...tensors.map((t) => broadcastStrides(t.shape, t.strides, out.shape))];
  const L = fusedLayout({ kind: 'pointwise', shape: out.shape, dims: [], strides, offsets: [out.offset, ...tensors.map((t) => t.offset)], rowRef: 1 });
  const launch = prepareFused(g, [out, ...tensors].map((t) => ({ buffer: t.storage.buffer, dtype: t.dtype })), L, groupKey(g), `kiln.${label} (${out.dtype})`);
  if (typeof launch === 'string') throw new RangeError(`${label}: cannot run on webgpu: ${launch}`);
  launchFused(launch, L);
  for (const s of staged) s.dispose();
  return out;
}

