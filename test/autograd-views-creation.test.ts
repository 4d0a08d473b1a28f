/**
 * The creation group needs no derivatives: factories take no tensor (nothing to record), and the
 * `*Like` ops read only their input's metadata. Their formulas send no gradient back, so a graph
 * that uses zerosLike(x) next to x still runs backward, with x's gradient coming only from x's
 * other uses.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import * as C from '../src/ops/defs/creation.js';
import { listOps } from '../src/ops/registry.js';
import { makeTensor } from './helpers/make.js';

test('creation ops: *Like ops have a (no-gradient) formula; the rest take no tensor argument', () => {
  const names = new Set(Object.values(C).flatMap((v) => (typeof v === 'object' && v !== null && 'kernels' in v && 'name' in v ? [(v as { name: string }).name] : [])));
  const ops = listOps().filter((op) => names.has(op.name));
  assert.ok(ops.length >= 16, `creation ops found: ${ops.map((o) => o.name).join(', ')}`);
  for (const op of ops) {
    const takesTensor = op.args.some((a) => a.type.startsWith('Tensor'));
    if (takesTensor) assert.notEqual(op.backward, undefined, `${op.name} takes a tensor but has no formula`);
    else assert.equal(op.backward, undefined, `${op.name} takes no tensor: it can never be recorded`);
  }
});

test('*Like ops of a tensor that requires grad send it no gradient', () => {
  const fns: [string, (x: kiln.Tensor) => kiln.Tensor][] = [
    ['zerosLike', (x) => kiln.zerosLike(x)],
    ['onesLike', (x) => kiln.onesLike(x)],
    ['fullLike', (x) => kiln.fullLike(x, 3)],
    ['emptyLike', (x) => kiln.emptyLike(x).mul(0)],
    ['randLike', (x) => kiln.randLike(x)],
    ['randnLike', (x) => kiln.randnLike(x)],
  ];
  for (const [name, fn] of fns) {
    const x = makeTensor([1, 2, 3], [3], 'float64').requiresGrad_();
    const y = fn(x).mul(x);
    const c = fn(x).toFlatArray();
    y.backward(kiln.onesLike(y));
    if (name !== 'randLike' && name !== 'randnLike') assert.deepEqual(x.grad!.toFlatArray(), name === 'emptyLike' ? [0, 0, 0] : c, name);
    else assert.equal(x.grad!.numel(), 3, name);
  }
  // The value does not depend on x: gradcheck agrees that d(fullLike(x, 3) * x)/dx = 3.
  kiln.gradcheck((x) => kiln.fullLike(x, 3).mul(x), [makeTensor([1, 2], [2], 'float64').requiresGrad_()]);
});
