/**
 * Eager hooks of the native row kernels (rows-c.ts): RMSNorm, add + RMSNorm and neox rotary for
 * contiguous float32 or bfloat16 tensors of one dtype on the native path; each returns null when
 * the call does not fit (the JS kernel then runs). They replace JS loops that decode and round
 * every element through doubles: the small ops of a cpu decode step (issue #17).
 */
import type { OutMeta } from '../../../ops/schema.js';
import { isContiguousStrides, numel } from '../../../tensor/layout.js';
import type { Tensor } from '../../../tensor/tensor.js';
import { allocOut } from '../numeric.js';
import { loadLibrary, type NativeFn } from './koffi.js';
import { cpuPath } from './path.js';
import { ROWS_C_SOURCE } from './rows-c.js';
import { buildSharedObjectSync } from './so-cache.js';
import { probeToolchain } from './toolchain.js';

let lib: { addRms: NativeFn; rope: NativeFn } | undefined;
let calls = 0;

/** How many native row-kernel calls this process made (tests check that they ran). */
export function nativeRowCalls(): number {
  return calls;
}

function rows(): { addRms: NativeFn; rope: NativeFn } {
  if (lib) return lib;
  const probe = probeToolchain();
  if (!probe.ok) throw new Error(`native cpu path: ${probe.reason}`);
  const l = loadLibrary(buildSharedObjectSync('kiln_rows', ROWS_C_SOURCE, probe.toolchain));
  lib = {
    addRms: l.func('void kiln_add_rms(int64_t rows, int64_t n, void *x, void *r, void *w, double eps, void *out, void *sum, int32_t bf16)'),
    rope: l.func('void kiln_rope(int64_t rows, int64_t heads, int64_t d, void *x, void *cs, void *sn, void *out, int32_t bf16)'),
  };
  return lib;
}

const DTYPES: ReadonlySet<string> = new Set(['float32', 'bfloat16']);

/** The tensor's elements from its offset on (a view of its storage). */
function words(t: Tensor): Float32Array | Uint16Array {
  const buf = t.storage.cpuArrayBuffer();
  return t.dtype === 'bfloat16' ? new Uint16Array(buf, t.offset * 2, numel(t.shape)) : new Float32Array(buf, t.offset * 4, numel(t.shape));
}

function fits(dtype: string, ...ts: (Tensor | OutMeta)[]): boolean {
  return DTYPES.has(dtype) && ts.every((t) => t.dtype === dtype && isContiguousStrides(t.shape, t.strides)) && cpuPath() === 'native';
}

/** rmsNorm over the last n elements (residual null) or llm.addRmsNorm's [out, sum]. */
export function nativeAddRms(metas: OutMeta[], x: Tensor, residual: Tensor | null, weight: Tensor, n: number, eps: number): Tensor[] | null {
  const all = residual ? [x, residual, weight, ...metas] : [x, weight, ...metas];
  if (n === 0 || numel(weight.shape) !== n || !fits(x.dtype, ...all)) return null;
  const outs = metas.map((m) => allocOut(m));
  const total = numel(x.shape);
  calls++;
  if (total > 0) rows().addRms(total / n, n, words(x), residual ? words(residual) : null, words(weight), eps, words(outs[0]!), outs[1] ? words(outs[1]) : null, x.dtype === 'bfloat16' ? 1 : 0);
  return outs;
}

/** neox rotary of x [B, H, D] with cos / sin [B, 1, D] (a decode step's positions), or null. */
export function nativeRope(meta: OutMeta, x: Tensor, cos: Tensor, sin: Tensor): Tensor | null {
  if (x.ndim !== 3 || !fits(x.dtype, x, cos, sin, meta)) return null;
  const [B, H, D] = x.shape as [number, number, number];
  for (const t of [cos, sin]) if (t.ndim !== 3 || t.shape[0] !== B || t.shape[1] !== 1 || t.shape[2] !== D) return null;
  if (D % 2 !== 0) return null;
  const out = allocOut(meta);
  calls++;
  if (B * H * D > 0) rows().rope(B, H, D, words(x), words(cos), words(sin), words(out), x.dtype === 'bfloat16' ? 1 : 0);
  return out;
}
