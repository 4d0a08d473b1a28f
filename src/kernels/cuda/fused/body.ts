/**
 * Per-element code shared by the pointwise and reduction emitters: loads of the group's inputs,
 * the fused nodes' statements (templates.ts) and stores of its outputs, for V consecutive elements
 * at once (vector lanes). Value v<id> in lane u is named v<id>_<u>; per-row values computed outside
 * the element loop ("leaves") are named v<id> and shared by all lanes. An operand whose innermost
 * stride is 1 is read/written with one 16/8/4-byte vector access (KVec in the prelude); one whose
 * innermost stride is 0 is read once for all lanes. Moved below the compiler with the emitters, so
 * the eager cuda kernels render their one-node programs with it (group.ts).
 */
import { getOption } from '../../../runtime/config.js';
import { type DType, isFloating } from '../../../tensor/dtype.js';
import { type CArg, CUDA_TEMPLATES } from '../../math/cuda.js';
import { computeType, storageType } from '../codegen/ctypes.js';
import { declareValue, loadConvert, storeConvert } from './ctypes.js';
import type { FusedGroup, FusedNode, FusedValue } from './group.js';
import type { KernelSpec } from './spec.js';

type ValueId = number;

/**
 * KILN_CUDA_FAST_MATH=0 turns the fast float exp/tanh off (templates.ts); it is in every cache
 * key (configFingerprint). Read once when this module loads (a process.env read per generated node was measurable).
 */
const FAST_MATH = getOption('KILN_CUDA_FAST_MATH');
export function cudaFastMath(): boolean {
  return FAST_MATH;
}

export interface GroupCtx {
  readonly g: FusedGroup;
  readonly info: (id: ValueId) => FusedValue;
  readonly nodeOf: ReadonlyMap<ValueId, FusedNode>;
  /** Operand index of each group input and output value. */
  readonly inOperand: ReadonlyMap<ValueId, number>;
  readonly outOperand: ReadonlyMap<ValueId, number>;
  readonly spec: KernelSpec;
  /** A pointwise group whose every output is bfloat16 (templates.ts CTemplateCtx.bf16Results). */
  readonly bf16Results: boolean;
}

export function groupCtx(g: FusedGroup, spec: KernelSpec): GroupCtx {
  const info = g.value;
  const nodeOf = new Map<ValueId, FusedNode>();
  for (const n of g.nodes) for (const o of n.outputs) nodeOf.set(o, n);
  const outOperand = new Map<ValueId, number>();
  const inOperand = new Map<ValueId, number>();
  g.outputs.forEach((o, k) => outOperand.set(o, k));
  g.inputs.forEach((id, k) => inOperand.set(id, g.outputs.length + k));
  // Reduce groups are left out: a sum over many approximated terms can cancel and expose the error.
  const bf16Results = g.kind === 'pointwise' && g.outputs.length > 0 && g.outputs.every((o) => info(o).dtype === 'bfloat16');
  return { g, info, nodeOf, inOperand, outOperand, spec, bf16Results };
}

/** Statement declaring pointwise node n's output under the lane naming `name`. */
export function nodeStatement(c: GroupCtx, n: FusedNode, name: (id: ValueId) => string): string {
  const out = n.outputs[0]!;
  const dtype = c.info(out).dtype;
  if (n.expr) return exprStatement(c, n, name);
  const args: CArg[] = n.args.map((a) => (a.kind === 'value' ? { kind: 'value', expr: name(a.id), dtype: c.info(a.id).dtype, shape: c.info(a.id).shape } : { kind: 'const', value: a.value }));
  const t = CUDA_TEMPLATES.get(n.op);
  const expr = t ? t(args, { out: dtype, fast: cudaFastMath() && c.g.exactMath !== true, bf16Results: c.bf16Results }) : null;
  if (expr === null) throw new Error(`kiln cuda codegen: no CUDA template for ${n.op} (${args.map((a) => (a.kind === 'value' ? a.dtype : JSON.stringify(a.value))).join(', ')} -> ${dtype})`);
  const fromFloating = n.inputs.some((id) => isFloating(c.info(id).dtype));
  return declareValue(name(out), expr, dtype, n.cast === true, fromFloating);
}

/**
 * A node with the caller's expression (FusedExprNode): its value args bound to a, b, c and the
 * group's params to s0.. in a scope of its own, the value declared in the output's storage type.
 */
function exprStatement(c: GroupCtx, n: FusedNode, name: (id: ValueId) => string): string {
  const e = n.expr!;
  const out = n.outputs[0]!;
  const ct = e.ct;
  const binds: string[] = [];
  n.args.forEach((a, i) => {
    if (a.kind !== 'value') throw new Error(`kiln cuda codegen: ${n.op}: an expression node takes values only`);
    const v = name(a.id);
    const x = c.info(a.id).byValue === true && computeType(c.info(a.id).dtype) === ct ? v : `(${ct})(${v})`;
    binds.push(`[[maybe_unused]] const ${ct} ${'abc'[i]} = ${roundThrough(e.roundThrough?.[i], x, ct)};`);
  });
  return `${storageType(c.info(out).dtype)} ${name(out)}; { ${binds.join(' ')} ${name(out)} = ${e.store(e.expr)}; }`;
}

/** `x` (of type ct) rounded through dtype d: a 0-d operand of another dtype, cast to the op's dtype as PyTorch does. */
function roundThrough(d: DType | undefined, x: string, ct: string): string {
  if (d === 'float16') return `kiln_h2f(kiln_f2h((float)(${x})))`;
  if (d === 'bfloat16') return `kiln_bf2f(kiln_f2bf((float)(${x})))`;
  if (d === 'float32' && ct === 'double') return `(double)(float)(${x})`;
  return x;
}

/** The stored form of value `id` named `v`: an expression node's value is already in it. */
export function storeForm(c: GroupCtx, id: ValueId, v: string): string {
  return c.nodeOf.get(id)?.expr ? v : storeConvert(c.info(id).dtype, v);
}

export interface ElementOptions {
  /** Values to compute (and their dependencies inside the group). */
  readonly roots: readonly ValueId[];
  /** Outputs to store. */
  readonly stores: readonly ValueId[];
  /** Values already available as per-row scalars v<id>. */
  readonly leaves: ReadonlySet<ValueId>;
  /** Lanes (vector width). */
  readonly V: number;
  /** Element offset expression of operand k for lane 0. */
  readonly off: (k: number) => string;
  /** Whether operand k's innermost stride is 0 (all lanes read the same element). */
  readonly innerZero: (k: number) => boolean;
  /**
   * Split loads (emitters that issue several units' loads before using any): input operand k is
   * read into `raw(k)`, a variable of type `rawTypes.get(k)` that the caller declares, by the
   * statements in `loads`; `stmts` then convert from it. Absent: `stmts` load where they use.
   */
  readonly raw?: (k: number) => string;
}

export interface ElementCode {
  readonly stmts: string[];
  /** With ElementOptions.raw: the loads alone, else empty. */
  readonly loads: string[];
  /** With ElementOptions.raw: the storage type of each loaded operand's raw variable. */
  readonly rawTypes: Map<number, string>;
  /** Operands read or written. */
  readonly used: Set<number>;
}

/** Name of value id in lane u. */
export function laneName(leaves: ReadonlySet<ValueId>, id: ValueId, u: number): string {
  return leaves.has(id) ? `v${id}` : `v${id}_${u}`;
}

export function elementCode(c: GroupCtx, o: ElementOptions): ElementCode {
  const need = new Set<ValueId>();
  const visit = (id: ValueId): void => {
    if (need.has(id) || o.leaves.has(id)) return;
    need.add(id);
    const n = c.nodeOf.get(id);
    if (n) for (const a of n.inputs) visit(a);
  };
  for (const r of o.roots) visit(r);
  for (const s of o.stores) visit(s);
  const stmts: string[] = [];
  const loads: string[] = [];
  const rawTypes = new Map<number, string>();
  const used = new Set<number>();
  const { V, raw } = o;
  for (const id of need) {
    if (c.nodeOf.has(id)) continue;
    const k = c.inOperand.get(id);
    if (k === undefined) throw new Error(`kiln cuda codegen: value %${id} is neither computed in the group nor one of its inputs`);
    used.add(k);
    const d = c.info(id).dtype;
    const ct = computeType(d);
    const st = storageType(d);
    if (V === 1 || o.innerZero(k)) {
      let src = `p${k}[${o.off(k)}]`;
      if (raw) {
        rawTypes.set(k, st);
        loads.push(`${raw(k)} = ${src};`);
        src = raw(k);
      }
      stmts.push(`const ${ct} v${id}_0 = ${loadConvert(d, src)};`);
      for (let u = 1; u < V; u++) stmts.push(`const ${ct} v${id}_${u} = v${id}_0;`);
    } else {
      const vt = `KVec<${V}, ${st}>`;
      const load = `*reinterpret_cast<const ${vt}*>(p${k} + ${o.off(k)})`;
      if (raw) {
        rawTypes.set(k, vt);
        loads.push(`${raw(k)} = ${load};`);
      } else stmts.push(`const ${vt} L${k} = ${load};`);
      const name = raw ? raw(k) : `L${k}`;
      for (let u = 0; u < V; u++) stmts.push(`const ${ct} v${id}_${u} = ${loadConvert(d, `${name}.v[${u}]`)};`);
    }
  }
  for (let u = 0; u < V; u++) {
    for (const n of c.g.nodes) {
      const out = n.outputs[0]!;
      if (!need.has(out) || n.kind !== 'pointwise') continue;
      stmts.push(nodeStatement(c, n, (id) => laneName(o.leaves, id, u)));
    }
  }
  for (const s of o.stores) {
    const k = c.outOperand.get(s)!;
    used.add(k);
    const d = c.info(s).dtype;
    const st = storageType(d);
    if (V === 1) stmts.push(`p${k}[${o.off(k)}] = ${storeForm(c, s, laneName(o.leaves, s, 0))};`);
    else {
      stmts.push(`KVec<${V}, ${st}> S${k};`);
      for (let u = 0; u < V; u++) stmts.push(`S${k}.v[${u}] = ${storeForm(c, s, laneName(o.leaves, s, u))};`);
      stmts.push(`*reinterpret_cast<KVec<${V}, ${st}>*>(p${k} + ${o.off(k)}) = S${k};`);
    }
  }
  return { stmts, loads, rawTypes, used };
}

/** Pointer parameter type of operand k. */
export function ptrType(c: GroupCtx, k: number): string {
  const nOut = c.g.outputs.length;
  const id = k < nOut ? c.g.outputs[k]! : c.g.inputs[k - nOut]!;
  const st = storageType(c.info(id).dtype);
  return k < nOut ? `${st}* __restrict__` : `const ${st}* __restrict__`;
}

/** Lines with consistent indentation. */
export class Lines {
  readonly out: string[] = [];
  private depth = 0;
  line(s: string): void {
    this.out.push('  '.repeat(this.depth) + s);
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
  text(): string {
    return this.out.join('\n');
  }
}
