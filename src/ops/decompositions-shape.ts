/**
 * Decomposition-table entries for the data-movement ops of defs/shape-extra.ts: flip as
 * indexSelect with a descending arange, roll as a cat of two slices per dim, repeat as
 * unsqueeze + expand + reshape. They only move elements, so unlike the float32-only entries of
 * decompositions.ts they apply to every dtype; they are what cuda (which has no kernels for these
 * ops) runs eagerly, and what the compiler rewrites the ops into.
 */
import { defineDecomposition, single } from './decompose.js';
import { repeatShape, rollPairs, uniqueDims } from './defs/shape-extra.js';
import './defs/creation.js';
import './defs/indexing.js';
import './defs/views.js';


defineDecomposition(
  'flip',
  single((b, args) => {
    let x = args[0];
    if (!b.isValue(x)) return null;
    const m = b.meta(x);
    for (const d of uniqueDims('flip', args[1] as number[], m.shape.length)) {
      const n = m.shape[d]!;
      if (n <= 1) continue;
      const ix = b.op('arange', n - 1, -1, -1, 'int64', m.device);
      x = b.op('indexSelect', x, d, ix);
    }
    // A flip of nothing (or of size-1 dims) is still a new tensor, as the kernel's output is.
    return b.op('clone', x, null);
  }),
);

defineDecomposition(
  'roll',
  single((b, args) => {
    const x0 = args[0];
    if (!b.isValue(x0)) return null;
    const m = b.meta(x0);
    const dims = args[2] as number[] | null;
    let x = dims === null ? b.op('reshape', x0, [-1]) : x0;
    const shape = b.meta(x).shape;
    for (const [dim, shift] of rollPairs(m, args[1] as number[], dims)) {
      const d = dim < 0 ? dim + shape.length : dim;
      const n = shape[d]!;
      if (n === 0) continue;
      const s = ((shift % n) + n) % n;
      if (s === 0) continue;
      // out = cat(x[n - s:], x[:n - s])
      x = b.op('cat', [b.op('slice', x, d, n - s, null, 1), b.op('slice', x, d, 0, n - s, 1)], d);
    }
    if (dims === null) x = b.op('reshape', x, [...m.shape]);
    return b.op('clone', x, null);
  }),
);

defineDecomposition(
  'repeat',
  single((b, args) => {
    const x = args[0];
    if (!b.isValue(x)) return null;
    const m = b.meta(x);
    const repeats = args[1] as number[];
    const outShape = repeatShape(m, repeats);
    const lead = repeats.length - m.shape.length;
    // [s0, s1, ...] -> [1, s0, 1, s1, ...] -> expand to [r0, s0, r1, s1, ...] -> [r0*s0, r1*s1, ...]
    const inShape = repeats.map((_, i) => (i < lead ? 1 : m.shape[i - lead]!));
    const interleaved = inShape.flatMap((s) => [1, s]);
    const big = repeats.flatMap((r, i) => [r, inShape[i]!]);
    const v = b.op('reshape', x, interleaved);
    return b.op('contiguous', b.op('reshape', b.op('expand', v, big), outShape), 'contiguous');
  }),
);
