/**
 * The fuzzer's mutation check (issue #18 item 7): a replay that passes whatever Kiln computes
 * proves nothing, so this breaks one kernel on purpose and shows the replay catches it and pins it
 * on the right op. It runs without PyTorch: the fixture is made here from float64 formulas, in the
 * same format and through the same replay as test/fuzz-replay.test.ts, for sigmoid (the op broken)
 * and add (left alone), over contiguous, transposed, strided and expanded layouts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { getOp } from '../src/ops/registry.js';
import type { Tensor } from '../src/index.js';
import { storageArray } from '../src/tensor/typed.js';
import type { EncInput, FuzzCase } from './helpers/fuzz/fixture.js';
import { loadSpec } from './helpers/fuzz/fixture.js';
import { groupReport } from './helpers/fuzz/known.js';
import { MODES, replayCase, type Mismatch } from './helpers/fuzz/replay.js';
import { rng } from './helpers/make.js';

type Layout = 'contiguous' | 'transposed' | 'strided' | 'expanded';

function contiguous(shape: number[]): number[] {
  const s = new Array<number>(shape.length);
  for (let d = shape.length - 1, acc = 1; d >= 0; acc *= Math.max(shape[d]!, 1), d--) s[d] = acc;
  return s;
}

/** An input with torch's layout conventions; values rounded to the dtype. */
function input(shape: number[], dtype: 'float32' | 'float64', layout: Layout, seed: number): EncInput {
  const r = rng(seed);
  const round = dtype === 'float32' ? Math.fround : (x: number) => x;
  const n = shape.reduce((a, b) => a * b, 1);
  let strides = contiguous(shape);
  let offset = 0;
  let values = Array.from({ length: n }, () => round(-4 + 8 * r()));
  if (layout === 'transposed') strides = contiguous([...shape].reverse()).reverse();
  if (layout === 'strided') {
    strides = strides.map((s) => 2 * s);
    offset = 3;
  }
  if (layout === 'expanded') {
    // The first dim broadcast: stride 0, every row the same values.
    strides = [0, ...contiguous(shape.slice(1))];
    const row = values.slice(0, n / Math.max(shape[0]!, 1));
    values = values.map((_, i) => row[i % row.length]!);
  }
  const size = offset + 1 + shape.reduce((a, d, i) => a + (Math.max(d, 1) - 1) * strides[i]!, 0);
  return { dtype, shape, strides, offset, size, layout, values };
}

function makeCases(): FuzzCase[] {
  const cases: FuzzCase[] = [];
  const shapes = [[3, 4], [2, 3, 4], [1, 5], [4, 1]];
  const layouts: Layout[] = ['contiguous', 'transposed', 'strided', 'expanded'];
  for (const dtype of ['float32', 'float64'] as const) {
    const round = dtype === 'float32' ? Math.fround : (x: number) => x;
    for (const shape of shapes) {
      for (const layout of layouts) {
        const id = cases.length;
        const x = input(shape, dtype, layout, 2 * id + 1);
        const y = input(shape, dtype, 'contiguous', 2 * id + 2);
        const out = (values: number[]) => ({ dtype, shape, strides: contiguous(shape), values });
        const sig = x.values.map((v) => round(1 / (1 + Math.exp(-(v as number)))));
        cases.push({ id, inputs: [x], steps: [{ op: 'sigmoid', inplace: false, args: [{ in: 0 }], out: out(sig) }] });
        const sum = x.values.map((v, i) => round((v as number) + (y.values[i] as number)));
        cases.push({ id: id + 1, inputs: [x, y], steps: [{ op: 'add', inplace: false, args: [{ in: 0 }, { in: 1 }], out: out(sum) }] });
      }
    }
  }
  return cases;
}

function replayAll(cases: FuzzCase[]): Mismatch[] {
  const spec = loadSpec();
  const eager = MODES.find((m) => m.name === 'eager')!;
  return cases.flatMap((c) => replayCase(spec, c, eager, new Map()));
}

/** The first element of a result, sign flipped: a bug as small as a kernel bug gets. */
function flipFirst(t: Tensor): void {
  if (t.numel() === 0) return;
  const a = storageArray(t.dtype, t.storage.cpuArrayBuffer()) as Float32Array | Float64Array;
  a[t.offset] = -a[t.offset]!;
}

test('fuzz mutation check: the replay passes on the real kernels', () => {
  const ms = replayAll(makeCases());
  assert.equal(ms.length, 0, groupReport(ms));
});

test('fuzz mutation check: a sign flipped in the cpu sigmoid kernel is caught and pinned on sigmoid', () => {
  const op = getOp('sigmoid');
  const real = op.kernels.get('cpu')!;
  assert.ok(real, 'sigmoid has a cpu kernel');
  // A test-only override, restored below: the registry refuses a second registerKernel on purpose.
  op.kernels.set('cpu', (...args: unknown[]) => {
    const out = (real as (...a: unknown[]) => unknown)(...args) as Tensor;
    flipFirst(out);
    return out;
  });
  let ms: Mismatch[];
  try {
    ms = replayAll(makeCases());
  } finally {
    op.kernels.set('cpu', real);
  }
  const report = groupReport(ms);
  const sigmoidCases = makeCases().filter((c) => c.steps[0]!.op === 'sigmoid').length;
  assert.equal(ms.length, sigmoidCases, `expected every sigmoid case to fail:\n${report}`);
  assert.deepEqual([...new Set(ms.map((m) => m.op))], ['sigmoid'], report);
  assert.ok(ms.every((m) => m.kind === 'value'), report);
  assert.match(report, /^sigmoid: \d+ /);
});
