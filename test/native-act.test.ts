/**
 * The native row kernels (kernels/cpu/native/rows.ts) behind silu and same-shape mul (bfloat16;
 * float32 runs the older native ops kernels), llm.siluAndMul, llm.reshapeAndCache's row copies
 * and argmax over trailing dims on the native cpu path: float32 and bfloat16, odd sizes and
 * tails, against float64 loops over the same (dtype-exact) inputs (one output rounding allowed,
 * plus the float32 silu's few ulp) or the JS kernels' results. Each case asserts which kernel
 * ran. Skips where no C compiler works.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { llm } from '../src/index.js';
import { probeToolchain, setCpuPath } from '../src/kernels/cpu/native/index.js';
import { nativeRowCalls } from '../src/kernels/cpu/native/rows.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { makeTensor, randomValues } from './helpers/make.js';

const probe = probeToolchain();
const skip = probe.ok ? false : `native cpu path unavailable: ${probe.reason}`;
const DTYPES = ['float32', 'bfloat16'] as const;
const SIZES = [1, 7, 37, 1029, 3072] as const;

function close(got: Tensor, want: number[], dtype: string, what: string): void {
  const g = got.toFlatArray();
  assert.equal(g.length, want.length);
  for (let i = 0; i < want.length; i++) {
    // bfloat16: one rounding of a float32 value within a few ulp; float32: a few ulp.
    const tol = (dtype === 'bfloat16' ? 2 ** -8 : 2 ** -21) * Math.abs(want[i]!) + 1e-30;
    assert.ok(Math.abs(g[i]! - want[i]!) <= tol, `${what} [${i}]: got ${g[i]}, expected ${want[i]}`);
  }
}

const silu = (x: number): number => x / (1 + Math.exp(-x));

function native<T>(f: () => T): T {
  setCpuPath('native');
  try {
    return f();
  } finally {
    setCpuPath(undefined);
  }
}

test('native silu and mul match float64 (bfloat16 through the row kernels, float32 through the ops kernels)', { skip }, () => {
  native(() => {
    for (const dtype of DTYPES) {
      for (const n of SIZES) {
        const vals = randomValues(n, n, -8, 8);
        if (n > 4) vals.splice(0, 4, 0, -100, 100, -0.5);
        const x = makeTensor(vals, [n], dtype);
        const y = makeTensor(randomValues(n, n + 1), [n], dtype);
        const before = nativeRowCalls();
        const s = kiln.nn.functional.silu(x);
        const m = kiln.mul(x, y);
        assert.equal(nativeRowCalls() - before, dtype === 'bfloat16' ? 2 : 0, `${dtype} [${n}]: which kernels ran`);
        const xv = x.toFlatArray();
        const yv = y.toFlatArray();
        close(s, xv.map(silu), dtype, `${dtype} silu [${n}]`);
        // A product of two dtype values rounds once: exactly the JS kernel's value.
        assert.deepEqual(m.toFlatArray(), makeTensor(xv.map((v, i) => v * yv[i]!), [n], dtype).toFlatArray(), `${dtype} mul [${n}]`);
      }
    }
    // Broadcasting and scalars keep the JS kernel.
    const a = makeTensor(randomValues(12, 3), [3, 4], 'bfloat16');
    const b = makeTensor(randomValues(4, 4), [4], 'bfloat16');
    const before = nativeRowCalls();
    const m = kiln.mul(a, b);
    assert.equal(nativeRowCalls() - before, 0, 'a broadcast mul keeps the JS kernel');
    const av = a.toFlatArray();
    const bv = b.toFlatArray();
    assert.deepEqual(m.toFlatArray(), makeTensor(av.map((v, i) => v * bv[i % 4]!), [3, 4], 'bfloat16').toFlatArray());
  });
});

test('native llm.siluAndMul matches float64 (float32, bfloat16, odd halves, several rows)', { skip }, () => {
  native(() => {
    for (const dtype of DTYPES) {
      for (const [rows, d] of [[1, 3072], [3, 37], [2, 1], [4, 129]] as const) {
        const x = makeTensor(randomValues(rows * 2 * d, rows + d, -6, 6), [rows, 2 * d], dtype);
        const before = nativeRowCalls();
        const y = llm.siluAndMul(x);
        assert.equal(nativeRowCalls() - before, 1, 'the native kernel ran');
        assert.deepEqual(y.shape, [rows, d]);
        const xv = x.toFlatArray();
        const want: number[] = [];
        for (let r = 0; r < rows; r++) for (let i = 0; i < d; i++) want.push(silu(xv[r * 2 * d + i]!) * xv[r * 2 * d + d + i]!);
        close(y, want, dtype, `${dtype} siluAndMul [${rows}, ${2 * d}]`);
      }
    }
  });
});

test('native llm.reshapeAndCache copies rows like the JS kernel (int32 / int64 slots, skips, bad slots)', { skip }, () => {
  for (const dtype of DTYPES) {
    for (const slotDtype of ['int32', 'int64'] as const) {
      const [blocks, bs, kvH, D] = [3, 4, 2, 5];
      const N = 4;
      const key = makeTensor(randomValues(N * kvH * D, 11), [N, kvH, D], dtype);
      const value = makeTensor(randomValues(N * kvH * D, 12), [N, kvH, D], dtype);
      const slots = kiln.tensor([7, -1, 0, 11], { dtype: slotDtype });
      const run = (path: 'native' | 'js'): number[][] => {
        setCpuPath(path);
        try {
          const kc = makeTensor(randomValues(blocks * bs * kvH * D, 13), [blocks, bs, kvH, D], dtype);
          const vc = makeTensor(randomValues(blocks * bs * kvH * D, 14), [blocks, bs, kvH, D], dtype);
          const before = nativeRowCalls();
          llm.reshapeAndCache(key, value, kc, vc, slots);
          assert.equal(nativeRowCalls() - before, path === 'native' ? 1 : 0, `${path}: which kernel ran`);
          return [kc.toFlatArray(), vc.toFlatArray()];
        } finally {
          setCpuPath(undefined);
        }
      };
      const got = run('native');
      assert.deepEqual(got, run('js'), `${dtype} / ${slotDtype} slots`);
      // Slot 7's key row is key[0]: a bit copy.
      assert.deepEqual(got[0]!.slice(7 * kvH * D, 8 * kvH * D), key.toFlatArray().slice(0, kvH * D));
      // A slot past the cache throws naming the row, after the rows before it were written.
      native(() => {
        const kc = makeTensor(new Array<number>(blocks * bs * kvH * D).fill(0), [blocks, bs, kvH, D], dtype);
        const vc = makeTensor(new Array<number>(blocks * bs * kvH * D).fill(0), [blocks, bs, kvH, D], dtype);
        const badSlots = kiln.tensor([2, 12, 3, 0], { dtype: slotDtype });
        assert.throws(() => llm.reshapeAndCache(key, value, kc, vc, badSlots), /slotMapping\[1\] = 12 is outside the cache's 12 slots/);
        const kv = kc.toFlatArray();
        assert.deepEqual(kv.slice(2 * kvH * D, 3 * kvH * D), key.toFlatArray().slice(0, kvH * D), 'row 0 written');
        assert.ok(kv.slice(3 * kvH * D, 4 * kvH * D).every((v) => v === 0), 'row 2 not written');
      });
    }
  }
});

test('native argmax over trailing dims matches a float64 scan (first maximum, first NaN, tails)', { skip }, () => {
  native(() => {
    const ref = (v: number[], rows: number, n: number): number[] => {
      const out: number[] = [];
      for (let r = 0; r < rows; r++) {
        let best = 0;
        for (let j = 0; j < n; j++) {
          const x = v[r * n + j]!;
          if (Number.isNaN(x)) {
            best = j;
            break;
          }
          if (x > v[r * n + best]!) best = j;
        }
        out.push(best);
      }
      return out;
    };
    for (const dtype of DTYPES) {
      for (const [rows, n] of [[1, 151_936], [3, 37], [2, 1], [5, 1029]] as const) {
        const vals = randomValues(rows * n, rows + n, -4, 4);
        if (n > 10) {
          vals[5] = 9; // a tie in row 0: the first one wins
          vals[9] = 9;
          if (rows > 1) vals[n + 3] = Number.NaN; // row 1: the first NaN
          if (rows > 1) vals[n + 7] = Number.NaN;
        }
        const x = makeTensor(vals, [rows, n], dtype);
        const xv = x.toFlatArray();
        const before = nativeRowCalls();
        const a = kiln.argmax(x, 1);
        const k = kiln.argmax(x, -1, true);
        const all = kiln.argmax(x);
        assert.equal(nativeRowCalls() - before, 3, 'the native kernel ran');
        assert.equal(a.dtype, 'int64');
        assert.deepEqual(a.toFlatArray(), ref(xv, rows, n), `${dtype} argmax [${rows}, ${n}]`);
        assert.deepEqual(k.shape, [rows, 1]);
        assert.deepEqual(k.toFlatArray(), ref(xv, rows, n));
        assert.deepEqual(all.toFlatArray(), ref(xv, 1, rows * n), `${dtype} argmax over all`);
      }
      // A leading reduced dim keeps the JS kernel.
      const x = makeTensor(randomValues(12, 5), [3, 4], dtype);
      const before = nativeRowCalls();
      const a = kiln.argmax(x, 0);
      assert.equal(nativeRowCalls() - before, 0);
      const xv = x.toFlatArray();
      assert.deepEqual(a.toFlatArray(), [0, 1, 2, 3].map((c) => [0, 1, 2].reduce((b, r) => (xv[r * 4 + c]! > xv[b * 4 + c]! ? r : b), 0)));
    }
  });
});
