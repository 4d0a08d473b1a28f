/**
 * The WGSL renderer of a fused group (group.ts): one compute shader for a pointwise chain, or for
 * reductions with their pointwise prologue, the per-row scalar ops after them and full-size
 * epilogues (a softmax, a layerNorm is one kernel). Every element's math comes from the WGSL math
 * table (kernels/math/wgsl.ts), the one table the eager kernels and the compiler share; loads and
 * stores from the storage forms of storage.ts (bfloat16 and, without shader-f16, float16 stored as
 * 16 bits in u32 words; computed in f32). The structure mirrors the CUDA generator
 * (kernels/cuda/fused/emit-pointwise.ts, emit-reduce.ts), not its code:
 *
 * - pointwise: invocations loop grid-stride over the elements; vectorised (a VectorPlan, vector.ts
 *   decides) each step covers V consecutive elements, loaded and stored as vectors, each lane
 *   running the scalar element code, with the elements past the last whole vector a scalar tail;
 * - reduce, strategy 'workgroup': one workgroup per row (rows grid-stride over workgroups),
 *   invocations stride the row, then a workgroup all-reduce (shared-memory tree; with the
 *   `subgroups` feature, sums reduce within subgroups first, one partial per subgroup_id) that
 *   every invocation gets back. A row of at most `resident` elements per invocation is held in
 *   registers instead (residentLoads: every input element loaded once, all loads issued before any
 *   use; each pass computes from the registers); longer rows loop, U elements per step with
 *   `unroll` (unrolledPass) or one;
 * - reduce, strategy 'thread': one invocation per row, a serial loop (short rows, or reductions
 *   over an outer dim, where neighbouring invocations read neighbouring addresses).
 *
 * A group with reductions at several levels (amax, then the sum of exp(x - max)) makes one pass
 * over the row per level and a last pass for full-size outputs, recomputing prologue values from
 * memory (from registers in the resident form), as the CUDA generator does. Arg reductions (argmax, argmin: the eager max/min with a
 * dim) carry an index accumulator and take the first index among equals, NaN first, as torch.
 */
import type { DType } from '../../../tensor/dtype.js';
import { isFloating } from '../../../tensor/dtype.js';
import type { MathArg } from '../../math/args.js';
import { WGSL_TEMPLATES, wgslComputeType, wgslLit, type WgslType } from '../../math/wgsl.js';
import { PRELUDE_MARK, withPrelude } from '../../math/wgsl-prelude.js';
import { arrayType, laneExpr, loadExpr, storagePrelude, storeStmt, type StorageKind, vectorArrayType, vectorElementLoad, vectorElementStoreStmt, vectorStoreStmt } from '../storage.js';
import type { FusedGroup, FusedNode, FusedReduceKind } from './group.js';
import { nanHoistPlan, type NanHoist } from './nan-hoist.js';
import { vectorBinding, type VectorPlan } from './vector.js';

/** Invocations per workgroup of every fused kernel. */
export const FUSED_WORKGROUP = 256;

/** How a binding holds its elements: storage.ts's kinds, and int64 results (indices) as u32 pairs. */
export type FusedStorage = StorageKind | 'i64';

export interface FusedBinding {
  readonly kind: FusedStorage;
  readonly written: boolean;
}

export type FusedStrategy = 'pointwise' | 'thread' | 'workgroup';

/** What besides the group is baked into the source. */
export interface RenderSpec {
  readonly strategy: FusedStrategy;
  /** Pointwise: the iteration rank; reduce: the outer rank. */
  readonly orank: number;
  /** Reduce: the row rank (0 for pointwise). */
  readonly rrank: number;
  /** Distinct buffers (outputs' first). */
  readonly bindings: readonly FusedBinding[];
  /** The binding of each operand (outputs, then inputs). */
  readonly operandBinding: readonly number[];
  /** Use subgroup operations in workgroup reductions (the device has `subgroups`). */
  readonly subgroups: boolean;
  /** Invocations per workgroup, a power of two (default FUSED_WORKGROUP; the autotuner's candidates vary it). */
  readonly workgroup?: number;
  /** Pointwise: V elements per invocation step (vector.ts); absent: one. */
  readonly vector?: VectorPlan;
  /**
   * Reduce, strategy 'workgroup': elements each invocation loads per loop step before using any
   * (KILN_WEBGPU_REDUCE_UNROLL; absent: one). Lanes past the row load its last element and are
   * masked out of the combine, so the values and their order are those of one per step.
   */
  readonly unroll?: number;
  /**
   * Reduce, strategy 'workgroup': the row is register-resident (KILN_WEBGPU_REDUCE_REGISTERS):
   * every invocation loads its `resident` elements (j = lid + u * W, u < resident; the row's length
   * must be at most resident * W) of every input once, all before any use, keeps them in registers,
   * and every pass (the reductions' levels, the full-size stores) computes from those registers
   * instead of looping over the row and reloading it. Overrides `unroll`.
   */
  readonly resident?: number;
}

/** A spec's workgroup size. */
export const workgroupOf = (spec: Pick<RenderSpec, 'workgroup'>): number => spec.workgroup ?? FUSED_WORKGROUP;

/** The compute type of a dtype in a fused kernel (int64 only as an index result). */
function ctype(dt: DType): WgslType {
  if (dt === 'int64') return 'i32';
  const t = wgslComputeType(dt);
  if (t === null) throw new Error(`kiln wgsl: dtype ${dt} has no WGSL compute type`);
  return t;
}

/**
 * A value as a node's dtype holds it: floating intermediates stay f32, casts round like a store
 * (to nearest even, in integer code: storage.ts says why not pack2x16float), uint8 wraps.
 */
function rounded(expr: string, dt: DType, cast: boolean): string {
  switch (dt) {
    case 'float16':
      return cast ? `kiln_f16_value(kiln_f16_bits(${expr}))` : expr;
    case 'bfloat16':
      return cast ? `bitcast<f32>(kiln_bf16_bits(${expr}) << 16u)` : expr;
    case 'uint8':
      return `((${expr}) & 255i)`;
    default:
      return expr;
  }
}

/** The statement declaring pointwise node n's value (`nanFree`: its NaN check is at the stores, nan-hoist.ts). */
function nodeStatement(g: FusedGroup, n: FusedNode, nanFree = false): string {
  const out = n.outputs[0]!;
  const dt = g.value(out).dtype;
  const margs = n.args.map((a): MathArg => {
    if (a.kind === 'const') return a;
    const v = g.value(a.id);
    return { kind: 'value', expr: `v${a.id}`, dtype: v.dtype, shape: v.shape };
  });
  const t = WGSL_TEMPLATES.get(n.op);
  const expr = n.expr ?? (t ? t(margs, g.fastMath ? { out: dt, fast: g.fastMath, ...(nanFree ? { nanFree } : {}) } : { out: dt }) : null);
  if (expr === null) {
    const sig = margs.map((a) => (a.kind === 'value' ? a.dtype : JSON.stringify(a.value))).join(', ');
    throw new Error(`kiln wgsl: the WGSL math table has no form for ${n.op}(${sig}) -> ${dt}`);
  }
  return `let v${out}: ${ctype(dt)} = ${rounded(expr, dt, n.cast === true)};`;
}

/** Whether binding b is declared as an array of vectors (some operand on it is vector-accessed). */
const isVectorBinding = (spec: RenderSpec, b: number): boolean => spec.vector !== undefined && vectorBinding(spec.vector, spec.operandBinding, b);

/** Element `index` of operand k (on a vector binding too: a broadcast operand, the scalar tail). */
function load(spec: RenderSpec, k: number, index: string): string {
  const b = spec.operandBinding[k]!;
  const bind = spec.bindings[b]!;
  if (bind.kind === 'i64') throw new Error('kiln wgsl: int64 operands are written only (indices)');
  if (isVectorBinding(spec, b)) return vectorElementLoad(bind.kind, spec.vector!.vec, `b${b}`, index);
  return loadExpr(bind.kind, `b${b}`, index, bind.written);
}

function store(spec: RenderSpec, k: number, index: string, v: string): string {
  const b = spec.operandBinding[k]!;
  const kind = spec.bindings[b]!.kind;
  if (kind === 'i64') return `b${b}[2u * (${index})] = bitcast<u32>(${v}); b${b}[2u * (${index}) + 1u] = select(0u, 0xffffffffu, ${v} < 0i);`;
  if (isVectorBinding(spec, b)) return vectorElementStoreStmt(kind, spec.vector!.vec, `b${b}`, index, v);
  return storeStmt(kind, `b${b}`, index, v);
}

class Lines {
  readonly out: string[] = [];
  private depth = 0;
  line(s: string): void {
    for (const l of s.split('\n')) this.out.push('  '.repeat(this.depth) + l);
  }
  open(s: string): void {
    this.line(s);
    this.depth++;
  }
  close(s = '}'): void {
    this.depth--;
    this.line(s);
  }
}

interface Ctx {
  readonly g: FusedGroup;
  readonly spec: RenderSpec;
  readonly nodeOf: ReadonlyMap<number, FusedNode>;
  readonly inOperand: ReadonlyMap<number, number>;
  readonly outOperand: ReadonlyMap<number, number>;
  /** NaN checks moved to the stores (pointwise groups under g.nanHoist), or null. */
  readonly nan: NanHoist | null;
}

function context(g: FusedGroup, spec: RenderSpec): Ctx {
  const nodeOf = new Map<number, FusedNode>();
  for (const n of g.nodes) for (const o of n.outputs) nodeOf.set(o, n);
  const outOperand = new Map<number, number>();
  const inOperand = new Map<number, number>();
  g.outputs.forEach((o, k) => outOperand.set(o, k));
  g.inputs.forEach((id, k) => inOperand.set(id, g.outputs.length + k));
  const nan = g.nanHoist === true && spec.strategy === 'pointwise' ? nanHoistPlan(g) : null;
  return { g, spec, nodeOf, inOperand, outOperand, nan };
}

const valueInputs = (n: FusedNode): number[] => (n.kind === 'reduction' ? [n.reduce!.input] : n.args.flatMap((a) => (a.kind === 'value' ? [a.id] : [])));

/** How element code reads operand k's element and writes an output's (default: load, store at `offset(k)`). */
interface Access {
  load(k: number): string;
  store(k: number, v: string): string;
}

/**
 * One element's code: loads of the inputs the roots and stores need, the pointwise nodes between,
 * the stores. `leaves` are values already declared (per-row scalars); `offset(k)` is operand k's
 * element offset expression; `access`, if given, replaces the loads and stores (a vector lane).
 */
function elementCode(c: Ctx, roots: readonly number[], stores: readonly number[], leaves: ReadonlySet<number>, offset: (k: number) => string, access?: Access): { used: Set<number>; stmts: string[] } {
  const need = new Set<number>();
  const visit = (id: number): void => {
    if (need.has(id) || leaves.has(id)) return;
    need.add(id);
    const n = c.nodeOf.get(id);
    if (n) for (const a of valueInputs(n)) visit(a);
  };
  for (const r of roots) visit(r);
  for (const s of stores) visit(s);
  const used = new Set<number>();
  const stmts: string[] = [];
  for (const id of need) {
    if (c.nodeOf.has(id)) continue;
    const k = c.inOperand.get(id);
    if (k === undefined) throw new Error(`kiln wgsl: value %${id} is neither computed in the group nor one of its inputs`);
    used.add(k);
    stmts.push(`let v${id}: ${ctype(c.g.value(id).dtype)} = ${access ? access.load(k) : load(c.spec, k, offset(k))};`);
  }
  for (const n of c.g.nodes) {
    if (n.kind !== 'pointwise' || !need.has(n.outputs[0]!)) continue;
    if (n.outputs.some((o) => leaves.has(o))) continue;
    stmts.push(nodeStatement(c.g, n, c.nan?.unchecked.has(n.outputs[0]!) === true));
  }
  for (const s of stores) {
    const k = c.outOperand.get(s)!;
    used.add(k);
    // A hoisted NaN check: the output is the NaN input where one of them is NaN (nan-hoist.ts).
    const v = (c.nan?.storeChecks.get(s) ?? []).reduceRight((e, x) => `select(${e}, v${x}, kiln_isnan(v${x}))`, `v${s}`);
    stmts.push(access ? access.store(k, v) : store(c.spec, k, offset(k), v));
  }
  return { used, stmts };
}

/** Index arithmetic: `var <pfx>k` offsets of operands `ks` from index `idx` over sizes at words `size(d)`, strides at `stride(k, d)`. */
function decompose(L: Lines, idx: string, rank: number, size: (d: number) => string, ks: readonly number[], name: (k: number) => string, init: (k: number) => string, stride: (k: number, d: number) => string, tmp: string): void {
  for (const k of ks) L.line(`var ${name(k)} = ${init(k)};`);
  if (rank === 0 || ks.length === 0) return;
  L.line(`var ${tmp} = ${idx};`);
  for (let d = rank - 1; d >= 0; d--) {
    if (d === 0) {
      for (const k of ks) L.line(`${name(k)} = ${name(k)} + ${tmp} * ${stride(k, d)};`);
      continue;
    }
    L.open(`{`);
    L.line(`let c = ${tmp} % ${size(d)}; ${tmp} = ${tmp} / ${size(d)};`);
    for (const k of ks) L.line(`${name(k)} = ${name(k)} + c * ${stride(k, d)};`);
    L.close();
  }
}

function header(c: Ctx, extra: string[]): string[] {
  const { spec, g } = c;
  const lines: string[] = [];
  if (spec.bindings.some((b) => b.kind === 'f16')) lines.push('enable f16;');
  if (extra.includes('subgroups')) lines.push('enable subgroups;');
  spec.bindings.forEach((b, i) => {
    const type = b.kind === 'i64' ? 'array<u32>' : isVectorBinding(spec, i) ? vectorArrayType(b.kind, spec.vector!.vec) : arrayType(b.kind, b.written);
    lines.push(`@group(0) @binding(${i}) var<storage, ${b.written ? 'read_write' : 'read'}> b${i}: ${type};`);
  });
  lines.push(`@group(0) @binding(${spec.bindings.length}) var<storage, read> kmeta: array<u32>;`);
  lines.push(PRELUDE_MARK);
  const castTo = (dt: DType): boolean => g.nodes.some((n) => n.cast === true && g.value(n.outputs[0]!).dtype === dt);
  const kinds = spec.bindings.flatMap((b) => (b.kind === 'i64' ? [] : [b.kind]));
  const helpers = storagePrelude(kinds, { f16: castTo('float16'), bf16: castTo('bfloat16') });
  if (helpers) lines.push(helpers);
  return lines;
}

function renderPointwise(c: Ctx): string {
  const { spec, g } = c;
  if (spec.vector !== undefined) return renderPointwiseVector(c, spec.vector);
  const R = spec.orank;
  const T = g.outputs.length + g.inputs.length;
  const base = (k: number): number => 1 + R + k * (1 + R);
  const W = workgroupOf(spec);
  const L = new Lines();
  for (const l of header(c, [])) L.line(l);
  L.line(`@compute @workgroup_size(${W})`);
  L.open('fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) ng: vec3u) {');
  L.line('let n = kmeta[0];');
  L.open(`for (var i = gid.x; i < n; i = i + ng.x * ${W}u) {`);
  const ks = Array.from({ length: T }, (_, k) => k);
  decompose(
    L,
    'i',
    R,
    (d) => `kmeta[${1 + d}]`,
    ks,
    (k) => `o${k}`,
    (k) => `kmeta[${base(k)}]`,
    (k, d) => `kmeta[${base(k) + 1 + d}]`,
    'rem',
  );
  const body = elementCode(c, [], g.outputs, new Set(), (k) => `o${k}`);
  for (const s of body.stmts) L.line(s);
  L.close();
  L.close();
  return L.out.join('\n');
}

/**
 * The vectorised pointwise kernel: step j covers elements j*V .. j*V+V-1, whose offsets are those
 * of element j*V plus the lane (stride 1) or the same (stride 0). Vector operands are loaded once
 * per step, broadcast operands one element per step; each lane is a block running the scalar
 * element code (WGSL lets a block redeclare its enclosing scope's names, so the lanes' v<id> are
 * the scalar kernel's statements unchanged) and leaving its outputs in lane c of r<k>; the vectors
 * are stored whole. Invocation 0 then runs the scalar element code on the tail (n % V elements,
 * all in the last partial vector of each vector operand, so no other invocation writes its words).
 * With plan.steps = U > 1 an invocation step takes U vectors W apart and issues all their loads
 * before computing any (a step's lanes then run in the same order, so values do not change).
 */
function renderPointwiseVector(c: Ctx, plan: VectorPlan): string {
  const { spec, g } = c;
  const V = plan.vec;
  const R = spec.orank;
  const nOut = g.outputs.length;
  const T = nOut + g.inputs.length;
  const base = (k: number): number => 1 + R + k * (1 + R);
  const W = workgroupOf(spec);
  const kindOf = (k: number): StorageKind => {
    const kind = spec.bindings[spec.operandBinding[k]!]!.kind;
    if (kind === 'i64') throw new Error('kiln wgsl: a vectorised kernel has no int64 operand');
    return kind;
  };
  const ks = Array.from({ length: T }, (_, k) => k);
  // Every operand's offset of element `idx`, named o<k><sfx>.
  const offsets = (L: Lines, idx: string, sfx = ''): void =>
    decompose(
      L,
      idx,
      R,
      (d) => `kmeta[${1 + d}]`,
      ks,
      (k) => `o${k}${sfx}`,
      (k) => `kmeta[${base(k)}]`,
      (k, d) => `kmeta[${base(k) + 1 + d}]`,
      `rem${sfx}`,
    );
  // Lanes first: which inputs they read decides the loads before them.
  const used = new Set<number>();
  const lanes: string[][] = [];
  for (let lane = 0; lane < V; lane++) {
    const body = elementCode(c, [], g.outputs, new Set(), (k) => `o${k}`, {
      load: (k) => (plan.operandVector[k] ? laneExpr(kindOf(k), V, `x${k}`, lane) : `s${k}`),
      store: (k, v) => `r${k}[${lane}] = ${v};`,
    });
    for (const k of body.used) used.add(k);
    lanes.push(body.stmts);
  }
  const inputs = [...used].filter((k) => k >= nOut).sort((a, b) => a - b);
  // Step j's offsets and loads, names suffixed by `sfx` (one set per vector of a multi-vector step).
  const loads = (L: Lines, idx: string, sfx: string): void => {
    offsets(L, idx, sfx);
    for (const k of inputs) {
      const b = spec.operandBinding[k]!;
      if (plan.operandVector[k]) L.line(`let x${k}${sfx} = b${b}[o${k}${sfx} / ${V}u];`);
      else L.line(`let s${k}${sfx}: ${ctype(c.g.value(g.inputs[k - nOut]!).dtype)} = ${load(spec, k, `o${k}${sfx}`)};`);
    }
  };
  // The lanes' element code, then the vector stores, in a block of its own. `bind` (for a
  // multi-vector step) gives the unsuffixed names the lanes read and the stores use.
  const compute = (L: Lines, bind: ((name: string) => string) | null): void => {
    L.open('{');
    if (bind) {
      for (const k of ks) L.line(`let o${k} = ${bind(`o${k}`)};`);
      for (const k of inputs) L.line(plan.operandVector[k] ? `let x${k} = ${bind(`x${k}`)};` : `let s${k} = ${bind(`s${k}`)};`);
    }
    for (let k = 0; k < nOut; k++) L.line(`var r${k}: vec${V}<${ctype(g.value(g.outputs[k]!).dtype)}>;`);
    for (const stmts of lanes) {
      L.open('{');
      for (const st of stmts) L.line(st);
      L.close();
    }
    for (let k = 0; k < nOut; k++) L.line(vectorStoreStmt(kindOf(k), V, `b${spec.operandBinding[k]!}`, `o${k} / ${V}u`, `r${k}`));
    L.close();
  };
  const U = plan.steps;
  const L = new Lines();
  for (const l of header(c, [])) L.line(l);
  L.line(`@compute @workgroup_size(${W})`);
  if (U === 1) {
    L.open('fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) ng: vec3u) {');
    L.line('let n = kmeta[0];');
    L.line(`let nv = n / ${V}u;`);
    L.open(`for (var j = gid.x; j < nv; j = j + ng.x * ${W}u) {`);
    loads(L, `j * ${V}u`, '');
    compute(L, null);
    L.close();
  } else {
    // A workgroup step covers W * U consecutive vectors; invocation i takes vectors i, i + W, ...
    // (each of the U loads coalesced across the workgroup). Whole steps issue all U loads before
    // any math; the last, partial step takes its vectors one at a time.
    L.open('fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) ng: vec3u) {');
    L.line('let n = kmeta[0];');
    L.line(`let nv = n / ${V}u;`);
    L.open(`for (var j0 = (gid.x / ${W}u) * ${W * U}u + gid.x % ${W}u; j0 < nv; j0 = j0 + ng.x * ${W * U}u) {`);
    L.open(`if (j0 + ${(U - 1) * W}u < nv) {`);
    for (let u = 0; u < U; u++) loads(L, `(j0 + ${u * W}u) * ${V}u`, `_${u}`);
    // One copy of the lanes' code in a loop over the U vectors, each picked by a chain of selects
    // (registers, where an array indexed by u could go to memory): U copies made compiling the
    // workload's chain of exp/tanh lanes take minutes on SwiftShader, and the driver may unroll.
    L.open(`for (var u = 0u; u < ${U}u; u = u + 1u) {`);
    compute(L, (name) => {
      let e = `${name}_0`;
      for (let u = 1; u < U; u++) e = `select(${e}, ${name}_${u}, u == ${u}u)`;
      return e;
    });
    L.close();
    L.close();
    L.open('else {');
    L.open(`for (var j = j0; j < nv; j = j + ${W}u) {`);
    loads(L, `j * ${V}u`, '');
    compute(L, null);
    L.close();
    L.close();
    L.close();
  }
  L.open(`if (gid.x == 0u) {`);
  L.open(`for (var i = nv * ${V}u; i < n; i = i + 1u) {`);
  offsets(L, 'i');
  for (const st of elementCode(c, [], g.outputs, new Set(), (k) => `o${k}`).stmts) L.line(st);
  L.close();
  L.close();
  L.close();
  return L.out.join('\n');
}

// ------------------------------------------------------------------------------------------------
// Reductions
// ------------------------------------------------------------------------------------------------

function identity(kind: FusedReduceKind, t: WgslType): string {
  switch (kind) {
    case 'sum':
    case 'mean':
      return wgslLit(0, t);
    case 'prod':
      return wgslLit(1, t);
    case 'amax':
    case 'argmax':
      return t === 'i32' ? wgslLit(-2147483648, t) : '(-kiln_inf())';
    case 'amin':
    case 'argmin':
      return t === 'i32' ? wgslLit(2147483647, t) : 'kiln_inf()';
    default:
      return kind satisfies never;
  }
}

/** a combined with b, NaN-propagating for floats (torch's amax/amin). */
function combine(kind: 'sum' | 'mean' | 'prod' | 'amax' | 'amin', t: WgslType, a: string, b: string): string {
  switch (kind) {
    case 'sum':
    case 'mean':
      return `(${a} + ${b})`;
    case 'prod':
      return `(${a} * ${b})`;
    case 'amax':
      return t === 'f32' ? `kiln_fmax(${a}, ${b})` : `max(${a}, ${b})`;
    case 'amin':
      return t === 'f32' ? `kiln_fmin(${a}, ${b})` : `min(${a}, ${b})`;
    default:
      return kind satisfies never;
  }
}

interface Phase {
  readonly reductions: FusedNode[];
  readonly stores: number[];
}

/** Reduction levels: each pass over the row computes the reductions of one level; full-size outputs in a last pass. */
export function phases(g: FusedGroup): { passes: Phase[]; rowOuts: number[] } {
  const level = new Map<number, number>();
  const lv = (id: number): number => level.get(id) ?? 0;
  for (const n of g.nodes) {
    const o = n.outputs[0]!;
    if (n.kind === 'reduction') for (const x of n.outputs) level.set(x, lv(n.reduce!.input) + 1);
    else level.set(o, Math.max(0, ...valueInputs(n).map(lv)));
  }
  const reductions = g.nodes.filter((n) => n.kind === 'reduction');
  const top = Math.max(0, ...reductions.map((n) => lv(n.outputs[0]!)));
  const passes: Phase[] = [];
  for (let p = 1; p <= top; p++) passes.push({ reductions: reductions.filter((n) => lv(n.outputs[0]!) === p), stores: [] });
  const fullOuts = g.outputs.filter((o) => !g.rowScalars.has(o));
  if (fullOuts.length > 0) passes.push({ reductions: [], stores: fullOuts });
  return { passes, rowOuts: g.outputs.filter((o) => g.rowScalars.has(o)) };
}

/** The workgroup reduction helpers a kernel calls, by name. */
class Helpers {
  readonly fns = new Map<string, string>();
  readonly shared = new Set<WgslType>();
  constructor(
    private readonly subgroups: boolean,
    private readonly W: number,
  ) {}

  /** `v` all-reduced over the workgroup; every invocation gets the result. */
  call(kind: 'sum' | 'mean' | 'prod' | 'amax' | 'amin', t: WgslType, v: string): string {
    const op = kind === 'mean' ? 'sum' : kind;
    this.shared.add(t);
    const sg = this.subgroups && op === 'sum';
    const name = `kiln_wg_${op}_${t}${sg ? '_sg' : ''}`;
    const arr = `kiln_w${t}`;
    if (!this.fns.has(name)) {
      this.fns.set(
        name,
        sg
          ? [
              // One partial per subgroup, by subgroup_id: no assumption about which invocations form a subgroup.
              `fn ${name}(v: ${t}, sid: u32, sgid: u32, nsub: u32) -> ${t} {`,
              '  let s = subgroupAdd(v);',
              `  if (sgid == 0u) { ${arr}[sid] = s; }`,
              '  workgroupBarrier();',
              `  var r = ${arr}[0];`,
              `  for (var k = 1u; k < nsub; k = k + 1u) { r = r + ${arr}[k]; }`,
              '  workgroupBarrier();',
              '  return r;',
              '}',
            ].join('\n')
          : [
              `fn ${name}(v: ${t}, lid: u32) -> ${t} {`,
              `  ${arr}[lid] = v;`,
              '  workgroupBarrier();',
              `  for (var s = ${this.W / 2}u; s > 0u; s = s >> 1u) {`,
              `    if (lid < s) { ${arr}[lid] = ${combine(op, t, `${arr}[lid]`, `${arr}[lid + s]`)}; }`,
              '    workgroupBarrier();',
              '  }',
              `  let r = ${arr}[0];`,
              '  workgroupBarrier();',
              '  return r;',
              '}',
            ].join('\n'),
      );
    }
    return sg ? `${name}(${v}, sid, sgid, nsub)` : `${name}(${v}, lid)`;
  }

  /** Whether (v, j) beats (a, ai): the larger (smaller) value, NaN first, the first index among equals. */
  better(kind: 'argmax' | 'argmin', t: WgslType): string {
    const name = `kiln_${kind}_better_${t}`;
    if (!this.fns.has(name)) {
      const cmp = kind === 'argmax' ? '>' : '<';
      const nan = t === 'f32' ? ['  if (kiln_isnan(a)) { return kiln_isnan(v) && j < ai; }', '  if (kiln_isnan(v)) { return true; }'] : [];
      this.fns.set(name, [`fn ${name}(v: ${t}, j: i32, a: ${t}, ai: i32) -> bool {`, ...nan, `  return v ${cmp} a || (v == a && j < ai);`, '}'].join('\n'));
    }
    return name;
  }

  /** The (value, index) pair all-reduced over the workgroup, into a<o> and ai<o>. */
  argCall(kind: 'argmax' | 'argmin', t: WgslType, o: number): string {
    this.shared.add(t);
    const name = `kiln_wg_${kind}_${t}`;
    const better = this.better(kind, t);
    if (!this.fns.has(name)) {
      const arr = `kiln_w${t}`;
      // A second i32 array for the indices (kiln_wi holds values when t is i32).
      this.fns.set(
        name,
        [
          `fn ${name}(v: ${t}, j: i32, lid: u32) -> vec2<u32> {`,
          `  ${arr}[lid] = v; kiln_widx[lid] = j;`,
          '  workgroupBarrier();',
          `  for (var s = ${this.W / 2}u; s > 0u; s = s >> 1u) {`,
          `    if (lid < s && ${better}(${arr}[lid + s], kiln_widx[lid + s], ${arr}[lid], kiln_widx[lid])) { ${arr}[lid] = ${arr}[lid + s]; kiln_widx[lid] = kiln_widx[lid + s]; }`,
          '    workgroupBarrier();',
          '  }',
          `  let r = vec2<u32>(bitcast<u32>(${arr}[0]), bitcast<u32>(kiln_widx[0]));`,
          '  workgroupBarrier();',
          '  return r;',
          '}',
        ].join('\n'),
      );
    }
    return `${name}(a${o}, ai${o}, lid)`;
  }

  text(): string[] {
    const out: string[] = [];
    for (const t of this.shared) out.push(`var<workgroup> kiln_w${t}: array<${t}, ${this.W}>;`);
    if ([...this.fns.keys()].some((k) => k.startsWith('kiln_wg_arg'))) out.push(`var<workgroup> kiln_widx: array<i32, ${this.W}>;`);
    return [...out, ...this.fns.values()];
  }
}

function renderReduce(c: Ctx): string {
  const { spec, g } = c;
  const O = spec.orank;
  const Q = spec.rrank;
  const T = g.outputs.length + g.inputs.length;
  const hb = (k: number): number => 2 + O + Q + k * (1 + O + Q);
  const wg = spec.strategy === 'workgroup';
  const reductions = g.nodes.filter((n) => n.kind === 'reduction');
  const sg = wg && spec.subgroups && reductions.some((n) => n.reduce!.kind === 'sum' || n.reduce!.kind === 'mean');
  const W = workgroupOf(spec);
  const R = wg && spec.resident !== undefined ? Math.max(1, Math.floor(spec.resident)) : 0;
  const U = wg && R === 0 ? Math.max(1, Math.floor(spec.unroll ?? 1)) : 1;
  const helpers = new Helpers(sg, W);
  const { passes, rowOuts } = phases(g);
  const rowLines = new Lines();
  rowLines.line('let M = kmeta[0];');
  rowLines.line('let N = kmeta[1];');
  rowLines.open(wg ? 'for (var row = wid.x; row < M; row = row + ng.x) {' : `for (var row = gid.x; row < M; row = row + ng.x * ${W}u) {`);
  const ks = Array.from({ length: T }, (_, k) => k);
  decompose(
    rowLines,
    'row',
    O,
    (d) => `kmeta[${2 + d}]`,
    ks,
    (k) => `bs${k}`,
    (k) => `kmeta[${hb(k)}]`,
    (k, d) => `kmeta[${hb(k) + 1 + d}]`,
    'q',
  );
  const avail = new Set<number>();
  // Register-resident rows: the passes are rendered first (they say which inputs they read, into
  // `loaded`), then the loads of those inputs go before them.
  const loaded = new Set<number>();
  const L = R > 0 ? new Lines() : rowLines;
  /** Per-row nodes whose inputs are all available. */
  const rowNodes = (): void => {
    for (const n of g.nodes) {
      const o = n.outputs[0]!;
      if (n.kind !== 'pointwise' || !g.rowScalars.has(o) || avail.has(o)) continue;
      if (!valueInputs(n).every((id) => avail.has(id))) continue;
      L.line(nodeStatement(g, n));
      avail.add(o);
    }
  };
  for (const pass of passes) {
    for (const r of pass.reductions) {
      const o = r.outputs[0]!;
      const t = ctype(g.value(o).dtype);
      L.line(`var a${o}: ${t} = ${identity(r.reduce!.kind, t)};`);
      if (r.reduce!.kind === 'argmax' || r.reduce!.kind === 'argmin') L.line(`var ai${o}: i32 = 2147483647i;`);
    }
    const body = elementCode(
      c,
      pass.reductions.map((n) => n.reduce!.input),
      pass.stores,
      avail,
      (k) => `bs${k} + ro${k}`,
    );
    if (R > 0) {
      residentPass(c, L, pass, avail, helpers, W, R, loaded);
      for (const r of pass.reductions) finishReduction(c, L, r, helpers, wg, avail);
      rowNodes();
      continue;
    }
    if (wg && U > 1) {
      unrolledPass(c, L, pass, avail, helpers, W, U);
      for (const r of pass.reductions) finishReduction(c, L, r, helpers, wg, avail);
      rowNodes();
      continue;
    }
    L.open(wg ? `for (var j = lid; j < N; j = j + ${W}u) {` : 'for (var j = 0u; j < N; j = j + 1u) {');
    const used = [...body.used].sort((a, b) => a - b);
    decompose(
      L,
      'j',
      Q,
      (d) => `kmeta[${2 + O + d}]`,
      used,
      (k) => `ro${k}`,
      () => '0u',
      (k, d) => `kmeta[${hb(k) + 1 + O + d}]`,
      'wq',
    );
    for (const s of body.stmts) L.line(s);
    combineElement(c, L, pass, helpers, false);
    L.close();
    for (const r of pass.reductions) finishReduction(c, L, r, helpers, wg, avail);
    rowNodes();
  }
  if (rowOuts.length > 0) {
    if (wg) L.open('if (lid == 0u) {');
    for (const o of rowOuts) L.line(store(spec, c.outOperand.get(o)!, `bs${c.outOperand.get(o)!}`, `v${o}`));
    if (wg) L.close();
  }
  if (R > 0) {
    residentLoads(c, rowLines, loaded, W, R);
    for (const l of L.out) rowLines.line(l);
  }
  rowLines.close();

  const out = new Lines();
  for (const l of header(c, sg ? ['subgroups'] : [])) out.line(l);
  for (const l of helpers.text()) out.line(l);
  out.line(`@compute @workgroup_size(${W})`);
  const builtins = wg
    ? ['@builtin(workgroup_id) wid: vec3u', '@builtin(local_invocation_index) lid: u32', '@builtin(num_workgroups) ng: vec3u', ...(sg ? ['@builtin(subgroup_id) sid: u32', '@builtin(subgroup_invocation_id) sgid: u32', '@builtin(num_subgroups) nsub: u32'] : [])]
    : ['@builtin(global_invocation_id) gid: vec3u', '@builtin(num_workgroups) ng: vec3u'];
  out.open(`fn main(${builtins.join(', ')}) {`);
  for (const l of rowLines.out) out.line(l);
  out.close();
  return out.out.join('\n');
}

/**
 * Inside a pass's loop, after element j's statements: each reduction of the pass takes v<input>
 * (argmax/argmin keep the first index among equals; the others combine). `masked`: the unrolled
 * and register-resident forms, whose lanes past the row (jv >= N) hold a clamped element and must
 * leave the accumulators as they are.
 */
function combineElement(c: Ctx, L: Lines, pass: Phase, helpers: Helpers, masked: boolean): void {
  const { g } = c;
  for (const r of pass.reductions) {
    const o = r.outputs[0]!;
    const t = ctype(g.value(o).dtype);
    const x = r.reduce!.input;
    const v = ctype(g.value(x).dtype) === t ? `v${x}` : `${t}(v${x})`;
    const kind = r.reduce!.kind;
    if (kind === 'argmax' || kind === 'argmin') L.line(`if (${masked ? 'jv < N && ' : ''}${helpers.better(kind, t)}(${v}, i32(j), a${o}, ai${o})) { a${o} = ${v}; ai${o} = i32(j); }`);
    else L.line(`a${o} = ${combine(kind, t, `a${o}`, masked ? `select(${identity(kind, t)}, ${v}, jv < N)` : v)};`);
  }
}

/** After a pass's loop: reduction r's accumulator combined over the workgroup (wg) and declared as v<o>. */
function finishReduction(c: Ctx, L: Lines, r: FusedNode, helpers: Helpers, wg: boolean, avail: Set<number>): void {
  const o = r.outputs[0]!;
  const dt = c.g.value(o).dtype;
  const t = ctype(dt);
  const kind = r.reduce!.kind;
  if (kind === 'argmax' || kind === 'argmin') {
    if (wg) {
      L.line(`let p${o} = ${helpers.argCall(kind, t, o)};`);
      L.line(`a${o} = bitcast<${t}>(p${o}.x); ai${o} = bitcast<i32>(p${o}.y);`);
    }
    L.line(`let v${o}: ${t} = a${o};`);
    if (r.outputs[1] !== undefined) {
      L.line(`let v${r.outputs[1]}: i32 = ai${o};`);
      avail.add(r.outputs[1]);
    }
  } else {
    if (wg) L.line(`a${o} = ${helpers.call(kind, t, `a${o}`)};`);
    if (kind === 'mean' && !isFloating(dt)) throw new Error(`kiln wgsl: mean into ${dt}`);
    L.line(`let v${o}: ${t} = ${kind === 'mean' ? `a${o} / f32(N)` : `a${o}`};`);
  }
  avail.add(o);
}

/**
 * One pass of a 'workgroup' reduce with U lanes per loop step (issue #20: a strided loop whose
 * every step waited on its own load made a one-row [1, 1024] norm about four memory round trips
 * per pass). Step j0 covers elements j0 + u * W (u < U): each lane block loads its operands at
 * min(that, N - 1), so every load is unconditional and in bounds and the blocks' loads can all be
 * in flight at once; a lane past the row combines the identity (select), which leaves the
 * accumulator bit for bit as it was, so each invocation combines the same elements in the same
 * order as the one-per-step loop (lane u of step k is that loop's step k * U + u). A pass's stores
 * wait in registers until every lane is computed, then go out under the row bound, so no store sits
 * between two lanes' loads (the bindings may alias for all the shader compiler knows).
 */
function unrolledPass(c: Ctx, L: Lines, pass: Phase, avail: ReadonlySet<number>, helpers: Helpers, W: number, U: number): void {
  const { spec, g } = c;
  const O = spec.orank;
  const Q = spec.rrank;
  const hb = (k: number): number => 2 + O + Q + k * (1 + O + Q);
  const stride = (k: number, d: number): string => `kmeta[${hb(k) + 1 + O + d}]`;
  const storeOps = pass.stores.map((s) => c.outOperand.get(s)!);
  L.open(`for (var j0 = lid; j0 < N; j0 = j0 + ${U * W}u) {`);
  for (const s of pass.stores) {
    const k = c.outOperand.get(s)!;
    L.line(`var sv${k}: array<${ctype(g.value(s).dtype)}, ${U}>;`);
    L.line(`var so${k}: array<u32, ${U}>;`);
  }
  for (let u = 0; u < U; u++) {
    const lane = u;
    const body = elementCode(
      c,
      pass.reductions.map((n) => n.reduce!.input),
      pass.stores,
      avail,
      (k) => `bs${k} + ro${k}`,
      {
        load: (k) => load(spec, k, `bs${k} + ro${k}`),
        store: (k, v) => `sv${k}[${lane}] = ${v}; so${k}[${lane}] = bs${k} + ro${k};`,
      },
    );
    L.open('{');
    L.line(`let jv = j0 + ${u * W}u;`);
    L.line('let j = min(jv, N - 1u);');
    const used = [...body.used].sort((a, b) => a - b);
    decompose(L, 'j', Q, (d) => `kmeta[${2 + O + d}]`, used, (k) => `ro${k}`, () => '0u', stride, 'wq');
    for (const st of body.stmts) L.line(st);
    combineElement(c, L, pass, helpers, true);
    L.close();
  }
  for (let u = 0; u < U; u++) {
    if (storeOps.length === 0) break;
    L.open(`if (j0 + ${u * W}u < N) {`);
    for (const k of storeOps) L.line(store(spec, k, `so${k}[${u}]`, `sv${k}[${u}]`));
    L.close();
  }
  L.close();
}

/**
 * A register-resident row's loads (issue #20: a one-row [1, 1024] add + RMSNorm was 15-18 us on
 * the H200, a chain of dependent loads: a strided loop whose every step waited on its load, and a
 * second pass that loaded the row again). Input operand k's lane u is x<k>_<u>, element
 * j = lid + u * W clamped to the row (a lane past the row loads the last element: every load is
 * unconditional and in bounds, so all R * inputs loads can be in flight at once; the passes mask
 * such lanes out). Values are held in the compute type.
 */
function residentLoads(c: Ctx, L: Lines, loaded: ReadonlySet<number>, W: number, R: number): void {
  const { spec, g } = c;
  const O = spec.orank;
  const Q = spec.rrank;
  const hb = (k: number): number => 2 + O + Q + k * (1 + O + Q);
  const ks = [...loaded].sort((a, b) => a - b);
  for (const k of ks) {
    const id = g.inputs[k - g.outputs.length]!;
    for (let u = 0; u < R; u++) L.line(`var x${k}_${u}: ${ctype(g.value(id).dtype)};`);
  }
  for (let u = 0; u < R; u++) {
    L.open('{');
    L.line(`let j = min(lid + ${u * W}u, N - 1u);`);
    decompose(L, 'j', Q, (d) => `kmeta[${2 + O + d}]`, ks, (k) => `ro${k}`, () => '0u', (k, d) => `kmeta[${hb(k) + 1 + O + d}]`, 'wq');
    for (const k of ks) L.line(`x${k}_${u} = ${load(spec, k, `bs${k} + ro${k}`)};`);
    L.close();
  }
}

/**
 * One pass of a register-resident 'workgroup' reduce: lane u of every invocation (element
 * lid + u * W) computed from the registers residentLoads fills (the operands it reads are added to
 * `loaded`), combined into the accumulators in lane order (each invocation combines its elements in
 * the order of the strided loop; lanes past the row combine the identity) and its full-size outputs
 * stored under the row bound. No loads of the row here: every one was issued before the first pass.
 */
function residentPass(c: Ctx, L: Lines, pass: Phase, avail: ReadonlySet<number>, helpers: Helpers, W: number, R: number, loaded: Set<number>): void {
  const { spec } = c;
  const O = spec.orank;
  const Q = spec.rrank;
  const hb = (k: number): number => 2 + O + Q + k * (1 + O + Q);
  const storeOps = pass.stores.map((s) => c.outOperand.get(s)!).sort((a, b) => a - b);
  for (let u = 0; u < R; u++) {
    const body = elementCode(
      c,
      pass.reductions.map((n) => n.reduce!.input),
      pass.stores,
      avail,
      (k) => `bs${k} + ro${k}`,
      {
        load: (k) => {
          loaded.add(k);
          return `x${k}_${u}`;
        },
        store: (k, v) => `if (jv < N) { ${store(spec, k, `bs${k} + ro${k}`, v)} }`,
      },
    );
    L.open('{');
    L.line(`let jv = lid + ${u * W}u;`);
    L.line('let j = min(jv, N - 1u);');
    decompose(L, 'j', Q, (d) => `kmeta[${2 + O + d}]`, storeOps, (k) => `ro${k}`, () => '0u', (k, d) => `kmeta[${hb(k) + 1 + O + d}]`, 'wq');
    for (const st of body.stmts) L.line(st);
    combineElement(c, L, pass, helpers, true);
    L.close();
  }
}

/** The WGSL source of group `g` under `spec`. */
export function renderFused(g: FusedGroup, spec: RenderSpec): string {
  const c = context(g, spec);
  return withPrelude(g.kind === 'pointwise' ? renderPointwise(c) : renderReduce(c));
}
