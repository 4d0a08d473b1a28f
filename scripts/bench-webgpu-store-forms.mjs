#!/usr/bin/env node
/* global process, console */
/**
 * Why is float16 elementwise work slower than float32 on webgpu? (H200, Dawn/Vulkan, session 13:
 * the compiled elementwise-4096 workload took 0.422 ms in float16 against 0.135 ms in float32,
 * where float16 moves half the bytes.) Times hand-made variants of the kernels side by side, device
 * time from kiln.Event, medians of reps, on 4096^2 elements:
 *   - plain copies: f32, f16 stored through kiln_f16_bits (Kiln's exact rounding), f16 through
 *     WGSL's f16() conversion, and f16 pairs (vec2<f16> per invocation);
 *   - the compiled elementwise-4096 kernel exactly as kiln.compile renders it, float32 and float16,
 *     and the float16 one with its store through f16() instead of kiln_f16_bits.
 * Prints one JSON line per variant: {variant, ms, gbs}.
 *
 *   node scripts/bench-webgpu-store-forms.mjs [dist]
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const root = path.resolve(process.argv[2] ?? 'dist');
// The compiled kernels' WGSL comes from the compiler's own log (read once, at import).
process.env.KILN_LOG = 'output_code';
const kiln = await import(pathToFileURL(path.join(root, 'src/index.js')).href);
const { elementwiseForward } = await import(pathToFileURL(path.join(root, 'src/bench/workloads.js')).href);
const acc = kiln.getAccelerator('webgpu');
const N = 4096 * 4096;
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/** The WGSL kiln.compile renders for elementwiseForward on `dtype` (its first kernel). */
function compiledSource(dtype) {
  const x = kiln.randn([64, 64]).to(dtype).to('webgpu');
  const f = kiln.compile(elementwiseForward, { name: `ew-${dtype}` });
  let code = '';
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = (chunk) => ((code += String(chunk)), true);
  try {
    f(x).dispose();
  } finally {
    process.stderr.write = write;
  }
  const start = code.indexOf('// kiln_k0');
  const end = code.indexOf('// wrapper');
  return code.slice(code.indexOf('\n', start) + 1, end > 0 ? end : undefined);
}

const copy = (decl, body) => `${decl}
@group(0) @binding(0) var<storage, read_write> b0: OUT;
@group(0) @binding(1) var<storage, read> b1: IN;
@group(0) @binding(2) var<storage, read> kmeta: array<u32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) ng: vec3u) {
  let n = kmeta[0];
  for (var i = gid.x; i < n; i = i + ng.x * 256u) { ${body} }
}`;
const ew32 = compiledSource('float32');
const ew16 = compiledSource('float16');
const f16bits = ew16.match(/fn kiln_f16_bits[\s\S]*?\n}\n/)?.[0] ?? '';

const variants = [
  { name: 'copy f32', dtype: 'float32', n: N, src: copy('', 'b0[i] = b1[i];').replace('OUT', 'array<f32>').replace('IN', 'array<f32>'), bytes: 8 * N },
  { name: 'copy f16 (kiln_f16_bits store)', dtype: 'float16', n: N, src: copy(`enable f16;\n${f16bits}`, 'b0[i] = bitcast<vec2<f16>>(kiln_f16_bits(f32(b1[i]))).x;').replace('OUT', 'array<f16>').replace('IN', 'array<f16>'), bytes: 4 * N },
  { name: 'copy f16 (f16() store)', dtype: 'float16', n: N, src: copy('enable f16;', 'b0[i] = f16(f32(b1[i]));').replace('OUT', 'array<f16>').replace('IN', 'array<f16>'), bytes: 4 * N },
  { name: 'copy f16 pairs (vec2<f16>)', dtype: 'float16', n: N / 2, src: copy('enable f16;', 'b0[i] = vec2<f16>(vec2<f32>(b1[i]));').replace('OUT', 'array<vec2<f16>>').replace('IN', 'array<vec2<f16>>'), bytes: 4 * N },
  { name: 'copy f16 pairs as u32', dtype: 'float16', n: N / 2, src: copy('', 'b0[i] = b1[i];').replace('OUT', 'array<u32>').replace('IN', 'array<u32>'), bytes: 4 * N },
];
variants.push({ name: 'elementwise compiled f32', dtype: 'float32', n: N, src: ew32, bytes: 8 * N, meta: [N, N, 0, 1, 0, 1] });
variants.push({ name: 'elementwise compiled f16', dtype: 'float16', n: N, src: ew16, bytes: 4 * N, meta: [N, N, 0, 1, 0, 1] });
const ew16conv = ew16.replace(/bitcast<vec2<f16>>\(kiln_f16_bits\((v\d+)\)\)\.x/, 'f16($1)');
if (ew16conv !== ew16) variants.push({ name: 'elementwise f16, f16() store', dtype: 'float16', n: N, src: ew16conv, bytes: 4 * N, meta: [N, N, 0, 1, 0, 1] });

const x32 = kiln.randn([N]).to('webgpu');
const x16 = x32.to('float16');
const y32 = kiln.empty([N], { device: 'webgpu' });
const y16 = kiln.empty([N], { device: 'webgpu', dtype: 'float16' });
const buf = (t) => t.storage.buffer;
for (const v of variants) {
  let k;
  try {
    k = acc.kernel(v.src, v.name);
  } catch (e) {
    console.log(JSON.stringify({ variant: v.name, error: String(e.message).split('\n').slice(0, 4).join(' | ') }));
    continue;
  }
  const [y, x] = v.dtype === 'float32' ? [y32, x32] : [y16, x16];
  const meta = new Uint32Array(v.meta ?? [v.n, v.n]);
  const groups = [Math.min(Math.ceil(v.n / 256), 65535), 1, 1];
  const run = () => acc.dispatch(k, [buf(y), buf(x)], meta, groups);
  for (let i = 0; i < 3; i++) run();
  kiln.synchronize('webgpu');
  const ms = [];
  for (let r = 0; r < 15; r++) {
    const s = new kiln.Event('webgpu').record();
    for (let i = 0; i < 10; i++) run();
    const e = new kiln.Event('webgpu').record();
    e.synchronize();
    ms.push(s.elapsedTime(e) / 10);
  }
  const t = median(ms);
  console.log(JSON.stringify({ variant: v.name, ms: Number(t.toFixed(4)), gbs: Number((v.bytes / t / 1e6).toFixed(1)) }));
}
process.exit(0);
