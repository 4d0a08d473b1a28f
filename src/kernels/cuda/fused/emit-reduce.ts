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
 * - col:    few long strided rows that lie next to each other in memory (reductions over the outer
 *           dims of a channels_last tensor): blocks of adjacent rows x slices of the reduced range,
 *           coalesced across rows, with a launch per pass (emit-col.ts). Any number of passes and
 *           full-size outputs; no arg reductions.
 *
 * The eager cuda reductions (kernels/cuda/reduce-run.ts) render their one-node programs here too,
 * with two things the compiler never schedules: host scalars s0.. that expression nodes read
 * (double parameters after the pointers) and arg reductions (emit-arg.ts).
 */
import { computeType } from '../codegen/ctypes.js';
import type { Param } from './args.js';
import { type GroupCtx, Lines } from './body.js';
import { type ArgKind, argBlockCombine, argWarpCombine, isArg } from './emit-arg.js';
import { emitCol } from './emit-col.js';
import type { EmittedKernel } from './emit-pointwise.js';
import { finishReduction, identity, OPS, phases, rowBases, rowPass, rowScalars, rowTotals, shared, splittable, storeRowOuts } from './reduce-parts.js';

export { phases, reduceIndexPlans, splittable } from './reduce-parts.js';

type ValueId = number;

export type ReduceStrategy = 'thread' | 'warp' | 'block' | 'split' | 'col';

export interface ReduceConfig {
  readonly kind: 'reduce';
  readonly strategy: ReduceStrategy;
  readonly block: 128 | 256 | 512 | 1024;
  /** Elements per vector access along the row (1 for the thread and col strategies). */
  readonly vec: 1 | 2 | 4 | 8;
}

/** Threads per block of the split strategy's second kernel (one thread per row; rows are few). */
export const FINISH_BLOCK = 128;

export function emitReduce(c: GroupCtx, name: string, cfg: ReduceConfig): { kernels: EmittedKernel[]; params: Param[] } {
  if (cfg.strategy === 'split') return emitSplit(c, name, cfg);
  if (cfg.strategy === 'col') return emitCol(c, name, cfg);
  const s = shared(c);
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
  const s = shared(c, ['G', 'chunk'], true);
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
