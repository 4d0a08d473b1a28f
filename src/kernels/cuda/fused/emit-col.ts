/**
 * The column strategy of a reduce group ('col'): few long rows whose elements are strided and whose
 * rows lie next to each other in memory, i.e. a reduction over the OUTER dim of an [R, C] matrix
 * (BatchNorm's statistics and gradients of a channels_last activation: C channels, R = N*H*W
 * elements each at stride C). The other strategies walk one row per thread, warp or block and so
 * read one element per 32-byte sector; here the threads of a block cover TX adjacent rows (lane i
 * reads row i's element: coalesced) times TY = block / TX slices of the reduced range.
 *
 * Per reduction level (pass, reduce-parts.ts phases) two launches:
 * - `_p<p>`: block w takes row tile w % T (T = ceil(M / TX)) and chunk w / T of the reduced range
 *   (`chunk` elements, G chunks); each thread accumulates its row over the chunk at step TY, the TY
 *   partials of a row are combined by a tree in shared memory and written to the workspace
 *   (partials of reduction ri at [ri][gi * M + row]).
 * - `_f<p>`: a warp per row combines its G partials (lanes stride them, shuffle reduce), finishes
 *   the reductions (mean divides by N, rounds to the dtype), computes the row scalars, stores the
 *   finished reductions in the workspace (slot ri, [row]) for later kernels and writes the row
 *   outputs that became available.
 * Later kernels reload the finished reductions of earlier levels and recompute the row scalars
 * derived from them (a few flops per thread, the same code), so only reductions need slots. A group
 * with full-size outputs ends with `_s`, a tile kernel that stores them (no reductions). One launch
 * per pass costs a few microseconds of launch each but every pass reads the input coalesced and
 * fills the GPU; the alternative of restricting to one-pass groups would leave BatchNorm's input
 * gradient (mean, variance, two gradient sums, then a full-size output) on 64 blocks of strided reads.
 *
 * Workspace: reductions x M x G partials then reductions x M finished values, 8 bytes each.
 * Integer arguments: G, chunk and TX (rows per tile, a power of two <= 32: lanes beyond M would
 * idle, so fewer rows than a warp give each warp several slices of adjacent, often contiguous, rows).
 * Arg reductions are not supported (their index needs the row order); configSpace never offers col
 * for them.
 */
import { computeType } from '../codegen/ctypes.js';
import type { Param } from './args.js';
import { type GroupCtx, Lines, storeForm } from './body.js';
import { isArg } from './emit-arg.js';
import type { EmittedKernel } from './emit-pointwise.js';
import type { FusedNode } from './group.js';
import { finishReduction, identity, OPS, type Phase, phases, rowBases, rowPass, rowScalars, rowTotals, type Shared, shared } from './reduce-parts.js';

type ValueId = number;

/** Threads per block of the finishing kernels (a warp per row). */
export const COL_FINISH_BLOCK = 256;

/** Whether the col strategy can run this group: no arg reductions. */
export function colable(c: GroupCtx): boolean {
  return !c.g.nodes.some((n) => n.kind === 'reduction' && isArg(n));
}

interface ColCtx {
  readonly c: GroupCtx;
  readonly s: Shared;
  readonly passes: readonly Phase[];
  /** Every reduction in pass order: its index is its workspace area and slot. */
  readonly reds: readonly FusedNode[];
}

/** Row values a kernel of one level may not read (finished reductions of earlier levels, row scalars for later ones). */
const MAYBE_UNUSED = '[[maybe_unused]] ';

const ws64 = (e: string): string => `(unsigned long long)(${e})`;

/** Pointer to the partials of reduction ri. */
function partials(x: ColCtx, ri: number): string {
  const at = computeType(x.c.info(x.reds[ri]!.outputs[0]!).dtype);
  return `reinterpret_cast<${at}*>(ws + ${ws64(`${ri}`)} * ${ws64('M')} * ${ws64('G')} * 8)`;
}

/** Pointer to the finished values of reduction ri (one per row). */
function slot(x: ColCtx, ri: number): string {
  const at = computeType(x.c.info(x.reds[ri]!.outputs[0]!).dtype);
  return `reinterpret_cast<${at}*>(ws + ${ws64(`${x.reds.length}`)} * ${ws64('M')} * ${ws64('G')} * 8 + ${ws64(`${ri}`)} * ${ws64('M')} * 8)`;
}

/** The finished reductions of passes before p, from their slots, and the row scalars they give. */
function loadFinished(L: Lines, x: ColCtx, p: number, avail: Set<ValueId>): void {
  let ri = 0;
  for (let q = 0; q < p; q++) {
    for (const r of x.passes[q]!.reductions) {
      const o = r.outputs[0]!;
      L.line(`[[maybe_unused]] const ${computeType(x.c.info(o).dtype)} v${o} = ${slot(x, ri)}[row];`);
      avail.add(o);
      ri++;
    }
  }
  if (p > 0) rowScalars(L, x.c, avail, MAYBE_UNUSED);
}

/** Index of pass p's first reduction among all. */
const firstRed = (x: ColCtx, p: number): number => x.passes.slice(0, p).reduce((a, q) => a + q.reductions.length, 0);

/** Tile kernel of pass p: partial reductions of a row tile over a chunk, or the full-size stores. */
function tileKernel(x: ColCtx, name: string, p: number, B: number): string {
  const { s } = x;
  const idx = s.idx;
  const pass = x.passes[p]!;
  const L = new Lines();
  L.line(`extern "C" __global__ void __launch_bounds__(${B}) ${name}(${s.decl}) {`);
  L.indent();
  if (pass.reductions.length > 0) L.line('extern __shared__ __align__(16) unsigned char kiln_smem[];');
  rowTotals(L, s);
  L.line('const int cx = (int)threadIdx.x % (int)TX;');
  L.line('const int cy = (int)threadIdx.x / (int)TX;');
  L.line(`const int CY = ${B} / (int)TX;`);
  L.line(`const ${idx} T = (M + TX - 1) / TX;`);
  L.open(`for (${idx} w = blockIdx.x; w < T * G; w += gridDim.x) {`);
  L.line(`const ${idx} gi = w / T;`);
  L.line(`const ${idx} rowr = (w - gi * T) * TX + cx;`);
  L.line(`[[maybe_unused]] const ${idx} row = rowr < M ? rowr : M - 1;`);
  L.line(`const ${idx} j0 = gi * chunk;`);
  L.line(`const ${idx} j1 = rowr < M ? (j0 + chunk < N ? j0 + chunk : N) : j0;`);
  rowBases(L, s);
  const avail = new Set<ValueId>();
  loadFinished(L, x, p, avail);
  rowPass(L, s, pass, avail, 1, 'j0 + cy', 'CY', 'j1', '#pragma unroll 4');
  pass.reductions.forEach((r, i) => {
    const o = r.outputs[0]!;
    const at = computeType(x.c.info(o).dtype);
    const op = OPS[r.reduce!.kind]!;
    L.open('{');
    L.line(`${at}* sh = reinterpret_cast<${at}*>(kiln_smem);`);
    L.line(`sh[threadIdx.x] = a${o};`);
    L.line('__syncthreads();');
    L.open('for (int h = CY >> 1; h > 0; h >>= 1) {');
    L.line(`if (cy < h) sh[threadIdx.x] = ${op}::f(sh[threadIdx.x], sh[threadIdx.x + h * (int)TX]);`);
    L.line('__syncthreads();');
    L.close();
    L.line(`if (cy == 0 && rowr < M) ${partials(x, firstRed(x, p) + i)}[gi * M + rowr] = sh[threadIdx.x];`);
    L.line('__syncthreads();');
    L.close();
  });
  L.close();
  L.close();
  return L.text();
}

/** Finishing kernel of pass p: a warp per row combines the partials; row scalars, slots, row outputs. */
function finishKernel(x: ColCtx, name: string, p: number, rowOuts: readonly ValueId[]): string {
  const { s, c } = x;
  const idx = s.idx;
  const W = COL_FINISH_BLOCK / 32;
  const L = new Lines();
  L.line(`extern "C" __global__ void __launch_bounds__(${COL_FINISH_BLOCK}) ${name}(${s.decl}) {`);
  L.indent();
  rowTotals(L, s);
  L.line('const int lane = threadIdx.x & 31;');
  L.open(`for (${idx} row = (${idx})blockIdx.x * ${W} + (threadIdx.x >> 5); row < M; row += (${idx})gridDim.x * ${W}) {`);
  rowBases(L, s);
  const avail = new Set<ValueId>();
  loadFinished(L, x, p, avail);
  const before = new Set(avail);
  const r0 = firstRed(x, p);
  const reds = x.passes[p]!.reductions;
  reds.forEach((r, i) => {
    const o = r.outputs[0]!;
    const at = computeType(c.info(o).dtype);
    const op = OPS[r.reduce!.kind]!;
    L.line(`${at} a${o} = ${identity(r.reduce!.kind, at)};`);
    L.line(`for (${idx} gi = lane; gi < G; gi += 32) a${o} = ${op}::f(a${o}, ${partials(x, r0 + i)}[gi * M + row]);`);
    L.line(`a${o} = kiln_warp_reduce<${op}>(a${o});`);
    finishReduction(L, c, r, avail);
  });
  rowScalars(L, c, avail, MAYBE_UNUSED);
  L.open('if (lane == 0) {');
  reds.forEach((r, i) => L.line(`${slot(x, r0 + i)}[row] = v${r.outputs[0]!};`));
  for (const o of rowOuts) {
    if (before.has(o) || !avail.has(o)) continue;
    const k = c.outOperand.get(o)!;
    L.line(`p${k}[bs${k}] = ${storeForm(c, o, `v${o}`)};`);
  }
  L.close();
  L.close();
  L.close();
  return L.text();
}

export function emitCol(c: GroupCtx, name: string, cfg: { readonly block: number }): { kernels: EmittedKernel[]; params: Param[] } {
  if (!colable(c)) throw new Error(`kiln cuda codegen: ${name}: the col strategy does not run arg reductions`);
  const s = shared(c, ['G', 'chunk', 'TX'], true);
  const { passes, rowOuts } = phases(c);
  const x: ColCtx = { c, s, passes, reds: passes.flatMap((q) => q.reductions) };
  const kernels: EmittedKernel[] = [];
  passes.forEach((pass, p) => {
    if (pass.reductions.length > 0) {
      kernels.push({ name: `${name}_p${p}`, params: s.params, source: tileKernel(x, `${name}_p${p}`, p, cfg.block) });
      kernels.push({ name: `${name}_f${p}`, params: s.params, source: finishKernel(x, `${name}_f${p}`, p, rowOuts) });
    } else kernels.push({ name: `${name}_s`, params: s.params, source: tileKernel(x, `${name}_s`, p, cfg.block) });
  });
  return { kernels, params: s.params };
}
