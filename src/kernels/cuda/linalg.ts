/**
 * cuda GEMMs through cuBLASLt: mm, bmm, matmul (batched with broadcasting), linear (bias fused as
 * the BIAS epilogue), addmm and dot. Operands are read in place when cuBLASLt can (row-major or
 * transposed 2-D blocks, one uniform batch stride); anything else is copied to a contiguous
 * temporary first. Float32 uses exact fp32 compute (no TF32), matching the CPU within 1e-5. A
 * problem cuBLASLt refuses (float32/float64) runs on the plain kernel of gemm-fallback.ts;
 * bfloat16 products of at most 8 rows against a row-major weight (decode) run on gemv.ts, and of
 * 2..64 rows on the tensor-core mma-gemv.ts where KILN_MMA_GEMV_MAX_ROWS lets it.
 */
import { foldRows } from '../cpu/matrix-views.js';
import { addmm, bmm, dot, linear, matmul, mm } from '../../ops/defs/linalg.js';
import { registerKernel } from '../../ops/registry.js';
import type { OutMeta } from '../../ops/schema.js';
import type { DType } from '../../tensor/dtype.js';
import { broadcastShapes, broadcastStrides, contiguousStrides, fmtShape, numel } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import { gemm, type GemmDtype, type GemmProblem, type LtOperand, rowMajorOperand } from '../../runtime/cuda/cublaslt.js';
import { isLtRefusal, runFallbackGemm } from './gemm-fallback.js';
import { copyTensor } from './core.js';
import { allocOut, ptrOf, streamOf } from './device.js';
import { runPointwise } from './pointwise-run.js';
import { runSimtLinear } from './sgemm.js';
import { GEMV_MAX_M, gemvApplies, runGemv } from './gemv.js';
import { MMA_GEMV_MAX_M, mmaGemvApplies, runMmaGemv } from './mma-gemv.js';
import { backends } from '../../runtime/backends.js';

const GEMM_DTYPES: readonly DType[] = ['float32', 'float64', 'float16', 'bfloat16'];

function gemmDtype(op: string, d: DType, shapes: string): GemmDtype {
  if (!GEMM_DTYPES.includes(d)) throw new TypeError(`${op}: the cuda GEMM (cuBLASLt) supports float32, float64, float16 and bfloat16, got ${d} (${shapes})`);
  return d as GemmDtype;
}

/** A matrix operand [batch..., R, C] as cuBLASLt reads it, plus the temporaries made for it. */
interface Prepared {
  op: LtOperand;
  temps: Tensor[];
}

/**
 * `t` broadcast to [...batch, R, C] as one strided batch: the batch dims must collapse into one
 * stride (or be broadcast), and the matrix must be row- or column-major; otherwise a contiguous copy.
 */
function prepare(t: Tensor, batch: readonly number[], R: number, C: number): Prepared {
  const shape = [...batch, R, C];
  const strides = broadcastStrides(t.shape, t.strides, shape);
  const bs = batchStride(batch, strides.slice(0, batch.length));
  const sr = strides[batch.length]!;
  const sc = strides[batch.length + 1]!;
  if (bs !== null) {
    const op = rowMajorOperand(ptrOf(t), R, C, sr, sc, bs);
    if (op) return { op, temps: [] };
  }
  const dense = allocOut({ shape, strides: contiguousStrides(shape), dtype: t.dtype, device: t.device });
  copyTensor(dense, new Tensor(t.storage, t.dtype, shape, strides, t.offset));
  return { op: rowMajorOperand(ptrOf(dense), R, C, C, 1, R * C)!, temps: [dense] };
}

/** One stride that walks all batch dims (size-1 dims ignored), or null. */
function batchStride(batch: readonly number[], strides: readonly number[]): number | null {
  let stride: number | null = null;
  let expected = -1;
  for (let d = batch.length - 1; d >= 0; d--) {
    if (batch[d] === 1) continue;
    if (stride === null) {
      stride = strides[d]!;
      expected = stride * batch[d]!;
      continue;
    }
    if (strides[d] !== expected) return null;
    expected = strides[d]! * batch[d]!;
  }
  return stride ?? 0;
}

export interface GemmCall {
  op: string;
  out: Tensor;
  a: Tensor;
  b: Tensor;
  /** Batch shape (out = [...batch, M, N]). */
  batch: readonly number[];
  M: number;
  N: number;
  K: number;
  bias?: Tensor | null;
  alpha?: number;
  beta?: number;
}

const INT_GEMM_DTYPES: readonly DType[] = ['int32', 'int64', 'uint8'];

/** Integer products (no cuBLASLt kernel): the plain kernel, exact in 64 bits, wrapping at the store. */
function runIntGemm(c: GemmCall): Tensor {
  const { out, M, N, K } = c;
  const dt = c.a.dtype as 'int32' | 'int64' | 'uint8';
  const shapes = `${fmtShape(c.a.shape)} @ ${fmtShape(c.b.shape)}`;
  if (c.b.dtype !== dt || out.dtype !== dt) throw new TypeError(`${c.op}: integer operands and result must share one dtype, got ${c.a.dtype} @ ${c.b.dtype} -> ${out.dtype} (${shapes})`);
  if (c.bias && c.bias.dtype !== dt) throw new TypeError(`${c.op}: the bias must be ${dt} like the operands, got ${c.bias.dtype}`);
  const pa = prepare(c.a, c.batch, M, K);
  const pb = prepare(c.b, c.batch, K, N);
  const dense = c.bias && !(c.bias.ndim === 1 && c.bias.shape[0] === N && c.bias.strides[0] === 1);
  try {
    runFallbackGemm(out.device.index, streamOf(out), {
      dtype: dt, m: M, n: N, k: K, batch: numel(c.batch), a: pa.op, b: pb.op, d: ptrOf(out), ldd: N, dBatchStride: M * N,
      bias: c.bias && !dense ? ptrOf(c.bias) : undefined, alpha: c.alpha ?? 1, beta: c.beta ?? 0,
    });
  } finally {
    for (const t of [...pa.temps, ...pb.temps]) t.dispose();
  }
  if (c.bias && dense) runPointwise('add', 'a + b', out, [out, c.bias], [], out.dtype);
  return out;
}

/** out[..., M, N] (contiguous) = alpha * a[..., M, K] @ b[..., K, N] (+ bias[N]) (+ beta * out). */
export function runGemm(c: GemmCall): Tensor {
  const { out, M, N, K } = c;
  if (M === 0 || N === 0 || numel(c.batch) === 0) return out;
  if (INT_GEMM_DTYPES.includes(c.a.dtype)) return runIntGemm(c);
  const dtype = gemmDtype(c.op, c.a.dtype, `${fmtShape(c.a.shape)} @ ${fmtShape(c.b.shape)}`);
  const outDtype = gemmDtype(c.op, out.dtype, `${fmtShape(c.a.shape)} @ ${fmtShape(c.b.shape)}`);
  if (K === 0) {
    // An empty inner dimension: the product is 0; keep beta * out, then add the bias.
    if ((c.beta ?? 0) === 0) runPointwise('fill', 's0', out, [], [0], out.dtype);
    else runPointwise('scale', 'a * s0', out, [out], [c.beta!], out.dtype);
    if (c.bias) runPointwise('add', 'a + b', out, [out, c.bias], [], out.dtype);
    return out;
  }
  const pa = prepare(c.a, c.batch, M, K);
  const pb = prepare(c.b, c.batch, K, N);
  const batch = numel(c.batch);
  const fused = c.bias && c.bias.ndim === 1 && c.bias.shape[0] === N && c.bias.strides[0] === 1 && c.bias.dtype === dtype && (c.beta ?? 0) === 0;
  try {
    // Decode-shaped bfloat16 products (few rows against a row-major weight): gemv.ts (M <= 8,
    // KILN_GEMV_MAX_ROWS), else the tensor-core mma-gemv.ts (2 <= M <= 64, KILN_MMA_GEMV_MAX_ROWS).
    if (dtype === 'bfloat16' && outDtype === dtype && batch === 1 && (c.beta ?? 0) === 0 && (c.alpha ?? 1) === 1 && M <= Math.max(GEMV_MAX_M, MMA_GEMV_MAX_M) && !pa.op.trans && pb.op.trans && (!c.bias || fused)) {
      const g = { m: M, n: N, k: K, x: pa.op.ptr, ldx: pa.op.ld, w: pb.op.ptr, ldw: pb.op.ld, out: ptrOf(out), ldo: N, bias: fused ? ptrOf(c.bias!) : undefined };
      if (gemvApplies(g)) {
        runGemv(out.device.index, streamOf(out), g);
        return out;
      }
      if (mmaGemvApplies(out.device.index, g)) {
        runMmaGemv(out.device.index, streamOf(out), g);
        return out;
      }
    }
    const simt =
      dtype === 'float32' && outDtype === dtype && batch === 1 && (c.beta ?? 0) === 0 && (c.alpha ?? 1) === 1 && !backends.cuda.matmul.allowTf32 &&
      runSimtLinear(out.device.index, streamOf(out), { m: M, n: N, k: K, a: pa.op, b: pb.op, d: ptrOf(out), ldd: N, bias: fused ? ptrOf(c.bias!) : undefined });
    if (!simt) ltOrFallback(out.device.index, streamOf(out), {
      dtype,
      m: M,
      n: N,
      k: K,
      batch,
      a: pa.op,
      b: pb.op,
      d: ptrOf(out),
      ldd: N,
      dBatchStride: M * N,
      bias: fused ? ptrOf(c.bias!) : undefined,
      alpha: c.alpha ?? 1,
      beta: c.beta ?? 0,
      outDtype: outDtype !== dtype ? outDtype : undefined,
    });
  } finally {
    for (const t of [...pa.temps, ...pb.temps]) t.dispose();
  }
  if (c.bias && !fused) runPointwise('add', 'a + b', out, [out, c.bias], [], out.dtype);
  return out;
}

/**
 * cuBLASLt, or the plain kernel (gemm-fallback.ts) when cuBLASLt refuses a float32/float64
 * problem's layout: a refusal is a limit of the library, not of the input, so the user gets the
 * product rather than a cublasStatus.
 */
function ltOrFallback(index: number, stream: ReturnType<typeof streamOf>, p: GemmProblem): void {
  try {
    gemm(index, stream, p);
  } catch (e) {
    if (!isLtRefusal(e) || (p.dtype !== 'float32' && p.dtype !== 'float64') || (p.outDtype !== undefined && p.outDtype !== p.dtype)) throw e;
    gemmFallbackStats.runs++;
    runFallbackGemm(index, stream, { ...p, dtype: p.dtype });
  }
}

/** How often cuBLASLt refused and the fallback ran (tests). */
export const gemmFallbackStats = { runs: 0 };

function matmulKernel(op: string, meta: OutMeta, a: Tensor, b: Tensor): Tensor {
  const out = allocOut(meta);
  const a2 = a.ndim === 1 ? new Tensor(a.storage, a.dtype, [1, a.shape[0]!], [0, a.strides[0]!], a.offset) : a;
  const b2 = b.ndim === 1 ? new Tensor(b.storage, b.dtype, [b.shape[0]!, 1], [b.strides[0]!, 0], b.offset) : b;
  try {
    const M = a2.shape[a2.ndim - 2]!;
    const K = a2.shape[a2.ndim - 1]!;
    const N = b2.shape[b2.ndim - 1]!;
    const batch = broadcastShapes(op, a2.shape.slice(0, -2), b2.shape.slice(0, -2));
    // The output of the 2-D problem viewed as [...batch, M, N], contiguous.
    const view = new Tensor(out.storage, out.dtype, [...batch, M, N], contiguousStrides([...batch, M, N]), out.offset);
    // x @ W with a weight-like 2-D right operand: fold the batch into M when `a` allows it.
    if (b2.ndim === 2 && batch.length > 0) {
      const rows = numel(batch) * M;
      const af = foldRows(a2, rows, K);
      if (af) {
        const flat = new Tensor(out.storage, out.dtype, [rows, N], [N, 1], out.offset);
        runGemm({ op, out: flat, a: af, b: b2, batch: [], M: rows, N, K });
        flat.dispose();
        af.dispose();
        view.dispose();
        return out;
      }
    }
    runGemm({ op, out: view, a: a2, b: b2, batch, M, N, K });
    view.dispose();
  } finally {
    if (a2 !== a) a2.dispose();
    if (b2 !== b) b2.dispose();
  }
  return out;
}

registerKernel(matmul, 'cuda', (ctx, self, other) => {
  if (self.ndim === 1 && other.ndim === 1) return dotKernel(ctx.out, self, other);
  return matmulKernel('matmul', ctx.out, self, other);
});
registerKernel(mm, 'cuda', (ctx, self, mat2) => matmulKernel('mm', ctx.out, self, mat2));
registerKernel(bmm, 'cuda', (ctx, self, mat2) => matmulKernel('bmm', ctx.out, self, mat2));

function dotKernel(meta: OutMeta, a: Tensor, b: Tensor): Tensor {
  const out = allocOut(meta);
  const K = a.shape[0]!;
  const av = new Tensor(a.storage, a.dtype, [1, K], [K, a.strides[0]!], a.offset);
  const bv = new Tensor(b.storage, b.dtype, [K, 1], [b.strides[0]!, 1], b.offset);
  const ov = new Tensor(out.storage, out.dtype, [1, 1], [1, 1], out.offset);
  try {
    runGemm({ op: 'dot', out: ov, a: av, b: bv, batch: [], M: 1, N: 1, K });
  } finally {
    av.dispose();
    bv.dispose();
    ov.dispose();
  }
  return out;
}
registerKernel(dot, 'cuda', (ctx, self, tensor) => dotKernel(ctx.out, self, tensor));

registerKernel(linear, 'cuda', (ctx, input, weight, bias) => {
  const out = allocOut(ctx.out);
  const K = input.shape[input.ndim - 1]!;
  const rows = numel(input.shape.slice(0, -1));
  const N = weight.ndim === 2 ? weight.shape[0]! : 1;
  const x = input.ndim === 1 ? new Tensor(input.storage, input.dtype, [1, K], [K, input.strides[0]!], input.offset) : foldRows(input, rows, K);
  const xs = x ?? copyTensor(allocOut({ shape: [rows, K], strides: [K, 1], dtype: input.dtype, device: input.device }), reshapeView(input, rows, K));
  // y = x W^T: W [N, K] read transposed is a [K, N] operand with strides (sK, sN).
  const wt = weight.ndim === 2 ? new Tensor(weight.storage, weight.dtype, [K, N], [weight.strides[1]!, weight.strides[0]!], weight.offset) : new Tensor(weight.storage, weight.dtype, [K, 1], [weight.strides[0]!, 1], weight.offset);
  const flat = new Tensor(out.storage, out.dtype, [rows, N], [N, 1], out.offset);
  try {
    runGemm({ op: 'linear', out: flat, a: xs, b: wt, batch: [], M: rows, N, K, bias });
  } finally {
    xs.dispose();
    wt.dispose();
    flat.dispose();
  }
  return out;
});

/** A contiguous copy source: `t` read as [rows, K] in row-major order (through a dense clone). */
function reshapeView(t: Tensor, rows: number, K: number): Tensor {
  const dense = copyTensor(allocOut({ shape: t.shape, strides: contiguousStrides(t.shape), dtype: t.dtype, device: t.device }), t);
  const v = new Tensor(dense.storage, dense.dtype, [rows, K], [K, 1], dense.offset);
  dense.dispose();
  return v;
}

registerKernel(addmm, 'cuda', (ctx, self, mat1, mat2, beta, alpha) => {
  const out = allocOut(ctx.out);
  const b = Number(beta);
  if (b !== 0) copyTensor(out, self);
  return runGemm({ op: 'addmm', out, a: mat1, b: mat2, batch: [], M: out.shape[0]!, N: out.shape[1]!, K: mat1.shape[1]!, alpha: Number(alpha), beta: b });
});
