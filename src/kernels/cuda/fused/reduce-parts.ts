/**
 * The pieces every reduce strategy's kernels are made of (emit-reduce.ts: thread, warp, block and
 * split; emit-col.ts: column tiles): reduction levels (passes), kernel parameters, row totals and
 * bases, the element loop of one pass over (part of) a row, the finishing of reductions and the
 * per-row scalar nodes and stores after them. Split out of emit-reduce.ts so that the column
 * strategy's emitter shares them without an import cycle; the text they write is unchanged.
 */
import { cLit, computeType, type CType } from '../codegen/ctypes.js';
import type { Param } from './args.js';
import { type GroupCtx, elementCode, Lines, nodeStatement, ptrType, storeForm } from './body.js';
import { declareValue } from './ctypes.js';
import { type ArgKind, argUpdate, isArg } from './emit-arg.js';
import type { FusedNode } from './group.js';
import { type IndexPlan, indexPlan, sizeParams } from './index-math.js';
import type { KernelSpec } from './spec.js';

type ValueId = number;

export const OPS: Record<string, string> = { sum: 'KSum', mean: 'KSum', prod: 'KProd', amax: 'KMax', amin: 'KMin' };

export function identity(kind: string, t: CType): string {
  switch (kind) {
    case 'sum':
    case 'mean':
      return cLit(0, t);
    case 'prod':
      return cLit(1, t);
    case 'amax':
    case 'argmax':
      return t === 'int' ? '(-2147483647 - 1)' : t === 'long long' ? '(-9223372036854775807LL - 1)' : cLit(-Infinity, t);
    case 'amin':
    case 'argmin':
      return t === 'int' ? '2147483647' : t === 'long long' ? '9223372036854775807LL' : cLit(Infinity, t);
    default:
      throw new Error(`kiln cuda codegen: unknown reduction ${kind}`);
  }
}

export interface Phase {
  readonly reductions: FusedNode[];
  readonly stores: ValueId[];
}

/** Reduction levels: each pass over the row computes the reductions of one level. */
export function phases(c: GroupCtx): { passes: Phase[]; rowOuts: ValueId[] } {
  const { g } = c;
  const level = new Map<ValueId, number>();
  const lv = (id: ValueId): number => level.get(id) ?? 0;
  for (const n of g.nodes) {
    const o = n.outputs[0]!;
    // An arg reduction's index output is at its value's level.
    if (n.kind === 'reduction') for (const out of n.outputs) level.set(out, lv(n.reduce!.input) + 1);
    else level.set(o, Math.max(0, ...n.inputs.map(lv)));
  }
  const reductions = g.nodes.filter((n) => n.kind === 'reduction');
  const top = Math.max(...reductions.map((n) => lv(n.outputs[0]!)));
  const passes: Phase[] = [];
  for (let p = 1; p <= top; p++) passes.push({ reductions: reductions.filter((n) => lv(n.outputs[0]!) === p), stores: [] });
  const fullOuts = g.outputs.filter((o) => !g.rowScalars.has(o));
  if (fullOuts.length > 0) passes.push({ reductions: [], stores: fullOuts });
  return { passes, rowOuts: g.outputs.filter((o) => g.rowScalars.has(o)) };
}

/** Whether the split strategy can run this group (one pass, no full-size outputs, no arg reductions). */
export function splittable(c: GroupCtx): boolean {
  const { passes } = phases(c);
  return passes.length === 1 && passes[0]!.stores.length === 0 && !passes[0]!.reductions.some(isArg);
}

/** Row base offsets from the row index `row` (sizes M<d>, strides a<k>_<d>) and in-row offsets from `j` (sizes R<d>, strides b<k>_<d>). */
export function reduceIndexPlans(spec: KernelSpec): { outer: IndexPlan; row: IndexPlan } {
  const idx = spec.idx64 ? 'long long' : 'int';
  const ip = spec.idx64 ? 'i64' : 'i32';
  return {
    outer: indexPlan(
      'row',
      spec.orank,
      spec.ops.map((o) => ({ linear: false, zero: o.outerZero, unitInner: false })),
      'M',
      'a',
      'q',
      idx,
      ip,
    ),
    row: indexPlan(
      'j',
      spec.rrank,
      spec.ops.map((o) => ({ linear: o.linear, zero: o.rowZero, unitInner: o.unitInner })),
      'R',
      'b',
      'w',
      idx,
      ip,
    ),
  };
}

export interface Shared {
  readonly c: GroupCtx;
  readonly idx: string;
  readonly params: Param[];
  readonly outer: ReturnType<typeof indexPlan>;
  readonly rowPlan: ReturnType<typeof indexPlan>;
  readonly decl: string;
}

/** Parameters and their declaration: pointers, host scalars, sizes, strides, then `ints` (launch-computed integers) and the workspace pointer when `ws`. */
export function shared(c: GroupCtx, ints: readonly string[] = [], ws = false): Shared {
  const { spec } = c;
  const idx = spec.idx64 ? 'long long' : 'int';
  const ip = spec.idx64 ? 'i64' : 'i32';
  const nOps = spec.ops.length;
  const ptrs: Param[] = Array.from({ length: nOps }, (_, k): Param => ({ name: `p${k}`, type: 'ptr', source: { kind: 'operand', k } }));
  // Host scalars s0.. of expression nodes (eager one-node programs only), as emitPointwise takes them.
  const scalars: Param[] = Array.from({ length: c.g.params?.count ?? 0 }, (_, j): Param => ({ name: `p_s${j}`, type: 'f64', source: { kind: 'scalar', what: `s${j}` } }));
  const { outer, row: rowPlan } = reduceIndexPlans(spec);
  const params: Param[] = [...ptrs, ...scalars, ...sizeParams('M', spec.orank, ip), ...sizeParams('R', spec.rrank, ip), ...outer.params, ...rowPlan.params];
  for (const what of ints) params.push({ name: what, type: ip, source: { kind: 'int', what } });
  if (ws) params.push({ name: 'ws', type: 'ptr', source: { kind: 'workspace' } });
  const cType = (t: Param['type']): string => (t === 'f64' ? 'double' : t === 'i64' ? 'long long' : 'int');
  const decl = params
    .map((p) => (p.type === 'ptr' ? (p.name === 'ws' ? `unsigned char* __restrict__ ws` : `${ptrType(c, Number(p.name.slice(1)))} ${p.name}`) : `${cType(p.type)} ${p.name}`))
    .join(', ');
  return { c, idx, params, outer, rowPlan, decl };
}

export function rowTotals(L: Lines, s: Shared): void {
  const { spec } = s.c;
  L.line(`[[maybe_unused]] const ${s.idx} M = ${Array.from({ length: spec.orank }, (_, d) => `M${d}`).join(' * ')};`);
  L.line(`[[maybe_unused]] const ${s.idx} N = ${Array.from({ length: spec.rrank }, (_, d) => `R${d}`).join(' * ')};`);
  const p = s.c.g.params;
  for (let j = 0; j < (p?.count ?? 0); j++) L.line(`const ${p!.ct} s${j} = (${p!.ct})p_s${j};`);
}

export function rowBases(L: Lines, s: Shared): void {
  for (const st of s.outer.coords) L.line(st);
  s.c.spec.ops.forEach((_, k) => L.line(`[[maybe_unused]] const ${s.idx} bs${k} = ${s.outer.offsets[k]};`));
}

/** Per-row scalar nodes whose inputs are all available; adds them to `avail`. `prefix` starts each declaration (`[[maybe_unused]] `). */
export function rowScalars(L: Lines, c: GroupCtx, avail: Set<ValueId>, prefix = ''): void {
  for (const n of c.g.nodes) {
    const o = n.outputs[0]!;
    if (n.kind !== 'pointwise' || !c.g.rowScalars.has(o) || avail.has(o)) continue;
    if (!n.inputs.every((id) => avail.has(id))) continue;
    L.line(prefix + nodeStatement(c, n, (id) => `v${id}`));
    avail.add(o);
  }
}

/** Finishes reduction r from accumulator a<o>: mean divides by N; rounds to the output dtype; an arg reduction's index is ai<o>. */
export function finishReduction(L: Lines, c: GroupCtx, r: FusedNode, avail: Set<ValueId>): void {
  const o = r.outputs[0]!;
  const dt = c.info(o).dtype;
  const at = computeType(dt);
  const v = r.reduce!.kind === 'mean' ? `a${o} / (${at})N` : `a${o}`;
  L.line(declareValue(`v${o}`, v, dt, false, false));
  avail.add(o);
  if (isArg(r)) {
    L.line(`const long long v${r.outputs[1]!} = ai${o};`);
    avail.add(r.outputs[1]!);
  }
}

/** One pass over the row: element loop from `start` by `step` below `end` (`pragma`: a line before the loop, e.g. `#pragma unroll 4`). */
export function rowPass(L: Lines, s: Shared, pass: Phase, avail: Set<ValueId>, V: number, start: string, step: string, end: string, pragma?: string): void {
  const { c } = s;
  const { spec } = c;
  for (const r of pass.reductions) {
    const o = r.outputs[0]!;
    const at = computeType(c.info(o).dtype);
    L.line(`${at} a${o} = ${identity(r.reduce!.kind, at)};`);
    if (isArg(r)) L.line(`long long ai${o} = -1;`);
  }
  const body = elementCode(c, {
    roots: pass.reductions.map((n) => n.reduce!.input),
    stores: pass.stores,
    leaves: avail,
    V,
    off: (k) => `(bs${k} + ro${k})`,
    innerZero: (k) => spec.ops[k]!.rowZero[spec.rrank - 1] === true,
  });
  if (pragma) L.line(pragma);
  L.open(`for (${s.idx} j = ${start}; j < ${end}; j += ${step}) {`);
  for (const st of s.rowPlan.coords) L.line(st);
  for (let k = 0; k < spec.ops.length; k++) if (body.used.has(k)) L.line(`const ${s.idx} ro${k} = ${s.rowPlan.offsets[k]};`);
  for (const st of body.stmts) L.line(st);
  for (const r of pass.reductions) {
    const o = r.outputs[0]!;
    const at = computeType(c.info(o).dtype);
    const x = r.reduce!.input;
    for (let u = 0; u < V; u++) {
      if (isArg(r)) L.line(argUpdate(r.reduce!.kind as ArgKind, o, `(${at})v${x}_${u}`, u === 0 ? 'j' : `j + ${u}`));
      else L.line(`a${o} = ${OPS[r.reduce!.kind]}::f(a${o}, (${at})v${x}_${u});`);
    }
  }
  L.close();
}

export function storeRowOuts(L: Lines, c: GroupCtx, rowOuts: readonly ValueId[], guard: string | null): void {
  if (rowOuts.length === 0) return;
  if (guard) L.open(`if (${guard}) {`);
  for (const o of rowOuts) {
    const k = c.outOperand.get(o)!;
    L.line(`p${k}[bs${k}] = ${storeForm(c, o, `v${o}`)};`);
  }
  if (guard) L.close();
}

/** What a reduce config's launch plan needs of its group (configs.ts launchPlan): reductions, reduction levels, full-size outputs. */
export interface ReduceShape {
  readonly reductions: number;
  /** Passes with reductions (levels). */
  readonly levels: number;
  /** Whether the group has full-size outputs (a last pass that stores them). */
  readonly stores: boolean;
}

export function reduceShape(c: GroupCtx): ReduceShape {
  const { passes } = phases(c);
  return { reductions: passes.reduce((a, p) => a + p.reductions.length, 0), levels: passes.filter((p) => p.reductions.length > 0).length, stores: passes.some((p) => p.stores.length > 0) };
}
