/**
 * scaled_dot_product_attention on the CPU: per (batch, head) and query row, a streaming (online)
 * softmax over blocks of keys, so no [L, S] matrix is materialised. K and V of the current
 * (batch, head) are packed once into dense float64 rows; grouped-query heads read the shared
 * key/value head through the batch map's divisor. Dropout (when p > 0) drops normalised weights,
 * as torch's math path does: the denominator uses every weight, the numerator only the kept ones.
 */
import { attentionGeometry, type BatchMap, scaledDotProductAttention } from '../../ops/defs/nn.js';
import { registerKernel } from '../../ops/registry.js';
import { numel } from '../../tensor/layout.js';
import { defaultGenerator, type Generator } from '../../tensor/random.js';
import { allocOut, readable, writable } from './numeric.js';
import { nativeAttention, nativeAttentionBf16 } from './native/ops.js';

const KEY_BLOCK = 64;

function offsetOf(map: BatchMap, idx: readonly number[]): number {
  let off = 0;
  for (let d = 0; d < idx.length; d++) off += Math.floor(idx[d]! / map.divisors[d]!) * map.strides[d]!;
  return off;
}

registerKernel(scaledDotProductAttention, 'cpu', (ctx, query, key, value, attnMask, dropoutArg, causalArg, scaleArg, _enableGqa, genArg) => {
  // Realize<> widens plain number/boolean args to Tensor | ScalarValue; the meta function checked them.
  const dropoutP = dropoutArg as number;
  const isCausal = causalArg as boolean;
  const scale = scaleArg as number | null;
  const generator = genArg as Generator | null;
  const geo = attentionGeometry(query, key, value, attnMask, dropoutP, isCausal, scale);
  if ((attnMask === null || attnMask === undefined) && dropoutP === 0) {
    const nat = nativeAttention(ctx.out, query, key, value, isCausal, scale) ?? nativeAttentionBf16(ctx.out, query, key, value, isCausal, scale);
    if (nat) return nat;
  }
  const out = allocOut(ctx.out);
  const { batch, l, s, e, ev } = geo;
  const nb = numel(batch);
  if (nb * l * ev === 0) return out;
  const res = writable(out);
  const od = res.data;
  const oRow = out.strides[out.ndim - 2]!;
  const oCol = out.strides[out.ndim - 1]!;
  const ob = batch.length; // output batch dims come first, contiguous
  const oBatchStride = l * oRow;
  if (s === 0) {
    // softmax over no keys times an empty value matrix: zeros, as torch's math path gives.
    for (let i = 0; i < nb * l * ev; i++) od[res.offset + i] = 0;
    res.commit();
    return out;
  }
  const q = readable(query);
  const k = readable(key);
  const v = readable(value);
  const qRowS = query.strides[query.ndim - 2]!;
  const qColS = query.strides[query.ndim - 1]!;
  const kRowS = key.strides[key.ndim - 2]!;
  const kColS = key.strides[key.ndim - 1]!;
  const vRowS = value.strides[value.ndim - 2]!;
  const vColS = value.strides[value.ndim - 1]!;
  const m = attnMask ? readable(attnMask) : null;
  const maskBool = attnMask?.dtype === 'bool';
  const ms = geo.maskStrides;
  const mRowS = ms ? ms[ob]! : 0;
  const mColS = ms ? ms[ob + 1]! : 0;
  const sc = scale ?? 1 / Math.sqrt(e);
  const dropping = dropoutP > 0;
  const keepScale = dropoutP < 1 ? 1 / (1 - dropoutP) : 0;
  const gen = generator ?? defaultGenerator;

  const kPack = new Float64Array(s * e);
  const vPack = new Float64Array(s * ev);
  const qRow = new Float64Array(e);
  const scores = new Float64Array(KEY_BLOCK);
  const acc = new Float64Array(ev);
  const idx = new Array<number>(ob).fill(0);
  let lastK = -1;
  let lastV = -1;

  for (let bi = 0; bi < nb; bi++) {
    const qOff = q.offset + offsetOf(geo.q, idx);
    const kOff = k.offset + offsetOf(geo.k, idx);
    const vOff = v.offset + offsetOf(geo.v, idx);
    let mOff = 0;
    if (m && ms) {
      mOff = m.offset;
      for (let d = 0; d < ob; d++) mOff += idx[d]! * ms[d]!;
    }
    if (kOff !== lastK) {
      for (let j = 0; j < s; j++) for (let t = 0; t < e; t++) kPack[j * e + t] = k.data[kOff + j * kRowS + t * kColS]!;
      lastK = kOff;
    }
    if (vOff !== lastV) {
      for (let j = 0; j < s; j++) for (let t = 0; t < ev; t++) vPack[j * ev + t] = v.data[vOff + j * vRowS + t * vColS]!;
      lastV = vOff;
    }
    const outBase = res.offset + bi * oBatchStride;
    for (let i = 0; i < l; i++) {
      for (let t = 0; t < e; t++) qRow[t] = q.data[qOff + i * qRowS + t * qColS]!;
      acc.fill(0);
      let mx = -Infinity;
      let denom = 0;
      const sEnd = isCausal ? Math.min(s, i + 1) : s;
      for (let j0 = 0; j0 < sEnd; j0 += KEY_BLOCK) {
        const j1 = Math.min(sEnd, j0 + KEY_BLOCK);
        let bmax = -Infinity;
        for (let j = j0; j < j1; j++) {
          let dot = 0;
          const kb = j * e;
          for (let t = 0; t < e; t++) dot += qRow[t]! * kPack[kb + t]!;
          let sv = dot * sc;
          if (m) {
            const mv = m.data[mOff + i * mRowS + j * mColS]!;
            if (maskBool) {
              if (mv === 0) sv = -Infinity;
            } else sv += mv;
          }
          scores[j - j0] = sv;
          if (sv > bmax || Number.isNaN(sv)) bmax = Number.isNaN(bmax) ? bmax : sv;
        }
        if (bmax === -Infinity) continue; // every key in the block is masked out
        const newMax = Number.isNaN(bmax) || bmax > mx ? bmax : mx;
        if (newMax !== mx) {
          const corr = Math.exp(mx - newMax);
          denom *= corr;
          for (let t = 0; t < ev; t++) acc[t]! *= corr;
          mx = newMax;
        }
        for (let j = j0; j < j1; j++) {
          let pj = Math.exp(scores[j - j0]! - mx);
          denom += pj;
          if (dropping) pj = gen.nextDouble() < dropoutP ? 0 : pj * keepScale;
          const vb = j * ev;
          for (let t = 0; t < ev; t++) acc[t]! += pj * vPack[vb + t]!;
        }
      }
      const ob2 = outBase + i * oRow;
      // A row with every key masked has denom 0: 0/0 = NaN, as torch's softmax gives.
      for (let t = 0; t < ev; t++) od[ob2 + t * oCol] = acc[t]! / denom;
    }
    for (let d = ob - 1; d >= 0; d--) {
      idx[d]!++;
      if (idx[d]! < batch[d]!) break;
      idx[d] = 0;
    }
  }
  res.commit();
  return out;
});
