/**
 * Child process for test/compile-dynamic-disk.test.ts: compiles the tiny Qwen3 forward (no grad)
 * and runs it at several sequence lengths under the KILN_CACHE_DIR it is given, then prints one
 * JSON line: the compile counters, the symbolic dims, and per length the largest |compiled -
 * eager| logit difference and the sum of the compiled logits (to compare across processes).
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as kiln from '../../src/index.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const fixtures = [path.join(here, '../fixtures'), path.join(here, '../../../test/fixtures')].find((p) => fs.existsSync(path.join(p, 'qwen3-tiny')))!;
const model = kiln.models.loadQwen3(path.join(fixtures, 'qwen3-tiny'), { dtype: 'float32' });
const f = kiln.compile(model);
const lengths = process.argv.slice(2).map(Number);
const runs = lengths.map((len) => {
  const ids = kiln.tensor([Array.from({ length: len }, (_, i) => (i * 7 + 3) % 90)], { dtype: 'int64' });
  const got = kiln.noGrad(() => f(ids)).toFlatArray();
  const want = kiln.noGrad(() => model.forward(ids)).toFlatArray();
  let maxDiff = 0;
  let sum = 0;
  got.forEach((v, i) => {
    maxDiff = Math.max(maxDiff, Math.abs(v - want[i]!));
    sum += v;
  });
  return { len, maxDiff, sum };
});
console.log(JSON.stringify({ counters: f.counters, symbolic: f.symbolicDims(), runs }));
