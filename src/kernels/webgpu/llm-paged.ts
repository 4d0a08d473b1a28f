/**
 * webgpu kernels of llm.reshapeAndCache and llm.pagedAttention, neither reading device data on the
 * host (the references read the slot mapping back, and pagedAttention's computes slots in int64,
 * which WGSL lacks):
 *
 * - reshapeAndCache: two row scatters (indexing.ts) of the step's keys and values into the caches
 *   viewed [numBlocks * blockSize, kvHeads, headDim], rows whose slot is negative skipped.
 * - pagedAttention: one workgroup of 64 invocations per (query head, row); each invocation keeps
 *   up to 8 of the head's dims (head dims up to 512), every key's score is a workgroup sum, and the
 *   softmax is online (running max and sum) in f32 over the row's contextLens[b] tokens, read
 *   through its block table; its exponentials are the math library's kiln_exp (WGSL's exp is
 *   3 + 2|x| ulp and undefined at the first step's e^(-3.4e38 - s)). A row of length 0 is zeros (as the reference). A block id outside
 *   the cache skips its token (the cuda kernel raises; a WebGPU kernel cannot).
 * A first, simple form: one barrier-reduced dot product per token, no splits across the context.
 */
import { cacheGeometry, pagedAttention, reshapeAndCache } from '../../ops/defs/llm-paged.js';
import { registerLlmImpl, type ImplFn } from '../../ops/library/policy.js';
import type { OutMeta } from '../../ops/schema.js';
import type { WebgpuKernel } from '../../runtime/webgpu/webgpu-accelerator.js';
import { Tensor } from '../../tensor/tensor.js';
import { allocOut, unsupportedDtype, webgpu } from './device.js';
import { scatterRows } from './indexing.js';
import { PRELUDE_MARK, withPrelude } from '../math/wgsl-prelude.js';
import { arrayType, loadExpr, storageKind, storagePrelude, storeStmt, type StorageKind } from './storage.js';

function registerWebgpu(opName: string, fn: ImplFn): void {
  registerLlmImpl(opName, { name: 'webgpu-kernel', kind: 'kernel', device: 'webgpu', priority: 0, fn });
}

registerWebgpu(reshapeAndCache.name, (_ctx, key, value, keyCache, valueCache, slotMapping) => {
  const op = reshapeAndCache.name;
  const kc = keyCache as Tensor;
  const vc = valueCache as Tensor;
  const g = cacheGeometry(op, kc, vc);
  const rows = [g.numBlocks * g.blockSize, g.kvHeads, g.headDim];
  for (const [cache, src] of [
    [kc, key as Tensor],
    [vc, value as Tensor],
  ] as const) {
    const flat = new Tensor(cache.storage, cache.dtype, rows, undefined, cache.offset);
    try {
      scatterRows(op, flat, slotMapping as Tensor, src, true);
    } finally {
      flat.dispose();
    }
  }
  return [kc, vc];
});

const WG = 64;
const PER = 8;
const kernels = new Map<string, WebgpuKernel>();

/**
 * Metadata: [B, H, D, kvHeads, blockSize, maxBlocks, qRowStride, qHeadStride, qOffset,
 * tableRowStride, tableOffset, lenOffset, scale (f32 bits), numBlocks, lenStride, keyCacheOffset,
 * valueCacheOffset].
 */
function pagedSource(kind: StorageKind, tableDtype: string, lenDtype: string): string {
  const word = (dt: string, b: string, i: string): string => (dt === 'int64' ? `bitcast<i32>(${b}[2u * (${i})])` : `${b}[${i}]`);
  const lines: string[] = [];
  if (kind === 'f16') lines.push('enable f16;');
  lines.push(
    `@group(0) @binding(0) var<storage, read_write> b0: ${arrayType(kind, true)};`,
    `@group(0) @binding(1) var<storage, read> bq: ${arrayType(kind, false)};`,
    `@group(0) @binding(2) var<storage, read> bk: ${arrayType(kind, false)};`,
    `@group(0) @binding(3) var<storage, read> bv: ${arrayType(kind, false)};`,
    `@group(0) @binding(4) var<storage, read> btab: array<${tableDtype === 'int64' ? 'u32' : 'i32'}>;`,
    `@group(0) @binding(5) var<storage, read> blen: array<${lenDtype === 'int64' ? 'u32' : 'i32'}>;`,
    '@group(0) @binding(6) var<storage, read> kmeta: array<u32>;',
    PRELUDE_MARK,
  );
  const pre = storagePrelude([kind]);
  if (pre) lines.push(pre);
  lines.push(
    `var<workgroup> red: array<f32, ${WG}>;`,
    `@compute @workgroup_size(${WG})`,
    'fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) lid: vec3u) {',
    '  let h = wg.x; let b = wg.y; let tid = lid.x;',
    '  let H = kmeta[1]; let D = kmeta[2]; let hkv = kmeta[3]; let bs = kmeta[4];',
    '  let kvh = h / (H / hkv);',
    '  let scale = bitcast<f32>(kmeta[12]);',
    `  let len = max(${word(lenDtype, 'blen', 'kmeta[11] + b * kmeta[14]')}, 0i);`,
    `  var qv: array<f32, ${PER}>;`,
    `  var acc: array<f32, ${PER}>;`,
    `  for (var i = 0u; i < ${PER}u; i++) {`,
    `    let d = tid + i * ${WG}u;`,
    '    acc[i] = 0.0f;',
    `    qv[i] = select(0.0f, ${loadExpr(kind, 'bq', 'kmeta[8] + b * kmeta[6] + h * kmeta[7] + min(d, D - 1u)', false)}, d < D);`,
    '  }',
    '  var m = -3.4028234663852886e38f;',
    '  var l = 0.0f;',
    '  for (var pos = 0u; pos < u32(len); pos++) {',
    `    let blk = ${word(tableDtype, 'btab', 'kmeta[10] + b * kmeta[9] + pos / bs')};`,
    '    let ok = blk >= 0i && u32(blk) < kmeta[13];',
    '    let base = ((u32(max(blk, 0i)) * bs + pos % bs) * hkv + kvh) * D;',
    '    var part = 0.0f;',
    `    for (var i = 0u; i < ${PER}u; i++) {`,
    `      let d = tid + i * ${WG}u;`,
    `      if (ok && d < D) { part += qv[i] * ${loadExpr(kind, 'bk', 'kmeta[15] + base + d', false)}; }`,
    '    }',
    '    red[tid] = part;',
    '    workgroupBarrier();',
    `    for (var st = ${WG / 2}u; st > 0u; st = st >> 1u) {`,
    '      if (tid < st) { red[tid] += red[tid + st]; }',
    '      workgroupBarrier();',
    '    }',
    '    let s = red[0] * scale;',
    '    workgroupBarrier();',
    '    if (!ok) { continue; }',
    '    let m2 = max(m, s);',
    '    let c = kiln_exp(m - m2);',
    '    let p = kiln_exp(s - m2);',
    '    l = l * c + p;',
    `    for (var i = 0u; i < ${PER}u; i++) {`,
    `      let d = tid + i * ${WG}u;`,
    `      if (d < D) { acc[i] = acc[i] * c + p * ${loadExpr(kind, 'bv', 'kmeta[16] + base + d', false)}; }`,
    '    }',
    '    m = m2;',
    '  }',
    `  for (var i = 0u; i < ${PER}u; i++) {`,
    `    let d = tid + i * ${WG}u;`,
    '    if (d < D) {',
    '      let o = select(0.0f, acc[i] / l, l > 0.0f);',
    `      ${storeStmt(kind, 'b0', '(b * H + h) * D + d', 'o').replace(/\n/g, '\n      ')}`,
    '    }',
    '  }',
    '}',
  );
  return withPrelude(lines.join('\n'));
}

registerWebgpu(pagedAttention.name, (ctx, query, keyCache, valueCache, blockTables, contextLens, scale) => {
  const op = pagedAttention.name;
  const kc = keyCache as Tensor;
  const vc = valueCache as Tensor;
  const g = cacheGeometry(op, kc, vc);
  const q = query as Tensor;
  const tables = blockTables as Tensor;
  const lens = contextLens as Tensor;
  const [b, heads, d] = q.shape as [number, number, number];
  const out = allocOut(ctx.out as OutMeta);
  if (b === 0 || heads === 0 || d === 0) return out;
  if (d > WG * PER) throw new Error(`${op}: the webgpu kernel supports head dims up to ${WG * PER}, got ${d} (query ${JSON.stringify(q.shape)})`);
  const acc = webgpu();
  const kind = storageKind(q.dtype, acc.hasFeature('shader-f16'));
  if (kind === null || (kind !== 'f32' && kind !== 'f16' && kind !== 'f16p' && kind !== 'bf16p')) throw unsupportedDtype(op, q);
  if (q.strides[2] !== 1) throw new Error(`${op}: the webgpu kernel reads the query's head dim contiguous, got strides [${q.strides.join(', ')}]`);
  const key = `${kind}.${tables.dtype}.${lens.dtype}`;
  let k = kernels.get(key);
  if (!k) {
    k = acc.kernel(pagedSource(kind, tables.dtype, lens.dtype), `kiln.pagedAttention (${key})`);
    kernels.set(key, k);
  }
  const f32 = new Float32Array([scale as number]);
  const meta = new Uint32Array([
    b, heads, d, g.kvHeads, g.blockSize, tables.shape[1]!, q.strides[0]!, q.strides[1]!, q.offset,
    tables.strides[0]!, tables.offset, lens.offset, new Uint32Array(f32.buffer)[0]!, g.numBlocks, lens.strides[0] ?? 1, kc.offset, vc.offset,
  ]);
  acc.dispatch(k, [out.storage.buffer, q.storage.buffer, kc.storage.buffer, vc.storage.buffer, tables.storage.buffer, lens.storage.buffer], meta, [heads, b, 1]);
  return out;
});
