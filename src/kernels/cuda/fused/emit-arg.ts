/**
 * The arg reductions of the reduce emitter (emit-reduce.ts): argmax / argmin keep a pair, the
 * extreme value a<o> and its in-row index ai<o> (-1 before the first element), and combine pairs
 * under one total order, so a butterfly of warp shuffles leaves every lane with the same pair:
 * a valid pair beats an empty one, NaN beats any number (PyTorch's max/argmax propagate NaN), a
 * larger (argmax) or smaller (argmin) value beats the other, and among equals the lower index wins
 * (the first occurrence, as PyTorch returns). Within one thread's serial loop indices only grow, so
 * a strictly better value is the only reason to replace the pair there.
 *
 * Arg reductions are eager-only (the compiler schedules none), so none of this text appears in a
 * compiled kernel. They run with the thread, warp and block strategies; not split (splittable()).
 */
import type { CType } from '../codegen/ctypes.js';
import type { Lines } from './body.js';
import type { FusedNode } from './group.js';

export type ArgKind = 'argmax' | 'argmin';

export function isArg(n: FusedNode): boolean {
  return n.reduce?.kind === 'argmax' || n.reduce?.kind === 'argmin';
}

/** Whether value x is better than value y (NaN first, then the larger / smaller). */
function better(kind: ArgKind, x: string, y: string): string {
  const cmp = kind === 'argmax' ? '>' : '<';
  return `((${x} != ${x} && ${y} == ${y}) || ${x} ${cmp} ${y})`;
}

/** One element (value x at in-row index j) into the pair of output o. */
export function argUpdate(kind: ArgKind, o: number, x: string, j: string): string {
  return `if (ai${o} < 0 || ${better(kind, x, `a${o}`)}) { a${o} = ${x}; ai${o} = (long long)(${j}); }`;
}

/** Whether pair (b, bi) beats pair (a<o>, ai<o>). */
function beats(kind: ArgKind, o: number, b: string, bi: string): string {
  return `${bi} >= 0 && (ai${o} < 0 || ${better(kind, b, `a${o}`)} || (!${better(kind, `a${o}`, b)} && ${bi} < ai${o}))`;
}

/** Butterfly over the warp: every lane ends with the warp's best pair. */
export function argWarpCombine(L: Lines, kind: ArgKind, o: number, at: CType): void {
  L.line('#pragma unroll');
  L.open('for (int off = 16; off > 0; off >>= 1) {');
  L.line(`const ${at} b = __shfl_xor_sync(0xffffffffu, a${o}, off);`);
  L.line(`const long long bi = __shfl_xor_sync(0xffffffffu, ai${o}, off);`);
  L.line(`if (${beats(kind, o, 'b', 'bi')}) { a${o} = b; ai${o} = bi; }`);
  L.close();
}

/**
 * Across the block: warps combine, one pair per warp in static shared memory, warp 0 combines those
 * and every thread reads the result. The trailing barrier lets the next row reuse the slots.
 */
export function argBlockCombine(L: Lines, kind: ArgKind, o: number, at: CType, identity: string): void {
  L.open('{');
  L.line(`__shared__ ${at} sa${o}[32];`);
  L.line(`__shared__ long long si${o}[32];`);
  L.line('const int lane_ = threadIdx.x & 31, warp_ = threadIdx.x >> 5, nw_ = (blockDim.x + 31) >> 5;');
  argWarpCombine(L, kind, o, at);
  L.line(`if (lane_ == 0) { sa${o}[warp_] = a${o}; si${o}[warp_] = ai${o}; }`);
  L.line('__syncthreads();');
  L.open('if (warp_ == 0) {');
  L.line(`a${o} = lane_ < nw_ ? sa${o}[lane_] : ${identity};`);
  L.line(`ai${o} = lane_ < nw_ ? si${o}[lane_] : -1LL;`);
  argWarpCombine(L, kind, o, at);
  L.line(`if (lane_ == 0) { sa${o}[0] = a${o}; si${o}[0] = ai${o}; }`);
  L.close();
  L.line('__syncthreads();');
  L.line(`a${o} = sa${o}[0];`);
  L.line(`ai${o} = si${o}[0];`);
  L.line('__syncthreads();');
  L.close();
}
