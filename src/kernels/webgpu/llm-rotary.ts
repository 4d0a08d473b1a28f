/**
 * webgpu kernels of llm.qkNormRotary and llm.applyRotaryEmb (issue #20): a compiled decode step's
 * q/k norm and rotary ran as two norm kernels and the rotary's reference composition (about ten
 * dispatches per tensor, in float32 with casts), 24 dispatches a layer; this is one. With a kernel
 * chosen on webgpu, kiln.compile's q/k-norm + rotary pass (src/llm/qk-norm-rotary-pass.ts) fires
 * there too.
 *
 * One workgroup of 64 per head row (q rows first, then k rows; grid-stride past the grid limit):
 * the sum of squares of the row reduced in workgroup memory, then each invocation takes rotated
 * pairs (i1, i2) = (j, j + D/2) (neox) or (2j, 2j + 1) (gpt-j), normalises them and rounds them to
 * the dtype (as the unfused norm stores its output), rotates them with cos and sin and stores:
 *   n = round(x * rsqrt(mean(x^2) + eps) * w);  out[i1] = n1 cos[i1] - n2 sin[i1];  out[i2] = n2 cos[i2] + n1 sin[i2]
 * Without the norm (applyRotaryEmb) n = x. Float32 compute for every storage form (16-bit loaded
 * into f32, rounded once at the store; rsqrt is the math library's, as the eager norm's).
 * KILN_WEBGPU_ROTARY_REGISTERS (default on) renders the register-resident form (registerBody):
 * every load of the row issued first and kept in registers, the sum by subgroupAdd where the
 * device has subgroups, no second pass over memory; 0 renders the loop form described above.
 *
 * Up to three leading dims per tensor (size-1 dims dropped) with any strides, so q and k read as
 * column slices of a fused qkv output, transposed or not, are read in place; cos and sin broadcast.
 * Operands that share a buffer share a binding (the q and k of a fused qkv output, usually), which
 * keeps the kernel within the default 8 storage bindings; a device that binds fewer than the two
 * tensors need runs them as two launches.
 *
 * Metadata (u32): per tensor (q at 0, k at 25) rows, n1, n2, then offset and strides (3 leading,
 * last) of x, out, cos and sin, then the weight's offset and stride; word 50 eps (f32 bits).
 */
import { cacheGeometry, reshapeAndCache } from '../../ops/defs/llm-paged.js';
import { qkNormRotary } from '../../ops/defs/llm-qk-norm-rotary.js';
import { qkNormRotaryCache } from '../../ops/defs/llm-qk-norm-rotary-cache.js';
import { dispatch } from '../../ops/dispatch.js';
import { applyRotaryEmb } from '../../ops/defs/llm-rotary.js';
import { registerLlmImpl } from '../../ops/library/policy.js';
import type { OutMeta } from '../../ops/schema.js';
import { broadcastStrides } from '../../tensor/layout.js';
import type { DType } from '../../tensor/dtype.js';
import type { Tensor } from '../../tensor/tensor.js';
import type { DeviceBuffer } from '../../runtime/accelerator.js';
import { withPrelude } from '../math/wgsl-prelude.js';
import { getOption } from '../../runtime/config.js';
import { allocOut, unsupportedDtype, webgpu } from './device.js';
import { loadExpr, storeStmt, type StorageKind } from './storage.js';
import { type Bind, dataKind, groupsFor, header, indexBind, indexLoad, kernelFor, words } from './template.js';

const WG = 64;
/** Metadata words per tensor, and the eps word. */
const PER = 25;
const EPS_AT = 2 * PER;
/** llm.qkNormRotaryCache's words: kvHeads, capacity, key and value cache offsets, v's offset and strides (3), the slots' offset and stride. */
const CACHE_AT = EPS_AT + 1;
const CACHE_WORDS = 10;
const LEAD = 3;
/**
 * The norm's scale from each invocation's partial sum of squares `acc`, through the workgroup-memory
 * tree (the loop form, and the register form without subgroups).
 */
const NORM_TREE: readonly string[] = [
  '    red[lid] = acc;',
  '    workgroupBarrier();',
  `    for (var s = ${WG / 2}u; s > 0u; s = s >> 1u) {`,
  '      if (lid < s) { red[lid] = red[lid] + red[lid + s]; }',
  '      workgroupBarrier();',
  '    }',
  '    scale = kiln_rsqrt(red[0] / f32(D) + eps);',
  '    workgroupBarrier();',
];

/**
 * The roles a launch binds (k's only in the two-tensor kernel, weights only with the norm; the
 * caches, v and the slots only in llm.qkNormRotaryCache's, where k's rows go to the key cache).
 */
type Role = 'outQ' | 'outK' | 'xQ' | 'xK' | 'wQ' | 'wK' | 'cos' | 'sin' | 'kc' | 'vc' | 'v' | 'slots';

interface Operand {
  readonly role: Role;
  readonly t: Tensor;
  readonly written: boolean;
}

/** Roles to bindings: each distinct buffer bound once (outputs never share). */
interface Binding {
  readonly buffers: DeviceBuffer[];
  readonly written: boolean[];
  readonly of: Map<Role, number>;
}

function bind(ops: readonly Operand[]): Binding {
  const buffers: DeviceBuffer[] = [];
  const written: boolean[] = [];
  const of = new Map<Role, number>();
  // The slots (an index dtype) get a binding of their own: no data operand shares it.
  const ownKind = new Set<number>();
  for (const o of ops) {
    const buf = o.t.storage.buffer;
    let b = o.written || o.role === 'slots' ? -1 : buffers.findIndex((x, i) => x === buf && !written[i] && !ownKind.has(i));
    if (b < 0) {
      if (buffers.some((x) => x === buf)) throw new Error(`webgpu rotary kernel: operand '${o.role}' shares a buffer with a written operand`);
      b = buffers.length;
      buffers.push(buf);
      written.push(o.written);
      if (o.role === 'slots') ownKind.add(b);
    }
    of.set(o.role, b);
  }
  return { buffers, written, of };
}

/** Leading dims of x without the size-1 ones (at most LEAD), padded in front to LEAD. */
function leadDims(op: string, name: string, x: Tensor): number[] {
  const lead = x.shape.slice(0, -1).map((s, i) => ({ s, i })).filter((d) => d.s !== 1);
  if (lead.length > LEAD) throw new Error(`${op}: the webgpu kernel takes at most ${LEAD} leading dims of size > 1 in '${name}', got shape [${x.shape.join(', ')}]`);
  const idx = lead.map((d) => d.i);
  while (idx.length < LEAD) idx.unshift(-1);
  return idx;
}

/** The metadata of one tensor: its rows and leading sizes, x/out/cos/sin offsets and strides, the weight's. */
function tensorWords(op: string, name: string, x: Tensor, out: Tensor, cos: Tensor, sin: Tensor, w: Tensor | null): number[] {
  const idx = leadDims(op, name, x);
  const size = (i: number): number => (i < 0 ? 1 : x.shape[i]!);
  const last = x.ndim - 1;
  const place = (strides: readonly number[], offset: number): number[] => [offset, ...idx.map((i) => (i < 0 ? 0 : strides[i]!)), strides[last]!];
  const rows = idx.reduce((n, i) => n * size(i), 1);
  return [
    rows,
    size(idx[1]!),
    size(idx[2]!),
    ...place(x.strides, x.offset),
    ...place(out.strides, out.offset),
    ...place(broadcastStrides(cos.shape, cos.strides, x.shape), cos.offset),
    ...place(broadcastStrides(sin.shape, sin.strides, x.shape), sin.offset),
    w ? w.offset : 0,
    w ? (w.strides[0] ?? 1) : 0,
  ];
}

/**
 * The WGSL of one launch: `b` maps roles to bindings (every binding of storage kind `kind` but the
 * slots', of `slots`). With `slots` (llm.qkNormRotaryCache) k's rows are stored into the key cache
 * at their token's slot and the workgroup of each k row copies the same row of v into the value
 * cache (a negative slot or one past the capacity skips both).
 */
function source(kind: StorageKind, d: number, isNeox: boolean, norm: boolean, two: boolean, b: Binding, slots: DType | null = null, form: RotaryForm = { registers: false, subgroups: false }): string {
  const slotBinding = slots === null ? -1 : b.of.get('slots')!;
  const binds: Bind[] = b.buffers.map((_, i) => (i === slotBinding ? { kind: indexBind(slots!), written: false } : { kind, written: b.written[i]! }));
  const lines = header(binds, { f16: kind === 'f16' || kind === 'f16p', bf16: kind === 'bf16p' });
  const v = (r: Role): string => `b${b.of.get(r)!}`;
  const ld = (r: Role, i: string): string => loadExpr(kind, v(r), i, b.written[b.of.get(r)!]!);
  // q's operand or k's, through a function per pair: one load where both share a binding, else a
  // branch on isQ (never select(), which would read the other binding at this tensor's index: out
  // of bounds, and Node runs Dawn without robustness).
  const helpers: string[] = [];
  const pick = (rq: Role, rk: Role, i: string): string => {
    const name = `ld_${rq}`;
    if (!helpers.some((h) => h.startsWith(`fn ${name}(`))) {
      const body = !two || b.of.get(rq) === b.of.get(rk) ? `return ${ld(rq, 'i')};` : `if (isQ) { return ${ld(rq, 'i')}; } return ${ld(rk, 'i')};`;
      helpers.push(`fn ${name}(isQ: bool, i: u32) -> f32 { ${body} }`);
    }
    return `${name}(isQ, ${i})`;
  };
  const round =
    kind === 'f32' ? (e: string): string => e : kind === 'bf16p' ? (e: string): string => `bitcast<f32>(kiln_bf16_bits(${e}) << 16u)` : (e: string): string => `kiln_f16_value(kiln_f16_bits(${e}))`;
  // Element p of the row's output: q's (or k's) output tensor, or k's slot in the key cache.
  const store = (p: string, val: string): string => {
    const i = at('m + 8u', p);
    if (!two) return storeStmt(kind, v('outQ'), i, val);
    const kStore = slots !== null ? `if (cs >= 0i) { ${storeStmt(kind, v('kc'), `kmeta[${CACHE_AT + 2}] + (u32(cs) * CKV + hh) * D + ${p}`, val)} }` : storeStmt(kind, v('outK'), i, val);
    return `if (isQ) { ${storeStmt(kind, v('outQ'), i, val)} } else { ${kStore} }`;
  };
  const at = (base: string, i: string): string => `u32(i32(kmeta[${base}]) + i32(i0) * bitcast<i32>(kmeta[${base} + 1u]) + i32(i1) * bitcast<i32>(kmeta[${base} + 2u]) + i32(i2) * bitcast<i32>(kmeta[${base} + 3u]) + i32(${i}) * bitcast<i32>(kmeta[${base} + 4u]))`;
  lines.push(
    `const D = ${d}u;`,
    `const HALF = ${d / 2}u;`,
    `var<workgroup> red: array<f32, ${WG}>;`,
    `@compute @workgroup_size(${WG})`,
    `fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32, @builtin(num_workgroups) ng: vec3u${form.registers && form.subgroups && norm ? ', @builtin(subgroup_id) sid: u32, @builtin(subgroup_invocation_id) sgid: u32, @builtin(num_subgroups) nsub: u32' : ''}) {`,
    `  let rowsQ = kmeta[0]; let rowsK = ${two ? `kmeta[${PER}]` : '0u'};`,
    `  let eps = bitcast<f32>(kmeta[${EPS_AT}]);`,
    '  for (var r = wid.x; r < rowsQ + rowsK; r = r + ng.x) {',
    '    let isQ = r < rowsQ;',
    `    let m = select(${PER}u, 0u, isQ);`,
    '    let row = select(r - rowsQ, r, isQ);',
    '    let n1 = kmeta[m + 1u]; let n2 = kmeta[m + 2u];',
    '    let i2 = row % n2; let i1 = (row / n2) % n1; let i0 = row / (n1 * n2);',
    '    var scale = 1.0;',
  );
  if (form.registers) {
    const slotLoad = (i: string): string => indexLoad(slots!, v('slots'), i);
    const vStore = (e: string, val: string): string => storeStmt(kind, v('vc'), `kmeta[${CACHE_AT + 3}] + (u32(cs) * CKV + hh) * D + ${e}`, val);
    registerBody(lines, { d, isNeox, norm, slots, subgroups: form.subgroups, pick, round, store, at, ld, slotLoad, vStore });
    lines.push('  }', '}');
    const at0 = lines.findIndex((l) => l.startsWith('@compute'));
    lines.splice(at0, 0, ...helpers);
    if (form.subgroups && norm) lines.unshift('enable subgroups;');
    return lines.join('\n');
  }
  if (slots !== null) {
    // k is [N, kvHeads, D]: its row r is token r / kvHeads, head r % kvHeads.
    lines.push(
      `    let CKV = kmeta[${CACHE_AT}]; let tok = row / CKV; let hh = row % CKV;`,
      '    var cs = -1i;',
      `    if (!isQ) { cs = ${indexLoad(slots, v('slots'), `kmeta[${CACHE_AT + 8}] + tok * kmeta[${CACHE_AT + 9}]`)}; if (cs >= 0i && u32(cs) >= kmeta[${CACHE_AT + 1}]) { cs = -1i; } }`,
    );
  }
  if (norm) {
    lines.push(
      '    var acc = 0.0;',
      `    for (var e = lid; e < D; e = e + ${WG}u) { let x = ${pick('xQ', 'xK', at('m + 3u', 'e'))}; acc = acc + x * x; }`,
      ...NORM_TREE,
    );
  }
  const w = (i: string): string => pick('wQ', 'wK', `kmeta[m + 23u] + (${i}) * kmeta[m + 24u]`);
  lines.push(
    `    for (var j = lid; j < HALF; j = j + ${WG}u) {`,
    `      let p1 = ${isNeox ? 'j' : '2u * j'}; let p2 = ${isNeox ? 'j + HALF' : '2u * j + 1u'};`,
    `      let a = ${pick('xQ', 'xK', at('m + 3u', 'p1'))};`,
    `      let b = ${pick('xQ', 'xK', at('m + 3u', 'p2'))};`,
    norm ? `      let n1v = ${round(`a * scale * ${w('p1')}`)}; let n2v = ${round(`b * scale * ${w('p2')}`)};` : '      let n1v = a; let n2v = b;',
    `      let c1 = ${pick('cos', 'cos', at('m + 13u', 'p1'))}; let s1 = ${pick('sin', 'sin', at('m + 18u', 'p1'))};`,
    `      let c2 = ${pick('cos', 'cos', at('m + 13u', 'p2'))}; let s2 = ${pick('sin', 'sin', at('m + 18u', 'p2'))};`,
    `      ${store('p1', 'n1v * c1 - n2v * s1')}`,
    `      ${store('p2', 'n2v * c2 + n1v * s2')}`,
    '    }',
  );
  if (slots !== null) {
    const vi = `u32(i32(kmeta[${CACHE_AT + 4}]) + i32(tok) * bitcast<i32>(kmeta[${CACHE_AT + 5}]) + i32(hh) * bitcast<i32>(kmeta[${CACHE_AT + 6}]) + i32(e) * bitcast<i32>(kmeta[${CACHE_AT + 7}]))`;
    lines.push(
      `    if (!isQ && cs >= 0i) { for (var e = lid; e < D; e = e + ${WG}u) { ${storeStmt(kind, v('vc'), `kmeta[${CACHE_AT + 3}] + (u32(cs) * CKV + hh) * D + e`, ld('v', vi))} } }`,
    );
  }
  lines.push('  }', '}');
  // The helpers go before main (after the bindings and the prelude mark), once the body named them.
  const at0 = lines.findIndex((l) => l.startsWith('@compute'));
  lines.splice(at0, 0, ...helpers);
  return lines.join('\n');
}

/** How the kernel walks a row: the loop form, or register-resident (KILN_WEBGPU_ROTARY_REGISTERS), with subgroup sums where the device has them. */
export interface RotaryForm {
  readonly registers: boolean;
  readonly subgroups: boolean;
}

/** The form launches take now (options read per launch: a bench may switch them), and its kernel-key suffix. */
function rotaryForm(): { form: RotaryForm; key: string } {
  const registers = getOption('KILN_WEBGPU_ROTARY_REGISTERS');
  const subgroups = registers && webgpu().hasFeature('subgroups');
  return { form: { registers, subgroups }, key: registers ? `.regs${subgroups ? '.sg' : ''}` : '' };
}

interface BodyParts {
  readonly d: number;
  readonly isNeox: boolean;
  readonly norm: boolean;
  readonly slots: DType | null;
  readonly subgroups: boolean;
  pick(rq: Role, rk: Role, i: string): string;
  round(e: string): string;
  store(p: string, val: string): string;
  at(base: string, i: string): string;
  ld(r: Role, i: string): string;
  /** Cache mode: the slot load at index i, and the store of value element e into the value cache. */
  slotLoad(i: string): string;
  vStore(e: string, val: string): string;
}

/**
 * The row body of the register-resident form (issue #20: llm.qkNormRotaryCache took 21.7 us for a
 * decode step's 24 head rows on the H200, a chain of round trips: the norm's loop loaded the row,
 * the rotary pass loaded it again with the weights, cos and sin after the reduction's barriers,
 * and the value row's copy came last). Every invocation first issues all its loads: its pairs'
 * x values (pair j = lid + u * 64, clamped to the row: lanes past it load a valid pair and are
 * masked out), weights, cos and sin, and in cache mode its elements of the k row's value row; then
 * the slot; the sum of squares from those registers (subgroupAdd and one partial per subgroup
 * where the device has subgroups, else the workgroup-memory tree); then the stores, from registers.
 * The sum's order differs from the loop form's (the values within float32 rounding of each other).
 */
function registerBody(lines: string[], c: BodyParts): void {
  const P = Math.ceil(c.d / 2 / WG);
  const E = Math.ceil(c.d / WG);
  const w = (i: string): string => c.pick('wQ', 'wK', `kmeta[m + 23u] + (${i}) * kmeta[m + 24u]`);
  for (let u = 0; u < P; u++) {
    lines.push(
      `    let jv${u} = lid + ${u * WG}u; let j${u} = min(jv${u}, HALF - 1u);`,
      `    let p1_${u} = ${c.isNeox ? `j${u}` : `2u * j${u}`}; let p2_${u} = ${c.isNeox ? `j${u} + HALF` : `2u * j${u} + 1u`};`,
      `    let xa${u} = ${c.pick('xQ', 'xK', c.at('m + 3u', `p1_${u}`))}; let xb${u} = ${c.pick('xQ', 'xK', c.at('m + 3u', `p2_${u}`))};`,
      ...(c.norm ? [`    let w1_${u} = ${w(`p1_${u}`)}; let w2_${u} = ${w(`p2_${u}`)};`] : []),
      `    let c1_${u} = ${c.pick('cos', 'cos', c.at('m + 13u', `p1_${u}`))}; let s1_${u} = ${c.pick('sin', 'sin', c.at('m + 18u', `p1_${u}`))};`,
      `    let c2_${u} = ${c.pick('cos', 'cos', c.at('m + 13u', `p2_${u}`))}; let s2_${u} = ${c.pick('sin', 'sin', c.at('m + 18u', `p2_${u}`))};`,
    );
  }
  if (c.slots !== null) {
    // k is [N, kvHeads, D]: its row r is token r / kvHeads, head r % kvHeads; its value row's elements (e = lid + k * 64, clamped).
    lines.push(`    let CKV = kmeta[${CACHE_AT}]; let tok = row / CKV; let hh = row % CKV;`);
    for (let e = 0; e < E; e++) lines.push(`    var vv${e} = 0.0;`);
    const vi = (e: string): string => `u32(i32(kmeta[${CACHE_AT + 4}]) + i32(tok) * bitcast<i32>(kmeta[${CACHE_AT + 5}]) + i32(hh) * bitcast<i32>(kmeta[${CACHE_AT + 6}]) + i32(${e}) * bitcast<i32>(kmeta[${CACHE_AT + 7}]))`;
    lines.push(`    if (!isQ) { ${Array.from({ length: E }, (_, e) => `vv${e} = ${c.ld('v', vi(`min(lid + ${e * WG}u, D - 1u)`))};`).join(' ')} }`);
    lines.push(
      '    var cs = -1i;',
      `    if (!isQ) { cs = ${c.slotLoad(`kmeta[${CACHE_AT + 8}] + tok * kmeta[${CACHE_AT + 9}]`)}; if (cs >= 0i && u32(cs) >= kmeta[${CACHE_AT + 1}]) { cs = -1i; } }`,
    );
  }
  if (c.norm) {
    lines.push('    var acc = 0.0;');
    for (let u = 0; u < P; u++) lines.push(`    acc = acc + select(0.0, xa${u} * xa${u} + xb${u} * xb${u}, jv${u} < HALF);`);
    if (c.subgroups)
      lines.push(
        '    let sgs = subgroupAdd(acc);',
        '    if (sgid == 0u) { red[sid] = sgs; }',
        '    workgroupBarrier();',
        '    var tot = red[0];',
        '    for (var k = 1u; k < nsub; k = k + 1u) { tot = tot + red[k]; }',
        '    scale = kiln_rsqrt(tot / f32(D) + eps);',
        '    workgroupBarrier();',
      );
    else lines.push(...NORM_TREE);
  }
  for (let u = 0; u < P; u++) {
    lines.push(
      `    if (jv${u} < HALF) {`,
      c.norm ? `      let n1v = ${c.round(`xa${u} * scale * w1_${u}`)}; let n2v = ${c.round(`xb${u} * scale * w2_${u}`)};` : `      let n1v = xa${u}; let n2v = xb${u};`,
      `      ${c.store(`p1_${u}`, `n1v * c1_${u} - n2v * s1_${u}`)}`,
      `      ${c.store(`p2_${u}`, `n2v * c2_${u} + n1v * s2_${u}`)}`,
      '    }',
    );
  }
  if (c.slots !== null) lines.push(`    if (!isQ && cs >= 0i) { ${Array.from({ length: E }, (_, e) => `if (lid + ${e * WG}u < D) { ${c.vStore(`lid + ${e * WG}u`, `vv${e}`)} }`).join(' ')} }`);
}

interface Part {
  readonly name: 'q' | 'k';
  readonly x: Tensor;
  readonly out: Tensor;
  readonly w: Tensor | null;
}

/** Launches the kernel over `parts` (q, and k when there is one), in one launch where the device binds every operand. */
function launch(op: string, parts: readonly Part[], cos: Tensor, sin: Tensor, eps: number, isNeox: boolean): void {
  const x0 = parts[0]!.x;
  const d = x0.shape[x0.ndim - 1]!;
  const { kind, wide } = dataKind(op, x0);
  if (wide) throw unsupportedDtype(op, x0);
  const acc = webgpu();
  const maxBindings = (acc.bridge.adapter.limits.maxStorageBuffersPerShaderStage ?? 8) - 1;
  const norm = parts[0]!.w !== null;
  const operands = (ps: readonly Part[]): Operand[] => {
    const [q, k] = ps;
    const list: Operand[] = [{ role: 'outQ', t: q!.out, written: true }];
    if (k) list.push({ role: 'outK', t: k.out, written: true });
    list.push({ role: 'xQ', t: q!.x, written: false });
    if (k) list.push({ role: 'xK', t: k.x, written: false });
    if (norm) {
      list.push({ role: 'wQ', t: q!.w!, written: false });
      if (k) list.push({ role: 'wK', t: k.w!, written: false });
    }
    list.push({ role: 'cos', t: cos, written: false }, { role: 'sin', t: sin, written: false });
    return list;
  };
  const run = (ps: readonly Part[]): void => {
    const b = bind(operands(ps));
    const two = ps.length === 2;
    const meta = new Array<number>(EPS_AT + 1).fill(0);
    ps.forEach((p, i) => tensorWords(op, p.name, p.x, p.out, cos, sin, p.w).forEach((wd, j) => (meta[i * PER + j] = wd)));
    meta[EPS_AT] = new Uint32Array(new Float32Array([eps]).buffer)[0]!;
    const rf = rotaryForm();
    const key = `rotary.${kind}.${d}.${isNeox ? 'neox' : 'gptj'}.${norm ? 'norm' : 'plain'}.${two ? 'qk' : 'q'}.${[...b.of.entries()].map(([r, i]) => `${r}${i}`).join('')}${rf.key}`;
    const k = kernelFor(key, () => source(kind, d, isNeox, norm, two, b, null, rf.form));
    const rows = ps.reduce((n, p) => n + p.x.numel() / d, 0);
    acc.dispatch(k, b.buffers, words(meta), groupsFor(rows, 1));
  };
  if (parts.length === 2 && bind(operands(parts)).buffers.length > maxBindings) {
    run([parts[0]!]);
    run([parts[1]!]);
  } else run(parts);
}

/**
 * llm.qkNormRotaryCache in one launch: q's rows to `qo`, k's rotated rows and v's rows into the
 * caches at their tokens' slots. Returns false, dispatching nothing, where the kernel does not
 * apply (k or v not [N, kvHeads, D], more bindings than the device has, a buffer both read and
 * written): the caller runs the two ops.
 */
function launchCache(q: Tensor, k: Tensor, v: Tensor, qw: Tensor, kw: Tensor, eps: number, cos: Tensor, sin: Tensor, isNeox: boolean, kc: Tensor, vc: Tensor, slots: Tensor, qo: Tensor): boolean {
  const op = qkNormRotaryCache.name;
  const g = cacheGeometry(op, kc, vc);
  const d = q.shape[q.ndim - 1]!;
  const shape3 = (t: Tensor): boolean => t.ndim === 3 && t.shape[1] === g.kvHeads && t.shape[2] === d;
  if (!shape3(k) || !shape3(v) || v.shape[0] !== k.shape[0] || d !== g.headDim || slots.ndim > 1) return false;
  if ((slots.dtype !== 'int32' && slots.dtype !== 'int64') || q.numel() === 0) return false;
  const { kind, wide } = dataKind(op, q);
  if (wide) throw unsupportedDtype(op, q);
  const acc = webgpu();
  const maxBindings = (acc.bridge.adapter.limits.maxStorageBuffersPerShaderStage ?? 8) - 1;
  const operands: Operand[] = [
    { role: 'outQ', t: qo, written: true },
    { role: 'kc', t: kc, written: true },
    { role: 'vc', t: vc, written: true },
    { role: 'xQ', t: q, written: false },
    { role: 'xK', t: k, written: false },
    { role: 'wQ', t: qw, written: false },
    { role: 'wK', t: kw, written: false },
    { role: 'cos', t: cos, written: false },
    { role: 'sin', t: sin, written: false },
    { role: 'v', t: v, written: false },
    { role: 'slots', t: slots, written: false },
  ];
  let b: Binding;
  try {
    b = bind(operands);
  } catch {
    return false;
  }
  if (b.buffers.length > maxBindings) return false;
  const meta = new Array<number>(CACHE_AT + CACHE_WORDS).fill(0);
  tensorWords(op, 'q', q, qo, cos, sin, qw).forEach((wd, j) => (meta[j] = wd));
  // k's output strides are unused (its rows go to the cache): k itself stands in for them.
  tensorWords(op, 'k', k, k, cos, sin, kw).forEach((wd, j) => (meta[PER + j] = wd));
  meta[EPS_AT] = new Uint32Array(new Float32Array([eps]).buffer)[0]!;
  const cacheWords = [g.kvHeads, g.numBlocks * g.blockSize, kc.offset, vc.offset, v.offset, v.strides[0]!, v.strides[1]!, v.strides[2]!, slots.offset, slots.ndim === 0 ? 0 : slots.strides[0]!];
  cacheWords.forEach((wd, j) => (meta[CACHE_AT + j] = wd));
  const rf = rotaryForm();
  const key = `rotary.${kind}.${d}.${isNeox ? 'neox' : 'gptj'}.norm.cache.${slots.dtype}.${[...b.of.entries()].map(([r, i]) => `${r}${i}`).join('')}${rf.key}`;
  const kernel = kernelFor(key, () => source(kind, d, isNeox, true, true, b, slots.dtype, rf.form));
  const rows = q.numel() / d + k.numel() / d;
  acc.dispatch(kernel, b.buffers, words(meta), groupsFor(rows, 1));
  return true;
}

/**
 * Tests: the WGSL of llm.qkNormRotaryCache's kernel for a decode step's usual operands (q, k and v
 * slices of one qkv buffer; weights, cos, sin, caches and slots apart), for compile checks on a
 * device that binds fewer buffers than the kernel needs (Dawn's null backend binds 8).
 */
export function qkNormRotaryCacheSourceForTest(kind: StorageKind, d: number, isNeox: boolean, slots: DType, form: RotaryForm = rotaryForm().form): string {
  const roles: Role[][] = [['outQ'], ['kc'], ['vc'], ['xQ', 'xK', 'v'], ['wQ'], ['wK'], ['cos'], ['sin'], ['slots']];
  const of = new Map<Role, number>();
  roles.forEach((rs, i) => rs.forEach((r) => of.set(r, i)));
  const b: Binding = { buffers: roles.map(() => ({}) as DeviceBuffer), written: roles.map((_, i) => i < 3), of };
  return withPrelude(source(kind, d, isNeox, true, true, b, slots, form));
}

registerLlmImpl(qkNormRotaryCache.name, {
  name: 'webgpu-kernel',
  kind: 'kernel',
  device: 'webgpu',
  priority: 0,
  fn: (ctx, qIn, kIn, vIn, qwIn, kwIn, eps, cosIn, sinIn, isNeox, kcIn, vcIn, slotsIn) => {
    const [q, k, v, qw, kw, cos, sin, kc, vc, slotsT] = [qIn, kIn, vIn, qwIn, kwIn, cosIn, sinIn, kcIn, vcIn, slotsIn] as Tensor[];
    const metas = ctx.out as unknown as OutMeta[];
    const slots = slotsT!.device.type === 'webgpu' ? slotsT! : slotsT!.to(kc!.device);
    try {
      const qo = allocOut(metas[0]!);
      if (launchCache(q!, k!, v!, qw!, kw!, eps as number, cos!, sin!, isNeox as boolean, kc!, vc!, slots, qo)) return [qo, kc!, vc!];
      qo.dispose();
      // The two ops it fuses.
      const [q2, k2] = dispatch(qkNormRotary, q!, k!, qw!, kw!, eps as number, cos!, sin!, isNeox as boolean) as unknown as Tensor[];
      dispatch(reshapeAndCache, k2!, v!, kc!, vc!, slots);
      k2!.dispose();
      return [q2!, kc!, vc!];
    } finally {
      if (slots !== slotsT) slots.dispose();
    }
  },
});

registerLlmImpl(qkNormRotary.name, {
  name: 'webgpu-kernel',
  kind: 'kernel',
  device: 'webgpu',
  priority: 0,
  fn: (ctx, q, k, qw, kw, eps, cos, sin, isNeox) => {
    const [mq, mk] = ctx.out as OutMeta[];
    const qo = allocOut(mq!);
    const ko = allocOut(mk!);
    const parts: Part[] = [];
    if ((q as Tensor).numel() > 0) parts.push({ name: 'q', x: q as Tensor, out: qo, w: qw as Tensor });
    if ((k as Tensor).numel() > 0) parts.push({ name: 'k', x: k as Tensor, out: ko, w: kw as Tensor });
    if (parts.length > 0) launch(qkNormRotary.name, parts, cos as Tensor, sin as Tensor, eps as number, isNeox as boolean);
    return [qo, ko];
  },
});

registerLlmImpl(applyRotaryEmb.name, {
  name: 'webgpu-kernel',
  kind: 'kernel',
  device: 'webgpu',
  priority: 0,
  fn: (ctx, x, cos, sin, isNeox) => {
    const out = allocOut(ctx.out as OutMeta);
    if ((x as Tensor).numel() > 0) launch(applyRotaryEmb.name, [{ name: 'q', x: x as Tensor, out, w: null }], cos as Tensor, sin as Tensor, 0, isNeox as boolean);
    return out;
  },
});
