/**
 * Views the GEMM kernels of every accelerator take of their operands (the host's helpers, which
 * the vendor folders may use): a batched [..., R, K] operand folded into one 2-D matrix.
 */
import { numel } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';

/** `t` [..., R, K] as a 2-D [rows, K] view when its leading dims collapse into the row stride. */
export function foldRows(t: Tensor, rows: number, K: number): Tensor | null {
  if (t.ndim < 2) return null;
  const sk = t.strides[t.ndim - 1]!;
  const sr = t.strides[t.ndim - 2]!;
  let expected = sr * t.shape[t.ndim - 2]!;
  for (let d = t.ndim - 3; d >= 0; d--) {
    if (t.shape[d] === 1) continue;
    if (t.strides[d] !== expected) return null;
    expected = t.strides[d]! * t.shape[d]!;
  }
  if (numel(t.shape.slice(0, -1)) !== rows) return null;
  return new Tensor(t.storage, t.dtype, [rows, K], [sr, sk], t.offset);
}
