/**
 * embedding and indexSelect (dim 0) on contiguous bfloat16 / float16 tensors gather raw words
 * (kernels/cpu/indexing.ts gatherHalfRows) instead of decoding the whole table: the rows must equal
 * the float32 path's values exactly, with a bad index still an error.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { randomValues } from './helpers/make.js';

test('16-bit embedding and indexSelect rows equal the float32 gather of the same values', () => {
  for (const dtype of ['bfloat16', 'float16'] as const) {
    const table = kiln.tensor(randomValues(50 * 12, 3), { dtype }).view([50, 12]);
    const ids = kiln.tensor([[3, 49], [0, 3]], { dtype: 'int64' });
    const want = kiln.nn.functional.embedding(ids, table.to('float32')).toFlatArray();
    const got = kiln.nn.functional.embedding(ids, table);
    assert.equal(got.dtype, dtype);
    assert.deepEqual(got.shape, [2, 2, 12]);
    assert.deepEqual(got.to('float32').toFlatArray(), want);
    const rows = kiln.tensor([7, 7, 1], { dtype: 'int32' });
    assert.deepEqual(kiln.indexSelect(table, 0, rows).to('float32').toFlatArray(), kiln.indexSelect(table.to('float32'), 0, rows).toFlatArray());
    assert.throws(() => kiln.nn.functional.embedding(kiln.tensor([50], { dtype: 'int64' }), table), /index 50 is out of bounds/);
  }
});
