/**
 * bfloat16 elementwise arithmetic on the native cpu path (kernels/cpu/native/ops.ts
 * nativeElementwise, ops-c.ts kiln_elementwise's bfloat16 operands): operands widened exactly,
 * computed in float32, rounded once to bfloat16. Against float64 arithmetic on the same bfloat16
 * values rounded once to bfloat16: + - * must be those bits exactly (a float32 sum or
 * product of two bfloat16 values rounds to the bfloat16 nearest the exact result), / within one
 * bfloat16 step (float32 division rounds first). Also the same bits as the JavaScript kernel
 * (KILN_CPU_PATH=js) for + - *. Layouts: same shape, row and column broadcasts, a transposed
 * operand, a scalar, the rotary's [T, H, D] x [T, 1, D], sizes past the threaded threshold, and
 * NaN / infinities / signed zeros.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/index.js';
import { nativeOpCalls } from '../src/kernels/cpu/native/ops.js';
import { cpuPath } from '../src/kernels/cpu/native/path.js';
import { nativeRowCalls } from '../src/kernels/cpu/native/rows.js';
import { roundToBfloat16 } from '../src/tensor/half.js';

const skip = cpuPath() === 'native' ? false : 'needs the native cpu path (a C compiler)';

/** Samples in about [-8, 8] from a fixed sequence, as bfloat16, with special values among the first. */
function sample(shape: number[], seed: number, specials = true): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  let s = (seed * 2654435761) >>> 0;
  const data = Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s / 2 ** 32) * 16 - 8;
  });
  if (specials) [Number.NaN, Infinity, -Infinity, -0, 0, 1e-30, 3e38].forEach((v, i) => i * 5 + 2 < n && (data[i * 5 + 2] = v));
  return kiln.tensor(data).reshape(shape).to('bfloat16');
}

type Op = 'add' | 'sub' | 'mul' | 'div';
const F64: Record<Op, (x: number, y: number) => number> = {
  add: (x, y) => x + y,
  sub: (x, y) => x - y,
  mul: (x, y) => x * y,
  div: (x, y) => x / y,
};
const run = (op: Op, a: Tensor | number, b: Tensor | number): Tensor => {
  switch (op) {
    case 'add':
      return kiln.add(a as Tensor, b);
    case 'sub':
      return kiln.sub(a as Tensor, b);
    case 'mul':
      return kiln.mul(a as Tensor, b);
    case 'div':
      return kiln.div(a as Tensor, b);
    default:
      return op satisfies never;
  }
};

/** Values of a broadcast to `shape`, row-major. */
function expanded(t: Tensor | number, shape: number[]): number[] {
  if (typeof t === 'number') return new Array<number>(shape.reduce((a, b) => a * b, 1)).fill(t);
  return t.expand(shape).contiguous().toFlatArray() as number[];
}

/** Checks y = op(a, b) (bfloat16) element by element against float64 rounded once; `steps` bfloat16 steps allowed. */
function check(label: string, op: Op, a: Tensor | number, b: Tensor | number, steps: number): Tensor {
  // Native calls of either kernel: same-shape bfloat16 products take the row kernel (rows.ts).
  const calls = (): number => nativeOpCalls() + nativeRowCalls();
  const before = calls();
  const y = run(op, a, b);
  assert.ok(calls() > before, `${label}: ran natively`);
  assert.equal(y.dtype, 'bfloat16', label);
  const shape = [...y.shape];
  const xa = expanded(a, shape);
  const xb = expanded(b, shape);
  const got = y.contiguous().toFlatArray() as number[];
  for (let i = 0; i < got.length; i++) {
    const want = roundToBfloat16(F64[op](xa[i]!, xb[i]!));
    const g = got[i]!;
    if (Number.isNaN(want)) {
      assert.ok(Number.isNaN(g), `${label}: element ${i}: got ${g}, want NaN (${xa[i]} ${op} ${xb[i]})`);
      continue;
    }
    if (Object.is(g, want)) continue;
    const step = 2 ** (Math.floor(Math.log2(Math.max(Math.abs(want), 2 ** -126))) - 7);
    assert.ok(steps > 0 && Number.isFinite(want) && Math.abs(g - want) <= steps * step, `${label}: element ${i}: got ${g}, want ${want} (${xa[i]} ${op} ${xb[i]})`);
  }
  return y;
}

/** The JavaScript kernel's result (KILN_CPU_PATH=js for one call). */
function onJs(fn: () => Tensor): Tensor {
  process.env.KILN_CPU_PATH = 'js';
  try {
    return fn();
  } finally {
    delete process.env.KILN_CPU_PATH;
  }
}

function sameBits(label: string, a: Tensor, b: Tensor): void {
  const x = a.contiguous().toFlatArray() as number[];
  const y = b.contiguous().toFlatArray() as number[];
  assert.equal(x.length, y.length, label);
  const i = x.findIndex((v, k) => !Object.is(v, y[k]) && !(Number.isNaN(v) && Number.isNaN(y[k])));
  assert.equal(i, -1, `${label}: element ${i}: native ${x[i]}, js ${y[i]}`);
}

test('bfloat16 + - * / on the native path: float64 rounded once (/ within a step), the JS kernel\'s bits for + - *', { skip }, () => {
  const a = sample([6, 1030], 1);
  const b = sample([6, 1030], 2);
  const row = sample([1030], 3);
  const col = sample([6, 1], 4);
  const t = sample([1030, 6], 5).t();
  const big = sample([300, 1024], 6, false);
  const big2 = sample([300, 1024], 7, false);
  const q = sample([32, 16, 128], 8, false);
  const cos = sample([32, 1, 128], 9, false);
  const cases: [string, Tensor, Tensor | number][] = [
    ['same shape', a, b],
    ['row broadcast', a, row],
    ['column broadcast', a, col],
    ['transposed operand', a, t],
    ['scalar 1.5', a, 1.5],
    ['rotary [32,16,128] x [32,1,128]', q, cos],
    ['threaded [300,1024]', big, big2],
  ];
  for (const [label, x, y] of cases) {
    for (const op of ['add', 'sub', 'mul', 'div'] as const) {
      const r = check(`${op} ${label}`, op, x, y, op === 'div' ? 1 : 0);
      if (op === 'add' || op === 'sub' || op === 'mul') sameBits(`${op} ${label}`, r, onJs(() => run(op, x, y)));
    }
  }
});

test('bfloat16 outputs round ties to even and keep NaN quiet; float32 outputs from bfloat16 inputs are unchanged', { skip }, () => {
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: even is 1; 1 + 3 * 2^-8 rounds up to 1 + 2^-6.
  const x = kiln.tensor([1, 1 + 2 ** -7, -1, 3e38]).to('bfloat16');
  const y = kiln.tensor([2 ** -8, 2 ** -8, -(2 ** -8), 3e38]).to('bfloat16');
  assert.deepEqual(kiln.add(x, y).toFlatArray(), [1, 1 + 2 ** -6, -1, Infinity]);
  // bfloat16 + float32 promotes to float32 (not this kernel's bfloat16 form): exact sums.
  const f = kiln.add(x, kiln.tensor([2 ** -8, 2 ** -8, -(2 ** -8), 0]));
  assert.equal(f.dtype, 'float32');
  assert.deepEqual(f.toFlatArray(), [1 + 2 ** -8, 1 + 3 * 2 ** -8, -1 - 2 ** -8, roundToBfloat16(3e38)]);
});
