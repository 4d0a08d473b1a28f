/**
 * webgpu kernels for indexPut / indexPut_ (advanced-index assignment, plain or accumulate).
 *
 * One integer index on dim 0 without accumulate, into a self whose rows are contiguous blocks, is
 * the row writer of indexing.ts (the KV cache's write: no readback). Everything else (several
 * index tensors, broadcasting, bool masks, accumulate) is planned on the host, as the cuda kernels
 * plan it: the indices are read back and the CPU kernel's own walk (indexPutDense with a visitor)
 * lists every write as (destination, source) positions, so both devices share negative indices,
 * masks, broadcasting and the range errors. The device then applies the plan (scatter-source.ts's
 * pairs addressing): plain writes keep the last per destination (deduplicated on the host, so the
 * result is the CPU's), accumulation adds atomically into a dense 32-bit copy of self (logical or
 * for bool), cast back once.
 */
import { indexPut, indexPut_ } from '../../ops/defs/indexing.js';
import { dispatch } from '../../ops/dispatch.js';
import { contiguous } from '../../ops/defs/core.js';
import { registerKernel } from '../../ops/registry.js';
import type { OutMeta, ScalarValue } from '../../ops/schema.js';
import { isFloating, itemSize } from '../../tensor/dtype.js';
import { contiguousStrides, fmtShape } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import { indexPutDense } from '../cpu/indexing.js';
import { copyTensor, fillTensor } from './core.js';
import { allocOut, webgpu } from './device.js';
import { scatterRows } from './indexing.js';
import { applySource, SC_HEAD, setSource } from './scatter-source.js';
import { dataKind, groupsFor, int32On, kernelFor, scalarWords, words } from './template.js';

const PAIRS = { kind: 'pairs' as const };

/** The row writer's case: one 0-d or 1-d integer index on dim 0, no accumulate. */
function rowCase(indices: readonly (Tensor | null)[], accumulate: boolean): Tensor | null {
  const one = indices.length === 1 ? indices[0] : null;
  return !accumulate && one instanceof Tensor && (one.dtype === 'int64' || one.dtype === 'int32') && one.ndim <= 1 ? one : null;
}

/** Pairs metadata: the head, then per dim of self: its size and `out`'s stride (pairs address by self's row-major positions). */
function pairsMeta(n: number, self: Tensor, out: Tensor, scalar: readonly [number, number], srcOff: number): Uint32Array {
  const head = [n, self.ndim, 0, 0, scalar[0], scalar[1], 0, srcOff, out.offset];
  if (head.length !== SC_HEAD) throw new Error('indexPut: metadata head');
  return words([...head, ...self.shape.flatMap((s, k) => [s, 0, 0, out.strides[k]!, 0])]);
}

function runIndexPut(op: string, out: Tensor, self: Tensor, indices: readonly (Tensor | null)[], values: Tensor | ScalarValue, accumulate: boolean): Tensor {
  if (out !== self) copyTensor(out, self);
  const one = rowCase(indices, accumulate);
  if (one) {
    const vals = values instanceof Tensor ? values : fillTensor(allocOut({ shape: [], strides: [], dtype: self.dtype, device: self.device }), values);
    try {
      if (scatterRows(op, out, one, vals, false) !== null) return out;
    } finally {
      if (vals !== values) vals.dispose();
    }
  }
  // The plan: the CPU kernel's walk over host copies of the indices (it checks every index first).
  const hostIndices = indices.map((t) => (t ? t.to('cpu') : null));
  const dest: number[] = [];
  const spos: number[] = [];
  try {
    if (accumulate) indexPutDense(op, null, self, hostIndices, values, true, (p, s) => void (dest.push(p), spos.push(s)));
    else {
      const last = new Map<number, number>();
      indexPutDense(op, null, self, hostIndices, values, false, (p, s) => void last.set(p, s));
      for (const [p, s] of last) {
        dest.push(p);
        spos.push(s);
      }
    }
  } finally {
    hostIndices.forEach((t, i) => t && t !== indices[i] && t.dispose());
  }
  if (dest.length === 0) return out;
  const temps: Tensor[] = [];
  try {
    const dp = int32On(dest, out.device);
    const sp = int32On(spos, out.device);
    temps.push(dp, sp);
    const vals = values instanceof Tensor ? (values.isContiguous() ? values : (dispatch(contiguous, values, 'contiguous') as Tensor)) : null;
    if (vals && vals !== values) temps.push(vals);
    return accumulate ? accumulateInto(op, out, self, dp, sp, vals, values) : setInto(op, out, self, dp, sp, vals, values);
  } finally {
    for (const t of temps) t.dispose();
  }
}

/** Plain writes: every planned destination is distinct, so each store is the only one to its element. */
function setInto(op: string, out: Tensor, self: Tensor, dp: Tensor, sp: Tensor, vals: Tensor | null, values: Tensor | ScalarValue): Tensor {
  const o = dataKind(op, out);
  const scalar = vals ? ([0, 0] as const) : scalarWords(values as ScalarValue, out.dtype);
  const k = kernelFor(`indexPut.set.${o.kind}.${o.wide ? 'w' : ''}.${vals ? 't' : 's'}`, () => setSource(o.kind, o.wide, PAIRS, vals !== null));
  const bufs = [out.storage.buffer, dp.storage.buffer, sp.storage.buffer, ...(vals ? [vals.storage.buffer] : [])];
  webgpu().dispatch(k, bufs, pairsMeta(dp.numel(), self, out, scalar, vals?.offset ?? 0), groupsFor(dp.numel()));
  return out;
}

/** Accumulation into a dense 32-bit copy of self (sums; logical or for bool), cast back into `out`. */
function accumulateInto(op: string, out: Tensor, self: Tensor, dp: Tensor, sp: Tensor, vals: Tensor | null, values: Tensor | ScalarValue): Tensor {
  if (itemSize(self.dtype) === 8) {
    throw new TypeError(`${op}: the webgpu kernel accumulates into float32, float16, bfloat16, int32, uint8 and bool; got dtype ${self.dtype} (self ${fmtShape(self.shape)}): WGSL has no 64-bit atomics`);
  }
  const wd = isFloating(self.dtype) ? 'float32' : 'int32';
  const t = wd === 'float32' ? 'f32' : 'i32';
  const mode = self.dtype === 'bool' ? 'max' : 'add';
  const work = allocOut({ shape: self.shape, strides: contiguousStrides(self.shape), dtype: wd, device: out.device });
  try {
    copyTensor(work, out);
    const sk = vals ? dataKind(op, vals).kind : null;
    const scalar = vals ? ([0, 0] as const) : scalarWords(values as ScalarValue, wd);
    const k = kernelFor(`indexPut.apply.${t}.${mode}.${sk ?? 's'}`, () => applySource(t, mode, PAIRS, sk, false));
    const bufs = [work.storage.buffer, dp.storage.buffer, sp.storage.buffer, ...(vals ? [vals.storage.buffer] : [])];
    webgpu().dispatch(k, bufs, pairsMeta(dp.numel(), self, work, scalar, vals?.offset ?? 0), groupsFor(dp.numel()));
    copyTensor(out, work);
  } finally {
    work.dispose();
  }
  return out;
}

registerKernel(indexPut, 'webgpu', (ctx, self, indices, values, accumulate) =>
  runIndexPut('indexPut', allocOut(ctx.out as OutMeta), self, indices as readonly (Tensor | null)[], values as Tensor | ScalarValue, accumulate === true),
);
registerKernel(indexPut_, 'webgpu', (_ctx, self, indices, values, accumulate) => runIndexPut('indexPut_', self, self, indices as readonly (Tensor | null)[], values as Tensor | ScalarValue, accumulate === true));
