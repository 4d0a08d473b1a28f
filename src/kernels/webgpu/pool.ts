/**
 * webgpu kernels for maxPool2d (with and without indices) and avgPool2d: one invocation per output
 * element, any input and output strides (contiguous and channels_last alike, unbatched input as a
 * batch of one), PyTorch's window rules as the cuda and CPU kernels have them: dilation, padding
 * that never wins a max, NaN winning (the last NaN of the window), the first index among equal
 * maxima; count_include_pad and divisor_override for the average, computed in f32. Indices are
 * written as int64 (flat h * W + w within the plane).
 */
import { avgPool2d, avgPoolGeometry, maxPool2d, maxPool2dWithIndices, maxPoolGeometry, type PoolGeometry } from '../../ops/defs/nn.js';
import { registerKernel } from '../../ops/registry.js';
import type { OutMeta } from '../../ops/schema.js';
import type { Tensor } from '../../tensor/tensor.js';
import { allocOut, unsupportedDtype, webgpu } from './device.js';
import { loadExpr, storeStmt, type StorageKind } from './storage.js';
import { dataKind, groupsFor, header, kernelFor, storeI64, WG, words } from './template.js';

const isFloatKind = (k: StorageKind): boolean => k === 'f32' || k === 'f16' || k === 'f16p' || k === 'bf16p';

/**
 * Metadata: [total, C, H, W, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, countIncludePad, divisor (f32
 * bits, 0 for none), xOff, oOff, iOff, xs0..3, os0..3, is0..3].
 */
function poolSource(kind: 'max' | 'avg', k: StorageKind, withIndices: boolean): string {
  const binds = [{ kind: k, written: true }, { kind: k, written: false }, ...(withIndices ? [{ kind: 'u32' as const, written: true }] : [])];
  const lines = header(binds);
  const f = isFloatKind(k);
  const T = f ? 'f32' : 'i32';
  const x = (o: string): string => loadExpr(k, 'b1', o, false);
  const body =
    kind === 'max'
      ? [
          'var ih0 = i32(oh * kmeta[8]) - i32(kmeta[10]); let ih1 = min(ih0 + i32((kmeta[6] - 1u) * kmeta[12]) + 1, i32(kmeta[2]));',
          'while (ih0 < 0) { ih0 = ih0 + i32(kmeta[12]); }',
          'var iw0 = i32(ow * kmeta[9]) - i32(kmeta[11]); let iw1 = min(iw0 + i32((kmeta[7] - 1u) * kmeta[13]) + 1, i32(kmeta[3]));',
          'while (iw0 < 0) { iw0 = iw0 + i32(kmeta[13]); }',
          `var best: ${T} = ${f ? '-kiln_inf()' : '(-2147483647i - 1i)'}; var bi = ih0 * i32(kmeta[3]) + iw0;`,
          'for (var ih = ih0; ih < ih1; ih = ih + i32(kmeta[12])) {',
          '  for (var iw = iw0; iw < iw1; iw = iw + i32(kmeta[13])) {',
          `    let v = ${x('xp + u32(ih) * kmeta[21] + u32(iw) * kmeta[22]')};`,
          `    if (v > best${f ? ' || kiln_isnan(v)' : ''}) { best = v; bi = ih * i32(kmeta[3]) + iw; }`,
          '  }',
          '}',
          storeStmt(k, 'b0', 'o', 'best'),
          ...(withIndices ? [storeI64('b2', 'io', 'bi')] : []),
        ]
      : [
          'var ih0 = i32(oh * kmeta[8]) - i32(kmeta[10]); var ih1 = min(ih0 + i32(kmeta[6]), i32(kmeta[2] + kmeta[10]));',
          'let poolH = ih1 - ih0; ih0 = max(ih0, 0); ih1 = min(ih1, i32(kmeta[2]));',
          'var iw0 = i32(ow * kmeta[9]) - i32(kmeta[11]); var iw1 = min(iw0 + i32(kmeta[7]), i32(kmeta[3] + kmeta[11]));',
          'let poolSize = poolH * (iw1 - iw0); iw0 = max(iw0, 0); iw1 = min(iw1, i32(kmeta[3]));',
          `var r = ${f ? '0.0f' : '0i'};`,
          'if (ih0 < ih1 && iw0 < iw1) {',
          '  var div = bitcast<f32>(kmeta[15]);',
          '  if (div == 0.0f) { div = f32(select((ih1 - ih0) * (iw1 - iw0), poolSize, kmeta[14] != 0u)); }',
          '  var sum = 0.0f;',
          '  for (var ih = ih0; ih < ih1; ih = ih + 1) {',
          `    for (var iw = iw0; iw < iw1; iw = iw + 1) { sum = sum + ${f ? x('xp + u32(ih) * kmeta[21] + u32(iw) * kmeta[22]') : `f32(${x('xp + u32(ih) * kmeta[21] + u32(iw) * kmeta[22]')})`}; }`,
          '  }',
          `  r = ${f ? 'sum / div' : 'i32(trunc(sum / div))'};`,
          '}',
          storeStmt(k, 'b0', 'o', 'r'),
        ];
  lines.push(
    `@compute @workgroup_size(${WG})`,
    'fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) ng: vec3u) {',
    `  for (var e = gid.x; e < kmeta[0]; e = e + ng.x * ${WG}u) {`,
    '    let ow = e % kmeta[5]; let oh = (e / kmeta[5]) % kmeta[4]; let c = (e / (kmeta[5] * kmeta[4])) % kmeta[1]; let n = e / (kmeta[5] * kmeta[4] * kmeta[1]);',
    '    let xp = kmeta[16] + n * kmeta[19] + c * kmeta[20];',
    '    let o = kmeta[17] + n * kmeta[23] + c * kmeta[24] + oh * kmeta[25] + ow * kmeta[26];',
    '    let io = kmeta[18] + n * kmeta[27] + c * kmeta[28] + oh * kmeta[29] + ow * kmeta[30];',
    ...body.flatMap((l) => l.split('\n')).map((l) => `    ${l}`),
    '  }',
    '}',
  );
  return lines.join('\n');
}

function runPool(op: string, kind: 'max' | 'avg', input: Tensor, g: PoolGeometry, out: Tensor, indices: Tensor | null, countIncludePad = false, divisor = 0): void {
  const total = g.n * g.c * g.oh * g.ow;
  if (total === 0) return;
  const k = dataKind(op, input);
  if (k.wide) throw unsupportedDtype(op, input);
  const four = (t: Tensor): number[] => (g.batched ? [...t.strides] : [0, ...t.strides]);
  const dil = g.dilation.length === 2 ? g.dilation : [1, 1];
  const div = new Uint32Array(new Float32Array([divisor]).buffer)[0]!;
  const meta = words([
    total,
    g.c,
    g.h,
    g.w,
    g.oh,
    g.ow,
    g.kernel[0]!,
    g.kernel[1]!,
    g.stride[0]!,
    g.stride[1]!,
    g.padding[0]!,
    g.padding[1]!,
    dil[0]!,
    dil[1]!,
    countIncludePad ? 1 : 0,
    div,
    input.offset,
    out.offset,
    indices?.offset ?? 0,
    ...four(input),
    ...four(out),
    ...(indices ? four(indices) : [0, 0, 0, 0]),
  ]);
  const kern = kernelFor(`pool.${kind}.${k.kind}.${indices ? 'i' : ''}`, () => poolSource(kind, k.kind, indices !== null));
  webgpu().dispatch(kern, [out.storage.buffer, input.storage.buffer, ...(indices ? [indices.storage.buffer] : [])], meta, groupsFor(total));
}

registerKernel(maxPool2d, 'webgpu', (ctx, input, kernelSize, stride, padding, dilation, ceilMode) => {
  const g = maxPoolGeometry(input, kernelSize, stride, padding, dilation, ceilMode as boolean);
  const out = allocOut(ctx.out);
  runPool('maxPool2d', 'max', input, g, out, null);
  return out;
});

registerKernel(maxPool2dWithIndices, 'webgpu', (ctx, input, kernelSize, stride, padding, dilation, ceilMode) => {
  const g = maxPoolGeometry(input, kernelSize, stride, padding, dilation, ceilMode as boolean, 'maxPool2dWithIndices');
  const [vm, im] = ctx.out as readonly OutMeta[];
  const values = allocOut(vm!);
  const indices = allocOut(im!);
  runPool('maxPool2dWithIndices', 'max', input, g, values, indices);
  return [values, indices];
});

registerKernel(avgPool2d, 'webgpu', (ctx, input, kernelSize, stride, padding, ceilMode, countIncludePad, divisorArg) => {
  const divisorOverride = divisorArg as number | null;
  const g = avgPoolGeometry(input, kernelSize, stride, padding, ceilMode as boolean, divisorOverride);
  const out = allocOut(ctx.out);
  runPool('avgPool2d', 'avg', input, g, out, null, countIncludePad === true, divisorOverride ?? 0);
  return out;
});
