/** CPU kernel for nonzero: one row-major scan writing each nonzero element's multi-index. */
import { nonzero } from '../../ops/defs/nonzero.js';
import { registerKernel } from '../../ops/registry.js';
import { fromDense } from './numeric.js';

registerKernel(nonzero, 'cpu', (ctx, self) => {
  const rank = self.ndim;
  const n = ctx.out.shape[0]!;
  const out = new Float64Array(n * rank);
  const vals = self.toFlatArray();
  const idx = new Array<number>(rank).fill(0);
  let row = 0;
  for (let i = 0; i < vals.length; i++) {
    if (vals[i] !== 0) {
      for (let d = 0; d < rank; d++) out[row * rank + d] = idx[d]!;
      row++;
    }
    // Advance the row-major multi-index.
    for (let d = rank - 1; d >= 0; d--) {
      if (++idx[d]! < self.shape[d]!) break;
      idx[d] = 0;
    }
  }
  return fromDense(ctx.out, out);
});
