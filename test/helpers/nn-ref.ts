/**
 * Naive float64 references for the nn group, written independently of the kernels: a direct
 * 7-loop convolution, window-by-window pooling, and softmax(QK^T)V with a materialised score matrix.
 * All inputs and outputs are dense row-major (logical order) arrays.
 */

export interface Ref {
  values: number[];
  shape: number[];
}

/** Direct convolution. pad = [top, bottom, left, right]. x [N, C, H, W], w [O, C/groups, kh, kw]. */
export function refConv2d(
  x: readonly number[],
  xShape: readonly number[],
  w: readonly number[],
  wShape: readonly number[],
  bias: readonly number[] | null,
  stride: readonly [number, number],
  pad: readonly [number, number, number, number],
  dilation: readonly [number, number],
  groups: number,
): Ref {
  const [n, c, h, wd] = xShape as [number, number, number, number];
  const [o, cg, kh, kw] = wShape as [number, number, number, number];
  const [sh, sw] = stride;
  const [pt, pb, pl, pr] = pad;
  const [dh, dw] = dilation;
  const oh = Math.floor((h + pt + pb - dh * (kh - 1) - 1) / sh) + 1;
  const ow = Math.floor((wd + pl + pr - dw * (kw - 1) - 1) / sw) + 1;
  const og = o / groups;
  const out: number[] = [];
  for (let b = 0; b < n; b++) {
    for (let oc = 0; oc < o; oc++) {
      const g = Math.floor(oc / og);
      for (let y = 0; y < oh; y++) {
        for (let xx = 0; xx < ow; xx++) {
          let acc = bias ? bias[oc]! : 0;
          for (let ci = 0; ci < cg; ci++) {
            const ic = g * cg + ci;
            for (let i = 0; i < kh; i++) {
              for (let j = 0; j < kw; j++) {
                const ih = y * sh - pt + i * dh;
                const iw = xx * sw - pl + j * dw;
                if (ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
                acc += x[((b * c + ic) * h + ih) * wd + iw]! * w[((oc * cg + ci) * kh + i) * kw + j]!;
              }
            }
          }
          out.push(acc);
        }
      }
    }
  }
  return { values: out, shape: [n, o, oh, ow] };
}

function poolOut(size: number, k: number, p: number, s: number, d: number, ceil: boolean): number {
  // Written from the definition: count window starts; with ceil, a partial last window counts if it
  // starts inside the input or the left padding.
  const span = size + 2 * p - d * (k - 1) - 1;
  let out = ceil ? Math.ceil(span / s) + 1 : Math.floor(span / s) + 1;
  if (ceil && (out - 1) * s >= size + p) out -= 1;
  return out;
}

export interface PoolParams {
  kernel: [number, number];
  stride: [number, number];
  padding: [number, number];
  dilation?: [number, number];
  ceilMode?: boolean;
}

/** Max pooling over [N, C, H, W]; NaN wins; indices are flat h * W + w per plane. */
export function refMaxPool2d(x: readonly number[], xShape: readonly number[], p: PoolParams): Ref & { indices: number[] } {
  const [n, c, h, w] = xShape as [number, number, number, number];
  const [dh, dw] = p.dilation ?? [1, 1];
  const oh = poolOut(h, p.kernel[0], p.padding[0], p.stride[0], dh, p.ceilMode ?? false);
  const ow = poolOut(w, p.kernel[1], p.padding[1], p.stride[1], dw, p.ceilMode ?? false);
  const values: number[] = [];
  const indices: number[] = [];
  for (let b = 0; b < n; b++) {
    for (let ch = 0; ch < c; ch++) {
      for (let y = 0; y < oh; y++) {
        for (let xx = 0; xx < ow; xx++) {
          let best = -Infinity;
          let bestIdx = -1;
          let sawNaN = false;
          for (let i = 0; i < p.kernel[0]; i++) {
            for (let j = 0; j < p.kernel[1]; j++) {
              const ih = y * p.stride[0] - p.padding[0] + i * dh;
              const iw = xx * p.stride[1] - p.padding[1] + j * dw;
              if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
              const v = x[((b * c + ch) * h + ih) * w + iw]!;
              if (bestIdx < 0) bestIdx = ih * w + iw;
              if (Number.isNaN(v)) {
                sawNaN = true;
                best = NaN;
                bestIdx = ih * w + iw;
              } else if (!sawNaN && v > best) {
                best = v;
                bestIdx = ih * w + iw;
              }
            }
          }
          values.push(best);
          indices.push(bestIdx);
        }
      }
    }
  }
  return { values, indices, shape: [n, c, oh, ow] };
}

/** Average pooling with torch's divisor rules (padded window size, or only real elements). */
export function refAvgPool2d(
  x: readonly number[],
  xShape: readonly number[],
  p: PoolParams & { countIncludePad?: boolean; divisorOverride?: number },
): Ref {
  const [n, c, h, w] = xShape as [number, number, number, number];
  const oh = poolOut(h, p.kernel[0], p.padding[0], p.stride[0], 1, p.ceilMode ?? false);
  const ow = poolOut(w, p.kernel[1], p.padding[1], p.stride[1], 1, p.ceilMode ?? false);
  const values: number[] = [];
  for (let b = 0; b < n; b++) {
    for (let ch = 0; ch < c; ch++) {
      for (let y = 0; y < oh; y++) {
        for (let xx = 0; xx < ow; xx++) {
          let sum = 0;
          let real = 0;
          let padded = 0;
          for (let i = 0; i < p.kernel[0]; i++) {
            for (let j = 0; j < p.kernel[1]; j++) {
              const ih = y * p.stride[0] - p.padding[0] + i;
              const iw = xx * p.stride[1] - p.padding[1] + j;
              // Positions beyond the padded input (ceil-mode overhang) do not count at all.
              if (ih >= h + p.padding[0] || iw >= w + p.padding[1]) continue;
              padded++;
              if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
              real++;
              sum += x[((b * c + ch) * h + ih) * w + iw]!;
            }
          }
          const div = p.divisorOverride ?? ((p.countIncludePad ?? true) ? padded : real);
          values.push(sum / div);
        }
      }
    }
  }
  return { values, shape: [n, c, oh, ow] };
}

/** Row-major index of `idx` in a shape broadcast to `target` (size-1 dims read index 0). */
function bIndex(shape: readonly number[], target: readonly number[], idx: readonly number[]): number {
  let flat = 0;
  const off = target.length - shape.length;
  for (let d = 0; d < shape.length; d++) flat = flat * shape[d]! + (shape[d] === 1 ? 0 : idx[off + d]!);
  return flat;
}

export interface AttnInput {
  values: readonly number[];
  shape: readonly number[];
}

/**
 * softmax(scale * Q K^T + mask) V per batch element, with the [L, S] matrix materialised. Batch dims
 * are those before [-2]; the head dim (-3) of K/V maps query head h to h / (Hq / Hkv).
 */
export function refAttention(
  q: AttnInput,
  k: AttnInput,
  v: AttnInput,
  opts: { mask?: AttnInput & { bool: boolean }; causal?: boolean; scale?: number } = {},
): Ref {
  const qb = q.shape.slice(0, -2);
  const l = q.shape[q.shape.length - 2]!;
  const e = q.shape[q.shape.length - 1]!;
  const s = k.shape[k.shape.length - 2]!;
  const ev = v.shape[v.shape.length - 1]!;
  const scale = opts.scale ?? 1 / Math.sqrt(e);
  const nb = qb.reduce((a, b) => a * b, 1);
  const out: number[] = [];
  const idx = new Array<number>(qb.length).fill(0);
  const kvIndex = (t: AttnInput, bidx: number[]): number => {
    const tb = t.shape.slice(0, -2);
    const mapped = [...bidx];
    if (tb.length >= 1 && qb.length >= 1) {
      const hq = qb[qb.length - 1]!;
      const hk = tb[tb.length - 1]!;
      if (hk !== 1) mapped[mapped.length - 1] = Math.floor(bidx[bidx.length - 1]! / (hq / hk));
    }
    let flat = 0;
    const off = qb.length - tb.length;
    for (let d = 0; d < tb.length; d++) flat = flat * tb[d]! + (tb[d] === 1 ? 0 : mapped[off + d]!);
    return flat;
  };
  for (let bi = 0; bi < nb; bi++) {
    const qOff = bi * l * e;
    const kOff = kvIndex(k, idx) * s * e;
    const vOff = kvIndex(v, idx) * s * ev;
    const scores: number[][] = [];
    for (let i = 0; i < l; i++) {
      const row: number[] = [];
      for (let j = 0; j < s; j++) {
        let dot = 0;
        for (let t = 0; t < e; t++) dot += q.values[qOff + i * e + t]! * k.values[kOff + j * e + t]!;
        let sc = dot * scale;
        if (opts.causal && j > i) sc = -Infinity;
        if (opts.mask) {
          const mv = opts.mask.values[bIndex(opts.mask.shape, [...qb, l, s], [...idx, i, j])]!;
          if (opts.mask.bool) sc = mv ? sc : -Infinity;
          else sc += mv;
        }
        row.push(sc);
      }
      scores.push(row);
    }
    for (let i = 0; i < l; i++) {
      const row = scores[i]!;
      const mx = Math.max(...row);
      const ex = row.map((x) => Math.exp(x - mx));
      const sum = ex.reduce((a, b) => a + b, 0);
      for (let t = 0; t < ev; t++) {
        let acc = 0;
        for (let j = 0; j < s; j++) acc += (ex[j]! / sum) * v.values[vOff + j * ev + t]!;
        out.push(acc);
      }
    }
    for (let d = qb.length - 1; d >= 0; d--) {
      idx[d]!++;
      if (idx[d]! < qb[d]!) break;
      idx[d] = 0;
    }
  }
  return { values: out, shape: [...qb, l, ev] };
}
