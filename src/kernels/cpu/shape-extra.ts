/**
 * CPU kernels for flip, roll and repeat. All three are one gather: output index i along dim d
 * reads input index map[d][i], so one loop over per-dim index maps serves them (the maps cost
 * O(sum of sizes), the loop one read per output element, for every dtype).
 */
import { flip, repeat, repeatShape, roll, rollPairs, uniqueDims } from '../../ops/defs/shape-extra.js';
import { registerKernel } from '../../ops/registry.js';
import type { OutMeta } from '../../ops/schema.js';
import { contiguousStrides, numel } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { computeArrayFor, denseValues, fromDense } from './numeric.js';

/** Gathers `self` (dense, viewed as `inShape`) into `out` by per-dim maps from output to input index. */
function gatherByMaps(out: OutMeta, self: Tensor, inShape: readonly number[], maps: readonly Int32Array[]): Tensor {
  const src = denseValues(self);
  const dst = computeArrayFor(self.dtype, numel(out.shape));
  const rank = maps.length;
  if (rank === 0) {
    if (dst.length > 0) dst[0] = src[0]!;
    return fromDense(out, dst);
  }
  const inStrides = contiguousStrides(inShape);
  let k = 0;
  const walk = (d: number, base: number): void => {
    const map = maps[d]!;
    const st = inStrides[d]!;
    if (d === rank - 1) {
      for (let i = 0; i < map.length; i++) dst[k++] = src[base + map[i]! * st]!;
      return;
    }
    for (let i = 0; i < map.length; i++) walk(d + 1, base + map[i]! * st);
  };
  if (dst.length > 0) walk(0, 0);
  return fromDense(out, dst);
}

function identity(n: number): Int32Array {
  const m = new Int32Array(n);
  for (let i = 0; i < n; i++) m[i] = i;
  return m;
}

registerKernel(flip, 'cpu', (ctx, self, dims) => {
  const maps = self.shape.map((n) => identity(n));
  for (const d of uniqueDims('flip', dims, self.ndim)) {
    const n = self.shape[d]!;
    maps[d] = maps[d]!.map((i) => n - 1 - i);
  }
  return gatherByMaps(ctx.out, self, self.shape, maps);
});

registerKernel(roll, 'cpu', (ctx, self, shifts, dims) => {
  // roll without dims rolls the flattened tensor: gather over the 1-d view, reshape back.
  const flat = dims === null;
  const shape = flat ? [numel(self.shape)] : [...self.shape];
  const maps = shape.map((n) => identity(n));
  for (const [dim, shift] of rollPairs(self, shifts, dims)) {
    const d = flat ? 0 : dim;
    const n = shape[d]!;
    if (n === 0) continue;
    // out[i] = in[(i - shift) mod n]
    maps[d] = maps[d]!.map((i) => ((((i - shift) % n) + n) % n));
  }
  return gatherByMaps(ctx.out, self, shape, maps);
});

registerKernel(repeat, 'cpu', (ctx, self, repeats) => {
  const outShape = repeatShape(self, repeats);
  const lead = repeats.length - self.ndim;
  const inShape = repeats.map((_, i) => (i < lead ? 1 : self.shape[i - lead]!));
  const maps = outShape.map((n, d) => {
    const m = new Int32Array(n);
    const size = inShape[d]!;
    for (let i = 0; i < n; i++) m[i] = i % size;
    return m;
  });
  return gatherByMaps(ctx.out, self, inShape, maps);
});
