/**
 * The native row kernels (kernels/cpu/native/rows.ts) behind rmsNorm, llm.addRmsNorm and neox
 * llm.applyRotaryEmb on the native cpu path: float32 and bfloat16, odd row lengths, several rows;
 * against float64 loops over the same (dtype-exact) inputs, one output rounding allowed. Each
 * case asserts the native kernel ran. Skips where no C compiler works.
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

function close(got: Tensor, want: number[], dtype: string, what: string): void {
  const g = got.toFlatArray();
  assert.equal(g.length, want.length);
  for (let i = 0; i < want.length; i++) {
    const tol = (dtype === 'bfloat16' ? 2 ** -8 : 2 ** -23) * Math.abs(want[i]!) + 1e-6;
    assert.ok(Math.abs(g[i]! - want[i]!) <= tol, `${what} [${i}]: got ${g[i]}, expected ${want[i]}`);
  }
}

function rmsRef(x: number[], w: number[], n: number, eps: number): number[] {
  const out: number[] = [];
  for (let b = 0; b < x.length; b += n) {
    let ss = 0;
    for (let i = 0; i < n; i++) ss += x[b + i]! ** 2;
    const inv = 1 / Math.sqrt(ss / n + eps);
    for (let i = 0; i < n; i++) out.push(x[b + i]! * inv * w[i]!);
  }
  return out;
}

test('native rmsNorm and llm.addRmsNorm match float64 (float32, bfloat16, odd rows)', { skip }, () => {
  setCpuPath('native');
  try {
    for (const dtype of DTYPES) {
      for (const [rows, n] of [[1, 1024], [3, 37], [2, 128]] as const) {
        const mk = (seed: number, len: number, shape: number[]): Tensor => makeTensor(randomValues(len, seed), shape, dtype);
        const x = mk(rows + n, rows * n, [rows, n]);
        const r = mk(rows + n + 1, rows * n, [rows, n]);
        const w = mk(n, n, [n]);
        const before = nativeRowCalls();
        const y = kiln.nn.functional.rmsNorm(x, [n], w, 1e-6);
        const both = llm.addRmsNorm(x, r, w, 1e-6);
        // float32 rmsNorm runs the older native norm (ops-c.ts), bfloat16 the row kernel.
        assert.equal(nativeRowCalls() - before, dtype === 'float32' ? 1 : 2, 'the native kernels ran');
        const xv = x.toFlatArray();
        const wv = w.toFlatArray();
        close(y, rmsRef(xv, wv, n, 1e-6), dtype, `${dtype} rmsNorm [${rows}, ${n}]`);
        // The sum is rounded to the dtype first (what residual stores), then normalised.
        const sum = makeTensor(xv.map((v, i) => v + r.toFlatArray()[i]!), [rows, n], dtype).toFlatArray();
        assert.deepEqual(both.residual.toFlatArray(), sum, `${dtype} addRmsNorm residual`);
        close(both.out, rmsRef(sum, wv, n, 1e-6), dtype, `${dtype} addRmsNorm [${rows}, ${n}]`);
      }
    }
  } finally {
    setCpuPath(undefined);
  }
});

test('native neox llm.applyRotaryEmb of [B, H, D] with cos / sin [B, 1, D] matches float64', { skip }, () => {
  setCpuPath('native');
  try {
    for (const dtype of DTYPES) {
      for (const [B, H, D] of [[1, 16, 128], [3, 5, 6], [2, 1, 2]] as const) {
        const x = makeTensor(randomValues(B * H * D, B + H + D), [B, H, D], dtype);
        const cos = makeTensor(randomValues(B * D, D, -1, 1), [B, 1, D], dtype);
        const sin = makeTensor(randomValues(B * D, D + 1, -1, 1), [B, 1, D], dtype);
        const before = nativeRowCalls();
        const y = llm.applyRotaryEmb(x, cos, sin, true);
        assert.equal(nativeRowCalls() - before, 1, 'the native kernel ran');
        const xv = x.toFlatArray();
        const cv = cos.toFlatArray();
        const sv = sin.toFlatArray();
        const want: number[] = [];
        for (let b = 0; b < B; b++) {
          for (let h = 0; h < H; h++) {
            const base = (b * H + h) * D;
            for (let i = 0; i < D; i++) {
              const rot = i < D / 2 ? -xv[base + i + D / 2]! : xv[base + i - D / 2]!;
              want.push(xv[base + i]! * cv[b * D + i]! + rot * sv[b * D + i]!);
            }
          }
        }
        close(y, want, dtype, `${dtype} rotary [${B}, ${H}, ${D}]`);
      }
    }
  } finally {
    setCpuPath(undefined);
  }
});
