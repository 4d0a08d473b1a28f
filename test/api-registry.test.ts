/**
 * The public API is checked against the op registry: every registered op is reachable through a
 * public function of its public name, and every op declared as a method is a Tensor method. Ops
 * and functions must not drift apart as groups grow.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { listOps } from '../src/ops/registry.js';

test('every registered op has a public function', () => {
  // Dotted names live in namespaces: 'llm.rmsNorm' is kiln.llm.rmsNorm.
  const lookup = (name: string): unknown => name.split('.').reduce<unknown>((o, k) => (o as Record<string, unknown> | undefined)?.[k], kiln);
  const missing = listOps()
    .map((op) => op.publicName ?? op.name)
    .filter((name) => typeof lookup(name) !== 'function');
  assert.deepEqual([...new Set(missing)], [], `ops without a public function: ${missing.join(', ')}`);
});

test('every op declared as a method is a Tensor method', () => {
  const proto = kiln.Tensor.prototype as unknown as Record<string, unknown>;
  const missing = listOps()
    .filter((op) => op.method)
    .map((op) => op.publicName ?? op.name)
    .filter((name) => typeof proto[name] !== 'function');
  assert.deepEqual(missing, [], `ops without a Tensor method: ${missing.join(', ')}`);
});

test('schemas are well formed: mutated args are tensors, aliases name real arguments', () => {
  for (const op of listOps()) {
    const names = new Set(op.args.map((a) => a.name));
    for (const a of op.args) if (a.mutated) assert.ok(a.type.startsWith('Tensor'), `${op.name}.${a.name}`);
    for (const o of op.outputs) if (o.aliasOf) assert.ok(names.has(o.aliasOf), `${op.name} output ${o.name}`);
    if (op.tags?.includes('inplace')) assert.ok(op.args.some((a) => a.mutated), `${op.name} is in-place but mutates nothing`);
    assert.ok(op.kernels.has('cpu') || op.decomposition, `${op.name} has no cpu kernel or decomposition`);
  }
});

test('`using` disposes a tensor at the end of its block', () => {
  const before = kiln.memoryStats().allocatedBytes;
  {
    using t = kiln.tensor([1, 2, 3]);
    assert.equal(kiln.memoryStats().allocatedBytes, before + 12);
    assert.deepEqual(t.toArray(), [1, 2, 3]);
  }
  assert.equal(kiln.memoryStats().allocatedBytes, before);
});
