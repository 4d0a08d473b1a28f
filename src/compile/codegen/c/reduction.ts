/**
 * C code for fused row-reduction kernels on the native CPU path (a layer norm's mean / variance /
 * normalise chain, a softmax, a residual add feeding a norm): the same pass structure as the JS row
 * kernel (codegen/js/emit.ts): one pass over the row per reduction phase, then a pass that stores
 * the full-size outputs, with per-row scalars (reductions and pointwise ops on them) in registers
 * between passes; full-size values a later pass needs are recomputed (no scratch row).
 *
 *   void <sym>(int32_t orank, const double *meta, float *d0, ..., float *dK, int32_t nthreads)
 *
 * `meta`: the outer shape, every operand's outer strides, the offsets, then the row length and
 * every operand's row stride (the caller coalesces the row to one dim; other rows run the JS
 * kernel). Rows are shared over OpenMP threads. sum / mean accumulate in double (as the JS kernel
 * does in float64 numbers); a pass whose row is unit-stride for every operand it touches runs a
 * dense loop the compiler vectorises (`omp simd` reductions for sums). Only groups whose every
 * value is float32 and whose every pointwise op has a C form are generated.
 */
import { createHash } from '../../../platform/index.js';
import { C_HELPERS, C_MATH } from '../../../kernels/cpu/native/c-math.js';
import type { IRArg, ValueId } from '../../ir.js';
import { type LNode, type Lowered, nodeInputs } from '../../lower/lower.js';
import type { KernelGroup } from '../../lower/schedule.js';
import { C_MAX_RANK, nodeExpr, num, type NativePointwise } from './pointwise.js';

/**
 * Below this many elements one thread does the work. An OpenMP region ends in a barrier that waits
 * for every worker to be scheduled: microseconds on an idle machine, up to milliseconds on a shared
 * one, while a 64 K-element layer norm or residual add (the transformer block's) takes ~20-40 us on
 * one thread. From 128 K elements (512 KiB, beyond L2) the second core pays for the risk.
 */
const PARALLEL_MIN = 1 << 17;

const v = (id: ValueId): string => `v${id}`;

/** The C row kernel for a reduce group, or null when some value or op has no C form. */
export function cReductionKernel(g: KernelGroup, low: Lowered): NativePointwise | null {
  if (g.kind !== 'reduce') return null;
  const ids = new Set<ValueId>([...g.inputs, ...g.produced]);
  for (const id of ids) if (low.values.get(id)?.dtype !== 'float32') return null;
  const nodeOf = new Map<ValueId, LNode>();
  for (const n of g.nodes) {
    if (n.outputs.length !== 1 || n.mutates) return null;
    if (n.kind === 'reduction') {
      if (!['sum', 'mean', 'amax', 'amin'].includes(n.reduce!.kind)) return null;
    } else if (n.kind !== 'pointwise') return null;
    nodeOf.set(n.outputs[0]!, n);
  }
  const nOut = g.outputs.length;
  const nOps = nOut + g.inputs.length;
  const operand = new Map<ValueId, number>();
  g.inputs.forEach((id, k) => operand.set(id, nOut + k));
  const outOperand = new Map<ValueId, number>();
  g.outputs.forEach((o, k) => outOperand.set(o, k));
  const arg = (a: IRArg | undefined): string | null => {
    if (!a) return null;
    if (a.kind === 'value') return v(a.id);
    if (a.kind === 'const' && (typeof a.value === 'number' || typeof a.value === 'boolean')) return num(Number(a.value));
    return null;
  };
  const stmt = (n: LNode): string | null => {
    const e = nodeExpr(n, arg);
    return e === null ? null : `const float ${v(n.outputs[0]!)} = ${e};`;
  };
  // Phases as in the JS row kernel: a reduction's phase is one more than its input's.
  const level = new Map<ValueId, number>();
  const lv = (id: ValueId): number => level.get(id) ?? 0;
  for (const n of g.nodes) {
    const o = n.outputs[0]!;
    level.set(o, n.kind === 'reduction' ? lv(n.reduce!.input) + 1 : Math.max(0, ...nodeInputs(n).map(lv)));
  }
  const reductions = g.nodes.filter((n) => n.kind === 'reduction');
  const phases = Math.max(...reductions.map((n) => lv(n.outputs[0]!)));
  const fullOuts = g.outputs.filter((o) => !g.rowScalars.has(o));
  const rowOuts = g.outputs.filter((o) => g.rowScalars.has(o));
  const avail = new Set<ValueId>();
  const body: string[] = [];
  const emitRowScalars = (): boolean => {
    for (const n of g.nodes) {
      const o = n.outputs[0]!;
      if (n.kind !== 'pointwise' || !g.rowScalars.has(o) || avail.has(o) || !nodeInputs(n).every((id) => avail.has(id))) continue;
      const s = stmt(n);
      if (s === null) return false;
      body.push(`    ${s}`);
      avail.add(o);
    }
    return true;
  };
  const passes: { reds: LNode[]; stores: ValueId[] }[] = [];
  for (let p = 1; p <= phases; p++) passes.push({ reds: reductions.filter((n) => lv(n.outputs[0]!) === p), stores: [] });
  if (fullOuts.length > 0) passes.push({ reds: [], stores: fullOuts });
  for (const P of passes) {
    const need = new Set<ValueId>();
    const visit = (id: ValueId): void => {
      if (need.has(id) || avail.has(id)) return;
      need.add(id);
      const n = nodeOf.get(id);
      if (n) for (const a of nodeInputs(n)) visit(a);
    };
    for (const r of P.reds) visit(r.reduce!.input);
    for (const s of P.stores) visit(s);
    const used = new Set<number>();
    const loads: { id: ValueId; k: number }[] = [];
    for (const id of need) {
      if (nodeOf.has(id)) continue;
      const k = operand.get(id);
      if (k === undefined) return null;
      used.add(k);
      loads.push({ id, k });
    }
    for (const s of P.stores) used.add(outOperand.get(s)!);
    const inner: string[] = [];
    for (const n of g.nodes) {
      const o = n.outputs[0]!;
      if (!need.has(o)) continue;
      if (n.kind !== 'pointwise') return null;
      const s = stmt(n);
      if (s === null) return null;
      inner.push(s);
    }
    const accs: string[] = [];
    for (const r of P.reds) {
      const a = `a${r.outputs[0]!}`;
      const x = v(r.reduce!.input);
      const kind = r.reduce!.kind;
      if (kind === 'sum' || kind === 'mean') {
        body.push(`    double ${a} = 0.0;`);
        accs.push(a);
        inner.push(`${a} += (double)${x};`);
      } else {
        body.push(`    float ${a} = ${kind === 'amax' ? '-INFINITY' : 'INFINITY'};`);
        inner.push(`if (${x} ${kind === 'amax' ? '>' : '<'} ${a} || ${x} != ${x}) ${a} = ${x};`);
      }
    }
    const onlySums = P.reds.every((r) => r.reduce!.kind === 'sum' || r.reduce!.kind === 'mean');
    const loop = (at: (k: number) => string): string[] => [
      ...loads.map((l) => `const float ${v(l.id)} = ${at(l.k)};`),
      ...inner,
      ...P.stores.map((s) => `${at(outOperand.get(s)!)} = ${v(s)};`),
    ];
    const u = [...used].sort((x, y) => x - y);
    const contig = u.length === 0 ? '1' : u.map((k) => `rs[${k}] == 1`).join(' && ');
    body.push(`    if (${contig}) {`);
    u.forEach((k) => body.push(`      float *restrict q${k} = d${k} + b[${k}];`));
    if (onlySums && accs.length > 0) body.push(`#pragma omp simd reduction(+:${accs.join(', ')})`);
    body.push(`      for (int64_t i = 0; i < n; i++) {`, ...loop((k) => `q${k}[i]`).map((l) => `        ${l}`), '      }');
    body.push('    } else {');
    body.push(`      for (int64_t i = 0; i < n; i++) {`, ...loop((k) => `d${k}[b[${k}] + i * rs[${k}]]`).map((l) => `        ${l}`), '      }');
    body.push('    }');
    for (const r of P.reds) {
      const o = r.outputs[0]!;
      body.push(`    const float ${v(o)} = (float)(${r.reduce!.kind === 'mean' ? `a${o} / (double)n` : `a${o}`});`);
      avail.add(o);
    }
    if (!emitRowScalars()) return null;
  }
  for (const o of rowOuts) {
    if (!avail.has(o)) return null;
    const k = outOperand.get(o)!;
    body.push(`    d${k}[b[${k}]] = ${v(o)};`);
  }
  const dparams = Array.from({ length: nOps }, (_, k) => `float *d${k}`).join(', ');
  const core = `
void SYMBOL(int32_t orank, const double *meta, ${dparams}, int32_t nthreads) {
  enum { NOPS = ${nOps}, MAXR = ${C_MAX_RANK} };
  int64_t shape[MAXR], st[NOPS][MAXR], off[NOPS], rs[NOPS];
  if (orank < 0 || orank > MAXR) return;
  int64_t rows = 1;
  for (int r = 0; r < orank; r++) { shape[r] = (int64_t)meta[r]; rows *= shape[r]; }
  for (int k = 0; k < NOPS; k++) {
    for (int r = 0; r < orank; r++) st[k][r] = (int64_t)meta[orank + k * orank + r];
    off[k] = (int64_t)meta[orank + NOPS * orank + k];
    rs[k] = (int64_t)meta[orank + NOPS * orank + NOPS + 1 + k];
  }
  int64_t n = (int64_t)meta[orank + NOPS * orank + NOPS];
  if (rows <= 0 || n <= 0) return;
  if ((double)rows * (double)n < ${PARALLEL_MIN}.0 || nthreads < 1) nthreads = 1;
#pragma omp parallel for num_threads(nthreads) schedule(static)
  for (int64_t row = 0; row < rows; row++) {
    int64_t b[NOPS];
    for (int k = 0; k < NOPS; k++) b[k] = off[k];
    for (int64_t r = orank - 1, t = row; r >= 0; r--) {
      int64_t i = t % shape[r];
      t /= shape[r];
      for (int k = 0; k < NOPS; k++) b[k] += i * st[k][r];
    }
${body.join('\n')}
  }
}
`;
  const symbol = `kiln_rd_${createHash('sha256').update(core).digest('hex').slice(0, 16)}`;
  const source = `/* kiln native row kernel: ${g.nodes.length} ops [${g.nodes.map((n) => n.op).join(', ')}] */
#include <stdint.h>
#include <string.h>
#include <math.h>
${C_MATH}${C_HELPERS}${core.replace('SYMBOL', symbol)}`;
  return { source, symbol, nOutputs: nOut, nInputs: g.inputs.length, kind: 'reduce' };
}
