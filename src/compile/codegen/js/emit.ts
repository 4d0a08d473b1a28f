/**
 * JavaScript source for one fused kernel. Every kernel has the same calling convention:
 *   kernel(H, oshape, ost, rshape, rst, offs, datas)
 * where operands are the kernel's outputs then its inputs; `oshape`/`ost` are the (coalesced)
 * outer iteration dims and each operand's strides over them, `rshape`/`rst` the reduced ("row")
 * dims (empty for pointwise kernels), `offs` the operands' element offsets and `datas` their
 * number arrays. Sizes are never baked in: the same kernel serves any sizes of the traced ranks.
 * Op expressions are inlined from the template table (lower/ops.ts); values stay in registers
 * (float64 JS numbers, rounded to their dtype's precision as they are produced).
 */
import type { ValueId, ValueInfo } from '../../ir.js';
import type { LNode, Lowered } from '../../lower/lower.js';
import { nodeInputs } from '../../lower/lower.js';
import { CAST_OPS, ROUNDED_OPERAND_OPS, roundExpr, TEMPLATES, type TArg } from '../../lower/ops.js';
import { isFloating } from '../../../tensor/dtype.js';
import type { KernelGroup } from '../../lower/schedule.js';
import { wasmPointwiseModule } from '../wasm/pointwise.js';
import { nativePointwiseCandidates, nativeReductionCandidates } from '../c/candidate.js';
import { cpuPath } from '../../../kernels/cpu/native/path.js';
import type { NativePointwise } from '../c/pointwise.js';

export interface KernelConfig {
  /** Pointwise kernels: 'wasm' runs the f32x4 module (codegen/wasm), falling back to JS for short rows. */
  readonly impl?: 'js' | 'wasm' | 'native';
  /** Pointwise kernels: inner-loop unroll factor on the contiguous path. */
  readonly unroll?: 1 | 2 | 4;
  /** Row kernels: keep full-size values needed by a later pass in a scratch Float64Array row. */
  readonly scratch?: boolean;
}

export interface KernelCandidate {
  readonly config: KernelConfig;
  /** The JavaScript kernel (for a Wasm candidate: its fallback for short rows). */
  readonly source: string;
  readonly wasm?: { readonly bytes: Uint8Array; readonly nOutputs: number };
  /** A native C kernel (codegen/c), run in front of `source`. */
  readonly native?: NativePointwise;
}

export interface KernelCode {
  readonly name: string;
  readonly group: KernelGroup;
  /** Config space for the autotuner; the first is the default. */
  readonly candidates: readonly KernelCandidate[];
}

const vn = (id: ValueId): string => `v${id}`;

class Emitter {
  readonly lines: string[] = [];
  private depth = 1;
  line(s: string): void {
    this.lines.push('  '.repeat(this.depth) + s);
  }
  open(s: string): void {
    this.line(s);
    this.depth++;
  }
  indent(): void {
    this.depth++;
  }
  close(s = '}'): void {
    this.depth--;
    this.line(s);
  }
}

/**
 * Statements computing pointwise node `n` into const v<out>. `exact(id)`: the value is already held
 * at its dtype's precision (loaded from an operand); the others are JS doubles, which a
 * ROUNDED_OPERAND_OPS node rounds to their dtype before it compares or casts them.
 */
function nodeStatement(n: LNode, info: (id: ValueId) => ValueInfo, exact: (id: ValueId) => boolean): string[] {
  const out = n.outputs[0]!;
  const dtype = info(out).dtype;
  const pre: string[] = [];
  const mode = n.args[2];
  const roundOperands = ROUNDED_OPERAND_OPS.has(n.op) || (n.op === 'div' && mode?.kind === 'const' && mode.value !== null);
  const targs: TArg[] = n.args.map((a, i) => {
    if (a.kind !== 'value') return { kind: 'const', value: a.kind === 'const' ? a.value : null };
    const { dtype: adt, shape } = info(a.id);
    let expr = vn(a.id);
    if (roundOperands && !exact(a.id) && isFloating(adt) && adt !== 'float64') {
      // The name is per node and operand: two rounding consumers of one value each get their own.
      pre.push(`const ${vn(out)}_r${i} = ${roundExpr(expr, adt, true)};`);
      expr = `${vn(out)}_r${i}`;
    }
    return { kind: 'value', expr, dtype: adt, shape };
  });
  const expr = TEMPLATES.get(n.op)!(targs, { out: dtype });
  if (expr === null) throw new Error(`kiln codegen: no template for ${n.op}`);
  const tmp = `${vn(out)}_`;
  const rounded = roundExpr(tmp, dtype, CAST_OPS.has(n.op));
  if (rounded === tmp) return [...pre, `const ${vn(out)} = ${expr};`];
  return [...pre, `const ${tmp} = ${expr};`, `const ${vn(out)} = ${rounded};`];
}

interface Ctx {
  readonly g: KernelGroup;
  readonly info: (id: ValueId) => ValueInfo;
  readonly nodeOf: Map<ValueId, LNode>;
  /** Operand index of each input / output value. */
  readonly operand: Map<ValueId, number>;
  readonly outOperand: Map<ValueId, number>;
}

/**
 * Body statements for one element: computes `roots` (and their dependencies inside the group) in
 * topological order. Values in `leaves` are already available (per-row scalars), values in
 * `scratchLoads` come from the scratch row, inputs are loaded from their operands at index expr
 * `idx(k)`; `stores` are written to their output operands.
 */
function elementBody(
  c: Ctx,
  roots: readonly ValueId[],
  leaves: ReadonlySet<ValueId>,
  scratchLoads: ReadonlySet<ValueId>,
  idx: (k: number) => string,
  stores: readonly ValueId[],
  scratchStores: readonly ValueId[],
): { stmts: string[]; computed: Set<ValueId>; used: Set<number> } {
  const need = new Set<ValueId>();
  const visit = (id: ValueId): void => {
    if (need.has(id) || leaves.has(id)) return;
    need.add(id);
    if (scratchLoads.has(id)) return;
    const n = c.nodeOf.get(id);
    if (n) for (const a of nodeInputs(n)) visit(a);
  };
  for (const r of roots) visit(r);
  for (const s of stores) visit(s);
  for (const s of scratchStores) visit(s);
  const stmts: string[] = [];
  const used = new Set<number>();
  const computed = new Set<ValueId>();
  // Loads first (inputs), then nodes in program order.
  for (const id of need) {
    if (scratchLoads.has(id)) stmts.push(`const ${vn(id)} = SC${id}[j];`);
    else if (!c.nodeOf.has(id)) {
      const k = c.operand.get(id)!;
      used.add(k);
      stmts.push(`const ${vn(id)} = D${k}[${idx(k)}];`);
    }
  }
  for (const n of c.g.nodes) {
    const o = n.outputs[0]!;
    if (!need.has(o) || scratchLoads.has(o) || n.kind !== 'pointwise') continue;
    stmts.push(...nodeStatement(n, c.info, (id) => !c.nodeOf.has(id)));
    computed.add(o);
  }
  for (const s of stores) {
    const k = c.outOperand.get(s)!;
    used.add(k);
    stmts.push(`D${k}[${idx(k)}] = ${vn(s)};`);
  }
  for (const s of scratchStores) stmts.push(`SC${s}[j] = ${vn(s)};`);
  return { stmts, computed, used };
}

function header(e: Emitter, name: string, nOps: number): void {
  e.lines.push('"use strict";');
  e.lines.push(`return function ${name}(H, oshape, ost, rshape, rst, offs, datas) {`);
  for (let k = 0; k < nOps; k++) e.line(`const D${k} = datas[${k}], os${k} = ost[${k}], rs${k} = rst[${k}];`);
}

/** Advances outer offsets `p<k>` over all but the innermost of `rank` dims (odometer). */
function odometer(e: Emitter, ks: readonly number[], idx: string, shape: string, strides: (k: number) => string, rankExpr: string, ptr: (k: number) => string): void {
  e.open(`for (let d = ${rankExpr}; d >= 0; d--) {`);
  e.line(`${idx}[d]++;`);
  for (const k of ks) e.line(`${ptr(k)} += ${strides(k)}[d];`);
  e.line(`if (${idx}[d] < ${shape}[d]) break;`);
  for (const k of ks) e.line(`${ptr(k)} -= ${strides(k)}[d] * ${shape}[d];`);
  e.line(`${idx}[d] = 0;`);
  e.close();
}

function pointwiseSource(c: Ctx, name: string, nOps: number, unroll: number): string {
  const e = new Emitter();
  header(e, name, nOps);
  const ks = Array.from({ length: nOps }, (_, k) => k);
  e.line('const r = oshape.length, n = oshape[r - 1];');
  e.line('let total = 1;');
  e.line('for (let d = 0; d < r; d++) total *= oshape[d];');
  e.line('if (total === 0) return;');
  for (const k of ks) e.line(`const s${k} = os${k}[r - 1];`);
  e.line(`const contig = ${ks.map((k) => `s${k} === 1`).join(' && ')};`);
  e.line('const idx = new Int32Array(r);');
  e.line(`let ${ks.map((k) => `p${k} = offs[${k}]`).join(', ')};`);
  const roots = c.g.outputs;
  const none = new Set<ValueId>();
  e.open('for (let done = 0; done < total; done += n) {');
  e.open('if (contig) {');
  e.line('let i = 0;');
  if (unroll > 1) {
    e.open(`for (; i + ${unroll - 1} < n; i += ${unroll}) {`);
    for (let u = 0; u < unroll; u++) {
      const body = elementBody(c, roots, none, none, (k) => `p${k} + i + ${u}`, roots, []);
      e.open('{');
      for (const s of body.stmts) e.line(s);
      e.close();
    }
    e.close();
  }
  e.open('for (; i < n; i++) {');
  for (const s of elementBody(c, roots, none, none, (k) => `p${k} + i`, roots, []).stmts) e.line(s);
  e.close();
  e.close('} else {');
  e.indent();
  e.open(`for (let i = 0${ks.map((k) => `, q${k} = p${k}`).join('')}; i < n; i++${ks.map((k) => `, q${k} += s${k}`).join('')}) {`);
  for (const s of elementBody(c, roots, none, none, (k) => `q${k}`, roots, []).stmts) e.line(s);
  e.close();
  e.close();
  odometer(e, ks, 'idx', 'oshape', (k) => `os${k}`, 'r - 2', (k) => `p${k}`);
  e.close();
  e.lines.push('};');
  return e.lines.join('\n');
}

interface Loop {
  /** Reductions accumulated in this pass (empty for the final pass). */
  readonly reductions: LNode[];
  /** Full-size outputs stored in this pass. */
  readonly stores: ValueId[];
  /** Full-size values this pass must compute. */
  need: Set<ValueId>;
  scratchStores: ValueId[];
  scratchLoads: Set<ValueId>;
}

function reduceSource(c: Ctx, name: string, nOps: number, scratch: boolean): { source: string; usesScratch: boolean } {
  const { g, info } = c;
  // Phase of every group value: 0 = depends on no reduction of the group.
  const level = new Map<ValueId, number>();
  const lv = (id: ValueId): number => level.get(id) ?? 0;
  for (const n of g.nodes) {
    const o = n.outputs[0]!;
    if (n.kind === 'reduction') level.set(o, lv(n.reduce!.input) + 1);
    else level.set(o, Math.max(0, ...nodeInputs(n).map(lv)));
  }
  const reductions = g.nodes.filter((n) => n.kind === 'reduction');
  const phases = Math.max(...reductions.map((n) => lv(n.outputs[0]!)));
  const fullOuts = g.outputs.filter((o) => !g.rowScalars.has(o));
  const rowOuts = g.outputs.filter((o) => g.rowScalars.has(o));
  const loops: Loop[] = [];
  for (let p = 1; p <= phases; p++) {
    loops.push({ reductions: reductions.filter((n) => lv(n.outputs[0]!) === p), stores: [], need: new Set(), scratchStores: [], scratchLoads: new Set() });
  }
  if (fullOuts.length > 0) loops.push({ reductions: [], stores: fullOuts, need: new Set(), scratchStores: [], scratchLoads: new Set() });
  // Which full-size values each pass needs; with scratch, values computed by an earlier pass are
  // stored there and loaded later instead of being recomputed.
  const computedBefore = new Map<ValueId, Loop>();
  for (const L of loops) {
    const roots = [...L.reductions.map((n) => n.reduce!.input), ...L.stores];
    const visit = (id: ValueId): void => {
      if (L.need.has(id) || g.rowScalars.has(id) || !g.produced.has(id)) return;
      const before = computedBefore.get(id);
      if (scratch && before) {
        L.need.add(id);
        L.scratchLoads.add(id);
        if (!before.scratchStores.includes(id)) before.scratchStores.push(id);
        return;
      }
      L.need.add(id);
      for (const a of nodeInputs(c.nodeOf.get(id)!)) visit(a);
    };
    for (const r of roots) visit(r);
    for (const id of L.need) if (!L.scratchLoads.has(id) && !computedBefore.has(id)) computedBefore.set(id, L);
  }
  const usesScratch = loops.some((L) => L.scratchStores.length > 0);

  const e = new Emitter();
  header(e, name, nOps);
  const ks = Array.from({ length: nOps }, (_, k) => k);
  e.line('const orank = oshape.length, rrank = rshape.length;');
  e.line('let otot = 1, rowN = 1;');
  e.line('for (let d = 0; d < orank; d++) otot *= oshape[d];');
  e.line('for (let d = 0; d < rrank; d++) rowN *= rshape[d];');
  e.line('if (otot === 0) return;');
  e.line('const n = rshape[rrank - 1];');
  for (const k of ks) e.line(`const s${k} = rs${k}[rrank - 1];`);
  e.line('const oidx = new Int32Array(orank), ridx = new Int32Array(rrank);');
  e.line(`let ${ks.map((k) => `b${k} = offs[${k}]`).join(', ')};`);
  for (const L of loops) for (const id of L.scratchStores) e.line(`const SC${id} = new Float64Array(rowN);`);
  e.open('for (let od = 0; od < otot; od++) {');
  const avail = new Set<ValueId>();
  const emitRowScalars = (): void => {
    // Per-row pointwise ops whose inputs are now available.
    for (const n of g.nodes) {
      const o = n.outputs[0]!;
      if (n.kind !== 'pointwise' || !g.rowScalars.has(o) || avail.has(o)) continue;
      if (!nodeInputs(n).every((id) => avail.has(id))) continue;
      for (const s of nodeStatement(n, info, (id) => !c.nodeOf.has(id))) e.line(s);
      avail.add(o);
    }
  };
  for (const L of loops) {
    for (const r of L.reductions) {
      const init = { sum: '0', mean: '0', prod: '1', amax: '-Infinity', amin: 'Infinity' }[r.reduce!.kind];
      e.line(`let a${r.outputs[0]!} = ${init};`);
    }
    // Body for one element at index expression idx(k).
    const body = (idx: (k: number) => string): { stmts: string[]; used: Set<number> } => {
      const roots = L.reductions.map((n) => n.reduce!.input);
      const b = elementBody(c, roots, avail, L.scratchLoads, idx, L.stores, L.scratchStores);
      for (const r of L.reductions) {
        const a = `a${r.outputs[0]!}`;
        const x = vn(r.reduce!.input);
        switch (r.reduce!.kind) {
          case 'sum':
          case 'mean':
            b.stmts.push(`${a} += ${x};`);
            break;
          case 'prod':
            b.stmts.push(`${a} *= ${x};`);
            break;
          case 'amax':
            b.stmts.push(`if (${x} > ${a} || ${x} !== ${x}) ${a} = ${x};`);
            break;
          case 'amin':
            b.stmts.push(`if (${x} < ${a} || ${x} !== ${x}) ${a} = ${x};`);
            break;
        }
      }
      return b;
    };
    const probe = body((k) => `q${k}`);
    const used = [...probe.used].sort((a, b) => a - b);
    e.open('if (rowN > 0) {');
    e.line(`let ${['_z = 0', ...used.map((k) => `p${k} = b${k}`)].join(', ')};`);
    e.line('ridx.fill(0);');
    e.line(`const contig = ${['true', ...used.map((k) => `s${k} === 1`)].join(' && ')};`);
    e.open('for (let rd = 0; rd < rowN; rd += n) {');
    e.open('if (contig) {');
    e.open('for (let i = 0; i < n; i++) {');
    e.line('const j = rd + i;');
    for (const s of body((k) => `p${k} + i`).stmts) e.line(s);
    e.close();
    e.close('} else {');
    e.indent();
    e.open(`for (let i = 0${used.map((k) => `, q${k} = p${k}`).join('')}; i < n; i++${used.map((k) => `, q${k} += s${k}`).join('')}) {`);
    e.line('const j = rd + i;');
    for (const s of probe.stmts) e.line(s);
    e.close();
    e.close();
    odometer(e, used, 'ridx', 'rshape', (k) => `rs${k}`, 'rrank - 2', (k) => `p${k}`);
    e.close();
    e.close();
    for (const r of L.reductions) {
      const o = r.outputs[0]!;
      const fin = r.reduce!.kind === 'mean' ? `a${o} / rowN` : `a${o}`;
      const rounded = roundExpr(`${vn(o)}_`, info(o).dtype, false);
      e.line(`const ${vn(o)}_ = ${fin};`);
      e.line(`const ${vn(o)} = ${rounded};`);
      avail.add(o);
    }
    emitRowScalars();
  }
  for (const o of rowOuts) e.line(`D${c.outOperand.get(o)!}[b${c.outOperand.get(o)!}] = ${vn(o)};`);
  odometer(e, ks, 'oidx', 'oshape', (k) => `os${k}`, 'orank - 1', (k) => `b${k}`);
  e.close();
  e.lines.push('};');
  return { source: e.lines.join('\n'), usesScratch };
}

/** Generates the candidates of one kernel group. */
export function generateKernel(g: KernelGroup, low: Lowered, name: string): KernelCode {
  const info = (id: ValueId): ValueInfo => low.values.get(id)!;
  const nodeOf = new Map<ValueId, LNode>();
  for (const n of g.nodes) for (const o of n.outputs) nodeOf.set(o, n);
  const operand = new Map<ValueId, number>();
  const outOperand = new Map<ValueId, number>();
  g.outputs.forEach((o, k) => outOperand.set(o, k));
  g.inputs.forEach((id, k) => operand.set(id, g.outputs.length + k));
  const c: Ctx = { g, info, nodeOf, operand, outOperand };
  const nOps = g.outputs.length + g.inputs.length;
  if (g.kind === 'pointwise') {
    const js: KernelCandidate[] = ([4, 2, 1] as const).map((unroll) => ({ config: { impl: 'js', unroll }, source: pointwiseSource(c, name, nOps, unroll) }));
    // The Wasm candidate comes first (the default): on elementwise-1024 it measured 5-6x faster
    // than the unroll-4 JS kernel (vector exp/tanh vs Math.exp/tanh at ~25 ns each).
    const bytes = cpuPath() === 'js' ? null : wasmPointwiseModule(g, low);
    const wasm: KernelCandidate[] = bytes ? [{ config: { impl: 'wasm', unroll: 4 }, source: js[0]!.source, wasm: { bytes, nOutputs: g.outputs.length } }] : [];
    // On the native CPU path the C kernel (codegen/c) comes first.
    return { name, group: g, candidates: [...nativePointwiseCandidates(g, low, js[0]!.source), ...wasm, ...js] };
  }
  const withScratch = reduceSource(c, name, nOps, true);
  const candidates: KernelCandidate[] = [];
  if (withScratch.usesScratch) candidates.push({ config: { scratch: true }, source: withScratch.source });
  const plain = reduceSource(c, name, nOps, false).source;
  candidates.push({ config: { scratch: false }, source: plain });
  // On the native CPU path the C row kernel (codegen/c/reduction.ts) comes first; its fallback
  // (rows that do not coalesce to one dim, tiny calls) is the plain JS row kernel.
  return { name, group: g, candidates: [...nativeReductionCandidates(g, low, plain), ...candidates] };
}
