/**
 * Every registered op is differentiable (has a backward formula) unless it is listed here with the
 * reason it has no gradient. A new op without a formula fails this test until it gets one or is
 * listed. Per-group gradchecks live in test/autograd-<group>*.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { listOps } from '../src/ops/registry.js';

const NO_GRADIENT: Record<string, string> = {
  // Factories take no differentiable input.
  empty: 'factory', zeros: 'factory', ones: 'factory', full: 'factory', rand: 'factory', randn: 'factory',
  randint: 'factory', arange: 'factory', linspace: 'factory', eye: 'factory',
  // Bool outputs.
  isnan: 'bool output', isinf: 'bool output', isfinite: 'bool output', logicalNot: 'bool output',
  logicalAnd: 'bool output', logicalOr: 'bool output', logicalXor: 'bool output',
  eq: 'bool output', ne: 'bool output', lt: 'bool output', le: 'bool output', gt: 'bool output', ge: 'bool output',
  any: 'bool output', all: 'bool output',
  // Integer outputs.
  argmax: 'int64 output', argmin: 'int64 output', argsort: 'int64 output', nonzero: 'int64 output',
  // The compiler's inference-only conv -> eval BatchNorm -> ReLU fold (grad graphs keep the unfused ops).
  conv2dBatchNorm: 'inference-only fused op',
};

test('every op has a backward formula or a stated reason not to', () => {
  const missing = listOps()
    .filter((op) => op.backward === undefined && !(op.name in NO_GRADIENT) && typeof kiln.llm.manifestEntry(op.name)?.backward !== 'string')
    .map((op) => op.name);
  assert.deepEqual(missing, [], `ops without a backward formula: ${missing.join(', ')}`);
  const stale = Object.keys(NO_GRADIENT).filter((n) => listOps().some((op) => op.name === n && op.backward !== undefined));
  assert.deepEqual(stale, [], 'ops listed as non-differentiable that do have formulas');
  // The llm manifest states the reason for library ops without a formula (and must not lie).
  const llmStale = kiln.llm.manifestEntries().filter((e) => typeof e.backward === 'string' && listOps().some((op) => op.name === e.op && op.backward !== undefined));
  assert.deepEqual(llmStale.map((e) => e.op), [], 'llm ops whose manifest gives a reason for no backward but that have one');
});
