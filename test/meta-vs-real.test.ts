/**
 * The meta contract: for every registered op and every sample, the meta function's predicted
 * shape, strides, dtype and device equal those of the real output (and the storage offset for
 * views). The compiler plans memory from meta, so a mismatch here is a compiler bug waiting.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import '../src/index.js';
import { dispatch } from '../src/ops/dispatch.js';
import { getOp, listOps } from '../src/ops/registry.js';
import type { OutMeta } from '../src/ops/schema.js';
import { Tensor } from '../src/tensor/tensor.js';
import { allSamples } from './samples/index.js';

function compare(op: string, label: string, meta: OutMeta, real: Tensor): void {
  const where = `${op} [${label}]`;
  assert.ok(real instanceof Tensor, `${where}: kernel returned a non-tensor`);
  assert.deepEqual([...real.shape], [...meta.shape], `${where}: shape`);
  assert.deepEqual([...real.strides], [...meta.strides], `${where}: strides (meta predicted [${meta.strides}], kernel made [${real.strides}])`);
  assert.equal(real.dtype, meta.dtype, `${where}: dtype`);
  assert.ok(real.device.equals(meta.device), `${where}: device`);
  if (meta.offset !== undefined) assert.equal(real.offset, meta.offset, `${where}: storage offset`);
}

test('every registered op has at least one sample', () => {
  const covered = new Set(allSamples.map((s) => s.op));
  const missing = listOps().map((o) => o.name).filter((n) => !covered.has(n));
  assert.deepEqual(missing, [], `ops without samples: ${missing.join(', ')}`);
});

for (const sample of allSamples) {
  test(`meta matches real: ${sample.op} [${sample.label}]`, () => {
    const op = getOp(sample.op);
    const meta = op.meta(...sample.args()) as OutMeta | OutMeta[];
    const real = dispatch(op, ...(sample.args() as never[])) as Tensor | Tensor[];
    if (Array.isArray(meta)) {
      assert.ok(Array.isArray(real), `${sample.op}: meta gives ${meta.length} outputs, kernel one`);
      assert.equal(real.length, meta.length, `${sample.op}: number of outputs`);
      meta.forEach((m, i) => compare(sample.op, `${sample.label} #${i}`, m, real[i]!));
    } else {
      compare(sample.op, sample.label, meta, real as Tensor);
    }
  });
}
