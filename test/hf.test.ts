/** Hugging Face folders: single-file and sharded checkpoints, lazy per-name reads, and errors. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as kiln from '../src/index.js';
import { assertThrowsWith } from './helpers/assert.js';

const { openHfFolder, saveSafetensors } = kiln.io;

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-hf-'));
after(() => fs.rmSync(root, { recursive: true, force: true }));
let n = 0;
function folder(): string {
  const d = path.join(root, `m${n++}`);
  fs.mkdirSync(d);
  fs.writeFileSync(path.join(d, 'config.json'), JSON.stringify({ model_type: 'toy', hidden_size: 4 }));
  return d;
}

const here = path.dirname(fileURLToPath(import.meta.url));
const fixtures = [path.join(here, 'fixtures'), path.join(here, '../../test/fixtures')].find((p) => fs.existsSync(path.join(p, 'qwen3-tiny')))!;

test('single model.safetensors', () => {
  const d = folder();
  saveSafetensors(path.join(d, 'model.safetensors'), { a: kiln.tensor([1, 2]), b: kiln.tensor([[3]], { dtype: 'int64' }) });
  using ck = openHfFolder(d);
  assert.equal(ck.config.model_type, 'toy');
  assert.deepEqual(ck.keys().sort(), ['a', 'b']);
  assert.deepEqual(ck.get('a').toFlatArray(), [1, 2]);
  assert.deepEqual(ck.get('b').toArray(), [[3]]);
  assert.deepEqual([...ck.info('b').shape], [1, 1]);
  assertThrowsWith(() => ck.get('c'), d, "no tensor named 'c'");
});

test('sharded checkpoint via model.safetensors.index.json', () => {
  const d = folder();
  saveSafetensors(path.join(d, 's1.safetensors'), { a: kiln.tensor([1, 2]), c: kiln.tensor([9]) });
  saveSafetensors(path.join(d, 's2.safetensors'), { b: kiln.tensor([3, 4, 5]) });
  fs.writeFileSync(path.join(d, 'model.safetensors.index.json'), JSON.stringify({ metadata: {}, weight_map: { a: 's1.safetensors', b: 's2.safetensors', c: 's1.safetensors' } }));
  using ck = openHfFolder(d);
  assert.deepEqual(ck.keys(), ['a', 'b', 'c']);
  assert.deepEqual(ck.get('b').toFlatArray(), [3, 4, 5]);
  const sd = ck.stateDict({ dtype: 'float64' });
  assert.deepEqual(Object.keys(sd), ['a', 'b', 'c']);
  assert.equal(sd.c!.dtype, 'float64');
  assert.deepEqual(sd.c!.toFlatArray(), [9]);
});

test('the fixture folders list every tensor and read them by name', () => {
  using ck = openHfFolder(path.join(fixtures, 'qwen3-tiny'));
  const index = JSON.parse(fs.readFileSync(path.join(fixtures, 'qwen3-tiny', 'model.safetensors.index.json'), 'utf8')) as { weight_map: Record<string, string> };
  assert.deepEqual(ck.keys().sort(), Object.keys(index.weight_map).sort());
  assert.equal(ck.config.model_type, 'qwen3');
  const w = ck.get('model.norm.weight');
  assert.deepEqual([...w.shape], [64]);
});

test('errors: missing files, bad index, wrong shard', () => {
  const empty = folder();
  assertThrowsWith(() => openHfFolder(empty), empty, 'neither model.safetensors nor model.safetensors.index.json');
  const noCfg = path.join(root, 'nocfg');
  fs.mkdirSync(noCfg);
  assertThrowsWith(() => openHfFolder(noCfg), 'config.json');
  const badCfg = folder();
  fs.writeFileSync(path.join(badCfg, 'config.json'), '{"a": ');
  assertThrowsWith(() => openHfFolder(badCfg), 'config.json', 'malformed JSON');
  const missingShard = folder();
  fs.writeFileSync(path.join(missingShard, 'model.safetensors.index.json'), JSON.stringify({ weight_map: { a: 'gone.safetensors' } }));
  assertThrowsWith(() => openHfFolder(missingShard), "shard 'gone.safetensors'", 'does not exist');
  const noMap = folder();
  fs.writeFileSync(path.join(noMap, 'model.safetensors.index.json'), JSON.stringify({ metadata: {} }));
  assertThrowsWith(() => openHfFolder(noMap), 'weight_map');
  const escape = folder();
  fs.writeFileSync(path.join(escape, 'model.safetensors.index.json'), JSON.stringify({ weight_map: { a: '../x.safetensors' } }));
  assertThrowsWith(() => openHfFolder(escape), 'outside the folder');
  const wrong = folder();
  saveSafetensors(path.join(wrong, 's1.safetensors'), { a: kiln.tensor([1]) });
  fs.writeFileSync(path.join(wrong, 'model.safetensors.index.json'), JSON.stringify({ weight_map: { a: 's1.safetensors', b: 's1.safetensors' } }));
  using ck = openHfFolder(wrong);
  assertThrowsWith(() => ck.get('b'), "weight_map puts 'b' in s1.safetensors", 'no such tensor');
});
