/**
 * View ops: outputs share the input's storage (aliasOf 'self') and differ only in shape, strides
 * and storage offset, which the meta functions compute exactly (`offset` is the absolute storage
 * offset in elements). One device-agnostic kernel builds every view from that metadata.
 *
 * `reshape` and `flatten` are views when the strides allow it and contiguous copies otherwise; their
 * meta result says which (`copies`), and their output aliases 'self' only in the view case.
 */
import { itemSize } from '../../tensor/dtype.js';
import { contiguousStrides, fmtShape, normalizeDim, numel, shapeEquals } from '../../tensor/layout.js';
import type { TensorMeta } from '../../tensor/tensor.js';
import { describe } from '../meta-helpers.js';
import { defineOp } from '../registry.js';
import type { OutMeta } from '../schema.js';

/** Tensor metadata plus the storage offset real tensors carry (0 when absent). */
type ViewInput = TensorMeta & { readonly offset?: number };

/** Meta of a view: always carries the storage offset. */
export interface ViewMeta extends OutMeta {
  readonly offset: number;
}

/** Meta of reshape/flatten: a view (`copies: false`) or a fresh contiguous tensor (`copies: true`). */
export interface ReshapeMeta extends ViewMeta {
  readonly copies: boolean;
}

function baseOffset(t: ViewInput): number {
  return t.offset ?? 0;
}

function viewOf(self: ViewInput, shape: readonly number[], strides: readonly number[], offset = baseOffset(self)): ViewMeta {
  return { shape: [...shape], strides: [...strides], dtype: self.dtype, device: self.device, offset };
}

function checkIntList(op: string, name: string, v: unknown): number[] {
  if (!Array.isArray(v) || !(v as unknown[]).every((x) => typeof x === 'number' && Number.isInteger(x))) {
    throw new TypeError(`${op}: argument '${name}' must be an array of integers, got ${Array.isArray(v) ? fmtShape(v as number[]) : String(v)}`);
  }
  return [...(v as number[])];
}

function checkInteger(op: string, name: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isInteger(v)) throw new TypeError(`${op}: argument '${name}' must be an integer, got ${String(v)}`);
  return v;
}

/** Resolves one -1 in a requested shape against the element count (PyTorch's infer_size). */
export function inferSize(op: string, self: TensorMeta, shape: readonly number[]): number[] {
  const requested = checkIntList(op, 'shape', shape);
  const n = numel(self.shape);
  let infer = -1;
  let known = 1;
  for (let i = 0; i < requested.length; i++) {
    const s = requested[i]!;
    if (s === -1) {
      if (infer >= 0) throw new Error(`${op}: only one dimension can be inferred (-1), got shape ${fmtShape(requested)}`);
      infer = i;
    } else if (s < 0) {
      throw new RangeError(`${op}: invalid shape dimension ${s} in shape ${fmtShape(requested)}`);
    } else known *= s;
  }
  const out = [...requested];
  if (infer >= 0) {
    if (known === 0) {
      throw new Error(
        `${op}: cannot reshape tensor of 0 elements into shape ${fmtShape(requested)} because the unspecified dimension size -1 can be any value and is ambiguous`,
      );
    }
    if (n % known === 0) out[infer] = n / known;
    else known = -1; // forces the mismatch error below
  }
  if (numel(out) !== n || known < 0) {
    throw new Error(`${op}: shape ${fmtShape(requested)} is invalid for input of shape ${fmtShape(self.shape)} (${n} elements)`);
  }
  return out;
}

/**
 * Strides that view (oldShape, oldStrides) as newShape without copying, or null when impossible
 * (PyTorch's computeStride): each run of old dims that is contiguous within itself must map onto
 * a run of new dims of the same element count.
 */
export function computeViewStrides(oldShape: readonly number[], oldStrides: readonly number[], newShape: readonly number[]): number[] | null {
  if (oldShape.length === 0) return newShape.map(() => 1);
  const n = numel(oldShape);
  if (n === 0) return shapeEquals(oldShape, newShape) ? [...oldStrides] : contiguousStrides(newShape);
  const newStrides = new Array<number>(newShape.length).fill(0);
  let viewD = newShape.length - 1;
  let chunkBase = oldStrides[oldStrides.length - 1]!;
  let tensorNumel = 1;
  let viewNumel = 1;
  for (let d = oldShape.length - 1; d >= 0; d--) {
    tensorNumel *= oldShape[d]!;
    if (d === 0 || (oldShape[d - 1] !== 1 && oldStrides[d - 1] !== tensorNumel * chunkBase)) {
      while (viewD >= 0 && (viewNumel < tensorNumel || newShape[viewD] === 1)) {
        newStrides[viewD] = viewNumel * chunkBase;
        viewNumel *= newShape[viewD]!;
        viewD--;
      }
      if (viewNumel !== tensorNumel) return null;
      if (d > 0) {
        chunkBase = oldStrides[d - 1]!;
        tensorNumel = 1;
        viewNumel = 1;
      }
    }
  }
  if (viewD !== -1) return null;
  return newStrides;
}

function reshapeMeta(op: string, self: ViewInput, shape: readonly number[]): ReshapeMeta {
  const target = inferSize(op, self, shape);
  const strides = computeViewStrides(self.shape, self.strides, target);
  if (strides) return { ...viewOf(self, target, strides), copies: false };
  return { shape: target, strides: contiguousStrides(target), dtype: self.dtype, device: self.device, offset: 0, copies: true };
}

const selfArg = { name: 'self', type: 'Tensor' } as const;
const aliasOut = [{ name: 'out', type: 'Tensor', aliasOf: 'self' }] as const;

export const view = defineOp({
  name: 'view',
  args: [selfArg, { name: 'shape', type: 'int[]' }],
  outputs: aliasOut,
  tags: ['view'],
  method: true,
  meta(self: ViewInput, shape: readonly number[]): ViewMeta {
    const target = inferSize('view', self, shape);
    const strides = computeViewStrides(self.shape, self.strides, target);
    if (!strides) {
      throw new Error(
        `view: view size is not compatible with input tensor's size and stride (input shape ${fmtShape(self.shape)}, strides ${fmtShape(self.strides)}; ` +
          `requested shape ${fmtShape(target)}): at least one dimension spans across two contiguous subspaces. Use reshape(...) instead.`,
      );
    }
    return viewOf(self, target, strides);
  },
});

export const reshape = defineOp({
  name: 'reshape',
  args: [selfArg, { name: 'shape', type: 'int[]' }],
  // Aliases 'self' only when meta reports copies: false.
  outputs: aliasOut,
  tags: ['view'],
  method: true,
  meta: (self: ViewInput, shape: readonly number[]): ReshapeMeta => reshapeMeta('reshape', self, shape),
});

export const flatten = defineOp({
  name: 'flatten',
  args: [selfArg, { name: 'startDim', type: 'int' }, { name: 'endDim', type: 'int' }],
  // Like reshape: a view when possible, else a contiguous copy.
  outputs: aliasOut,
  tags: ['view'],
  method: true,
  meta(self: ViewInput, startDim: number, endDim: number): ReshapeMeta {
    const rank = self.shape.length;
    const s = normalizeDim('flatten', checkInteger('flatten', 'startDim', startDim), rank, 'startDim');
    const e = normalizeDim('flatten', checkInteger('flatten', 'endDim', endDim), rank, 'endDim');
    if (s > e) throw new RangeError(`flatten: startDim ${startDim} cannot come after endDim ${endDim} (tensor shape ${fmtShape(self.shape)})`);
    if (rank === 0) return { ...viewOf(self, [1], [1]), copies: false };
    if (s === e) return { ...viewOf(self, self.shape, self.strides), copies: false };
    const target = [...self.shape.slice(0, s), numel(self.shape.slice(s, e + 1)), ...self.shape.slice(e + 1)];
    return reshapeMeta('flatten', self, target);
  },
});

export const unflatten = defineOp({
  name: 'unflatten',
  args: [selfArg, { name: 'dim', type: 'int' }, { name: 'sizes', type: 'int[]' }],
  outputs: aliasOut,
  tags: ['view'],
  method: true,
  meta(self: ViewInput, dim: number, sizes: readonly number[]): ViewMeta {
    const d = normalizeDim('unflatten', checkInteger('unflatten', 'dim', dim), self.shape.length);
    const req = checkIntList('unflatten', 'sizes', sizes);
    if (self.shape.length === 0) throw new Error(`unflatten: cannot unflatten a 0-d tensor`);
    if (req.length === 0) throw new Error(`unflatten: argument 'sizes' must be non-empty`);
    const size = self.shape[d]!;
    let sizesOut: number[];
    try {
      sizesOut = inferSize('unflatten', { ...self, shape: [size] }, req);
    } catch {
      throw new Error(`unflatten: provided sizes ${fmtShape(req)} don't multiply up to the size of dim ${dim} (${size}) in the input tensor ${fmtShape(self.shape)}`);
    }
    const target = [...self.shape.slice(0, d), ...sizesOut, ...self.shape.slice(d + 1)];
    const strides = computeViewStrides(self.shape, self.strides, target);
    // Splitting one dim is always a view; the fallback only covers empty tensors.
    return viewOf(self, target, strides ?? contiguousStrides(target));
  },
});

function checkPermutation(op: string, name: string, dims: readonly number[], rank: number): number[] {
  const list = checkIntList(op, name, dims);
  if (list.length !== rank) {
    throw new Error(`${op}: number of dims in ${name} ${fmtShape(list)} doesn't match the tensor's rank ${rank}`);
  }
  const seen = new Set<number>();
  return list.map((d) => {
    const n = normalizeDim(op, d, rank);
    if (seen.has(n)) throw new Error(`${op}: repeated dim ${d} in ${name} ${fmtShape(list)}`);
    seen.add(n);
    return n;
  });
}

function permuted(self: ViewInput, perm: readonly number[]): ViewMeta {
  return viewOf(
    self,
    perm.map((p) => self.shape[p]!),
    perm.map((p) => self.strides[p]!),
  );
}

export const permute = defineOp({
  name: 'permute',
  args: [selfArg, { name: 'dims', type: 'int[]' }],
  outputs: aliasOut,
  tags: ['view'],
  method: true,
  meta: (self: ViewInput, dims: readonly number[]): ViewMeta => permuted(self, checkPermutation('permute', 'dims', dims, self.shape.length)),
});

function swapped(op: string, self: ViewInput, dim0: number, dim1: number): ViewMeta {
  const rank = self.shape.length;
  const a = normalizeDim(op, checkInteger(op, 'dim0', dim0), rank, 'dim0');
  const b = normalizeDim(op, checkInteger(op, 'dim1', dim1), rank, 'dim1');
  if (rank === 0) return viewOf(self, [], []);
  const perm = Array.from({ length: rank }, (_, i) => i);
  perm[a] = b;
  perm[b] = a;
  return permuted(self, perm);
}

export const transpose = defineOp({
  name: 'transpose',
  args: [selfArg, { name: 'dim0', type: 'int' }, { name: 'dim1', type: 'int' }],
  outputs: aliasOut,
  tags: ['view'],
  method: true,
  meta: (self: ViewInput, dim0: number, dim1: number): ViewMeta => swapped('transpose', self, dim0, dim1),
});

export const t = defineOp({
  name: 't',
  args: [selfArg],
  outputs: aliasOut,
  tags: ['view'],
  method: true,
  meta(self: ViewInput): ViewMeta {
    if (self.shape.length > 2) throw new Error(`t: expects a tensor with <= 2 dimensions, but got ${describe(self)} (rank ${self.shape.length}); use transpose or mT`);
    return self.shape.length < 2 ? viewOf(self, self.shape, self.strides) : swapped('t', self, 0, 1);
  },
});

export const movedim = defineOp({
  name: 'movedim',
  args: [selfArg, { name: 'source', type: 'int[]' }, { name: 'destination', type: 'int[]' }],
  outputs: aliasOut,
  tags: ['view'],
  method: true,
  meta(self: ViewInput, source: readonly number[], destination: readonly number[]): ViewMeta {
    const rank = self.shape.length;
    const src = checkIntList('movedim', 'source', source);
    const dst = checkIntList('movedim', 'destination', destination);
    if (src.length !== dst.length) {
      throw new Error(`movedim: invalid source or destination dims: source ${fmtShape(src)} and destination ${fmtShape(dst)} have different lengths`);
    }
    const norm = (list: number[], name: string): number[] => {
      const seen = new Set<number>();
      return list.map((d) => {
        const n = normalizeDim('movedim', d, rank, name);
        if (seen.has(n)) throw new Error(`movedim: repeated dim ${d} in ${name} ${fmtShape(list)}`);
        seen.add(n);
        return n;
      });
    };
    const s = norm(src, 'source');
    const d = norm(dst, 'destination');
    if (rank === 0) return viewOf(self, [], []);
    const perm = new Array<number>(rank).fill(-1);
    s.forEach((sd, i) => (perm[d[i]!] = sd));
    const rest = Array.from({ length: rank }, (_, i) => i).filter((i) => !s.includes(i));
    let k = 0;
    for (let i = 0; i < rank; i++) if (perm[i] === -1) perm[i] = rest[k++]!;
    return permuted(self, perm);
  },
});

export const expand = defineOp({
  name: 'expand',
  args: [selfArg, { name: 'sizes', type: 'int[]' }],
  outputs: aliasOut,
  tags: ['view'],
  method: true,
  meta(self: ViewInput, sizes: readonly number[]): ViewMeta {
    const target = checkIntList('expand', 'sizes', sizes);
    const rank = self.shape.length;
    const ndim = target.length;
    if (ndim < rank) {
      throw new Error(`expand: the number of sizes provided (${ndim}) must be greater or equal to the number of dimensions in the tensor (${rank}); sizes ${fmtShape(target)}, tensor ${fmtShape(self.shape)}`);
    }
    const shape = new Array<number>(ndim);
    const strides = new Array<number>(ndim);
    for (let i = ndim - 1; i >= 0; i--) {
      const dim = rank - (ndim - i);
      let size = dim >= 0 ? self.shape[dim]! : 1;
      let stride = dim >= 0 ? self.strides[dim]! : i === ndim - 1 ? 1 : shape[i + 1]! * strides[i + 1]!;
      let want = target[i]!;
      if (want === -1) {
        if (dim < 0) throw new Error(`expand: -1 is not allowed in a leading, non-existing dimension ${i} (sizes ${fmtShape(target)}, tensor ${fmtShape(self.shape)})`);
        want = size;
      }
      if (want < 0) throw new RangeError(`expand: invalid size ${want} at dimension ${i} (sizes ${fmtShape(target)})`);
      if (size !== want) {
        if (size !== 1) {
          throw new Error(
            `expand: the expanded size of the tensor (${want}) must match the existing size (${size}) at non-singleton dimension ${i}. Target sizes: ${fmtShape(target)}. Tensor sizes: ${fmtShape(self.shape)}`,
          );
        }
        size = want;
        stride = 0;
      }
      shape[i] = size;
      strides[i] = stride;
    }
    return viewOf(self, shape, strides);
  },
});

export const slice = defineOp({
  name: 'slice',
  args: [selfArg, { name: 'dim', type: 'int' }, { name: 'start', type: 'int?' }, { name: 'end', type: 'int?' }, { name: 'step', type: 'int' }],
  outputs: aliasOut,
  tags: ['view'],
  method: true,
  meta(self: ViewInput, dim: number, start: number | null, end: number | null, step: number): ViewMeta {
    if (self.shape.length === 0) throw new Error(`slice: cannot be applied to a 0-dim tensor`);
    const d = normalizeDim('slice', checkInteger('slice', 'dim', dim), self.shape.length);
    checkInteger('slice', 'step', step);
    if (step <= 0) throw new RangeError(`slice: step must be positive, got step=${step}`);
    const size = self.shape[d]!;
    let s = start === null || start === undefined ? 0 : checkInteger('slice', 'start', start);
    let e = end === null || end === undefined ? size : checkInteger('slice', 'end', end);
    if (s < 0) s += size;
    if (e < 0) e += size;
    s = Math.min(Math.max(s, 0), size);
    e = Math.min(Math.max(e, s), size);
    const len = Math.ceil((e - s) / step);
    const shape = [...self.shape];
    const strides = [...self.strides];
    shape[d] = len;
    strides[d] = self.strides[d]! * step;
    return viewOf(self, shape, strides, baseOffset(self) + s * self.strides[d]!);
  },
});

export const narrow = defineOp({
  name: 'narrow',
  args: [selfArg, { name: 'dim', type: 'int' }, { name: 'start', type: 'int' }, { name: 'length', type: 'int' }],
  outputs: aliasOut,
  tags: ['view'],
  method: true,
  meta(self: ViewInput, dim: number, start: number, length: number): ViewMeta {
    if (self.shape.length === 0) throw new Error(`narrow: cannot be applied to a 0-dim tensor`);
    const d = normalizeDim('narrow', checkInteger('narrow', 'dim', dim), self.shape.length);
    checkInteger('narrow', 'start', start);
    checkInteger('narrow', 'length', length);
    const size = self.shape[d]!;
    if (start < -size || start > size) {
      throw new RangeError(`narrow: start ${start} is out of range for dimension ${dim} of size ${size} (expected in [${-size}, ${size}])`);
    }
    const s = start < 0 ? start + size : start;
    if (length < 0) throw new RangeError(`narrow: length must be non-negative, got ${length}`);
    if (s + length > size) {
      throw new RangeError(`narrow: start (${start}) + length (${length}) exceeds dimension size (${size}) of dim ${dim} (tensor ${fmtShape(self.shape)})`);
    }
    const shape = [...self.shape];
    shape[d] = length;
    return viewOf(self, shape, self.strides, baseOffset(self) + s * self.strides[d]!);
  },
});

export const select = defineOp({
  name: 'select',
  args: [selfArg, { name: 'dim', type: 'int' }, { name: 'index', type: 'int' }],
  outputs: aliasOut,
  tags: ['view'],
  method: true,
  meta(self: ViewInput, dim: number, index: number): ViewMeta {
    if (self.shape.length === 0) throw new Error(`select: cannot be applied to a 0-dim tensor`);
    const d = normalizeDim('select', checkInteger('select', 'dim', dim), self.shape.length);
    checkInteger('select', 'index', index);
    const size = self.shape[d]!;
    if (index < -size || index >= size) {
      throw new RangeError(`select: index ${index} out of range for tensor of shape ${fmtShape(self.shape)} at dimension ${dim} (size ${size})`);
    }
    const i = index < 0 ? index + size : index;
    const shape = self.shape.filter((_, k) => k !== d);
    const strides = self.strides.filter((_, k) => k !== d);
    return viewOf(self, shape, strides, baseOffset(self) + i * self.strides[d]!);
  },
});

export const squeeze = defineOp({
  name: 'squeeze',
  args: [selfArg, { name: 'dim', type: 'int[]?' }],
  outputs: aliasOut,
  tags: ['view'],
  method: true,
  meta(self: ViewInput, dim: readonly number[] | null): ViewMeta {
    const rank = self.shape.length;
    let drop: Set<number>;
    if (dim === null || dim === undefined) {
      drop = new Set(self.shape.flatMap((s, i) => (s === 1 ? [i] : [])));
    } else {
      const list = checkIntList('squeeze', 'dim', dim);
      drop = new Set();
      for (const d of list) {
        const n = normalizeDim('squeeze', d, rank);
        if (drop.has(n)) throw new Error(`squeeze: dim ${d} appears multiple times in dim ${fmtShape(list)}`);
        drop.add(n);
      }
      // Dims whose size is not 1 are left alone, as in PyTorch.
      for (const n of [...drop]) if (rank === 0 || self.shape[n] !== 1) drop.delete(n);
    }
    return viewOf(
      self,
      self.shape.filter((_, i) => !drop.has(i)),
      self.strides.filter((_, i) => !drop.has(i)),
    );
  },
});

export const unsqueeze = defineOp({
  name: 'unsqueeze',
  args: [selfArg, { name: 'dim', type: 'int' }],
  outputs: aliasOut,
  tags: ['view'],
  method: true,
  meta(self: ViewInput, dim: number): ViewMeta {
    const rank = self.shape.length;
    const d = normalizeDim('unsqueeze', checkInteger('unsqueeze', 'dim', dim), rank + 1);
    const stride = d >= rank ? 1 : self.shape[d]! * self.strides[d]!;
    const shape = [...self.shape];
    const strides = [...self.strides];
    shape.splice(d, 0, 1);
    strides.splice(d, 0, stride);
    return viewOf(self, shape, strides);
  },
});

export const diagonal = defineOp({
  name: 'diagonal',
  args: [selfArg, { name: 'offset', type: 'int' }, { name: 'dim1', type: 'int' }, { name: 'dim2', type: 'int' }],
  outputs: aliasOut,
  tags: ['view'],
  method: true,
  meta(self: ViewInput, offset: number, dim1: number, dim2: number): ViewMeta {
    const rank = self.shape.length;
    if (rank < 2) throw new Error(`diagonal: expects a tensor with at least 2 dimensions, got ${describe(self)}`);
    checkInteger('diagonal', 'offset', offset);
    const a = normalizeDim('diagonal', checkInteger('diagonal', 'dim1', dim1), rank, 'dim1');
    const b = normalizeDim('diagonal', checkInteger('diagonal', 'dim2', dim2), rank, 'dim2');
    if (a === b) throw new Error(`diagonal: dimensions cannot be identical: dim1=${dim1}, dim2=${dim2}`);
    let off = baseOffset(self);
    let len: number;
    if (offset >= 0) {
      len = Math.max(Math.min(self.shape[a]!, self.shape[b]! - offset), 0);
      if (len > 0) off += offset * self.strides[b]!;
    } else {
      len = Math.max(Math.min(self.shape[a]! + offset, self.shape[b]!), 0);
      if (len > 0) off -= offset * self.strides[a]!;
    }
    const shape = self.shape.filter((_, i) => i !== a && i !== b);
    const strides = self.strides.filter((_, i) => i !== a && i !== b);
    shape.push(len);
    strides.push(self.strides[a]! + self.strides[b]!);
    return viewOf(self, shape, strides, off);
  },
});

/** Elements of storage a real tensor has (undefined for metadata-only tensors). */
function storageElements(self: ViewInput): number | undefined {
  const st = (self as { storage?: { nbytes?: number } }).storage;
  if (!st || typeof st.nbytes !== 'number') return undefined;
  const size = itemSize(self.dtype);
  return Math.floor(st.nbytes / size);
}

export const asStrided = defineOp({
  name: 'asStrided',
  args: [selfArg, { name: 'size', type: 'int[]' }, { name: 'stride', type: 'int[]' }, { name: 'storageOffset', type: 'int?' }],
  outputs: aliasOut,
  tags: ['view'],
  method: true,
  meta(self: ViewInput, size: readonly number[], stride: readonly number[], storageOffset: number | null): ViewMeta {
    const shape = checkIntList('asStrided', 'size', size);
    const strides = checkIntList('asStrided', 'stride', stride);
    if (shape.length !== strides.length) {
      throw new Error(`asStrided: mismatch in length of size ${fmtShape(shape)} (${shape.length}) and stride ${fmtShape(strides)} (${strides.length})`);
    }
    if (shape.some((s) => s < 0)) throw new RangeError(`asStrided: negative size in ${fmtShape(shape)}`);
    if (strides.some((s) => s < 0)) throw new RangeError(`asStrided: negative stride in ${fmtShape(strides)}`);
    const off = storageOffset === null || storageOffset === undefined ? baseOffset(self) : checkInteger('asStrided', 'storageOffset', storageOffset);
    if (off < 0) throw new RangeError(`asStrided: negative storage offset ${off}`);
    const avail = storageElements(self);
    if (avail !== undefined && numel(shape) > 0) {
      let last = off;
      for (let i = 0; i < shape.length; i++) last += (shape[i]! - 1) * strides[i]!;
      if (last >= avail) {
        throw new RangeError(
          `asStrided: size ${fmtShape(shape)}, stride ${fmtShape(strides)} and storage offset ${off} reach element ${last}, out of bounds for a storage of ${avail} elements`,
        );
      }
    }
    return viewOf(self, shape, strides, off);
  },
});
