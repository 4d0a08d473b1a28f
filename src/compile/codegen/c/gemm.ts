/**
 * Compiled float32 linears on the native CPU path ('gemm' steps of lower/gemm.ts): the native
 * BLIS GEMM (kernels/cpu/native/gemm-c.ts) with the bias in its epilogue and the folded consumer
 * kernel (GELU, a residual add, ...) generated as C into a variant of the GEMM translation unit
 * (`kiln_epi`, applied to each tile row while it is in L1), so the linear's output is written once.
 *
 * The weight is packed once per weight version (storage, view and storage version, as the Wasm
 * runner: an optimizer step or copy_ repacks on the next call). Variants are built in one batch
 * of 'cc' tasks in the compile worker pool and cached on disk by source like every native object.
 */
import { emitWarning } from '../../../platform/index.js';
import { GEMM_EPI_MAX, gemmCSource } from '../../../kernels/cpu/native/gemm-c.js';
import { GemmLibrary, type F32Extra, type PackedB } from '../../../kernels/cpu/native/gemm.js';
import { probeToolchain } from '../../../kernels/cpu/native/toolchain.js';
import { installBuilt, lookupObject, pendingBuild, runBuildsSync } from '../../../kernels/cpu/native/so-cache.js';
import { readable } from '../../../kernels/cpu/numeric.js';
import { isContiguousStrides, numel } from '../../../tensor/layout.js';
import type { Storage } from '../../../tensor/storage.js';
import type { Tensor } from '../../../tensor/tensor.js';
import type { ValueId } from '../../ir.js';
import type { Lowered } from '../../lower/lower.js';
import type { GemmStep } from '../../lower/gemm.js';
import type { KernelGroup } from '../../lower/schedule.js';
import { cGroupBody } from './pointwise.js';

/**
 * The `kiln_epi` C function for a folded epilogue group: `v` (the linear's output, bias added) is
 * c[j], the other inputs e0..e3 in `extraIds` order. Null when the group has no C form or too
 * many inputs.
 */
export function cGemmEpilogue(g: KernelGroup, low: Lowered, v: ValueId, extraIds: readonly ValueId[]): string | null {
  if (g.kind !== 'pointwise' || g.outputs.length !== 1 || extraIds.length > GEMM_EPI_MAX) return null;
  const names = g.inputs.map((id) => (id === v ? 'c[j]' : `e${extraIds.indexOf(id)}[j]`));
  if (names.some((n) => n === 'e-1[j]')) return null;
  const gb = cGroupBody(g, low, names);
  if (!gb) return null;
  const params = Array.from({ length: GEMM_EPI_MAX }, (_, q) => `const float *restrict e${q}`).join(', ');
  const header = `/* epilogue: [${g.nodes.map((n) => n.op).join(', ')}] */`;
  const out = gb.outputs[0]!;
  const near = nearSplit(gb.lines);
  if (!near) {
    return `${header}
static inline void kiln_epi(int64_t w, float *restrict c, ${params}) {
#pragma omp simd
  for (int64_t j = 0; j < w; j++) {
    ${gb.lines.join('\n    ')}
    c[j] = ${out};
  }
}`;
  }
  const es = Array.from({ length: GEMM_EPI_MAX }, (_, q) => `e${q}`).join(', ');
  // Segments as k_gelu_row (c-math.ts): the group's one erf / gelu runs its first branch alone
  // for every 8-lane chunk whose argument is in (-1, 1) (scaled as the function does); the
  // same float32 values, without the erfc / exp that branch-free code evaluates for every lane.
  return `${header}
/* out[j - oo] = epilogue(j) for j in [j0, j1) (out may be c: each j reads only its own inputs). */
static inline void kiln_epi_span(int64_t j0, int64_t j1, const float *c, float *out, int64_t oo, ${params}) {
#pragma omp simd
  for (int64_t j = j0; j < j1; j++) {
    ${gb.lines.join('\n    ')}
    out[j - oo] = ${out};
  }
}
static inline void kiln_epi(int64_t w, float *restrict c, ${params}) {
  int64_t j0 = 0;
  for (; j0 + K_SEG <= w; j0 += K_SEG) {
    float g[K_SEG], o[K_SEG];
    int wide[K_SEG / 8], nwide = 0;
#pragma omp simd
    for (int64_t j = j0; j < j0 + K_SEG; j++) {
      ${near.before.join('\n      ')}
      g[j - j0] = ${near.arg};
    }
    for (int q = 0; q < K_SEG / 8; q++) {
      wide[q] = !k_all_near(g + 8 * q, ${near.scale});
      nwide += wide[q];
    }
    if (nwide > K_SEG_FIXUPS) {
      kiln_epi_span(j0, j0 + K_SEG, c, c, 0, ${es});
      continue;
    }
#pragma omp simd
    for (int64_t j = j0; j < j0 + K_SEG; j++) {
      ${near.lines.join('\n      ')}
      o[j - j0] = ${out};
    }
    for (int q = 0; q < K_SEG / 8; q++)
      if (wide[q]) kiln_epi_span(j0 + 8 * q, j0 + 8 * q + 8, c, o, j0, ${es});
    memcpy(c + j0, o, sizeof o);
  }
  kiln_epi_span(j0, w, c, c, 0, ${es});
}`;
}

/** `k_erf(a)` / `k_gelu(a)` line: the near form's function and the scale its branch test applies to `a`. */
const NEAR_CALL = /^const float (v\d+) = k_(erf|gelu)\(([A-Za-z_][A-Za-z0-9_]*(?:\[j\])?)\);$/;

/**
 * When the body has exactly one erf / gelu call, as its own statement on a plain name: the lines
 * before it (they compute its argument), the argument, its branch scale, and the body with the
 * call replaced by its first-branch form. Null otherwise (the plain loop is generated).
 */
function nearSplit(lines: readonly string[]): { before: string[]; arg: string; scale: string; lines: string[] } | null {
  const calls = lines.flatMap((l, i) => (/\bk_(erf|gelu)\(/.test(l) ? [i] : []));
  if (calls.length !== 1) return null;
  const at = calls[0]!;
  const m = NEAR_CALL.exec(lines[at]!);
  if (!m) return null;
  const [, v, fn, arg] = m as unknown as [string, string, 'erf' | 'gelu', string];
  const nearLines = [...lines];
  nearLines[at] = `const float ${v} = k_${fn}_near(${arg});`;
  // k_gelu tests |x * 0.707106781f| < 1 (c-math.ts), k_erf |x| < 1.
  return { before: lines.slice(0, at), arg, scale: fn === 'gelu' ? '0.707106781f' : '1.0f', lines: nearLines };
}

/** The GEMM source for a gemm step (the base GEMM without an epilogue group), or null when the epilogue has no C form. */
export function gemmStepCSource(step: GemmStep, low: Lowered): string | null {
  if (!step.epilogue) return gemmCSource();
  const epi = cGemmEpilogue(
    step.epilogue,
    low,
    step.node.outputs[0]!,
    step.epilogueInputs.map((e) => e.id),
  );
  return epi === null ? null : gemmCSource(epi);
}

/** Builds (or loads from the cache) every source in one batch; a source that fails to compile gives null (with a warning). */
export function buildGemmLibraries(sources: readonly string[]): (GemmLibrary | null)[] {
  const probe = probeToolchain();
  if (!probe.ok || sources.length === 0) return sources.map(() => null);
  const tc = probe.toolchain;
  const files = sources.map((s) => lookupObject(s, tc));
  const todo = sources.map((_, i) => i).filter((i) => files[i] === undefined);
  // Equal sources (two linears with the same epilogue) are built once.
  const unique = [...new Set(todo.map((i) => sources[i]!))];
  if (unique.length > 0) {
    const builds = unique.map((s) => pendingBuild('kiln_sgemm_epi', s, tc));
    const results = runBuildsSync(`${builds.length} native GEMM${builds.length === 1 ? '' : 's'} with fused epilogues`, builds.map((b) => b.payload));
    const built = new Map<string, string | undefined>();
    unique.forEach((s, j) => {
      try {
        built.set(s, installBuilt(builds[j]!.key, results[j]!));
      } catch (e) {
        emitWarning(`kiln: a native GEMM epilogue does not compile; that linear runs eagerly.\n${(e as Error).message}`, { code: 'KILN_NATIVE_COMPILE' });
      }
    });
    for (const i of todo) files[i] = built.get(sources[i]!);
  }
  return files.map((f) => (f === undefined ? null : new GemmLibrary(f)));
}

interface PackedWeight {
  storage: Storage;
  version: number;
  offset: number;
  strides: string;
  packed: PackedB;
}

/** Runs one native gemm step on real tensors. */
export class NativeGemmRunner {
  private weight: PackedWeight | null = null;
  /** Weight packings performed (tests check invalidation with it). */
  packs = 0;

  constructor(private readonly lib: GemmLibrary) {}

  /** The operands as the C GEMM reads them, or null when this runner does not handle them (the caller runs the extern). */
  static operands(x: Tensor, w: Tensor, bias: Tensor | null, extras: readonly { t: Tensor; kind: 'full' | 'row' }[], out: { shape: readonly number[]; strides: readonly number[] }): boolean {
    if (x.dtype !== 'float32' || w.dtype !== 'float32' || w.shape.length !== 2 || numel(x.shape) === 0) return false;
    if (!isContiguousStrides(out.shape, out.strides)) return false;
    if (x.shape.length !== 2 && !isContiguousStrides(x.shape, x.strides)) return false;
    if (bias && (bias.dtype !== 'float32' || bias.shape.length !== 1)) return false;
    for (const e of extras) {
      if (e.t.dtype !== 'float32') return false;
      if (e.kind === 'full' && !isContiguousStrides(e.t.shape, e.t.strides)) return false;
      if (e.kind === 'row' && (e.t.strides[e.t.shape.length - 1] ?? 1) !== 1 && numel(e.t.shape) > 1) return false;
    }
    return true;
  }

  private packed(w: Tensor, K: number, N: number): PackedB {
    const p = this.weight;
    const strides = w.strides.join(',');
    if (p && p.storage === w.storage && p.version === w.storage.version && p.offset === w.offset && p.strides === strides) return p.packed;
    const r = readable(w);
    // B[k, n] = W[n, k]
    const packed = this.lib.packB(K, N, { data: r.data as Float32Array, offset: r.offset, rowStride: w.strides[1]!, colStride: w.strides[0]! });
    this.weight = { storage: w.storage, version: w.storage.version, offset: w.offset, strides, packed };
    this.packs++;
    return packed;
  }

  /** out = epilogue(x . w^T + bias, extras); `out` is contiguous with x's rows times N. */
  run(x: Tensor, w: Tensor, bias: Tensor | null, extras: readonly { t: Tensor; kind: 'full' | 'row' }[], out: Float32Array, outOffset: number): void {
    const K = w.shape[1]!;
    const N = w.shape[0]!;
    const M = numel(x.shape) / K;
    const xr = readable(x);
    const rowStride = x.shape.length === 2 ? x.strides[0]! : K;
    const colStride = x.shape.length === 2 ? x.strides[1]! : 1;
    const br = bias ? readable(bias) : null;
    const ex: F32Extra[] = extras.map((e) => {
      const r = readable(e.t);
      return { data: r.data as Float32Array, offset: r.offset, ld: e.kind === 'full' ? N : 0 };
    });
    this.lib.sgemm(
      M,
      N,
      K,
      1,
      { data: xr.data as Float32Array, offset: xr.offset, rowStride, colStride },
      this.packed(w, K, N),
      0,
      { data: out, offset: outOffset, stride: 1, ldc: N },
      { bias: br && bias ? { data: br.data as Float32Array, offset: br.offset, stride: bias.strides[0]! } : null, extras: ex },
    );
  }
}
