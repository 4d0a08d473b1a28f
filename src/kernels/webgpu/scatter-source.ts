/**
 * The WGSL of the gather / scatter family (scatter.ts, index-put.ts): one invocation per write,
 * addressed either by walking an index tensor (gather, scatter, scatterAdd: the write of index
 * element e goes to e's coordinates with the scattered dim's coordinate replaced by the index
 * value) or by a host-made plan of (destination, source) position pairs (indexPut, whose masks and
 * broadcast index lists are the CPU kernel's walk).
 *
 * Each write yields three offsets: `po`, the element in the destination's own strides (gathers
 * read it, plain writes store to it); `wo`, its row-major position (the winner and accumulator
 * arrays are dense); `so`, the source element. Passes:
 *
 * - gather: out[e] = self[po] (zero where the index is out of range; a GPU kernel cannot raise).
 * - winner / set: plain scatter is deterministic, as on the CPU: the last write in index order wins.
 *   `winner` takes atomicMax of e per destination into an int32 array, `set` lets only the winning
 *   write store, so no two invocations store one element (packed 8/16-bit stores are read-modify-
 *   write of a shared word, and torn writes would mix values).
 * - apply: reductions into a dense 32-bit accumulator: integer add/max/min are WGSL atomics; float
 *   ops and integer products are compare-exchange loops on the word's bits. Float sums therefore
 *   add in scheduling order, so their last bits vary from run to run, as PyTorch's CUDA
 *   scatter_add. `mean` also counts the writes per destination, and `finish` divides (flooring
 *   for integers, as the CPU kernel).
 *
 * 64-bit data (gather, plain scatter) moves as pairs of int32 words.
 */
import { loadExpr, storeStmt, type StorageKind } from './storage.js';
import { header, indexBind, indexLoad, type Bind, WG } from './template.js';
import type { DType } from '../../tensor/dtype.js';

/** Metadata head: [n, rank, dim, size(dim), scalar0, scalar1, idxOff, srcOff, dstOff]; then per dim (innermost last): [size, idxStride, srcStride, dstStride, denseStride]. */
export const SC_HEAD = 9;
export const SC_PER_DIM = 5;

export type Addressing = { readonly kind: 'walk'; readonly index: DType } | { readonly kind: 'pairs' };

export type ApplyMode = 'add' | 'mul' | 'max' | 'min';

/**
 * WGSL computing po, wo, so for write e; `miss` runs (and must leave the iteration) when its index
 * is out of range. `b` names the index (walk) or destination-positions (pairs) binding, `bs` the
 * source positions.
 */
function address(a: Addressing, b: string, bs: string, miss = 'continue;'): string[] {
  const H = SC_HEAD;
  const P = SC_PER_DIM;
  if (a.kind === 'pairs') {
    return [
      `let wo = u32(${b}[e]); let sp = ${bs}[e];`,
      'var po = kmeta[8]; var rem = wo;',
      'for (var k = kmeta[1]; k > 0u; k = k - 1u) {',
      `  let m = ${H}u + ${P}u * (k - 1u); let c = rem % kmeta[m]; rem = rem / kmeta[m]; po = po + c * kmeta[m + 3u];`,
      '}',
      'let so = kmeta[7] + u32(sp);',
    ];
  }
  return [
    'var io = kmeta[6]; var so = kmeta[7]; var po = kmeta[8]; var wo = 0u; var rem = e;',
    'for (var k = kmeta[1]; k > 0u; k = k - 1u) {',
    `  let m = ${H}u + ${P}u * (k - 1u); let c = rem % kmeta[m]; rem = rem / kmeta[m];`,
    '  io = io + c * kmeta[m + 1u]; so = so + c * kmeta[m + 2u];',
    '  if (k - 1u != kmeta[2]) { po = po + c * kmeta[m + 3u]; wo = wo + c * kmeta[m + 4u]; }',
    '}',
    `let x = ${indexLoad(a.index, b, 'io')};`,
    `if (x < 0i || u32(x) >= kmeta[3]) { ${miss} }`,
    `let dm = ${H}u + ${P}u * kmeta[2];`,
    'po = po + u32(x) * kmeta[dm + 3u]; wo = wo + u32(x) * kmeta[dm + 4u];',
  ];
}

/** The addressing bindings: the index (walk), or destination and source positions (pairs). */
function addressBinds(a: Addressing): Bind[] {
  return a.kind === 'walk' ? [{ kind: indexBind(a.index), written: false }] : [
    { kind: 'i32', written: false },
    { kind: 'i32', written: false },
  ];
}

function main(body: string[]): string[] {
  return [
    `@compute @workgroup_size(${WG})`,
    'fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) ng: vec3u) {',
    `  for (var e = gid.x; e < kmeta[0]; e = e + ng.x * ${WG}u) {`,
    ...body.map((l) => `    ${l}`),
    '  }',
    '}',
  ];
}

/** A store of `v` (or, for 64-bit data, the words at source offset `so` of `src`) at element `o` of `dst`. */
function move(kind: StorageKind, wide: boolean, dst: string, o: string, v: string, src: string, so: string): string {
  if (wide) return `${dst}[2u * (${o})] = ${src}[2u * (${so})]; ${dst}[2u * (${o}) + 1u] = ${src}[2u * (${so}) + 1u];`;
  return storeStmt(kind, dst, o, v);
}

/** gather: b0 out (contiguous from outOffset = srcOff word), b1 index, b2 self. Zero where the index is out of range. */
export function gatherSource(out: StorageKind, self: StorageKind, wide: boolean, index: DType): string {
  const lines = header([{ kind: out, written: true }, ...addressBinds({ kind: 'walk', index }), { kind: self, written: false }]);
  const zero = out === 'f32' || out === 'f16' || out === 'f16p' || out === 'bf16p' ? '0.0f' : '0i';
  const at = 'kmeta[7] + e';
  const miss = `${wide ? `b0[2u * (${at})] = 0i; b0[2u * (${at}) + 1u] = 0i;` : storeStmt(out, 'b0', at, zero).replace(/\n/g, ' ')} continue;`;
  const body = address({ kind: 'walk', index }, 'b1', '', miss);
  body.push(move(out, wide, 'b0', at, loadExpr(self, 'b2', 'po', false), 'b2', 'po'));
  return [...lines, ...main(body)].join('\n');
}

/** winner: b0 winners (atomic i32, dense), then the addressing bindings. */
export function winnerSource(a: Addressing): string {
  const lines = header([{ kind: 'atomicI32', written: true }, ...addressBinds(a)]);
  return [...lines, ...main([...address(a, 'b1', 'b2'), 'atomicMax(&b0[wo], i32(e));'])].join('\n');
}

/**
 * set: b0 out, then the addressing bindings, then the winners (i32; walk only: a pairs plan is
 * deduplicated on the host), then the source (when `src`). A scalar source is the metadata words
 * 4 (and 5 for 64-bit data) as bits of the compute type.
 */
export function setSource(out: StorageKind, wide: boolean, a: Addressing, src: boolean): string {
  const binds: Bind[] = [{ kind: out, written: true }, ...addressBinds(a)];
  const win = a.kind === 'walk' ? binds.length : -1;
  if (win >= 0) binds.push({ kind: 'i32', written: false });
  const s = binds.length;
  if (src) binds.push({ kind: out, written: false });
  const lines = header(binds);
  const isF = out === 'f32' || out === 'f16' || out === 'f16p' || out === 'bf16p';
  const scalar = isF ? 'bitcast<f32>(kmeta[4])' : 'bitcast<i32>(kmeta[4])';
  const body = [...address(a, 'b1', 'b2')];
  if (win >= 0) body.push(`if (b${win}[wo] != i32(e)) { continue; }`);
  // A pairs plan marks a scalar source with position -1; `so` is then never read.
  if (wide && !src) body.push('b0[2u * po] = bitcast<i32>(kmeta[4]); b0[2u * po + 1u] = bitcast<i32>(kmeta[5]);');
  else body.push(move(out, wide, 'b0', 'po', src ? loadExpr(out, `b${s}`, 'so', false) : scalar, `b${s}`, 'so'));
  return [...lines, ...main(body)].join('\n');
}

function combineExpr(mode: ApplyMode, t: 'f32' | 'i32', a: string, b: string): string {
  switch (mode) {
    case 'add':
      return `(${a} + ${b})`;
    case 'mul':
      return `(${a} * ${b})`;
    case 'max':
      return t === 'f32' ? `kiln_fmax(${a}, ${b})` : `max(${a}, ${b})`;
    case 'min':
      return t === 'f32' ? `kiln_fmin(${a}, ${b})` : `min(${a}, ${b})`;
    default:
      return mode satisfies never;
  }
}

/**
 * apply: b0 the dense accumulator (f32 as atomic u32 bits, or atomic i32), then the addressing
 * bindings, then the source (when `src`; else the scalar in metadata word 4), then the counts
 * (atomic i32, when `count`: scatter's mean).
 */
export function applySource(t: 'f32' | 'i32', mode: ApplyMode, a: Addressing, src: StorageKind | null, count: boolean): string {
  const binds: Bind[] = [{ kind: t === 'f32' ? 'atomicU32' : 'atomicI32', written: true }, ...addressBinds(a)];
  const s = binds.length;
  if (src) binds.push({ kind: src, written: false });
  const cnt = binds.length;
  if (count) binds.push({ kind: 'atomicI32', written: true });
  const lines = header(binds);
  const toAcc = (v: string): string => {
    if (!src) return t === 'f32' ? 'bitcast<f32>(kmeta[4])' : 'bitcast<i32>(kmeta[4])';
    const isF = src === 'f32' || src === 'f16' || src === 'f16p' || src === 'bf16p';
    return isF === (t === 'f32') ? v : `${t}(${v})`;
  };
  const v = toAcc(src ? loadExpr(src, `b${s}`, 'so', false) : '');
  const native = t === 'i32' && mode !== 'mul';
  const fn = native
    ? ''
    : [
        `fn kiln_apply(i: u32, v: ${t}) {`,
        '  var old = atomicLoad(&b0[i]);',
        '  loop {',
        t === 'f32' ? `    let nv = bitcast<u32>(${combineExpr(mode, t, 'bitcast<f32>(old)', 'v')});` : `    let nv = ${combineExpr(mode, t, 'old', 'v')};`,
        '    let r = atomicCompareExchangeWeak(&b0[i], old, nv);',
        '    if (r.exchanged) { break; }',
        '    old = r.old_value;',
        '  }',
        '}',
      ].join('\n');
  const body = [...address(a, 'b1', 'b2'), `let v = ${v};`];
  body.push(native ? `atomic${mode === 'add' ? 'Add' : mode === 'max' ? 'Max' : 'Min'}(&b0[wo], v);` : 'kiln_apply(wo, v);');
  if (count) body.push(`atomicAdd(&b${cnt}[wo], 1i);`);
  return [...lines, fn, ...main(body)].join('\n');
}

/** finish (mean): b0 the dense accumulator (f32 or i32), b1 the counts: acc / (count + 1) where written; floor for integers. */
export function finishSource(t: 'f32' | 'i32'): string {
  const lines = header([
    { kind: t === 'f32' ? 'f32' : 'i32', written: true },
    { kind: 'i32', written: false },
  ]);
  const div = t === 'f32' ? 'b0[e] / f32(c + 1i)' : 'kiln_idivfloor(b0[e], c + 1i)';
  return [...lines, ...main(['let c = b1[e];', `if (c > 0i) { b0[e] = ${div}; }`])].join('\n');
}
