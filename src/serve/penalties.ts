/**
 * Repetition, presence and frequency penalties on a [B, vocab] float32 logits tensor, on its device.
 * transformers' repetition penalty over prompt and output ids (logit < 0 ? logit * p : logit / p),
 * then the OpenAI penalties over output ids (logit -= presence * (count > 0) + frequency * count).
 * The host builds, per row, the distinct ids it penalises with their factor and offset ([B, L]
 * tensors, L the longest row); the device gathers those logits, applies both formulas and scatters
 * them back, so the vocabulary-sized tensor never leaves the device. Rows are padded with a repeat
 * of their first entry (the same value written twice) or with id 0 at factor 1 and offset 0, which
 * leaves the logit unchanged.
 */
import { tensor } from '../api/data.js';
import { gather, scatter } from '../api/indexing.js';
import { div, lt, mul, sub, where } from '../api/pointwise.js';
import type { Tensor } from '../tensor/tensor.js';
import type { SamplingRow } from './sampling-params.js';

/** Whether the row's penalties change any logit. */
export function hasPenalties(row: SamplingRow): boolean {
  const p = row.params;
  return (p.repetitionPenalty ?? 1) !== 1 || (p.presencePenalty ?? 0) !== 0 || (p.frequencyPenalty ?? 0) !== 0;
}

/** `x` with each row's penalties applied (a new tensor), or `x` itself when no row has any. */
export function applyPenalties(x: Tensor, rows: readonly SamplingRow[]): Tensor {
  const perRow: { ids: number[]; factor: number; offsets: number[] }[] = [];
  let width = 0;
  for (const row of rows) {
    const ids: number[] = [];
    const offsets: number[] = [];
    const factor = row.params.repetitionPenalty ?? 1;
    if (hasPenalties(row)) {
      const presence = row.params.presencePenalty ?? 0;
      const frequency = row.params.frequencyPenalty ?? 0;
      const counts = new Map<number, number>();
      for (const id of row.outputIds) counts.set(id, (counts.get(id) ?? 0) + 1);
      const seen = new Set<number>();
      // The repetition penalty reaches prompt ids too; the OpenAI ones only output ids.
      const candidates = factor !== 1 ? [...row.promptIds, ...row.outputIds] : row.outputIds;
      for (const id of candidates) {
        if (seen.has(id)) continue;
        seen.add(id);
        const c = counts.get(id) ?? 0;
        ids.push(id);
        offsets.push(presence * (c > 0 ? 1 : 0) + frequency * c);
      }
    }
    perRow.push({ ids, factor, offsets });
    width = Math.max(width, ids.length);
  }
  if (width === 0) return x;
  const idx: number[][] = [];
  const fac: number[][] = [];
  const off: number[][] = [];
  for (const r of perRow) {
    const n = r.ids.length;
    idx.push(Array.from({ length: width }, (_, j) => (n === 0 ? 0 : r.ids[j < n ? j : 0]!)));
    fac.push(new Array<number>(width).fill(n === 0 ? 1 : r.factor));
    off.push(Array.from({ length: width }, (_, j) => (n === 0 ? 0 : r.offsets[j < n ? j : 0]!)));
  }
  const device = x.device;
  const index = tensor(idx, { dtype: 'int64', device });
  const factor = tensor(fac, { dtype: 'float32', device });
  const offset = tensor(off, { dtype: 'float32', device });
  const g = gather(x, 1, index);
  const penalised = sub(where(lt(g, 0), mul(g, factor), div(g, factor)), offset);
  return scatter(x, 1, index, penalised);
}
