/**
 * mode: 'max-autotune' times every candidate config of each generated kernel on the first run
 * (through the autotuner and kiln.Event), keeps the winner, and stays numerically equal to eager.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { getDiskCache } from '../src/runtime/cache/index.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-autotune-'));
process.env.KILN_CACHE_DIR = dir;
const tuned = (): number => (fs.existsSync(path.join(dir, 'autotune')) ? fs.readdirSync(path.join(dir, 'autotune'), { recursive: true }).filter((f) => String(f).endsWith('.json')).length : 0);

test("max-autotune tunes each kernel's candidates on the first run and persists the winners", () => {
  const f = (x: kiln.Tensor) => kiln.sub(kiln.mul(kiln.relu(kiln.add(kiln.mul(x, 1.5), 0.5)), kiln.sigmoid(x)), kiln.mul(kiln.exp(kiln.neg(kiln.mul(x, x))), 0.1));
  const x = kiln.randn([256, 256]);
  kiln.noGrad(() => kiln.compile(f)(x));
  assert.equal(tuned(), 0, 'the default mode tunes nothing');
  const before = getDiskCache().stats().writes;
  const cf = kiln.compile(f, { mode: 'max-autotune' });
  const y = kiln.noGrad(() => cf(x));
  const want = kiln.noGrad(() => f(x));
  const d = kiln.amax(kiln.abs(kiln.sub(y, want))).item() as number;
  assert.ok(d <= 1e-5, `max |compiled - eager| = ${d}`);
  const afterFirst = getDiskCache().stats().writes;
  assert.ok(afterFirst > before, 'the winner (and the candidates) were written to the cache');
  assert.equal(tuned(), 1, 'one kernel, one stored autotune winner');
  // A second compiled function with the same kernel finds the stored winner: nothing new is timed or written.
  const again = kiln.compile(f, { mode: 'max-autotune' });
  const hitsBefore = getDiskCache().stats().hits + getDiskCache().stats().memoryHits;
  kiln.noGrad(() => again(x));
  const st = getDiskCache().stats();
  assert.ok(st.hits + st.memoryHits > hitsBefore, 'the stored winner was reused');
  assert.equal(st.writes, afterFirst, 'nothing new was stored');
});
