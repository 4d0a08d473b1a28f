/**
 * C code for fused pointwise kernels on the native CPU path (the third pointwise candidate kind
 * after JS and Wasm, and the default when the native path is active).
 *
 * A kernel is one exported function
 *
 *   void <sym>(int32_t rank, const double *meta, float *d0, ..., float *dK, int32_t nthreads)
 *
 * over the JS calling convention's operands (outputs first, then inputs; codegen/js/emit.ts):
 * `meta` holds the coalesced iteration shape, every operand's element strides and offsets (as
 * doubles: exact below 2^53, and one typed array instead of three). The iteration space is cut
 * into (row, CHUNK-wide column block) items shared out over OpenMP threads (dynamic, 16 items =
 * 8 K elements per grab: on a shared machine a descheduled thread's work goes to the other
 * instead of holding up the end of the region); in each item, operands
 * with unit inner stride are used in place and the others (broadcast, transposed) are gathered into
 * a stack buffer first, so the fused body is always a dense loop that the compiler vectorises
 * (restrict pointers, branch-free math from c-math.ts). Only groups whose every input and value is
 * float32 and whose every op has a C form in the shared table (kernels/math/c.ts) are generated;
 * anything else keeps the Wasm/JS kernel.
 */
import { createHash } from '../../../platform/index.js';
import type { DType } from '../../../tensor/dtype.js';
import type { IRArg, ValueId } from '../../ir.js';
import type { LNode, Lowered } from '../../lower/lower.js';
import type { KernelGroup } from '../../lower/schedule.js';
import { C_HELPERS, C_MATH } from '../../../kernels/cpu/native/c-math.js';
import { cExpr, num } from '../../../kernels/math/c.js';

/** Columns per work item: 512 floats = 2 KiB per gathered operand on the stack, inside L1 for a dozen operands. */
export const C_CHUNK = 512;
/** Iteration spaces of higher rank (after coalescing) run the JS kernel. */
export const C_MAX_RANK = 8;
/**
 * Below this many elements one thread does the work. An OpenMP region ends in a barrier that waits
 * for every worker to be scheduled: microseconds on an idle machine, up to milliseconds on a shared
 * one, while a 64 K-element layer norm or residual add (the transformer block's) takes ~20-40 us on
 * one thread. From 128 K elements (512 KiB, beyond L2) the second core pays for the risk.
 */
const PARALLEL_MIN = 1 << 17;

export interface NativePointwise {
  /** The complete C translation unit. */
  readonly source: string;
  /** Exported function name (unique per source). */
  readonly symbol: string;
  readonly nOutputs: number;
  readonly nInputs: number;
  /** 'reduce': a row kernel (reduction.ts) whose `meta` also carries the row length and row strides. */
  readonly kind?: 'pointwise' | 'reduce';
}

export { num } from '../../../kernels/math/c.js';

/** A C expression for one node, or null when the op (or an argument) has no C form (kernels/math/c.ts). */
export function nodeExpr(n: LNode, arg: (a: IRArg | undefined) => string | null): string | null {
  return cExpr(n.op, n.args, n.args.map((a) => arg(a)));
}

/**
 * The statements of a fused pointwise group as C: `const float v<id> = ...;` per node, reading the
 * group inputs through `inputs` (C expressions by input position), and the C names of its outputs;
 * null when some value is not float32 or some op has no C form. Shared by the pointwise kernels
 * and the GEMM epilogues (gemm.ts).
 */
export function cGroupBody(g: KernelGroup, low: Lowered, inputs: readonly string[]): { lines: string[]; outputs: string[] } | null {
  const dtype = (id: ValueId): DType => low.values.get(id)!.dtype;
  if (!g.inputs.every((id) => dtype(id) === 'float32')) return null;
  const name = new Map<ValueId, string>();
  g.inputs.forEach((id, k) => name.set(id, inputs[k]!));
  const arg = (a: IRArg | undefined): string | null => {
    if (!a) return null;
    if (a.kind === 'value') return name.get(a.id) ?? null;
    if (a.kind === 'const' && (typeof a.value === 'number' || typeof a.value === 'boolean')) return num(Number(a.value));
    return null;
  };
  const lines: string[] = [];
  for (const n of g.nodes) {
    if (n.kind !== 'pointwise' || n.outputs.length !== 1 || n.mutates) return null;
    const out = n.outputs[0]!;
    if (dtype(out) !== 'float32') return null;
    const e = nodeExpr(n, arg);
    if (e === null) return null;
    const v = `v${out}`;
    lines.push(`const float ${v} = ${e};`);
    name.set(out, v);
  }
  const outputs: string[] = [];
  for (const o of g.outputs) {
    const v = name.get(o);
    if (v === undefined) return null;
    outputs.push(v);
  }
  return { lines, outputs };
}

/** The C kernel for a pointwise group, or null when some value or op has no C form. */
export function cPointwiseKernel(g: KernelGroup, low: Lowered): NativePointwise | null {
  if (g.kind !== 'pointwise') return null;
  const nOut = g.outputs.length;
  const nIn = g.inputs.length;
  const nOps = nOut + nIn;
  const gb = cGroupBody(
    g,
    low,
    g.inputs.map((_, k) => `x${k}`),
  );
  if (!gb) return null;
  const body: string[] = [];
  g.inputs.forEach((_, k) => body.push(`      const float x${k} = i${k}[j];`));
  for (const l of gb.lines) body.push(`      ${l}`);
  gb.outputs.forEach((v, k) => body.push(`      o${k}[j] = ${v};`));
  const outs = Array.from({ length: nOut }, (_, k) => `float *restrict o${k}`);
  const ins = Array.from({ length: nIn }, (_, k) => `const float *restrict i${k}`);
  const ptrs = Array.from({ length: nOps }, (_, k) => `p[${k}]`);
  const dparams = Array.from({ length: nOps }, (_, k) => `float *d${k}`).join(', ');
  const core = `
static void body(int64_t n, ${[...outs, ...ins].join(', ')}) {
#pragma omp simd
    for (int64_t j = 0; j < n; j++) {
${body.join('\n')}
    }
}

void SYMBOL(int32_t rank, const double *meta, ${dparams}, int32_t nthreads) {
  enum { NOPS = ${nOps}, NOUT = ${nOut}, CH = ${C_CHUNK}, MAXR = ${C_MAX_RANK} };
  float *d[NOPS] = { ${Array.from({ length: nOps }, (_, k) => `d${k}`).join(', ')} };
  int64_t shape[MAXR], st[NOPS][MAXR], off[NOPS];
  if (rank < 1 || rank > MAXR) return;
  for (int r = 0; r < rank; r++) shape[r] = (int64_t)meta[r];
  for (int k = 0; k < NOPS; k++) {
    for (int r = 0; r < rank; r++) st[k][r] = (int64_t)meta[rank + k * rank + r];
    off[k] = (int64_t)meta[rank + NOPS * rank + k];
  }
  int64_t n = shape[rank - 1], rows = 1;
  for (int r = 0; r < rank - 1; r++) rows *= shape[r];
  if (n <= 0 || rows <= 0) return;
  int64_t nch = (n + CH - 1) / CH, items = rows * nch;
  if ((double)rows * (double)n < ${PARALLEL_MIN}.0 || nthreads < 1) nthreads = 1;
#pragma omp parallel for num_threads(nthreads) schedule(dynamic, 16)
  for (int64_t it = 0; it < items; it++) {
    float buf[NOPS][CH] __attribute__((aligned(64)));
    float *p[NOPS];
    int64_t base[NOPS];
    int64_t row = it / nch, c0 = (it % nch) * CH, len = n - c0 < CH ? n - c0 : CH;
    for (int k = 0; k < NOPS; k++) base[k] = off[k];
    for (int r = rank - 2; r >= 0; r--) {
      int64_t i = row % shape[r];
      row /= shape[r];
      for (int k = 0; k < NOPS; k++) base[k] += i * st[k][r];
    }
    for (int k = 0; k < NOPS; k++) {
      int64_t s = st[k][rank - 1];
      float *src = d[k] + base[k] + c0 * s;
      if (s == 1) { p[k] = src; continue; }
      p[k] = buf[k];
      if (k < NOUT) continue;
      if (s == 0) for (int64_t j = 0; j < len; j++) buf[k][j] = src[0];
      else for (int64_t j = 0; j < len; j++) buf[k][j] = src[j * s];
    }
    body(len, ${ptrs.join(', ')});
    for (int k = 0; k < NOUT; k++) {
      int64_t s = st[k][rank - 1];
      if (s == 1) continue;
      float *dst = d[k] + base[k] + c0 * s;
      for (int64_t j = 0; j < len; j++) dst[j * s] = buf[k][j];
    }
  }
}
`;
  const symbol = `kiln_pw_${createHash('sha256').update(core).digest('hex').slice(0, 16)}`;
  const source = `/* kiln native pointwise kernel: ${g.nodes.length} ops [${g.nodes.map((n) => n.op).join(', ')}] */
#include <stdint.h>
#include <string.h>
#include <math.h>
${C_MATH}${C_HELPERS}${core.replace('SYMBOL', symbol)}`;
  return { source, symbol, nOutputs: nOut, nInputs: nIn };
}
