/**
 * Values of the webgpu kernels issue #20 added (scans, sorting, any/all, var/std/logsumexp, the
 * norms, gather/scatter/indexPut, maskedFill, tril/triu, pooling, conv2d, dropout) against the
 * CPU: every case of webgpu-ops-cases.ts runs on webgpu with its inputs' layouts kept, and on the
 * CPU with floating inputs widened to float64 (the reference rounded to each result's dtype, whose
 * dtype and shape must match the CPU op's on the unwidened inputs). Indices, integer results and
 * copies compare exactly. Then the backward of these ops on webgpu against the same graph on the
 * CPU in float64, the scatter conventions (the last write wins; float sums may reorder), dropout's
 * masks (the CPU's, from one seed), and errors that name the op and dtype.
 * Needs a real adapter (Dawn on a GPU, or SwiftShader's Vulkan on a CPU): skips without one.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import { isFloating } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { tolFor } from './helpers/assert.js';
import { sameLayoutOnWebgpu, webgpuSkipReason } from './helpers/webgpu.js';
import { make, opCases } from './webgpu-ops-cases.js';

const skip = webgpuSkipReason();

const list = (r: unknown): Tensor[] => {
  if (Array.isArray(r)) return r as Tensor[];
  if (r && typeof r === 'object' && 'values' in r && 'indices' in r) return [(r as { values: Tensor }).values, (r as { indices: Tensor }).indices];
  return [r as Tensor];
};

/** Element-wise closeness (NaN matches NaN, infinities exactly); the first mismatch or null. */
function mismatch(got: Tensor, want: Tensor, atol: number, rtol: number): string | null {
  if (got.shape.join(',') !== want.shape.join(',')) return `shape [${got.shape.join(', ')}], want [${want.shape.join(', ')}]`;
  const g = got.to('cpu').toFlatArray() as number[];
  const w = want.toFlatArray() as number[];
  for (let i = 0; i < w.length; i++) {
    const a = Number(g[i]);
    const b = Number(w[i]);
    if (Number.isNaN(b) ? Number.isNaN(a) : a === b || (Number.isFinite(b) && Math.abs(a - b) <= atol + rtol * Math.abs(b))) continue;
    return `element ${i}: got ${a}, want ${b} (atol ${atol}, rtol ${rtol})`;
  }
  return null;
}

/** A result dtype's tolerance: its own, doubled for halves (one rounding of an f32 result either side). */
function tolerance(dtype: string): { atol: number; rtol: number } {
  if (dtype === 'float32') return { atol: 2e-5, rtol: 1e-5 };
  const t = tolFor(dtype);
  return { atol: 2 * t.atol, rtol: 2 * t.rtol };
}

const fresh = (t: Tensor): Tensor => t.clone();
const widened = (t: Tensor): Tensor => (isFloating(t.dtype) && t.dtype !== 'float64' ? t.to('float64') : t.clone());

test('webgpu kernels match the CPU (float64 reference) on every case: dtypes, strided/transposed/channels_last, ties, NaN, empty, long rows', { skip }, () => {
  const failures: string[] = [];
  let ran = 0;
  for (const c of opCases()) {
    try {
      const got = list(c.run(...c.inputs.map(sameLayoutOnWebgpu)));
      const plain = list(c.run(...c.inputs.map(fresh)));
      const want = list(c.run(...c.inputs.map(widened)));
      got.forEach((g, k) => {
        const p = plain[k]!;
        if (g.device.type !== 'webgpu') failures.push(`${c.label} result ${k}: on ${g.device.toString()}`);
        if (g.dtype !== p.dtype) failures.push(`${c.label} result ${k}: dtype ${g.dtype}, the CPU's ${p.dtype}`);
        const exact = c.exact === true || (Array.isArray(c.exact) && c.exact.includes(k)) || !isFloating(g.dtype);
        const { atol, rtol } = exact ? { atol: 0, rtol: 0 } : (c.tol ?? tolerance(g.dtype));
        const m = mismatch(g, want[k]!.to(g.dtype), atol, rtol);
        if (m) failures.push(`${c.label} result ${k}: ${m}`);
      });
      ran++;
    } catch (e) {
      failures.push(`${c.label}: ${(e as Error).message.split('\n')[0]}`);
    }
  }
  assert.ok(ran > 200, `only ${ran} cases ran`);
  assert.deepEqual(failures, [], `${failures.length} mismatches:\n${failures.join('\n')}`);
});

test('dropout on webgpu draws the CPU mask from the same seed (op and inside attention)', { skip }, () => {
  const x = make([4, 33], 'float32', 'strided');
  const run = (device: 'cpu' | 'webgpu'): Tensor => {
    kiln.manualSeed(5);
    return kiln.dropout(device === 'cpu' ? x : sameLayoutOnWebgpu(x), 0.3, true);
  };
  assert.equal(mismatch(run('webgpu'), run('cpu'), 0, 0), null);
  const [q, k, v] = [make([2, 3, 5, 4]), make([2, 3, 6, 4]), make([2, 3, 6, 4])];
  for (const isCausal of [false, true]) {
    const attend = (device: 'cpu' | 'webgpu'): Tensor => {
      kiln.manualSeed(6);
      const on = (t: Tensor): Tensor => (device === 'cpu' ? t : sameLayoutOnWebgpu(t));
      return kiln.scaledDotProductAttention(on(q), on(k), on(v), { dropoutP: 0.25, isCausal });
    };
    assert.equal(mismatch(attend('webgpu'), attend('cpu'), 1e-5, 1e-5), null, `causal ${isCausal}`);
  }
});

test('webgpu index conventions: the last write wins, out-of-range indices write nothing (no readback)', { skip }, () => {
  // Every write goes to element 0; the last one in index order is src's last element.
  const src = make([64]);
  const got = kiln.scatter(kiln.zeros([3]).to('webgpu'), 0, kiln.zeros([64], { dtype: 'int64' }).to('webgpu'), sameLayoutOnWebgpu(src));
  assert.deepEqual(got.to('cpu').toFlatArray(), [src.toFlatArray()[63], 0, 0]);
  // An index past the end reads zero (gather) and writes nothing (scatter), where the CPU raises.
  const i = kiln.tensor([1, 7], { dtype: 'int64' }).to('webgpu');
  assert.deepEqual(kiln.gather(kiln.tensor([5, 6]).to('webgpu'), 0, i).to('cpu').toFlatArray(), [6, 0]);
  assert.deepEqual(kiln.scatter(kiln.zeros([2]).to('webgpu'), 0, i, 4).to('cpu').toFlatArray(), [0, 4]);
});

test('webgpu kernels name the op and the dtype they do not take', { skip }, () => {
  const wide = kiln.tensor([3, 1, 2], { dtype: 'int64' }).to('webgpu');
  assert.throws(() => kiln.sort(wide), /sort: .*int64/);
  assert.throws(() => kiln.scatterAdd(wide, 0, wide, wide), /scatterAdd: .*int64/);
  assert.throws(() => kiln.cumsum(kiln.tensor([1, 2], { dtype: 'float64' }).to('webgpu'), 0), /cumsum: .*float64/);
});
