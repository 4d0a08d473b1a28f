/**
 * Issue #20: the ceiling of float16 subgroup-matrix arithmetic through WGSL on this device, so the
 * float16 GEMM's distance from cuBLAS can be split into what the kernel loses and what the path
 * (WGSL -> Dawn -> Vulkan cooperative matrices -> the driver) cannot give.
 *
 * Kernels (one workgroup of `sgs` subgroups, 4 by default; many workgroups per SM):
 *   - regs TAxTB: each subgroup multiplies TA left by TB right matrices, loaded once from workgroup
 *     memory, into TA x TB float32 accumulators, `iters` times (no memory traffic in the loop): the
 *     matrix units' throughput as the driver lowers subgroupMatrixMultiplyAccumulate;
 *   - smem TAxTB: as the staged GEMM's inner step, every iteration loads its TA left and TB right
 *     matrices from workgroup memory (offsets moving with the iteration) before the TA x TB
 *     multiplies: the throughput with the workgroup-memory matrix loads the GEMM pays.
 *   - step / stepv TAxTB: smem plus, every iteration, two workgroup barriers and an 8-word refill per
 *     invocation, stored as scalar float16 halves (as the staged GEMM) or as whole 16-byte words into
 *     a separate array the multiplies never read;
 *   - view TAxTB: the refill as whole words into the very tile the multiplies load, one untyped
 *     workgroup buffer (Dawn's `buffer<N>`) seen as vec4<u32> words for the stores and as f16 for
 *     subgroupMatrixLoad (`bufferView`), which an f16 array cannot offer (its loads take an array
 *     of the matrix's scalar type). Written in session 33 to see whether the GEMM can have the
 *     whole-word refill's ceiling.
 * The accumulators are stored at the end (so nothing is dead code). TFLOP/s count 2 m n k per
 * multiply. Device time from timestamp events (webgpu-device-ms.ts), median of alternating batches.
 *
 *   node dist/bench/webgpu-mma-peak.js [--iters 4096] [--groups 1056] [--json out.json]
 */
import fs from 'node:fs';
import * as kiln from '../src/index.js';
import { subgroupMatrixPlan } from '../src/kernels/webgpu/linalg.js';
import { webgpu } from '../src/kernels/webgpu/device.js';
import { deviceMsPerCall } from './webgpu-device-ms.js';

const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const iters = Number(flag('--iters') ?? 4096);
const groups = Number(flag('--groups') ?? 132 * 8);
const jsonOut = flag('--json');

const plan = subgroupMatrixPlan();
if ('reason' in plan) {
  console.log(JSON.stringify({ skipped: plan.reason }));
  process.exit(0);
}
const { m, n, k, sg } = plan;
const SGS = 4;
const T = SGS * sg;
/** Workgroup tile: 64 rows of 64 + 8 halves (the staged kernel's padded rows). */
const ROW = 72;
const TILE = 64 * ROW;
const left = `subgroup_matrix_left<f16, ${k}, ${m}>`;
const right = `subgroup_matrix_right<f16, ${n}, ${k}>`;
const result = `subgroup_matrix_result<f32, ${n}, ${m}>`;

type Form = 'regs' | 'smem' | 'step' | 'stepv' | 'view';

function source(form: Form, ta: number, tb: number): string {
  const L: string[] = ['enable f16;', 'enable subgroups;', 'enable chromium_experimental_subgroup_matrix;'];
  L.push('@group(0) @binding(0) var<storage, read_write> out: array<f32>;');
  L.push('@group(0) @binding(1) var<storage, read> src: array<f16>;');
  L.push('@group(0) @binding(2) var<storage, read> kmeta: array<u32>;');
  L.push(`var<workgroup> Ts: array<f16, ${TILE}>;`);
  if (form === 'step') L.push(`var<workgroup> Us: array<f16, ${8 * 8 * T}>;`);
  if (form === 'stepv') L.push(`var<workgroup> Us: array<vec4<u32>, ${8 * T}>;`);
  // One untyped workgroup buffer seen two ways (Dawn's buffer<N> and bufferView): whole 16-byte
  // words stored through a vec4<u32> view into the very halves the matrices load through an f16 view.
  if (form === 'view') L.push(`var<workgroup> Wb: buffer<${Math.max(8 * T * 16, TILE * 2)}>;`);
  L.push(`@compute @workgroup_size(${T})`);
  L.push('fn main(@builtin(local_invocation_index) tid: u32, @builtin(subgroup_id) sgi: u32, @builtin(workgroup_id) wid: vec3u) {');
  if (form === 'view') L.push('  let hv = bufferView<array<f16>>(&Wb, 0);', '  let wv = bufferView<array<vec4<u32>>>(&Wb, 0);');
  L.push(`  for (var i = tid; i < ${TILE}u; i = i + ${T}u) { ${form === 'view' ? 'hv' : 'Ts'}[i] = src[i]; }`);
  L.push('  workgroupBarrier();');
  L.push('  let iters = kmeta[0];');
  const accs: string[] = [];
  for (let i = 0; i < ta; i++) for (let j = 0; j < tb; j++) accs.push(`acc${i}_${j}`);
  for (const a of accs) L.push(`  var ${a} = ${result}();`);
  const loads = (off: string): string[] => {
    const o: string[] = [];
    const at = form === 'view' ? 'hv' : '&Ts';
    for (let i = 0; i < ta; i++) o.push(`let l${i} = subgroupMatrixLoad<${left}, row_major>(${at}, ${off} + ${i * m * ROW}u, ${ROW}u);`);
    for (let j = 0; j < tb; j++) o.push(`let r${j} = subgroupMatrixLoad<${right}, row_major>(${at}, ${off} + ${j * n}u, ${ROW}u);`);
    return o;
  };
  const mmas = (): string[] => accs.map((a) => {
    const [i, j] = a.slice(3).split('_');
    return `${a} = subgroupMatrixMultiplyAccumulate(l${i}, r${j}, ${a});`;
  });
  if (form === 'regs') {
    for (const x of loads('sgi * 8u')) L.push(`  ${x}`);
    L.push('  for (var it = 0u; it < iters; it = it + 1u) {');
    for (const x of mmas()) L.push(`    ${x}`);
    L.push('  }');
  } else {
    L.push('  for (var it = 0u; it < iters; it = it + 1u) {');
    if (form !== 'smem') {
      L.push('    workgroupBarrier();');
      for (let w = 0; w < 8; w++) {
        const word = `vec4<u32>(it, tid, ${w}u, iters)`;
        if (form === 'stepv') L.push(`    Us[${w * T}u + tid] = ${word};`);
        else if (form === 'view') L.push(`    wv[${w * T}u + tid] = ${word};`);
        else {
          L.push(`    { let v = ${word}; let h0 = bitcast<vec2<f16>>(v.x); let h1 = bitcast<vec2<f16>>(v.y); let h2 = bitcast<vec2<f16>>(v.z); let h3 = bitcast<vec2<f16>>(v.w); let at = (${w * T}u + tid) * 8u;`);
          L.push('      Us[at] = h0.x; Us[at + 1u] = h0.y; Us[at + 2u] = h1.x; Us[at + 3u] = h1.y; Us[at + 4u] = h2.x; Us[at + 5u] = h2.y; Us[at + 6u] = h3.x; Us[at + 7u] = h3.y; }');
        }
      }
      L.push('    workgroupBarrier();');
    }
    // The offset moves along K by one matrix each iteration (within the tile), as a K loop does.
    L.push(`    let off = (it & 1u) * ${k}u;`);
    for (const x of loads('off')) L.push(`    ${x}`);
    for (const x of mmas()) L.push(`    ${x}`);
    L.push('  }');
  }
  L.push(`  let base = (wid.x * ${SGS}u + sgi) * ${accs.length * m * n}u;`);
  accs.forEach((a, q) => L.push(`  subgroupMatrixStore<row_major>(&out, base + ${q * m * n}u, ${a}, ${n}u);`));
  // A read of the refill buffer the host never takes (iters is never all ones), so its stores stay.
  if (form === 'step') L.push('  if (iters == 0xffffffffu) { out[tid] = f32(Us[tid]); }');
  if (form === 'stepv') L.push('  if (iters == 0xffffffffu) { out[tid] = f32(Us[tid].x); }');
  L.push('}');
  return L.join('\n');
}

const acc = webgpu();
const shapes: [number, number][] = [[2, 2], [4, 2], [4, 4], [2, 4]];
const variants = (['regs', 'smem', 'step', 'stepv', 'view'] as const).flatMap((form) => shapes.map(([ta, tb]) => ({ form, ta, tb, name: `${form} ${ta}x${tb}` })));
const outT = kiln.zeros([groups * SGS * 16 * m * n], { dtype: 'float32', device: 'webgpu' });
const srcT = kiln.mul(kiln.rand([TILE], { dtype: 'float16', device: 'webgpu' }), 0.01);
const meta = new Uint32Array([iters]);
const rows: Record<string, unknown>[] = [];
const fns: (() => void)[] = [];
const kept: typeof variants = [];
for (const v of variants) {
  try {
    const kern = acc.kernel(source(v.form, v.ta, v.tb), `mma-peak.${v.form}.${v.ta}x${v.tb}`);
    fns.push(() => acc.dispatch(kern, [outT.storage.buffer, srcT.storage.buffer], meta, [groups, 1, 1]));
    kept.push(v);
  } catch (e) {
    rows.push({ variant: v.name, error: String(e).slice(0, 400) });
  }
}
const ms = deviceMsPerCall(fns, 7, 5);
kept.forEach((v, i) => {
  const flops = groups * SGS * iters * v.ta * v.tb * 2 * m * n * k;
  rows.push({ framework: 'kiln', workload: 'mma-peak', device: 'webgpu:0', variant: v.name, m, n, k, sg, groups, iters, ms: ms[i], tflops: flops / (ms[i]! * 1e-3) / 1e12 });
});
for (const r of rows) console.log(JSON.stringify(r));
console.log(`${'variant'.padEnd(12)} ${'ms'.padStart(9)} ${'TFLOP/s'.padStart(9)}`);
for (const r of rows) if ('ms' in r) console.log(`${String(r.variant).padEnd(12)} ${(r.ms as number).toFixed(4).padStart(9)} ${(r.tflops as number).toFixed(1).padStart(9)}`);
if (jsonOut) fs.writeFileSync(jsonOut, JSON.stringify({ meta: { command: `node dist/bench/webgpu-mma-peak.js ${argv.join(' ')}`, date: new Date().toISOString(), device: acc.bridge.adapter.description }, results: rows }, null, 1));
