/**
 * The native paged-attention kernel (kernels/cpu/native/paged.ts) that llm.pagedAttention runs on
 * the native cpu path: float32 and bfloat16, grouped-query heads, ragged lengths across block
 * boundaries, a zero-length row, head sizes that leave a vector tail, a single-row decode; against
 * a float64 loop over the same (dtype-rounded) values. Each case asserts the native kernel ran;
 * bad block ids and lengths stay RangeErrors. Skips where no C compiler works.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { llm } from '../src/index.js';
import { probeToolchain, setCpuPath } from '../src/kernels/cpu/native/index.js';
import { nativePagedAttentionCalls, nativePagedSplitCalls } from '../src/kernels/cpu/native/paged.js';
import { makeTensor, randomInts, randomValues } from './helpers/make.js';

const probe = probeToolchain();
const skip = probe.ok ? false : `native cpu path unavailable: ${probe.reason}`;
const bf16 = (x: number): number => kiln.tensor([x], { dtype: 'bfloat16' }).toFlatArray()[0]!;

function reference(q: number[], k: number[], v: number[], tables: number[], lens: number[], B: number, H: number, Hkv: number, D: number, BS: number, M: number, scale: number): number[] {
  const out: number[] = [];
  const at = (b: number, t: number, kh: number): number => ((tables[b * M + Math.floor(t / BS)]! * BS + (t % BS)) * Hkv + kh) * D;
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const kh = Math.floor(h / (H / Hkv));
      const s: number[] = [];
      for (let t = 0; t < lens[b]!; t++) {
        let d0 = 0;
        for (let d = 0; d < D; d++) d0 += q[(b * H + h) * D + d]! * k[at(b, t, kh) + d]!;
        s.push(d0 * scale);
      }
      const mx = Math.max(...s);
      const w = s.map((x) => Math.exp(x - mx));
      const z = w.reduce((x, y) => x + y, 0);
      for (let d = 0; d < D; d++) {
        let o = 0;
        for (let t = 0; t < w.length; t++) o += w[t]! * v[at(b, t, kh) + d]!;
        out.push(w.length ? o / z : 0);
      }
    }
  }
  return out;
}

test('native pagedAttention matches float64: float32 and bfloat16, GQA, ragged rows, head-size tails', { skip }, () => {
  setCpuPath('native');
  try {
    const cases = [
      { B: 4, H: 8, Hkv: 2, D: 64, NB: 40, BS: 16, M: 10, lens: [150, 1, 0, 37] },
      { B: 1, H: 16, Hkv: 8, D: 128, NB: 12, BS: 16, M: 6, lens: [93] },
      { B: 2, H: 6, Hkv: 3, D: 40, NB: 9, BS: 4, M: 5, lens: [17, 20] },
      { B: 3, H: 2, Hkv: 1, D: 7, NB: 6, BS: 3, M: 4, lens: [5, 12, 1] },
    ];
    for (const [ci, c] of cases.entries()) {
      for (const dtype of ['float32', 'bfloat16'] as const) {
        const round = dtype === 'bfloat16' ? bf16 : (x: number): number => Math.fround(x);
        const q = randomValues(c.B * c.H * c.D, 3 + ci, -1, 1).map(round);
        const k = randomValues(c.NB * c.BS * c.Hkv * c.D, 5 + ci, -1, 1).map(round);
        const v = randomValues(c.NB * c.BS * c.Hkv * c.D, 7 + ci, -1, 1).map(round);
        const tables = randomInts(c.B * c.M, 11 + ci, 0, c.NB);
        const scale = 1 / Math.sqrt(c.D);
        const before = nativePagedAttentionCalls();
        const out = llm.pagedAttention(makeTensor(q, [c.B, c.H, c.D], dtype), makeTensor(k, [c.NB, c.BS, c.Hkv, c.D], dtype), makeTensor(v, [c.NB, c.BS, c.Hkv, c.D], dtype),
          makeTensor(tables, [c.B, c.M], 'int32'), makeTensor(c.lens, [c.B], 'int64'), scale);
        assert.equal(nativePagedAttentionCalls() - before, 1, 'the native kernel ran');
        assert.equal(out.dtype, dtype);
        const want = reference(q, k, v, tables, c.lens, c.B, c.H, c.Hkv, c.D, c.BS, c.M, scale);
        const got = out.toFlatArray();
        for (let i = 0; i < want.length; i++) {
          const tol = dtype === 'float32' ? 2e-6 : 2 ** -8 * Math.abs(want[i]!) + 1e-6;
          assert.ok(Math.abs(got[i]! - want[i]!) <= tol, `case ${ci} ${dtype} [${i}]: got ${got[i]}, expected ${want[i]}`);
        }
      }
    }
  } finally {
    setCpuPath(undefined);
  }
});

test('native pagedAttention: bad block ids and lengths are RangeErrors', { skip }, () => {
  setCpuPath('native');
  try {
    const kc = kiln.zeros([2, 4, 1, 8]);
    const q = kiln.ones([1, 2, 8]);
    assert.throws(() => llm.pagedAttention(q, kc, kc, makeTensor([1, 5], [1, 2], 'int32'), makeTensor([6], [1], 'int32'), 1), /llm\.pagedAttention: blockTables\[0, 1\] = 5 is outside/);
    assert.throws(() => llm.pagedAttention(q, kc, kc, makeTensor([0, 1], [1, 2], 'int32'), makeTensor([9], [1], 'int32'), 1), /llm\.pagedAttention: contextLens\[0\] = 9/);
  } finally {
    setCpuPath(undefined);
  }
});

test('native pagedAttention, key ranges split across threads (KILN_CPU_PAGED_SPLIT), rows widened in registers or copied (KILN_CPU_PAGED_VEC): float64 agreement at long contexts, ragged and empty rows, a NaN key; the same values as one range per item', { skip }, async () => {
  const { setNativeThreads } = await import('../src/kernels/cpu/native/threads.js');
  const { setOption } = await import('../src/runtime/config.js');
  setCpuPath('native');
  // 8 threads (more than this machine may have: correctness only) and few (sequence, kv head)
  // items, so the kernel splits each kv head's keys into ranges (at least 128 keys each); every case
  // reads more than the 256 KiB under which the call runs on one thread.
  setNativeThreads(8);
  try {
    const cases = [
      { B: 1, H: 16, Hkv: 8, D: 128, NB: 40, BS: 16, M: 40, lens: [613] },
      { B: 2, H: 4, Hkv: 1, D: 128, NB: 90, BS: 8, M: 90, lens: [700, 0] },
      { B: 2, H: 2, Hkv: 2, D: 96, NB: 70, BS: 5, M: 70, lens: [129, 300] },
    ];
    for (const [ci, c] of cases.entries()) {
      for (const dtype of ['float32', 'bfloat16'] as const) {
        const round = dtype === 'bfloat16' ? bf16 : (x: number): number => Math.fround(x);
        const q = randomValues(c.B * c.H * c.D, 30 + ci, -1, 1).map(round);
        const k = randomValues(c.NB * c.BS * c.Hkv * c.D, 40 + ci, -1, 1).map(round);
        const v = randomValues(c.NB * c.BS * c.Hkv * c.D, 50 + ci, -1, 1).map(round);
        const tables = randomInts(c.B * c.M, 60 + ci, 0, c.NB);
        const scale = 1 / Math.sqrt(c.D);
        const run = (split: boolean, vec = true): number[] => {
          setOption('KILN_CPU_PAGED_SPLIT', split);
          setOption('KILN_CPU_PAGED_VEC', vec);
          const before = nativePagedAttentionCalls();
          const splitBefore = nativePagedSplitCalls();
          const out = llm.pagedAttention(makeTensor(q, [c.B, c.H, c.D], dtype), makeTensor(k, [c.NB, c.BS, c.Hkv, c.D], dtype), makeTensor(v, [c.NB, c.BS, c.Hkv, c.D], dtype),
            makeTensor(tables, [c.B, c.M], 'int32'), makeTensor(c.lens, [c.B], 'int32'), scale);
          assert.equal(nativePagedAttentionCalls() - before, 1, 'the native kernel ran');
          assert.equal(nativePagedSplitCalls() - splitBefore, split ? 1 : 0, `case ${ci}: the keys were ${split ? '' : 'not '}split`);
          return out.toFlatArray();
        };
        const want = reference(q, k, v, tables, c.lens, c.B, c.H, c.Hkv, c.D, c.BS, c.M, scale);
        const split = run(true);
        const whole = run(false);
        // The rows copied to float32 first (KILN_CPU_PAGED_VEC off), split and not.
        const copied = [run(true, false), run(false, false)];
        for (let i = 0; i < want.length; i++) {
          const tol = dtype === 'float32' ? 2e-6 : 2 ** -8 * Math.abs(want[i]!) + 1e-6;
          assert.ok(Math.abs(split[i]! - want[i]!) <= tol, `case ${ci} ${dtype} split [${i}]: got ${split[i]}, expected ${want[i]}`);
          assert.ok(Math.abs(split[i]! - whole[i]!) <= tol, `case ${ci} ${dtype} [${i}]: split ${split[i]} vs one range ${whole[i]}`);
          for (const c2 of copied) assert.ok(Math.abs(c2[i]! - want[i]!) <= tol, `case ${ci} ${dtype} rows copied [${i}]: got ${c2[i]}, expected ${want[i]}`);
        }
      }
    }
    // A NaN key in the last range makes its query rows NaN (as the unsplit kernel), not dropped.
    const c = { H: 2, Hkv: 1, D: 128, NB: 40, BS: 8 };
    const k = randomValues(c.NB * c.BS * c.D, 71, -1, 1);
    const tables = Array.from({ length: c.NB }, (_, i) => i);
    k[(300 * c.D) + 3] = Number.NaN;
    setOption('KILN_CPU_PAGED_SPLIT', true);
    const out = llm.pagedAttention(makeTensor(randomValues(c.H * c.D, 72, -1, 1), [1, c.H, c.D], 'float32'), makeTensor(k, [c.NB, c.BS, c.Hkv, c.D], 'float32'),
      makeTensor(randomValues(c.NB * c.BS * c.D, 73, -1, 1), [c.NB, c.BS, c.Hkv, c.D], 'float32'), makeTensor(tables, [1, c.NB], 'int32'), makeTensor([310], [1], 'int32'), 0.3).toFlatArray();
    assert.ok(out.every((x) => Number.isNaN(x)), `every output of a row with a NaN score is NaN, got ${out.slice(0, 4).join(', ')}`);
  } finally {
    setOption('KILN_CPU_PAGED_SPLIT', undefined);
    setOption('KILN_CPU_PAGED_VEC', undefined);
    setNativeThreads(undefined);
    setCpuPath(undefined);
  }
});
