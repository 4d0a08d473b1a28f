/** Shapes, strides and memory formats: pure functions on metadata, shared by meta functions and kernels. */

export type MemoryFormat = 'contiguous' | 'channelsLast' | 'preserve';

export function numel(shape: readonly number[]): number {
  let n = 1;
  for (const s of shape) n *= s;
  return n;
}

export function contiguousStrides(shape: readonly number[]): number[] {
  const strides = new Array<number>(shape.length);
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    strides[i] = acc;
    acc *= Math.max(shape[i]!, 1);
  }
  return strides;
}

/** NHWC strides for an NCHW-shaped 4-d tensor (torch.channels_last). */
export function channelsLastStrides(shape: readonly number[]): number[] {
  if (shape.length !== 4) throw new Error(`channelsLast: needs a 4-d shape, got [${shape.join(', ')}]`);
  const [, c, h, w] = shape.map((s) => Math.max(s, 1)) as [number, number, number, number];
  return [h * w * c, 1, w * c, c];
}

export function stridesFor(shape: readonly number[], format: Exclude<MemoryFormat, 'preserve'>): number[] {
  return format === 'channelsLast' ? channelsLastStrides(shape) : contiguousStrides(shape);
}

/** Contiguity as PyTorch defines it: dims of size 1 may have any stride. */
export function isContiguousStrides(shape: readonly number[], strides: readonly number[]): boolean {
  let expected = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    if (shape[i] === 1) continue;
    if (shape[i] === 0) return true;
    if (strides[i] !== expected) return false;
    expected *= shape[i]!;
  }
  return true;
}

export function isChannelsLastStrides(shape: readonly number[], strides: readonly number[]): boolean {
  if (shape.length !== 4) return false;
  const order = [1, 3, 2, 0];
  let expected = 1;
  for (const d of order) {
    if (shape[d] === 1) continue;
    if (shape[d] === 0) return true;
    if (strides[d] !== expected) return false;
    expected *= shape[d]!;
  }
  return true;
}

/**
 * Strides for a new dense tensor of `shape` that keeps the dimension order of a reference layout,
 * as PyTorch's preserve_format and TensorIterator do: transposed stays transposed, channels_last
 * stays channels_last, a row-major (even if gappy) reference gives row-major. Dims are ordered by
 * the reference's strides, outermost first, with an insertion sort that leaves size-1 dims and
 * equal strides in their natural order. Broadcast references (stride 0) give contiguous output.
 */
export function preservedStrides(shape: readonly number[], refShape: readonly number[], refStrides: readonly number[]): number[] {
  const rank = shape.length;
  if (refShape.length !== rank || refStrides.some((s, i) => s === 0 && refShape[i]! > 1)) return contiguousStrides(shape);
  const perm = Array.from({ length: rank }, (_, i) => i);
  for (let i = 1; i < rank; i++) {
    for (let j = i; j > 0; j--) {
      const outer = perm[j - 1]!;
      const inner = perm[j]!;
      if (refShape[outer]! <= 1 || refShape[inner]! <= 1) break;
      if (refStrides[outer]! < refStrides[inner]!) {
        perm[j - 1] = inner;
        perm[j] = outer;
      } else break;
    }
  }
  const strides = new Array<number>(rank);
  let acc = 1;
  for (let k = rank - 1; k >= 0; k--) {
    const d = perm[k]!;
    strides[d] = acc;
    acc *= Math.max(shape[d]!, 1);
  }
  return strides;
}

/** Normalises a possibly negative dim into [0, rank); the error names the op and the value. */
export function normalizeDim(op: string, dim: number, rank: number, argName = 'dim'): number {
  const r = Math.max(rank, 1);
  if (!Number.isInteger(dim) || dim < -r || dim >= r) {
    throw new RangeError(`${op}: ${argName} ${dim} is out of range for a tensor of rank ${rank} (expected in [${-r}, ${r - 1}])`);
  }
  return dim < 0 ? dim + r : dim;
}

/** Broadcasts shapes with NumPy/PyTorch rules; throws naming the op and shapes on mismatch. */
export function broadcastShapes(op: string, ...shapes: (readonly number[])[]): number[] {
  const rank = Math.max(0, ...shapes.map((s) => s.length));
  const out = new Array<number>(rank).fill(1);
  for (const s of shapes) {
    for (let i = 0; i < s.length; i++) {
      const o = rank - s.length + i;
      const a = out[o]!;
      const b = s[i]!;
      if (a === b || b === 1) continue;
      if (a === 1) out[o] = b;
      else {
        throw new Error(
          `${op}: shapes ${shapes.map((x) => `[${x.join(', ')}]`).join(' and ')} cannot be broadcast together (dim ${o - rank}: ${a} vs ${b})`,
        );
      }
    }
  }
  return out;
}

/** Strides that read `shape`/`strides` as if broadcast to `target` (0 where broadcast). */
export function broadcastStrides(shape: readonly number[], strides: readonly number[], target: readonly number[]): number[] {
  const out = new Array<number>(target.length).fill(0);
  const off = target.length - shape.length;
  for (let i = 0; i < shape.length; i++) out[off + i] = shape[i] === 1 && target[off + i] !== 1 ? 0 : strides[i]!;
  return out;
}

/**
 * Strides over the full shape `S` of a per-row result of a reduction over `dims` (keepdim or
 * not): 0 along the reduced dims. (The cuda and webgpu fused-group layouts share it.)
 */
export function rowStrides(shape: readonly number[], strides: readonly number[], S: readonly number[], dims: readonly number[]): number[] {
  if (shape.length === S.length) return strides.map((st, d) => (dims.includes(d) || shape[d] === 1 ? 0 : st));
  // keepdim=false: the result lacks the reduced dims; they get stride 0.
  const st: number[] = [];
  let k = 0;
  for (let d = 0; d < S.length; d++) st.push(dims.includes(d) ? 0 : strides[k++]!);
  return st;
}

/**
 * Drops size-1 dims and merges neighbours that are contiguous in every operand's strides, so a
 * kernel loops over as few dims as possible. A 0-d result becomes one dim of size 1, stride 0.
 * (The compiler's programs and the cuda fused-group layouts share it.)
 */
export function coalesceDims(shape: readonly number[], strides: readonly (readonly number[])[]): { shape: number[]; strides: number[][] } {
  const outShape: number[] = [];
  const outStrides: number[][] = strides.map(() => []);
  for (let d = 0; d < shape.length; d++) {
    const size = shape[d]!;
    if (size === 1) continue;
    const last = outShape.length - 1;
    if (last >= 0 && size !== 0 && outShape[last] !== 0 && strides.every((s, k) => outStrides[k]![last] === s[d]! * size)) {
      outShape[last]! *= size;
      strides.forEach((s, k) => (outStrides[k]![last] = s[d]!));
    } else {
      outShape.push(size);
      strides.forEach((s, k) => outStrides[k]!.push(s[d]!));
    }
  }
  if (outShape.length === 0) {
    outShape.push(1);
    strides.forEach((_, k) => outStrides[k]!.push(0));
  }
  return { shape: outShape, strides: outStrides };
}

export function shapeEquals(a: readonly number[], b: readonly number[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export function fmtShape(shape: readonly number[]): string {
  return `[${shape.join(', ')}]`;
}

