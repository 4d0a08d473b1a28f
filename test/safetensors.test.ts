/**
 * safetensors: round trips for every dtype (contiguous and non-contiguous inputs), golden bytes of a
 * hand-laid-out file (built byte by byte here, independent of the writer), on-demand reads, and
 * each class of malformed file; parseSafetensors (bytes in memory, the browser's way in) reads the
 * same tensors as the file reader and fails on the same malformed headers.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import * as kiln from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';
import { castValue } from '../src/tensor/typed.js';
import { assertThrowsWith } from './helpers/assert.js';
import { makeTensor, randomInts, randomValues, type Layout } from './helpers/make.js';

const { openSafetensors, loadSafetensors, saveSafetensors, parseSafetensors } = kiln.io;

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-safetensors-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));
let counter = 0;
const tmp = (name = 'f'): string => path.join(dir, `${name}-${counter++}.safetensors`);

function valuesFor(dtype: DType, n: number, seed: number): number[] {
  switch (dtype) {
    case 'bool':
      return randomInts(n, seed, 0, 2);
    case 'uint8':
      return randomInts(n, seed, 0, 256);
    case 'int32':
      return randomInts(n, seed, -2_000_000_000, 2_000_000_000);
    case 'int64':
      // Beyond 32 bits, exactly representable as JS numbers.
      return randomInts(n, seed, -(2 ** 50), 2 ** 50);
    default:
      return randomValues(n, seed, -1e3, 1e3).map((v) => castValue(v, dtype));
  }
}

const ALL: DType[] = ['float32', 'float64', 'float16', 'bfloat16', 'int32', 'int64', 'uint8', 'bool'];
const LAYOUTS: Layout[] = ['contiguous', 'transposed', 'strided'];

test('round trip: every dtype, contiguous and non-contiguous inputs, metadata', () => {
  const tensors: Record<string, kiln.Tensor> = {};
  const expected: Record<string, { values: number[]; shape: number[]; dtype: DType }> = {};
  let seed = 1;
  for (const dtype of ALL) {
    for (const layout of LAYOUTS) {
      const shape = [3, 5];
      const values = valuesFor(dtype, 15, seed++);
      const name = `${dtype}.${layout}`;
      tensors[name] = makeTensor(values, shape, dtype, layout);
      expected[name] = { values, shape, dtype };
    }
    // 0-d, 1-element, empty and 3-d tensors too.
    const v0 = valuesFor(dtype, 1, seed++);
    tensors[`${dtype}.scalar`] = makeTensor(v0, [], dtype);
    expected[`${dtype}.scalar`] = { values: v0, shape: [], dtype };
    tensors[`${dtype}.empty`] = makeTensor([], [0, 4], dtype);
    expected[`${dtype}.empty`] = { values: [], shape: [0, 4], dtype };
    const v3 = valuesFor(dtype, 24, seed++);
    tensors[`${dtype}.3d`] = makeTensor(v3, [2, 3, 4], dtype, 'transposed');
    expected[`${dtype}.3d`] = { values: v3, shape: [2, 3, 4], dtype };
  }
  const file = tmp('roundtrip');
  saveSafetensors(file, tensors, { format: 'pt', note: 'héllo' });
  // No temp file is left behind.
  assert.deepEqual(fs.readdirSync(dir).filter((f) => f.endsWith('.tmp')), []);
  // Every tensor starts at an offset aligned to its element size.
  const f = openSafetensors(file);
  try {
    assert.deepEqual({ ...f.metadata }, { format: 'pt', note: 'héllo' });
    assert.deepEqual(new Set(f.keys()), new Set(Object.keys(tensors)));
    assert.equal(f.dataStart % 8, 0);
    for (const [name, e] of Object.entries(expected)) {
      const info = f.info(name);
      assert.equal(info.dtype, e.dtype, name);
      assert.deepEqual([...info.shape], e.shape, name);
      assert.equal(info.dataOffsets[0] % kiln.tensor([0], { dtype: e.dtype }).elementSize(), 0, `${name} alignment`);
      const t = f.get(name);
      assert.equal(t.dtype, e.dtype);
      assert.deepEqual([...t.shape], e.shape);
      assert.ok(t.isContiguous());
      assert.deepEqual(t.toFlatArray(), e.values, name);
    }
  } finally {
    f.close();
  }
  // loadSafetensors gives the same.
  const all = loadSafetensors(file);
  for (const [name, e] of Object.entries(expected)) assert.deepEqual(all[name]!.toFlatArray(), e.values, name);
});

test('int64 beyond 2^53 round-trips bit-exactly', () => {
  const t = kiln.tensor([2n ** 62n + 1n, -(2n ** 63n), 2n ** 63n - 1n], { dtype: 'int64' });
  const file = tmp('i64');
  saveSafetensors(file, { x: t });
  const back = loadSafetensors(file).x!;
  const words = new BigInt64Array(back.storage.cpuArrayBuffer(), back.offset * 8, 3);
  assert.deepEqual([...words], [2n ** 62n + 1n, -(2n ** 63n), 2n ** 63n - 1n]);
});

test('get converts dtype and device on request', () => {
  const file = tmp('conv');
  saveSafetensors(file, { w: makeTensor([1.5, -2.25, 3], [3], 'bfloat16') });
  using f = openSafetensors(file);
  const t = f.get('w', { dtype: 'float32', device: 'cpu' });
  assert.equal(t.dtype, 'float32');
  assert.deepEqual(t.toFlatArray(), [1.5, -2.25, 3]);
  assert.equal(f.info('w').fileDtype, 'BF16');
});

// --- Golden bytes -------------------------------------------------------------------------------

function u64le(n: number): number[] {
  const out: number[] = [];
  let v = BigInt(n);
  for (let i = 0; i < 8; i++) {
    out.push(Number(v & 0xffn));
    v >>= 8n;
  }
  return out;
}
const ascii = (s: string): number[] => [...s].map((c) => c.charCodeAt(0));

/**
 * The file the writer must produce for { a: F32 [1.5, -2], aa: F64 [0.5], b: U8 [1, 2, 255], c: BF16 [1.0],
 * d: I64 [-1] } with metadata { format: 'pt' }: metadata first, then tensors in the reference
 * implementation's order (dtype descending in its enum order I64 > F64 > F32 > BF16 > U8, then
 * name), the JSON compact, padded with spaces to a multiple of 8.
 */
function goldenBytes(): Uint8Array {
  const json =
    '{"__metadata__":{"format":"pt"},' +
    '"d":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},' +
    '"aa":{"dtype":"F64","shape":[],"data_offsets":[8,16]},' +
    '"a":{"dtype":"F32","shape":[2],"data_offsets":[16,24]},' +
    '"c":{"dtype":"BF16","shape":[1,1],"data_offsets":[24,26]},' +
    '"b":{"dtype":"U8","shape":[3],"data_offsets":[26,29]}}';
  const padded = Math.ceil(json.length / 8) * 8;
  const bytes = [
    ...u64le(padded),
    ...ascii(json),
    ...new Array<number>(padded - json.length).fill(0x20),
    // d: int64 -1
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    // aa: float64 0.5 = 0x3fe0000000000000
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xe0, 0x3f,
    // a: float32 1.5 = 0x3fc00000, -2 = 0xc0000000 (little-endian)
    0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00, 0x00, 0xc0,
    // c: bfloat16 1.0 = 0x3f80
    0x80, 0x3f,
    // b: uint8
    1, 2, 255,
  ];
  return Uint8Array.from(bytes);
}

test('golden bytes: the reader decodes a hand-built file', () => {
  const file = tmp('golden-read');
  fs.writeFileSync(file, goldenBytes());
  using f = openSafetensors(file);
  assert.deepEqual(f.keys(), ['d', 'aa', 'a', 'c', 'b']);
  assert.equal(f.get('aa').item(), 0.5);
  assert.deepEqual([...f.get('aa').shape], []);
  assert.deepEqual({ ...f.metadata }, { format: 'pt' });
  assert.deepEqual(f.get('a').toFlatArray(), [1.5, -2]);
  assert.deepEqual(f.get('b').toFlatArray(), [1, 2, 255]);
  assert.deepEqual(f.get('c').toArray(), [[1]]);
  assert.equal(f.get('c').dtype, 'bfloat16');
  assert.deepEqual(f.get('d').toFlatArray(), [-1]);
});

test('golden bytes: the writer produces the hand-built file exactly', () => {
  const file = tmp('golden-write');
  // Insertion order differs from the file order on purpose; a is a strided view.
  saveSafetensors(
    file,
    {
      b: kiln.tensor([1, 2, 255], { dtype: 'uint8' }),
      a: makeTensor([1.5, -2], [2], 'float32', 'strided'),
      c: kiln.tensor([[1]], { dtype: 'bfloat16' }),
      d: kiln.tensor([-1], { dtype: 'int64' }),
      aa: kiln.tensor(0.5, { dtype: 'float64' }),
    },
    { format: 'pt' },
  );
  assert.deepEqual(new Uint8Array(fs.readFileSync(file)), goldenBytes());
});

test('tensors are read on demand, from the file as it is at get() time', () => {
  const file = tmp('lazy');
  saveSafetensors(file, { x: kiln.tensor([1, 2, 3, 4]), y: kiln.tensor([5, 6]) });
  using f = openSafetensors(file);
  const info = f.info('y');
  // Rewrite y's bytes after the header was read: get() must see the new values.
  const fd = fs.openSync(file, 'r+');
  fs.writeSync(fd, new Uint8Array(new Float32Array([7, 8]).buffer), 0, 8, f.dataStart + info.dataOffsets[0]);
  fs.closeSync(fd);
  assert.deepEqual(f.get('y').toFlatArray(), [7, 8]);
  assert.deepEqual(f.get('x').toFlatArray(), [1, 2, 3, 4]);
  f.close();
  assert.ok(f.closed);
  assertThrowsWith(() => f.get('x'), file, "get('x') after close()");
});

test('saving over an existing file replaces it; non-tensors and bad names are rejected', () => {
  const file = tmp('over');
  saveSafetensors(file, { x: kiln.tensor([1]) });
  saveSafetensors(file, { z: kiln.tensor([2, 3]) });
  assert.deepEqual(Object.keys(loadSafetensors(file)), ['z']);
  assertThrowsWith(() => saveSafetensors(file, { __metadata__: kiln.tensor([1]) }), file, '__metadata__');
  assertThrowsWith(() => saveSafetensors(file, { x: [1, 2] as unknown as kiln.Tensor }), file, "'x' is not a Tensor");
  assert.deepEqual(Object.keys(loadSafetensors(file)), ['z']);
});

// --- Malformed files -----------------------------------------------------------------------------

/** A file with the given header JSON (padded) and `dataBytes` bytes of data. */
function craft(header: string | object, dataBytes: number, declaredLen?: bigint): string {
  const json = typeof header === 'string' ? header : JSON.stringify(header);
  const body = new TextEncoder().encode(json);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(declaredLen ?? BigInt(body.length));
  const file = tmp('bad');
  fs.writeFileSync(file, Buffer.concat([len, Buffer.from(body), Buffer.alloc(dataBytes)]));
  return file;
}

const f32 = (begin: number, end: number, shape: number[] = [(end - begin) / 4]) => ({ dtype: 'F32', shape, data_offsets: [begin, end] });

test('errors: truncated files', () => {
  const short = tmp('short');
  fs.writeFileSync(short, Buffer.from([1, 2, 3]));
  assertThrowsWith(() => openSafetensors(short), short, 'too short', 'truncated');
  const beyond = craft({ a: f32(0, 8) }, 8, 10_000n);
  assertThrowsWith(() => openSafetensors(beyond), beyond, 'header length 10000', 'beyond the file size');
  const data = craft({ a: f32(0, 8), b: f32(8, 16) }, 12);
  assertThrowsWith(() => openSafetensors(data), data, "tensor 'b'", '[8, 16]', 'beyond the data buffer of 12 bytes');
});

test('errors: header too large', () => {
  const file = craft({}, 0, 100_000_001n);
  assertThrowsWith(() => openSafetensors(file), file, 'header length 100000001', 'limit');
  const huge = craft({}, 0, 2n ** 63n);
  assertThrowsWith(() => openSafetensors(huge), huge, 'limit');
});

test('errors: malformed JSON and bad entries', () => {
  const bad = craft('{"a": {"dtype": "F32", ', 0);
  assertThrowsWith(() => openSafetensors(bad), bad, 'malformed header JSON');
  const arr = craft('[1, 2]', 0);
  assertThrowsWith(() => openSafetensors(arr), arr, 'must be an object');
  const noShape = craft({ a: { dtype: 'F32', data_offsets: [0, 4] } }, 4);
  assertThrowsWith(() => openSafetensors(noShape), noShape, "tensor 'a'", "'shape'");
  const badOffs = craft({ a: { dtype: 'F32', shape: [1], data_offsets: [0] } }, 4);
  assertThrowsWith(() => openSafetensors(badOffs), badOffs, "tensor 'a'", 'data_offsets');
  const meta = craft({ __metadata__: { n: 3 }, a: f32(0, 4) }, 4);
  assertThrowsWith(() => openSafetensors(meta), meta, '__metadata__', "'n'", 'string');
  const utf = tmp('utf');
  fs.writeFileSync(utf, Buffer.concat([Buffer.from(u64le(2)), Buffer.from([0xff, 0xfe])]));
  assertThrowsWith(() => openSafetensors(utf), utf, 'UTF-8');
});

test('errors: unknown dtype', () => {
  const file = craft({ w: { dtype: 'F8_E4M3', shape: [4], data_offsets: [0, 4] } }, 4);
  assertThrowsWith(() => openSafetensors(file), file, "tensor 'w'", "dtype 'F8_E4M3'");
  const i16 = craft({ w: { dtype: 'I16', shape: [2], data_offsets: [0, 4] } }, 4);
  assertThrowsWith(() => openSafetensors(i16), i16, "tensor 'w'", "'I16'");
});

test('errors: shape and offsets disagree', () => {
  const file = craft({ w: f32(0, 12, [2, 2]) }, 12);
  assertThrowsWith(() => openSafetensors(file), file, "tensor 'w'", 'shape [2, 2] F32 needs 16 bytes', 'span 12');
  const rev = craft({ w: { dtype: 'U8', shape: [0], data_offsets: [4, 0] } }, 4);
  assertThrowsWith(() => openSafetensors(rev), rev, "tensor 'w'", 'end before begin');
});

test('errors: overlapping, holes and uncovered trailing bytes', () => {
  const overlap = craft({ a: f32(0, 8), b: f32(4, 12) }, 12);
  assertThrowsWith(() => openSafetensors(overlap), overlap, "tensor 'b'", 'overlap', "'a'");
  const hole = craft({ a: f32(0, 4), b: f32(8, 12) }, 12);
  assertThrowsWith(() => openSafetensors(hole), hole, "tensor 'b'", 'hole', 'bytes 4..8');
  const lead = craft({ a: f32(4, 8) }, 8);
  assertThrowsWith(() => openSafetensors(lead), lead, "tensor 'a'", 'hole');
  const trailing = craft({ a: f32(0, 4) }, 8);
  assertThrowsWith(() => openSafetensors(trailing), trailing, 'cover 4 bytes', 'data buffer has 8');
  // Zero-sized tensors may share an offset; any order in the header is fine.
  const ok = craft({ z: { dtype: 'F32', shape: [0], data_offsets: [4, 4] }, b: f32(4, 8), a: f32(0, 4), e: { dtype: 'BOOL', shape: [0, 3], data_offsets: [8, 8] } }, 8);
  using f = openSafetensors(ok);
  assert.deepEqual(f.get('z').shape, [0]);
  assert.deepEqual(f.get('e').shape, [0, 3]);
});

test('errors: unknown tensor name', () => {
  const file = tmp('names');
  saveSafetensors(file, { x: kiln.tensor([1]) });
  using f = openSafetensors(file);
  assertThrowsWith(() => f.get('nope'), file, "no tensor named 'nope'");
  assertThrowsWith(() => f.info('nope'), file, "'nope'");
});

// --- Bytes in memory ----------------------------------------------------------------------------

test('parseSafetensors: the hand-built bytes, from a view at an offset, copied out of the caller\'s buffer', () => {
  const golden = goldenBytes();
  // The file's bytes at offset 3 of a larger buffer (as a slice of a fetched bundle would be).
  const big = new Uint8Array(golden.length + 5);
  big.set(golden, 3);
  const t = parseSafetensors(big.subarray(3, 3 + golden.length));
  assert.deepEqual(Object.keys(t), ['d', 'aa', 'a', 'c', 'b']);
  assert.deepEqual(t.d!.toFlatArray(), [-1]);
  assert.equal(t.aa!.item(), 0.5);
  assert.deepEqual([...t.aa!.shape], []);
  assert.deepEqual(t.a!.toFlatArray(), [1.5, -2]);
  assert.equal(t.c!.dtype, 'bfloat16');
  assert.deepEqual(t.c!.toArray(), [[1]]);
  assert.deepEqual(t.b!.toFlatArray(), [1, 2, 255]);
  big.fill(0);
  assert.deepEqual(t.a!.toFlatArray(), [1.5, -2], 'the tensors own their bytes');
  // An ArrayBuffer works too, and dtype conversion on request.
  const f = parseSafetensors(golden.slice().buffer, { dtype: 'float64' });
  assert.equal(f.a!.dtype, 'float64');
  assert.deepEqual(f.a!.toFlatArray(), [1.5, -2]);
});

test('parseSafetensors reads every tensor of a written file as the file reader does', () => {
  const tensors: Record<string, kiln.Tensor> = {};
  ALL.forEach((dtype, i) => (tensors[dtype] = makeTensor(valuesFor(dtype, 12, 100 + i), [3, 4], dtype, 'transposed')));
  const file = tmp('bytes');
  saveSafetensors(file, tensors);
  const fromFile = loadSafetensors(file);
  const fromBytes = parseSafetensors(new Uint8Array(fs.readFileSync(file)), { name: file });
  assert.deepEqual(Object.keys(fromBytes).sort(), Object.keys(fromFile).sort());
  for (const [k, v] of Object.entries(fromFile)) {
    assert.equal(fromBytes[k]!.dtype, v.dtype, k);
    assert.deepEqual([...fromBytes[k]!.shape], [...v.shape], k);
    assert.deepEqual(fromBytes[k]!.toFlatArray(), v.toFlatArray(), k);
  }
});

test('parseSafetensors: malformed bytes fail as files do, naming the bytes', () => {
  assertThrowsWith(() => parseSafetensors(new Uint8Array([1, 2, 3])), 'safetensors: bytes:', 'too short');
  const bytes = (file: string): Uint8Array => new Uint8Array(fs.readFileSync(file));
  assertThrowsWith(() => parseSafetensors(bytes(craft({ a: f32(0, 8) }, 8, 10_000n)), { name: 'w.safetensors' }), 'w.safetensors', 'header length 10000');
  assertThrowsWith(() => parseSafetensors(bytes(craft({}, 0, 100_000_001n))), 'limit');
  assertThrowsWith(() => parseSafetensors(bytes(craft('{"a": {"dtype": "F32", ', 0))), 'malformed header JSON');
  assertThrowsWith(() => parseSafetensors(bytes(craft({ a: f32(0, 8), b: f32(4, 12) }, 12))), "tensor 'b'", 'overlap');
  assertThrowsWith(() => parseSafetensors(bytes(craft({ a: f32(0, 4) }, 8))), 'cover 4 bytes', 'data buffer has 8');
  assertThrowsWith(() => parseSafetensors(Uint8Array.from([...u64le(2), 0xff, 0xfe])), 'UTF-8');
});
