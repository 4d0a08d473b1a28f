/**
 * webgpu conv2dBatchNorm (the compiler's conv -> eval BatchNorm [-> ReLU] fold): on the float16
 * im2col route (conv.ts: im2colConv, the staged subgroup-matrix GEMM), the BatchNorm is folded into
 * the packed weight and the GEMM's bias, and the ReLU runs in the GEMM's epilogue, so the output is
 * written once. Unfused, the conv-stack's 3x3 layer wrote its [16, 64, 112, 112] float16 output,
 * then read and wrote it again for the BatchNorm and once more for the ReLU (three passes over
 * 51 MB instead of one).
 *
 * The fold (one prep dispatch over the packed weight [O, Kp]): scale[o] = gamma[o] / sqrt(var[o] +
 * eps) (gamma 1 when absent), W'[o, k] = W[o, k] * scale[o] rounded to float16, and the bias
 * shift[o] = beta[o] - mean[o] * scale[o] + convBias[o] * scale[o] (beta and the conv bias 0 when
 * absent), as inference engines fold it and as the cpu kernels do (kernels/cpu/conv-bn-fold.ts).
 * Numerically this rounds W * scale once to float16 where the composite rounds the conv's output
 * before scaling it: both are one float16 rounding per factor, and the tests hold both to the same
 * float64 reference.
 *
 * KILN_WEBGPU_CONV_BN_FOLD=0 runs the unfused ops everywhere (for A/B measurements).
 * Everything the route does not take (another dtype, groups, a layout that is not channels_last,
 * a device without the staged GEMM, 64-bit BatchNorm tensors) runs the unfused ops, as on cuda.
 */
import { conv2dBatchNorm, conv2dBatchNormComposite } from '../../ops/defs/conv-fused.js';
import { registerKernel } from '../../ops/registry.js';
import type { Tensor } from '../../tensor/tensor.js';
import { getOption } from '../../runtime/config.js';
import { allocOut, webgpu } from './device.js';
import { convGeometry, GEMM_MIN_OG, im2colConv } from './conv.js';
import { loadExpr, storeStmt, type StorageKind } from './storage.js';
import { dataKind, groupsFor, header, kernelFor, WG, words } from './template.js';
import { f32Bits } from './linalg.js';

/** Metadata: [O, Kp, K, eps bits, then (offset, stride) of mean, var, gamma, beta, conv bias]. */
const FOLD_META_WORDS = 14;

/**
 * WGSL of the fold: one invocation per element of the packed weight (binding 0, kind `w`, [O, Kp]
 * at offset 0), scaling the k < K ones; the k = 0 invocation of each row writes shift[o] (binding
 * 1). Absent operands are not bound (their terms are the identities above).
 */
export function foldSource(w: StorageKind, kinds: readonly (StorageKind | null)[]): string {
  const present = kinds.flatMap((k, i) => (k === null ? [] : [{ k, i }]));
  const binds = [{ kind: w, written: true }, { kind: w, written: true }, ...present.map(({ k }) => ({ kind: k, written: false }))];
  const L = header(binds);
  // Operand i (mean, var, gamma, beta, conv bias) at row o, or its identity when absent.
  const at = (i: number, identity: string): string => {
    const slot = present.findIndex((p) => p.i === i);
    if (slot < 0) return identity;
    return loadExpr(present[slot]!.k, `b${slot + 2}`, `kmeta[${4 + 2 * i}] + o * kmeta[${5 + 2 * i}]`, false);
  };
  L.push(
    `@compute @workgroup_size(${WG})`,
    'fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) ng: vec3u) {',
    '  let O = kmeta[0]; let Kp = kmeta[1]; let K = kmeta[2]; let eps = bitcast<f32>(kmeta[3]);',
    `  for (var e = gid.x; e < O * Kp; e = e + ng.x * ${WG}u) {`,
    '    let o = e / Kp; let k = e % Kp;',
    `    let scale = ${at(2, '1.0')} / sqrt(${at(1, '0.0')} + eps);`,
    // The value first: a packed store clears its half of the word before it writes (storage.ts).
    `    if (k < K) { let v = ${loadExpr(w, 'b0', 'e', true)} * scale; ${storeStmt(w, 'b0', 'e', 'v')} }`,
    `    if (k == 0u) { let v = ${at(3, '0.0')} - ${at(0, '0.0')} * scale + ${at(4, '0.0')} * scale; ${storeStmt(w, 'b1', 'o', 'v')} }`,
    '  }',
    '}',
  );
  return L.join('\n');
}

/** The fold's pipeline key part of one operand: its storage kind, or '-' when absent. */
const kindKey = (k: StorageKind | null): string => k ?? '-';

registerKernel(conv2dBatchNorm, 'webgpu', (ctx, input, weight, bias, stride, padding, dilation, groupsArg, runningMean, runningVar, bnWeight, bnBias, epsArg, reluArg) => {
  const op = 'conv2dBatchNorm';
  const groups = groupsArg as number;
  const eps = Number(epsArg);
  const relu = reluArg === true;
  const unfused = (): Tensor => conv2dBatchNormComposite(input, weight, bias, stride, padding, dilation, groups, runningMean, runningVar, bnWeight, bnBias, eps, relu);
  const x = dataKind(op, input);
  // The fold's operands in binding order after the weight and the shift (foldSource), absent ones null.
  const operands = [runningMean, runningVar, bnWeight, bnBias, bias ?? null];
  const data = operands.map((t) => (t === null ? null : dataKind(op, t)));
  if (x.wide || data.some((d) => d !== null && d.wide)) return unfused();
  const q = convGeometry(op, input, weight, stride, padding, dilation, groups);
  if (q.n * q.o * q.oh * q.ow === 0 || q.o / groups < GEMM_MIN_OG || !getOption('KILN_WEBGPU_CONV_GEMM') || !getOption('KILN_WEBGPU_CONV_BN_FOLD')) return unfused();
  const kinds = data.map((d) => (d === null ? null : d.kind));
  const out = allocOut(ctx.out);
  const fold = (packed: Tensor, Kp: number, K: number): Tensor => {
    const shift = allocOut({ shape: [q.o], strides: [1], dtype: packed.dtype, device: packed.device });
    const meta = words([q.o, Kp, K, f32Bits(eps), ...operands.flatMap((t) => (t === null ? [0, 0] : [t.offset, t.strides[0] ?? 1]))]);
    if (meta.length !== FOLD_META_WORDS) throw new Error(`${op}: ${meta.length} fold metadata words, want ${FOLD_META_WORDS}`);
    const kern = kernelFor(`conv2dBatchNorm.fold.${x.kind}.${kinds.map(kindKey).join('.')}`, () => foldSource(x.kind, kinds));
    const bufs = [packed.storage.buffer, shift.storage.buffer, ...operands.flatMap((t) => (t === null ? [] : [t.storage.buffer]))];
    webgpu().dispatch(kern, bufs, meta, groupsFor(q.o * Kp));
    return shift;
  };
  try {
    if (im2colConv(out, input, weight, null, x.kind, q, { fold, relu })) return out;
  } catch (e) {
    out.dispose();
    throw e;
  }
  out.dispose();
  return unfused();
});
