/**
 * Aliasing rules for ops that write a tensor argument (schema `mutated`), as PyTorch applies them
 * (aten/src/ATen/MemoryOverlap.cpp), checked once in the dispatcher so every in-place op, copy_ and
 * write-into op gets them on every device without touching kernels:
 *   internal overlap  a written tensor with two indices on one element (expand, stride 0) is an
 *                     error: the result would depend on the kernel's write order.
 *   partial overlap   a read input that shares some, but not exactly the same, memory as a written
 *                     argument (x.add_(x.t())) is cloned first, so the op sees the values from
 *                     before the write. The identical view (x.add_(x)) is fine elementwise and is
 *                     not copied; disjoint views of one storage (row slices) are not copied either.
 * The checks read metadata only, so the common path (contiguous output, no shared storage) costs
 * a stride walk and a storage comparison per tensor argument.
 */
import { itemSize } from '../tensor/dtype.js';
import { storageSpan, Tensor } from '../tensor/tensor.js';
import { provablyDisjoint } from './library/overlap.js';

export type OverlapStatus = 'yes' | 'no' | 'tooHard';

/** Above this many elements an undecided layout is 'tooHard' (allowed), as in PyTorch. */
const EXACT_LIMIT = 1 << 16;

/**
 * Whether two indices of `t` reach one element. PyTorch's check: a dim of size > 1 with stride 0 is
 * 'yes'; non-overlapping-and-dense is 'no'; anything else is 'tooHard' there. Here a gapped layout
 * (slices, transposes of slices) is also proven 'no' when, with dims sorted by |stride|, each stride
 * exceeds the reach of the smaller ones; small remaining cases are decided by visiting elements.
 */
export function internalOverlap(shape: readonly number[], strides: readonly number[]): OverlapStatus {
  const rank = shape.length;
  // An empty tensor writes nothing, whatever its strides.
  for (let d = 0; d < rank; d++) if (shape[d] === 0) return 'no';
  let n = 1;
  let sorted = true;
  let prevStride = 0;
  let reach = 0; // elements spanned by the dims seen so far, minus one
  for (let d = rank - 1; d >= 0; d--) {
    const size = shape[d]!;
    n *= size;
    if (size === 1) continue;
    const s = Math.abs(strides[d]!);
    if (s === 0) return 'yes';
    // Row-major walk: innermost first. Strides increasing and each beyond the reach below is the
    // usual case (contiguous, slices, narrow), and proves that no two indices collide.
    if (s < prevStride || s <= reach) sorted = false;
    prevStride = s;
    reach += (size - 1) * s;
  }
  if (sorted || n <= 1) return 'no';
  // Other orders (transposes): sort the dims and redo the reach test.
  const dims: [number, number][] = [];
  for (let d = 0; d < rank; d++) if (shape[d]! > 1) dims.push([Math.abs(strides[d]!), shape[d]!]);
  dims.sort((a, b) => a[0] - b[0]);
  reach = 0;
  let proven = true;
  for (const [s, size] of dims) {
    if (s <= reach) {
      proven = false;
      break;
    }
    reach += (size - 1) * s;
  }
  if (proven) return 'no';
  if (n > EXACT_LIMIT) return 'tooHard';
  let span = 1;
  for (const [s, size] of dims) span += (size - 1) * s;
  const seen = new Uint8Array(span);
  const idx = new Array<number>(dims.length).fill(0);
  let off = 0;
  for (let i = 0; i < n; i++) {
    if (seen[off] === 1) return 'yes';
    seen[off] = 1;
    for (let d = 0; d < dims.length; d++) {
      idx[d]!++;
      off += dims[d]![0];
      if (idx[d]! < dims[d]![1]) break;
      off -= dims[d]![0] * dims[d]![1];
      idx[d] = 0;
    }
  }
  return 'no';
}

/** PyTorch's error for a written tensor with internal overlap, naming the op and the argument. */
export function assertNoInternalOverlap(op: string, arg: string, shape: readonly number[], strides: readonly number[]): void {
  if (internalOverlap(shape, strides) !== 'yes') return;
  throw new Error(
    `${op}: unsupported operation: more than one element of the written-to tensor refers to a single memory location ` +
      `(argument '${arg}', shape [${shape.join(', ')}], strides [${strides.join(', ')}]). Please clone() the tensor before performing the operation.`,
  );
}

/**
 * Whether read input `b` shares memory with written tensor `a` without being the very same view.
 * Byte ranges are compared (views of one storage may differ in dtype); ranges that meet but are
 * proven element-disjoint (column slices of one matrix) do not count.
 */
export function partiallyOverlaps(a: Tensor, b: Tensor): boolean {
  if (a.storage !== b.storage) return false;
  if (a.offset === b.offset && a.dtype === b.dtype && sameList(a.shape, b.shape) && sameList(a.strides, b.strides)) return false;
  const as = storageSpan(a.shape, a.strides);
  const bs = storageSpan(b.shape, b.strides);
  if (as === 0 || bs === 0) return false;
  const ai = itemSize(a.dtype);
  const bi = itemSize(b.dtype);
  const lo = Math.max(a.offset * ai, b.offset * bi);
  const hi = Math.min((a.offset + as) * ai, (b.offset + bs) * bi);
  if (lo >= hi) return false;
  return !(ai === bi && provablyDisjoint(a, b));
}

function sameList(x: readonly number[], y: readonly number[]): boolean {
  if (x === y) return true;
  if (x.length !== y.length) return false;
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  return true;
}
