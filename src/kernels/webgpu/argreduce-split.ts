/**
 * argmax / argmin over long rows, split across workgroups (issue #20). The fused reduce kernel
 * (fused/render.ts) gives a row one workgroup: a greedy decode step's argmax over a 151936-token
 * vocabulary at batch 1 was one workgroup of 256 invocations walking 594 elements each, one
 * dependent load after another, on one SM of a 132-SM GPU (about 2 ms on the H200, most of the
 * sampler's time).
 *
 * Here, two dispatches:
 * - `part`: a grid of (P, rows); workgroup (p, m) takes chunk p of row m (consecutive elements, so
 *   a workgroup's loads are coalesced), each invocation keeps its best (value, index), and a
 *   workgroup tree reduction leaves the chunk's best, stored as two u32 words (the value's bits in
 *   its compute type, the index) in a scratch of [rows, P] pairs;
 * - `final`: one workgroup per row reduces its P pairs the same way and stores the index as int64.
 *
 * The order is the fused kernel's: the larger (argmin: smaller) value, NaN before any number (as
 * torch), the first index among equals. The combine is associative and commutative under that
 * order, so the split and tree shapes do not change the result.
 *
 * Used when a row is long and the rows are few (see `splitArgPlan`); the input's rows and the
 * output must each coalesce to one stride (any contiguous row-major tensor reduced over its last
 * dim or all dims; other layouts keep the fused kernel).
 *
 * Part metadata: [M, N, P, chunk, xOff, xRowStride, xColStride]; final adds [outOff, outStride].
 */
import type { Tensor } from '../../tensor/tensor.js';
import { rowStrides } from '../../tensor/layout.js';
import { allocOut, webgpu } from './device.js';
import { fusedLayout } from './fused/layout.js';
import { loadExpr, type StorageKind } from './storage.js';
import { dataKind, header, kernelFor, storeI64, words } from './template.js';

/** Invocations per workgroup of both passes. */
const W = 256;
/** Elements per workgroup of the first pass (8 per invocation). */
const CHUNK = 2048;
/** Rows from which one workgroup per row already fills the device: the fused kernel runs them. */
const MAX_ROWS = 128;
/** Shortest row worth a second dispatch. */
const MIN_ROW = 8192;
/** Most workgroups of the first pass over all rows. */
const MAX_PARTS_TOTAL = 4096;

type ArgKind = 'argmax' | 'argmin';

/** Chunks per row for M rows of N, or 0 where the fused one-workgroup-per-row kernel should run. */
export function splitArgPlan(M: number, N: number): number {
  if (M < 1 || M >= MAX_ROWS || N < MIN_ROW) return 0;
  return Math.max(2, Math.min(Math.ceil(N / CHUNK), Math.floor(MAX_PARTS_TOTAL / M)));
}

/** WGSL: whether (v, j) beats (a, ai) under the arg order (`t` the compute type). */
function betterFn(kind: ArgKind, t: 'f32' | 'i32'): string {
  const cmp = kind === 'argmax' ? '>' : '<';
  const nan = t === 'f32' ? ['  if (kiln_isnan(a)) { return kiln_isnan(v) && j < ai; }', '  if (kiln_isnan(v)) { return true; }'] : [];
  return [`fn kiln_better(v: ${t}, j: u32, a: ${t}, ai: u32) -> bool {`, ...nan, `  return v ${cmp} a || (v == a && j < ai);`, '}'].join('\n');
}

/** WGSL: the workgroup tree reduction of (bv, bi) into wv[0], wi[0] (every invocation calls it). */
function treeLines(): string[] {
  return [
    '    wv[lid] = bv; wi[lid] = bi;',
    '    workgroupBarrier();',
    `    for (var s = ${W / 2}u; s > 0u; s = s >> 1u) {`,
    '      if (lid < s && kiln_better(wv[lid + s], wi[lid + s], wv[lid], wi[lid])) { wv[lid] = wv[lid + s]; wi[lid] = wi[lid + s]; }',
    '      workgroupBarrier();',
    '    }',
  ];
}

const computeType = (x: StorageKind): 'f32' | 'i32' => (x === 'f32' || x === 'f16' || x === 'f16p' || x === 'bf16p' ? 'f32' : 'i32');

/** The identity of the order: every element beats it (index 0xffffffff loses every tie). */
function identity(kind: ArgKind, t: 'f32' | 'i32'): string {
  if (t === 'i32') return kind === 'argmax' ? 'i32(-2147483647 - 1)' : '2147483647i';
  return kind === 'argmax' ? '(-kiln_inf())' : 'kiln_inf()';
}

export function splitArgPartSource(kind: ArgKind, x: StorageKind): string {
  const t = computeType(x);
  const L = header([
    { kind: 'u32', written: true },
    { kind: x, written: false },
  ]);
  L.push(
    betterFn(kind, t),
    `var<workgroup> wv: array<${t}, ${W}>;`,
    `var<workgroup> wi: array<u32, ${W}>;`,
    `@compute @workgroup_size(${W})`,
    'fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32, @builtin(num_workgroups) ng: vec3u) {',
    '  let M = kmeta[0]; let N = kmeta[1]; let P = kmeta[2]; let chunk = kmeta[3];',
    '  let p = wid.x; let j0 = p * chunk; let j1 = min(N, j0 + chunk);',
    '  for (var m = wid.y; m < M; m = m + ng.y) {',
    '    let base = kmeta[4] + m * kmeta[5];',
    `    var bv: ${t} = ${identity(kind, t)}; var bi = 0xffffffffu;`,
    `    for (var j = j0 + lid; j < j1; j = j + ${W}u) {`,
    `      let v = ${loadExpr(x, 'b1', 'base + j * kmeta[6]', false)};`,
    '      if (kiln_better(v, j, bv, bi)) { bv = v; bi = j; }',
    '    }',
    ...treeLines(),
    '    if (lid == 0u) { let o = 2u * (m * P + p); b0[o] = bitcast<u32>(wv[0]); b0[o + 1u] = wi[0]; }',
    '    workgroupBarrier();',
    '  }',
    '}',
  );
  return L.join('\n');
}

export function splitArgFinalSource(kind: ArgKind, x: StorageKind): string {
  const t = computeType(x);
  const L = header([
    { kind: 'u32', written: true },
    { kind: 'u32', written: false },
  ]);
  L.push(
    betterFn(kind, t),
    `var<workgroup> wv: array<${t}, ${W}>;`,
    `var<workgroup> wi: array<u32, ${W}>;`,
    `@compute @workgroup_size(${W})`,
    'fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32, @builtin(num_workgroups) ng: vec3u) {',
    '  let M = kmeta[0]; let P = kmeta[2];',
    '  for (var m = wid.x; m < M; m = m + ng.x) {',
    `    var bv: ${t} = ${identity(kind, t)}; var bi = 0xffffffffu;`,
    `    for (var p = lid; p < P; p = p + ${W}u) {`,
    `      let o = 2u * (m * P + p); let v = bitcast<${t}>(b1[o]); let j = b1[o + 1u];`,
    '      if (kiln_better(v, j, bv, bi)) { bv = v; bi = j; }',
    '    }',
    ...treeLines(),
    `    if (lid == 0u) { ${storeI64('b0', 'kmeta[7] + m * kmeta[8]', 'bitcast<i32>(wi[0])')} }`,
    '    workgroupBarrier();',
    '  }',
  );
  L.push('}');
  return L.join('\n');
}

/**
 * Writes the split argmax / argmin of `x` over `dims` into `index` (int64, the reduced shape) and
 * returns true, or returns false (nothing dispatched) where the plan or the layout keeps the fused kernel.
 */
export function splitArgReduce(kind: ArgKind, x: Tensor, dims: readonly number[], index: Tensor): boolean {
  const S = x.shape;
  const M = S.reduce((a, s, d) => (dims.includes(d) ? a : a * s), 1);
  const N = S.reduce((a, s, d) => (dims.includes(d) ? a * s : a), 1);
  const P = splitArgPlan(M, N);
  if (P === 0) return false;
  const { kind: xk, wide } = dataKind(kind, x);
  if (wide || xk === 'boolp') return false;
  // The row index is the result: dims keep their order (row-major flattening of the reduced dims).
  const L = fusedLayout({ kind: 'reduce', shape: S, dims, strides: [rowStrides(index.shape, index.strides, S, dims), [...x.strides]], offsets: [index.offset, x.offset], rowRef: 1, keepRowOrder: true });
  if (L.oshape.length !== 1 || L.rshape.length !== 1) return false;
  const chunk = Math.ceil(N / P);
  const parts = Math.ceil(N / chunk);
  const meta = words([M, N, parts, chunk, x.offset, L.ost[1]![0]!, L.rst[1]![0]!, index.offset, L.ost[0]![0]!]);
  const acc = webgpu();
  const scratch = allocOut({ shape: [2 * M * parts], strides: [1], dtype: 'int32', device: index.device });
  try {
    acc.dispatch(kernelFor(`${kind}.split.part.${xk}`, () => splitArgPartSource(kind, xk)), [scratch.storage.buffer, x.storage.buffer], meta, [parts, Math.min(M, 65535), 1]);
    acc.dispatch(kernelFor(`${kind}.split.final.${xk}`, () => splitArgFinalSource(kind, xk)), [index.storage.buffer, scratch.storage.buffer], meta, [Math.min(M, 65535), 1, 1]);
  } finally {
    scratch.dispose();
  }
  return true;
}
