/**
 * The CUDA C pointwise generator: one kernel per (expression, operand dtypes, output dtype, path).
 * Pure string and shape logic, so it runs and is tested without a GPU.
 *
 * Two paths:
 * - contiguous: every tensor operand has the output's dense layout (after coalescing, one dim of
 *   stride 1), so all share the linear index; with `vec` > 1 each thread moves 16 bytes of the widest
 *   operand per access (kiln_vec loads), the tail handled element by element;
 * - strided: `rank` coalesced dims; each thread turns its linear index into per-operand offsets with
 *   one div/mod per dim. Broadcast operands are stride 0; numel-1 operands ('bcast') read element 0.
 * Index math is 32-bit (unsigned div/mod are much cheaper than 64-bit ones) unless the element count
 * or an operand's reach needs 64 bits (`index64`). Loops are grid-stride, so any size works with a
 * capped grid.
 */
import { createHash } from '../../../platform/index.js';
import type { DType } from '../../../tensor/dtype.js';
import type { ParamType } from '../../../runtime/cuda/launch.js';
import { computeType, loadAs, PRELUDE, storageType, storeAs, type CType } from './ctypes.js';

export type OperandKind = 'tensor' | 'bcast' | 'scalar';

export interface PwOperand {
  kind: OperandKind;
  /** Storage dtype (tensor/bcast operands). */
  dtype: DType;
  /** Round the loaded value through this dtype (a zero-dim operand of another dtype: PyTorch casts it to the op's dtype). */
  roundThrough?: DType;
}

export interface PointwiseSpec {
  /** Op name (kernel name prefix; letters, digits, underscores). */
  op: string;
  /** C expression over the operands a, b, c and the op parameters s0..s3, all of the compute type. */
  expr: string;
  operands: readonly PwOperand[];
  /** Number of op parameters (s0..): alpha, clamp bounds, softplus beta... */
  nParams: number;
  /** Operands are converted to this dtype's compute type. */
  compute: DType;
  out: DType;
  /** 0: contiguous path; otherwise the strided path over `rank` dims. */
  rank: number;
  /** Elements per thread on the contiguous path (1 = no vector access). */
  vec: number;
  index64: boolean;
}

export interface GeneratedKernel {
  name: string;
  source: string;
  params: ParamType[];
}

const OPERAND_NAMES = ['a', 'b', 'c'] as const;
// 256 threads: 8 warps a block, enough to hide latency with several blocks per SM; the launcher
// caps the grid and loops (grid-stride), so this is also the unit of work distribution.
export const POINTWISE_BLOCK = 256;

function roundThrough(d: DType, expr: string, ct: CType): string {
  if (d === 'float16' || d === 'bfloat16') return loadAs(d, storeAs(d, expr, ct), ct);
  if (d === 'float32' && ct === 'double') return `(double)(float)(${expr})`;
  return expr;
}

/** A stable key for everything that changes the generated text. */
export function pointwiseKey(s: PointwiseSpec): string {
  const ops = s.operands.map((o) => `${o.kind[0]}${o.dtype}${o.roundThrough ? `~${o.roundThrough}` : ''}`).join(',');
  return `${s.op}|${s.expr}|${ops}|${s.nParams}|${s.compute}|${s.out}|${s.rank}|${s.vec}|${s.index64 ? 64 : 32}`;
}

export function pointwiseKernelName(s: PointwiseSpec): string {
  const h = createHash('sha256').update(pointwiseKey(s)).digest('hex').slice(0, 12);
  return `kiln_pw_${s.op.replace(/[^A-Za-z0-9_]/g, '_')}_${h}`;
}

export function generatePointwise(s: PointwiseSpec): GeneratedKernel {
  if (s.operands.length > OPERAND_NAMES.length) throw new Error(`pointwise codegen: at most 3 operands, got ${s.operands.length}`);
  if (s.vec > 1 && s.rank !== 0) throw new Error('pointwise codegen: vector access needs the contiguous path (rank 0)');
  const ct = computeType(s.compute);
  const it = s.index64 ? 'long long' : 'unsigned int';
  const st = s.index64 ? 'long long' : 'int';
  const itP: ParamType = s.index64 ? 'i64' : 'u32';
  const stP: ParamType = s.index64 ? 'i64' : 'i32';
  const name = pointwiseKernelName(s);
  const params: ParamType[] = ['ptr'];
  const decl: string[] = [`${storageType(s.out)}* __restrict__ out`];
  s.operands.forEach((o, i) => {
    const v = OPERAND_NAMES[i]!;
    if (o.kind === 'scalar') {
      params.push('f64');
      decl.push(`double p_${v}`);
    } else {
      params.push('ptr');
      decl.push(`const ${storageType(o.dtype)}* __restrict__ in_${v}`);
    }
  });
  for (let j = 0; j < s.nParams; j++) {
    params.push('f64');
    decl.push(`double p_s${j}`);
  }
  params.push(itP);
  decl.push(`${it} n`);
  const strided = s.operands.map((o, i) => ({ o, v: OPERAND_NAMES[i]! })).filter((x) => x.o.kind === 'tensor');
  if (s.rank > 0) {
    for (let d = 0; d < s.rank; d++) {
      params.push(itP);
      decl.push(`${it} size${d}`);
    }
    for (const who of ['o', ...strided.map((x) => x.v)]) {
      for (let d = 0; d < s.rank; d++) {
        params.push(stP);
        decl.push(`${st} st_${who}${d}`);
      }
    }
  }
  const body: string[] = [];
  // Per-kernel constants: scalars and op parameters converted once, hoisted out of the loop.
  s.operands.forEach((o, i) => {
    if (o.kind === 'scalar') body.push(`  const ${ct} sc_${OPERAND_NAMES[i]} = (${ct})p_${OPERAND_NAMES[i]};`);
  });
  for (let j = 0; j < s.nParams; j++) body.push(`  const ${ct} s${j} = (${ct})p_s${j};`);
  body.push(`  const ${it} tid = (${it})blockIdx.x * blockDim.x + threadIdx.x;`);
  body.push(`  const ${it} stride = (${it})gridDim.x * blockDim.x;`);

  const loadOperand = (o: PwOperand, v: string, idx: string): string => {
    if (o.kind === 'scalar') return `sc_${v}`;
    const raw = loadAs(o.dtype, o.kind === 'bcast' ? `in_${v}[0]` : `in_${v}[${idx}]`, ct);
    return o.roundThrough ? roundThrough(o.roundThrough, raw, ct) : raw;
  };
  const elementBody = (outIdx: (v: string) => string, indent: string): string[] => {
    const lines: string[] = [];
    s.operands.forEach((o, i) => {
      const v = OPERAND_NAMES[i]!;
      lines.push(`${indent}const ${ct} ${v} = ${loadOperand(o, v, outIdx(v))};`);
    });
    lines.push(`${indent}out[${outIdx('o')}] = ${storeAs(s.out, s.expr, ct)};`);
    return lines;
  };

  if (s.rank === 0) {
    if (s.vec > 1) {
      const V = s.vec;
      body.push(`  const ${it} nv = n / ${V};`);
      body.push(`  for (${it} i = tid; i < nv; i += stride) {`);
      s.operands.forEach((o, i) => {
        const v = OPERAND_NAMES[i]!;
        if (o.kind === 'tensor') body.push(`    const kiln_vec<${storageType(o.dtype)}, ${V}> v_${v} = reinterpret_cast<const kiln_vec<${storageType(o.dtype)}, ${V}>*>(in_${v})[i];`);
      });
      body.push(`    kiln_vec<${storageType(s.out)}, ${V}> v_o;`);
      body.push('#pragma unroll');
      body.push(`    for (int j = 0; j < ${V}; j++) {`);
      s.operands.forEach((o, i) => {
        const v = OPERAND_NAMES[i]!;
        const raw = o.kind === 'tensor' ? loadAs(o.dtype, `v_${v}.v[j]`, ct) : loadOperand(o, v, '');
        const val = o.kind === 'tensor' && o.roundThrough ? roundThrough(o.roundThrough, raw, ct) : raw;
        body.push(`      const ${ct} ${v} = ${val};`);
      });
      body.push(`      v_o.v[j] = ${storeAs(s.out, s.expr, ct)};`);
      body.push('    }');
      body.push(`    reinterpret_cast<kiln_vec<${storageType(s.out)}, ${V}>*>(out)[i] = v_o;`);
      body.push('  }');
      body.push(`  for (${it} i = nv * ${V} + tid; i < n; i += stride) {`);
      body.push(...elementBody(() => 'i', '    '));
      body.push('  }');
    } else {
      body.push(`  for (${it} i = tid; i < n; i += stride) {`);
      body.push(...elementBody(() => 'i', '    '));
      body.push('  }');
    }
  } else {
    body.push(`  for (${it} i = tid; i < n; i += stride) {`);
    body.push(`    ${it} r = i;`);
    body.push(`    ${st} off_o = 0${strided.map((x) => `, off_${x.v} = 0`).join('')};`);
    for (let d = s.rank - 1; d >= 0; d--) {
      if (d === 0) {
        body.push(`    { const ${st} id = (${st})r;`);
      } else {
        body.push(`    { const ${it} q = r / size${d}; const ${st} id = (${st})(r - q * size${d}); r = q;`);
      }
      body.push(`      off_o += id * st_o${d};${strided.map((x) => ` off_${x.v} += id * st_${x.v}${d};`).join('')} }`);
    }
    body.push(...elementBody((v) => `off_${v}`, '    '));
    body.push('  }');
  }
  const source = `${PRELUDE}
extern "C" __global__ void __launch_bounds__(${POINTWISE_BLOCK}) ${name}(${decl.join(', ')}) {
${body.join('\n')}
}
`;
  return { name, source, params };
}

// ------------------------------------------------------------------------------------------------
// Shape logic: coalescing dims and choosing the path.
// ------------------------------------------------------------------------------------------------

export interface Coalesced {
  shape: number[];
  /** strides[k] for operand k (0 = the output), one per dim of `shape`. */
  strides: number[][];
}

/**
 * Reorders dims so the output's strides descend (the output is written in memory order), drops
 * size-1 dims, and merges neighbours that every operand walks contiguously
 * (stride[d] == stride[d+1] * size[d+1]). The result indexes the same elements with fewer dims.
 */
export function coalesce(shape: readonly number[], strides: readonly (readonly number[])[]): Coalesced {
  const dims = shape.map((_, d) => d).filter((d) => shape[d] !== 1);
  const out = strides[0]!;
  // Stable sort by the output's stride, largest first (ties keep the logical order).
  dims.sort((x, y) => out[y]! - out[x]! || x - y);
  const rs: number[] = [];
  const rst: number[][] = strides.map(() => []);
  for (const d of dims) {
    const last = rs.length - 1;
    if (last >= 0 && strides.every((s, k) => rst[k]![last] === s[d]! * shape[d]!)) {
      rs[last] = rs[last]! * shape[d]!;
      strides.forEach((s, k) => (rst[k]![last] = s[d]!));
      continue;
    }
    rs.push(shape[d]!);
    strides.forEach((s, k) => rst[k]!.push(s[d]!));
  }
  return { shape: rs, strides: rst };
}

/** Largest element offset (+1) an operand reaches. */
export function reach(shape: readonly number[], strides: readonly number[]): number {
  let r = 1;
  for (let d = 0; d < shape.length; d++) r += (shape[d]! - 1) * Math.abs(strides[d]!);
  return r;
}

// 2^31 - 1: indices, offsets and the grid-stride sum must stay below it in the 32-bit path.
export const INDEX32_LIMIT = 2 ** 31 - 1;

/** Elements per thread for 16-byte access, given operand item sizes (the widest moves 16 bytes). */
export function vectorWidth(itemSizes: readonly number[]): number {
  const widest = Math.max(...itemSizes);
  return Math.max(1, Math.floor(16 / widest));
}
