/**
 * CUDA C for a fused pointwise kernel: a grid-stride loop over the iteration space in units of V
 * elements (one vector access per operand per unit), EPT units per thread per trip at a stride of
 * the block size (so a warp's accesses stay coalesced), 32- or 64-bit index math per the spec.
 */
import { computeType } from '../codegen/ctypes.js';
import type { Param } from './args.js';
import { type GroupCtx, elementCode, Lines, ptrType } from './body.js';
import { type IndexPlan, indexPlan, sizeParams } from './index-math.js';
import type { KernelSpec } from './spec.js';

export interface PointwiseConfig {
  readonly kind: 'pointwise';
  /** Threads per block. */
  readonly block: 128 | 256 | 512 | 1024;
  /** Vector units per thread per loop trip. */
  readonly ept: 1 | 2 | 4;
  /** Elements per vector access (1: scalar). */
  readonly vec: 1 | 2 | 4 | 8;
}

export interface EmittedKernel {
  readonly name: string;
  readonly params: readonly Param[];
  readonly source: string;
}

/** Offsets of every operand from the element index `e` (coordinates over sizes n<d>, strides s<k>_<d>). */
export function pointwiseIndexPlan(spec: KernelSpec): IndexPlan {
  return indexPlan(
    'e',
    spec.orank,
    spec.ops.map((o) => ({ linear: o.linear, zero: o.outerZero, unitInner: o.unitInner })),
    'n',
    's',
    'c',
    spec.idx64 ? 'long long' : 'int',
    spec.idx64 ? 'i64' : 'i32',
  );
}

export function emitPointwise(c: GroupCtx, name: string, cfg: PointwiseConfig): EmittedKernel {
  const { spec } = c;
  const idx = spec.idx64 ? 'long long' : 'int';
  const ip = spec.idx64 ? 'i64' : 'i32';
  const r = spec.orank;
  const V = cfg.vec;
  const B = cfg.block;
  const nOps = spec.ops.length;
  const nOut = c.g.outputs.length;
  const operandValue = (k: number): number => (k < nOut ? c.g.outputs[k]! : c.g.inputs[k - nOut]!);
  // By-value inputs (FusedValue.byValue) and the group's params are doubles, converted once.
  const byValue = new Set(c.g.inputs.filter((id) => c.info(id).byValue === true));
  const ptrs: Param[] = Array.from({ length: nOps }, (_, k): Param =>
    byValue.has(operandValue(k)) ? { name: `p${k}`, type: 'f64', source: { kind: 'scalar', what: `p${k}` } } : { name: `p${k}`, type: 'ptr', source: { kind: 'operand', k } },
  );
  const scalars: Param[] = Array.from({ length: c.g.params?.count ?? 0 }, (_, j): Param => ({ name: `p_s${j}`, type: 'f64', source: { kind: 'scalar', what: `s${j}` } }));
  const sizes = sizeParams('n', r, ip);
  const ix = pointwiseIndexPlan(spec);
  // EPT > 1: every unit's loads are issued before any unit computes. With a unit's loads, math
  // and stores under one `if (i < nvec)`, each unit waited for its own loads before the next
  // unit's were issued (the branch keeps them from being hoisted), so a thread had one vector of
  // each input in flight however large EPT was.
  const phased = cfg.ept > 1;
  const body = elementCode(c, {
    roots: c.g.outputs,
    stores: c.g.outputs,
    leaves: byValue,
    V,
    off: (k) => `o${k}`,
    innerZero: (k) => spec.ops[k]!.outerZero[r - 1] === true,
    ...(phased ? { raw: (k: number) => `R${k}[t]` } : {}),
  });
  const params = [...ptrs, ...scalars, ...sizes, ...ix.params];
  const L = new Lines();
  const cType = (t: Param['type']): string => (t === 'f64' ? 'double' : t === 'i64' ? 'long long' : 'int');
  const decl = params.map((p) => (p.type === 'ptr' ? `${ptrType(c, Number(p.name.slice(1)))} ${p.name}` : `${cType(p.type)} ${p.name}`));
  L.line(`extern "C" __global__ void __launch_bounds__(${B}) ${name}(${decl.join(', ')}) {`);
  L.indent();
  for (let k = 0; k < nOps; k++) {
    const id = operandValue(k);
    if (byValue.has(id)) L.line(`const ${computeType(c.info(id).dtype)} v${id} = (${computeType(c.info(id).dtype)})p${k};`);
  }
  for (let j = 0; j < scalars.length; j++) L.line(`const ${c.g.params!.ct} s${j} = (${c.g.params!.ct})p_s${j};`);
  L.line(`const ${idx} total = ${sizes.map((s) => s.name).join(' * ')};`);
  L.line(`const ${idx} nvec = total / ${V};`);
  L.line(`const ${idx} step = (${idx})gridDim.x * ${B * cfg.ept};`);
  L.open(`for (${idx} base = (${idx})blockIdx.x * ${B * cfg.ept} + threadIdx.x; base < nvec; base += step) {`);
  // One unit: its index, coordinates and the offsets of `operands`, then `stmts`.
  const unit = (operands: Iterable<number>, stmts: readonly string[]): void => {
    if (cfg.ept > 1) {
      L.line('#pragma unroll');
      L.open(`for (int t = 0; t < ${cfg.ept}; t++) {`);
      L.line(`const ${idx} i = base + t * ${B};`);
      L.open('if (i < nvec) {');
    } else {
      L.line(`const ${idx} i = base;`);
      L.open('{');
    }
    L.line(V === 1 ? `const ${idx} e = i;` : `const ${idx} e = i * ${V};`);
    for (const s of ix.coords) L.line(s);
    for (const k of operands) L.line(`const ${idx} o${k} = ${ix.offsets[k]};`);
    for (const s of stmts) L.line(s);
    L.close();
    if (cfg.ept > 1) L.close();
  };
  const usedOps = [...Array(nOps).keys()].filter((k) => body.used.has(k));
  if (phased) {
    for (const [k, type] of body.rawTypes) L.line(`${type} R${k}[${cfg.ept}];`);
    if (body.loads.length > 0) unit(body.rawTypes.keys(), body.loads);
    unit(
      usedOps.filter((k) => !body.rawTypes.has(k)),
      body.stmts,
    );
  } else unit(usedOps, body.stmts);
  L.close();
  L.close();
  return { name, params, source: L.text() };
}
