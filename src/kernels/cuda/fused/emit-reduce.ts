/**
 * CUDA C for a reduce group: reductions with their pointwise prologue, per-row scalar ops after
 * them, and full-size epilogues (a softmax or layerNorm is one kernel). Rows are the outer dims,
 * elements the reduced dims; a group with reductions at several levels (amax, then sum of
 * exp(x - max)) makes one pass over the row per level and a final pass for full-size outputs,
 * recomputing prologue values from global memory (rows of a row kernel fit in L1/L2).
 *
 * Strategies (ReduceConfig.strategy):
 * - thread: one thread per row, serial loop. Right for reductions over a non-last dim, where
 *   adjacent threads take adjacent rows and so read adjacent addresses.
 * - warp:   one warp per row, lanes stride the row, shuffle all-reduce. Short and medium rows.
 * - block:  one block per row, warp shuffles plus shared memory across warps. Long rows.
 * - split:  for few very long rows (a full sum): G blocks per row each reduce a chunk into a
 *           workspace, a second kernel (one thread per row) combines the G partials and runs the
 *           per-row epilogue. Only for groups with one level of reductions and no full-size outputs.
 *
 * The eager cuda reductions (kernels/cuda/reduce-run.ts) render their one-node programs here too,
 * with two things the compiler never schedules: host scalars s0.. that expression nodes read
 * (double parameters after the pointers) and arg reductions (emit-arg.ts).
 */
import { cLit, computeType, type CType } from '../codegen/ctypes.js';
import type { Param } from './args.js';
import { type GroupCtx, elementCode, Lines, nodeStatement, ptrType, storeForm } from './body.js';
import { declareValue } from './ctypes.js';
import { type ArgKind, argBlockCombine, argUpdate, argWarpCombine, isArg } from './emit-arg.js';
import type { EmittedKernel } from './emit-pointwise.js';
import type { FusedNode } from './group.js';
import { type IndexPlan, indexPlan, sizeParams } from './index-math.js';
import type { KernelSpec } from './spec.js';

type ValueId = number;

export type ReduceStrategy = 'thread' | 'warp' | 'block' | 'split';

export interface ReduceConfig {
  readonly kind: 'reduce';
  readonly strategy: ReduceStrategy;
  readonly block: 128 | 256 | 512 | 1024;
  /** Elements per vector access along the row (1 for the thread strategy). */
  readonly vec: 1 | 2 | 4 | 8;
}

/** Threads per block of the split strategy's second kernel (one thread per row; rows are few). */
export const FINISH_BLOCK = 128;

const OPS: Record<string, string> = { sum: 'KSum', mean: 'KSum', prod: 'KProd', amax: 'KMax', amin: 'KMin' };

function identity(kind: string, t: CType): string {
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

interface Phase {
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

interface Shared {
  readonly c: GroupCtx;
  readonly idx: string;
  readonly params: Param[];
  readonly outer: ReturnType<typeof indexPlan>;
  readonly rowPlan: ReturnType<typeof indexPlan>;
  readonly decl: string;
}

function shared(c: GroupCtx, split: boolean): Shared {
  const { spec } = c;
  const idx = spec.idx64 ? 'long long' : 'int';
  const ip = spec.idx64 ? 'i64' : 'i32';
  const nOps = spec.ops.length;
  const ptrs: Param[] = Array.from({ length: nOps }, (_, k): Param => ({ name: `p${k}`, type: 'ptr', source: { kind: 'operand', k } }));
  // Host scalars s0.. of expression nodes (eager one-node programs only), as emitPointwise takes them.
  const scalars: Param[] = Array.from({ length: c.g.params?.count ?? 0 }, (_, j): Param => ({ name: `p_s${j}`, type: 'f64', source: { kind: 'scalar', what: `s${j}` } }));
  const { outer, row: rowPlan } = reduceIndexPlans(spec);
  const params: Param[] = [...ptrs, ...scalars, ...sizeParams('M', spec.orank, ip), ...sizeParams('R', spec.rrank, ip), ...outer.params, ...rowPlan.params];
  if (split) {
    params.push({ name: 'G', type: ip, source: { kind: 'int', what: 'G' } });
    params.push({ name: 'chunk', type: ip, source: { kind: 'int', what: 'chunk' } });
    params.push({ name: 'ws', type: 'ptr', source: { kind: 'workspace' } });
  }
  const cType = (t: Param['type']): string => (t === 'f64' ? 'double' : t === 'i64' ? 'long long' : 'int');
  const decl = params
    .map((p) => (p.type === 'ptr' ? (p.name === 'ws' ? `unsigned char* __restrict__ ws` : `${ptrType(c, Number(p.name.slice(1)))} ${p.name}`) : `${cType(p.type)} ${p.name}`))
    .join(', ');
  return { c, idx, params, outer, rowPlan, decl };
}

function rowTotals(L: Lines, s: Shared): void {
  const { spec } = s.c;
  L.line(`[[maybe_unused]] const ${s.idx} M = ${Array.from({ length: spec.orank }, (_, d) => `M${d}`).join(' * ')};`);
  L.line(`[[maybe_unused]] const ${s.idx} N = ${Array.from({ length: spec.rrank }, (_, d) => `R${d}`).join(' * ')};`);
  const p = s.c.g.params;
  for (let j = 0; j < (p?.count ?? 0); j++) L.line(`const ${p!.ct} s${j} = (${p!.ct})p_s${j};`);
}

function rowBases(L: Lines, s: Shared): void {
  for (const st of s.outer.coords) L.line(st);
  s.c.spec.ops.forEach((_, k) => L.line(`[[maybe_unused]] const ${s.idx} bs${k} = ${s.outer.offsets[k]};`));
}

/** Per-row scalar nodes whose inputs are all available; adds them to `avail`. */
function rowScalars(L: Lines, c: GroupCtx, avail: Set<ValueId>): void {
  for (const n of c.g.nodes) {
    const o = n.outputs[0]!;
    if (n.kind !== 'pointwise' || !c.g.rowScalars.has(o) || avail.has(o)) continue;
    if (!n.inputs.every((id) => avail.has(id))) continue;
    L.line(nodeStatement(c, n, (id) => `v${id}`));
    avail.add(o);
  }
}

/** Finishes reduction r from accumulator a<o>: mean divides by N; rounds to the output dtype; an arg reduction's index is ai<o>. */
function finishReduction(L: Lines, c: GroupCtx, r: FusedNode, avail: Set<ValueId>): void {
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

/** One pass over the row: element loop from `start` by `step` below `end`. */
function rowPass(L: Lines, s: Shared, pass: Phase, avail: Set<ValueId>, V: number, start: string, step: string, end: string): void {
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

function storeRowOuts(L: Lines, c: GroupCtx, rowOuts: readonly ValueId[], guard: string | null): void {
  if (rowOuts.length === 0) return;
  if (guard) L.open(`if (${guard}) {`);
  for (const o of rowOuts) {
    const k = c.outOperand.get(o)!;
    L.line(`p${k}[bs${k}] = ${storeForm(c, o, `v${o}`)};`);
  }
  if (guard) L.close();
}

export function emitReduce(c: GroupCtx, name: string, cfg: ReduceConfig): { kernels: EmittedKernel[]; params: Param[] } {
  if (cfg.strategy === 'split') return emitSplit(c, name, cfg);
  const s = shared(c, false);
  const { passes, rowOuts } = phases(c);
  const B = cfg.block;
  const V = cfg.strategy === 'thread' ? 1 : cfg.vec;
  const L = new Lines();
  L.line(`extern "C" __global__ void __launch_bounds__(${B}) ${name}(${s.decl}) {`);
  L.indent();
  if (cfg.strategy === 'block') L.line('extern __shared__ __align__(16) unsigned char kiln_smem[];');
  rowTotals(L, s);
  const idx = s.idx;
  let start: string;
  let step: string;
  let guard: string | null;
  switch (cfg.strategy) {
    case 'thread':
      L.open(`for (${idx} row = (${idx})blockIdx.x * ${B} + threadIdx.x; row < M; row += (${idx})gridDim.x * ${B}) {`);
      start = '0';
      step = '1';
      guard = null;
      break;
    case 'warp':
      L.line('const int lane = threadIdx.x & 31;');
      L.open(`for (${idx} row = (${idx})blockIdx.x * ${B / 32} + (threadIdx.x >> 5); row < M; row += (${idx})gridDim.x * ${B / 32}) {`);
      start = V === 1 ? 'lane' : `lane * ${V}`;
      step = `${32 * V}`;
      guard = 'lane == 0';
      break;
    case 'block':
      L.open(`for (${idx} row = blockIdx.x; row < M; row += gridDim.x) {`);
      start = V === 1 ? `(${idx})threadIdx.x` : `(${idx})threadIdx.x * ${V}`;
      step = `${B * V}`;
      guard = 'threadIdx.x == 0';
      break;
  }
  rowBases(L, s);
  const avail = new Set<ValueId>();
  for (const pass of passes) {
    rowPass(L, s, pass, avail, V, start, step, 'N');
    for (const r of pass.reductions) {
      const o = r.outputs[0]!;
      const at = computeType(c.info(o).dtype);
      const op = OPS[r.reduce!.kind];
      if (isArg(r)) {
        const kind = r.reduce!.kind as ArgKind;
        if (cfg.strategy === 'warp') argWarpCombine(L, kind, o, at);
        if (cfg.strategy === 'block') argBlockCombine(L, kind, o, at, `(${at})${identity(kind, at)}`);
      } else {
        if (cfg.strategy === 'warp') L.line(`a${o} = kiln_warp_reduce<${op}>(a${o});`);
        if (cfg.strategy === 'block') L.line(`a${o} = kiln_block_reduce<${op}>(a${o}, (${at})${identity(r.reduce!.kind, at)}, kiln_smem);`);
      }
      finishReduction(L, c, r, avail);
    }
    rowScalars(L, c, avail);
  }
  storeRowOuts(L, c, rowOuts, guard);
  L.close();
  L.close();
  return { kernels: [{ name, params: s.params, source: L.text() }], params: s.params };
}

function emitSplit(c: GroupCtx, name: string, cfg: ReduceConfig): { kernels: EmittedKernel[]; params: Param[] } {
  if (!splittable(c)) throw new Error(`kiln cuda codegen: ${name}: the split strategy needs one level of reductions and no full-size outputs`);
  const s = shared(c, true);
  const { passes, rowOuts } = phases(c);
  const pass = passes[0]!;
  const B = cfg.block;
  const V = cfg.vec;
  const idx = s.idx;
  // Workspace: per reduction, M*G partials of 8 bytes (wide enough for any accumulator type).
  const wsArea = (r: number): string => `reinterpret_cast<${computeType(c.info(pass.reductions[r]!.outputs[0]!).dtype)}*>(ws + (unsigned long long)${r} * (unsigned long long)M * (unsigned long long)G * 8)`;

  const A = new Lines();
  A.line(`extern "C" __global__ void __launch_bounds__(${B}) ${name}_partial(${s.decl}) {`);
  A.indent();
  A.line('extern __shared__ __align__(16) unsigned char kiln_smem[];');
  rowTotals(A, s);
  A.open(`for (${idx} w = blockIdx.x; w < M * G; w += gridDim.x) {`);
  A.line(`const ${idx} row = w / G;`);
  A.line(`const ${idx} j0 = (w - row * G) * chunk;`);
  A.line(`const ${idx} j1 = j0 + chunk < N ? j0 + chunk : N;`);
  rowBases(A, s);
  const avail = new Set<ValueId>();
  rowPass(A, s, pass, avail, V, V === 1 ? `j0 + threadIdx.x` : `j0 + (${idx})threadIdx.x * ${V}`, `${B * V}`, 'j1');
  pass.reductions.forEach((r, i) => {
    const o = r.outputs[0]!;
    const at = computeType(c.info(o).dtype);
    A.line(`a${o} = kiln_block_reduce<${OPS[r.reduce!.kind]}>(a${o}, (${at})${identity(r.reduce!.kind, at)}, kiln_smem);`);
    A.line(`if (threadIdx.x == 0) ${wsArea(i)}[w] = a${o};`);
  });
  A.close();
  A.close();

  const F = new Lines();
  F.line(`extern "C" __global__ void __launch_bounds__(${FINISH_BLOCK}) ${name}_finish(${s.decl}) {`);
  F.indent();
  rowTotals(F, s);
  F.open(`for (${idx} row = (${idx})blockIdx.x * ${FINISH_BLOCK} + threadIdx.x; row < M; row += (${idx})gridDim.x * ${FINISH_BLOCK}) {`);
  rowBases(F, s);
  const favail = new Set<ValueId>();
  pass.reductions.forEach((r, i) => {
    const o = r.outputs[0]!;
    const at = computeType(c.info(o).dtype);
    F.line(`${at} a${o} = ${identity(r.reduce!.kind, at)};`);
    F.line(`for (${idx} gi = 0; gi < G; gi++) a${o} = ${OPS[r.reduce!.kind]}::f(a${o}, ${wsArea(i)}[row * G + gi]);`);
    finishReduction(F, c, r, favail);
  });
  rowScalars(F, c, favail);
  storeRowOuts(F, c, rowOuts, null);
  F.close();
  F.close();
  return {
    kernels: [
      { name: `${name}_partial`, params: s.params, source: A.text() },
      { name: `${name}_finish`, params: s.params, source: F.text() },
    ],
    params: s.params,
  };
}
