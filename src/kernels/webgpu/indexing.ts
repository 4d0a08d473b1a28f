/**
 * webgpu kernels for indexing: cat and stack (a copy of each input into its slice of the output:
 * the one-node pointwise program of core.ts, casts included), and two small WGSL templates for
 * data-dependent indexing, which the fused renderer does not express:
 *
 * - a row gather, out[o, j, r] = self[o, index[j], r] (indexSelect; embedding is a gather of the
 *   weight's rows by the flattened ids), and
 * - a row scatter, self[index[j], r] = values[j, r] (indexPut with one integer index on dim 0, the
 *   KV cache's write, index-put.ts; llm.reshapeAndCache is two of them with the slot mapping, rows whose slot is
 *   negative skipped).
 *
 * Indices are int32 or int64 (read as their low word: Kiln's index ranges are below 2^31). A GPU
 * kernel cannot raise: an out-of-range gather index reads zeros and an out-of-range scatter index
 * writes nothing, where the cpu raises (reading the indices back to check them would cost a sync
 * per op). Data of any storage form the other kernels use (float32, float16, bfloat16, int32, uint8,
 * bool), and 64-bit data as pairs of int32 words.
 */
import { cat, embedding, indexSelect, stack } from '../../ops/defs/indexing.js';
import { catSkipped } from '../../ops/defs/indexing.js';
import { dispatch } from '../../ops/dispatch.js';
import { contiguous } from '../../ops/defs/core.js';
import { registerKernel } from '../../ops/registry.js';
import { contiguousStrides, normalizeDim, numel } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import { copyTensor } from './core.js';
import { allocOut, webgpu } from './device.js';
import { arrayType, loadExpr, storagePrelude, storeStmt, type StorageKind } from './storage.js';
import { dataKind, kernelFor } from './template.js';

const WG = 256;
const MAX_GROUPS = 65535;

// ------------------------------------------------------------------------------------------------
// cat, stack

/** A view of `out` with `shape` at element offset `off` (out's strides, or `strides`). */
function sliceOf(out: Tensor, shape: readonly number[], off: number, strides: readonly number[] = out.strides): Tensor {
  return new Tensor(out.storage, out.dtype, shape, strides, out.offset + off);
}

function catInto(out: Tensor, tensors: readonly Tensor[], d: number): Tensor {
  let at = 0;
  for (const t of tensors) {
    if (catSkipped(t)) continue;
    const len = t.shape[d]!;
    if (len > 0 && t.numel() > 0) {
      const v = sliceOf(out, t.shape, at * out.strides[d]!);
      try {
        copyTensor(v, t);
      } finally {
        v.dispose();
      }
    }
    at += len;
  }
  return out;
}

registerKernel(cat, 'webgpu', (ctx, tensors, dim) => {
  const out = allocOut(ctx.out);
  const ts = tensors as readonly Tensor[];
  if (out.numel() === 0) return out;
  return catInto(out, ts, normalizeDim('cat', dim as number, out.ndim));
});

registerKernel(stack, 'webgpu', (ctx, tensors, dim) => {
  const out = allocOut(ctx.out);
  const ts = tensors as readonly Tensor[];
  const d = normalizeDim('stack', dim as number, out.ndim);
  const strides = out.strides.filter((_, k) => k !== d);
  ts.forEach((t, i) => {
    if (t.numel() === 0) return;
    const v = sliceOf(out, t.shape, i * out.strides[d]!, strides);
    try {
      copyTensor(v, t);
    } finally {
      v.dispose();
    }
  });
  return out;
});

// ------------------------------------------------------------------------------------------------
// Row gather and scatter

function header(kinds: readonly { kind: StorageKind; written: boolean }[], indexDtype: string): string[] {
  const lines: string[] = [];
  if (kinds.some((k) => k.kind === 'f16')) lines.push('enable f16;');
  kinds.forEach((k, i) => lines.push(`@group(0) @binding(${i}) var<storage, ${k.written ? 'read_write' : 'read'}> b${i}: ${arrayType(k.kind, k.written)};`));
  lines.push(`@group(0) @binding(${kinds.length}) var<storage, read> bidx: array<${indexDtype === 'int64' ? 'u32' : 'i32'}>;`);
  lines.push(`@group(0) @binding(${kinds.length + 1}) var<storage, read> kmeta: array<u32>;`);
  const pre = storagePrelude(kinds.map((k) => k.kind));
  if (pre) lines.push(pre);
  return lines;
}

/**
 * Gather source. Metadata: [total, inner, n, N, outOffset, selfOffset, indexOffset, indexStride];
 * out is contiguous [outer, n, inner], self contiguous [outer, N, inner].
 */
function gatherSource(outKind: StorageKind, selfKind: StorageKind, indexDtype: string): string {
  const lines = header(
    [
      { kind: outKind, written: true },
      { kind: selfKind, written: false },
    ],
    indexDtype,
  );
  const idx = indexDtype === 'int64' ? 'bitcast<i32>(bidx[2u * (kmeta[6] + j * kmeta[7])])' : 'bidx[kmeta[6] + j * kmeta[7]]';
  lines.push(
    `@compute @workgroup_size(${WG})`,
    'fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) ng: vec3u) {',
    '  let total = kmeta[0]; let inner = kmeta[1]; let n = kmeta[2]; let N = kmeta[3];',
    `  for (var i = gid.x; i < total; i = i + ng.x * ${WG}u) {`,
    '    let r = i % inner; let t = i / inner; let j = t % n; let o = t / n;',
    `    let x = ${idx};`,
    `    var v = ${outKind === 'i32' || outKind === 'u8p' || outKind === 'boolp' ? '0i' : '0.0f'};`,
    `    if (x >= 0i && u32(x) < N) { v = ${loadExpr(selfKind, 'b1', 'kmeta[5] + (o * N + u32(x)) * inner + r', false)}; }`,
    `    ${storeStmt(outKind, 'b0', 'kmeta[4] + i', 'v').replace(/\n/g, '\n    ')}`,
    '  }',
    '}',
  );
  return lines.join('\n');
}

/** `t` contiguous (a copy when it is not; the caller disposes a result that is not `t`). */
function dense(t: Tensor): Tensor {
  return t.isContiguous() ? t : (dispatch(contiguous, t, 'contiguous') as Tensor);
}

/** out [..., n, ...] = self gathered along `dim` by the 1-D (or 0-d) `index`; out is contiguous. */
export function gatherRows(op: string, out: Tensor, self: Tensor, dim: number, index: Tensor): Tensor {
  if (out.numel() === 0) return out;
  const d = self.ndim === 0 ? 0 : dim;
  const shape = self.ndim === 0 ? [1] : self.shape;
  const N = shape[d]!;
  const n = index.numel();
  let inner = numel(shape.slice(d + 1));
  const outer = numel(shape.slice(0, d));
  const src = dense(self);
  const idx = index.device.type === 'webgpu' ? index : index.to(out.device);
  try {
    const o = dataKind(op, out);
    const s = dataKind(op, src);
    let oOff = out.offset;
    let sOff = src.offset;
    if (o.wide) {
      inner *= 2;
      oOff *= 2;
      sOff *= 2;
    }
    const acc = webgpu();
    const same = src.storage.buffer === out.storage.buffer;
    if (same) throw new Error(`${op}: webgpu: the output shares the input's buffer`);
    const key = `rows.gather.${o.kind}.${s.kind}.${idx.dtype}`;
    const k = kernelFor(key, () => gatherSource(o.kind, s.kind, idx.dtype));
    const total = outer * n * inner;
    const istride = idx.ndim === 0 ? 0 : idx.strides[0]!;
    const meta = new Uint32Array([total, inner, n, N, oOff, sOff, idx.offset, istride]);
    acc.dispatch(k, [out.storage.buffer, src.storage.buffer, idx.storage.buffer], meta, [Math.max(1, Math.min(Math.ceil(total / WG), MAX_GROUPS)), 1, 1]);
  } finally {
    if (src !== self) src.dispose();
    if (idx !== index) idx.dispose();
  }
  return out;
}

registerKernel(indexSelect, 'webgpu', (ctx, self, dim, index) => {
  const out = allocOut(ctx.out);
  const d = self.ndim === 0 ? 0 : normalizeDim('indexSelect', dim as number, self.ndim);
  return gatherRows('indexSelect', out, self, d, index);
});

registerKernel(embedding, 'webgpu', (ctx, input, weight) => {
  const out = allocOut(ctx.out);
  const ids = dense(input);
  const flat = new Tensor(ids.storage, ids.dtype, [ids.numel()], [1], ids.offset);
  try {
    return gatherRows('embedding', out, weight, 0, flat);
  } finally {
    flat.dispose();
    if (ids !== input) ids.dispose();
  }
});

/**
 * Scatter source. Metadata: [total, inner, n, N, selfOffset, valuesOffset, indexOffset, indexStride];
 * self rows are contiguous blocks of `inner` elements at row stride `inner`, values contiguous
 * [n, inner]. `skip`: a negative index skips its row (reshapeAndCache), else it counts from the end.
 */
function scatterSource(selfKind: StorageKind, valKind: StorageKind, indexDtype: string, skip: boolean): string {
  const lines = header(
    [
      { kind: selfKind, written: true },
      { kind: valKind, written: false },
    ],
    indexDtype,
  );
  const idx = indexDtype === 'int64' ? 'bitcast<i32>(bidx[2u * (kmeta[6] + j * kmeta[7])])' : 'bidx[kmeta[6] + j * kmeta[7]]';
  lines.push(
    `@compute @workgroup_size(${WG})`,
    'fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) ng: vec3u) {',
    '  let total = kmeta[0]; let inner = kmeta[1]; let N = kmeta[3];',
    `  for (var i = gid.x; i < total; i = i + ng.x * ${WG}u) {`,
    '    let r = i % inner; let j = i / inner;',
    `    var x = ${idx};`,
    skip ? '    if (x < 0i) { continue; }' : '    if (x < 0i) { x = x + i32(N); }',
    '    if (x < 0i || u32(x) >= N) { continue; }',
    `    let v = ${loadExpr(valKind, 'b1', 'kmeta[5] + i', false)};`,
    `    ${storeStmt(selfKind, 'b0', 'kmeta[4] + u32(x) * inner + r', 'v').replace(/\n/g, '\n    ')}`,
    '  }',
    '}',
  );
  return lines.join('\n');
}

/**
 * self[index[j], ...] = values[j, ...] for a `self` whose rows (dims after 0) are one contiguous
 * block; `values` broadcasts to [n, ...self.shape[1:]]. Returns null (nothing written) when self's
 * layout is not of that form.
 */
export function scatterRows(op: string, self: Tensor, index: Tensor, values: Tensor, skipNegative: boolean): Tensor | null {
  const rest = self.shape.slice(1);
  let inner = numel(rest);
  const rowDense = self.ndim >= 1 && (self.shape[0] === 1 || self.strides[0] === inner) && contiguousStrides(rest).every((s, k) => s === self.strides[k + 1] || rest[k] === 1);
  if (!rowDense) return null;
  const n = index.numel();
  if (n === 0 || inner === 0) return self;
  const vshape = [n, ...rest];
  const vals = allocOut({ shape: vshape, strides: contiguousStrides(vshape), dtype: self.dtype, device: self.device });
  const idx = index.device.type === 'webgpu' ? index : index.to(self.device);
  try {
    copyTensor(vals, values);
    const s = dataKind(op, self);
    const v = dataKind(op, vals);
    let sOff = self.offset;
    let vOff = vals.offset;
    if (s.wide) {
      inner *= 2;
      sOff *= 2;
      vOff *= 2;
    }
    const key = `rows.scatter.${s.kind}.${v.kind}.${idx.dtype}${skipNegative ? '.skip' : ''}`;
    const k = kernelFor(key, () => scatterSource(s.kind, v.kind, idx.dtype, skipNegative));
    const total = n * inner;
    const istride = idx.ndim === 0 ? 0 : idx.strides[0]!;
    const meta = new Uint32Array([total, inner, n, self.shape[0]!, sOff, vOff, idx.offset, istride]);
    webgpu().dispatch(k, [self.storage.buffer, vals.storage.buffer, idx.storage.buffer], meta, [Math.max(1, Math.min(Math.ceil(total / WG), MAX_GROUPS)), 1, 1]);
  } finally {
    vals.dispose();
    if (idx !== index) idx.dispose();
  }
  return self;
}
