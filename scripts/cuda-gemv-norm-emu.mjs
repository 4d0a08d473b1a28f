#!/usr/bin/env node
// Dev check without a GPU for the bf16 GEMV's norm-prologue variant (llm.addRmsNormLinear,
// src/kernels/cuda/gemv.ts gemvNormSource): runs its CUDA C on the host (scripts/cuda-emu/emu.h: a
// fiber per CUDA thread, blocks one after another) for 1..8 rows, every split of K over warps,
// plain and gated (exact and fast silu), residual / bias or none, and compares with a float64 loop
// over the same bfloat16 inputs: the residual output bit for bit, the product within the output's
// bfloat16 rounding. Every third case runs on at most 2 blocks (the grid-stride loop a wide weight
// takes). Numbers only: the H200 runs test/cuda-add-rms-norm-linear.test.ts.
//   npm run build && node scripts/cuda-gemv-norm-emu.mjs [--keep]
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { gemvNormSource } = await import(path.join(root, 'dist/src/kernels/cuda/gemv.js'));

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
const bfBits = (v) => {
  f32[0] = v;
  const u = u32[0];
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
};
const bfVal = (h) => {
  u32[0] = h << 16;
  return f32[0];
};
let seed = 1;
const rnd = (lo, hi) => {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return lo + ((hi - lo) * seed) / 2147483648;
};
const bfArray = (n, lo, hi) => Uint16Array.from({ length: n }, () => bfBits(rnd(lo, hi)));

// [m, n (output width), k, kw, gated, fast, residual, bias]
const cases = [];
for (const m of [1, 3, 8]) {
  for (const [n, k, kw] of [[16, 256, 1], [24, 512, 2], [8, 1024, 4], [5, 64, 8], [9, 2056, 1]]) {
    for (const gated of [false, true]) cases.push([m, n, k, kw, gated, gated && m === 3, m !== 3 || k !== 64, m === 3 || n === 5]);
  }
}
cases.push([1, 16, 256, 1, false, false, false, false], [2, 16, 256, 2, true, true, false, true]);

const kernels = new Map();
const sanitize = (src) =>
  src
    .replace(/extern __shared__ __align__\(16\) unsigned short xs\[\];/, 'unsigned short* xs = reinterpret_cast<unsigned short*>(kiln_smem);')
    .replace(/__shared__ float/g, 'static float')
    .replace(/asm\("ex2\.approx\.ftz\.f32 %0, %1;" : "=f"\(y\) : "f"\(x \* 1\.4426950408889634f\)\);/, 'y = exp2f(x * 1.4426950408889634f);')
    .replace(/asm\("rcp\.approx\.f32 %0, %1;" : "=f"\(y\) : "f"\(d\)\);/, 'y = 1.0f / d;')
    .replace(/asm volatile\("prefetch\.global\.L2 \[%0\];" :: "l"\(p\)\);/, '(void)p;')
    .replace(/extern "C" /, '');
const L = [
  '#include "emu.h"',
  'struct uint4 { unsigned x, y, z, w; };',
  'inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }',
  'template <typename T> inline T __ldg(const T* p) { return *p; }',
  'inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }',
  'inline float rsqrtf(float v) { return 1.0f / std::sqrt(v); }',
  '#include <vector>',
];
const data = [];
const body = [];
cases.forEach((c, i) => {
  const [m, n, k, kw, gated, fast, withRes, withBias] = c;
  const name = `kiln_gemv_rmsnorm${gated ? '_silu_mul' : ''}_bf16_m${m}_kw${kw}${gated && fast ? '_fast' : ''}`;
  if (!kernels.has(name)) kernels.set(name, `namespace ns_${name} {\n${sanitize(gemvNormSource(m, kw, gated, fast))}\n}\n`);
  const rows = gated ? 2 * n : n;
  const x = bfArray(m * k, -2, 2);
  const r = withRes ? bfArray(m * k, -2, 2) : null;
  const g = bfArray(k, 0.5, 1.5);
  const w = bfArray(rows * k, -0.1, 0.1);
  const b = withBias ? bfArray(rows, -0.5, 0.5) : null;
  data.push({ c, x, r, g, w, b });
  const arr = (a, nm) => (a ? `std::vector<unsigned short> ${nm}{${[...a].join(',')}};` : `std::vector<unsigned short> ${nm};`);
  body.push(`{ ${arr(x, 'x')} ${arr(r, 'r')} ${arr(g, 'g')} ${arr(w, 'w')} ${arr(b, 'b')}
    std::vector<unsigned short> o(${m * n}), h(${m * k});
    emu_launch(${Math.min(Math.ceil(n / (8 / kw)), i % 3 === 0 ? 2 : 1e9)}, 256, [&] { ns_${name}::${name}(x.data(), ${withRes ? 'r.data()' : 'nullptr'}, g.data(), w.data(), o.data(), h.data(), ${withBias ? 'b.data()' : 'nullptr'}, ${bfVal(bfBits(1e-6))}f, ${n}, ${k}, ${k}LL, ${k}LL, ${k}LL, ${n}LL, ${k}LL); });
    std::printf("case ${i}"); for (auto v : o) std::printf(" %u", v); std::printf(" |"); for (auto v : h) std::printf(" %u", v); std::printf("\\n"); }`);
});
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-gemv-norm-emu-'));
fs.copyFileSync(path.join(root, 'scripts/cuda-emu/emu.h'), path.join(dir, 'emu.h'));
fs.writeFileSync(path.join(dir, 'emu.cpp'), [...L, ...kernels.values(), 'int main() {', ...body, 'return 0; }'].join('\n'));
execFileSync('g++', ['-std=c++17', '-O1', '-w', '-o', path.join(dir, 'emu'), path.join(dir, 'emu.cpp')], { stdio: 'inherit' });
const out = execFileSync(path.join(dir, 'emu'), { maxBuffer: 1 << 28 }).toString().trim().split('\n');
let failures = 0;
out.forEach((line, i) => {
  const { c, x, r, g, w, b } = data[i];
  const [m, n, k, , gated] = c;
  const [os_, hs] = line.replace(/^case \d+ /, '').split('|');
  const o = os_.trim().split(' ').map(Number);
  const h = hs.trim().split(' ').map(Number);
  let worst = 0;
  let hBad = 0;
  const eps = bfVal(bfBits(1e-6));
  for (let row = 0; row < m; row++) {
    const s = Array.from({ length: k }, (_, j) => bfVal(x[row * k + j]) + (r ? bfVal(r[row * k + j]) : 0));
    for (let j = 0; j < k; j++) if (h[row * k + j] !== bfBits(s[j])) hBad++;
    const rstd = 1 / Math.sqrt(s.reduce((a, v) => a + v * v, 0) / k + eps);
    const y = s.map((v, j) => bfVal(bfBits(v * rstd * bfVal(g[j]))));
    const lin = (q) => {
      let acc = 0;
      for (let j = 0; j < k; j++) acc += y[j] * bfVal(w[q * k + j]);
      return acc + (b ? bfVal(b[q]) : 0);
    };
    for (let q = 0; q < n; q++) {
      let want;
      if (gated) {
        const gg = bfVal(bfBits(lin(q)));
        want = (gg / (1 + Math.exp(-gg))) * bfVal(bfBits(lin(n + q)));
      } else want = lin(q);
      worst = Math.max(worst, Math.abs(bfVal(o[row * n + q]) - want) / (2 ** -7 * (1 + Math.abs(want))));
    }
  }
  const ok = worst <= 1 && hBad === 0 && o.some((v) => v !== 0);
  if (!ok) failures++;
  console.log(`${ok ? 'ok  ' : 'FAIL'} m=${m} n=${n} k=${k} kw=${c[3]} gated=${gated} fast=${c[5]} residual=${c[6]} bias=${c[7]}: worst ${worst.toFixed(3)} (units of 2^-7 (1 + |want|)), residual mismatches ${hBad}`);
});
console.log(`${out.length} cases, ${failures} failure(s) (${dir})`);
if (!process.argv.includes('--keep')) fs.rmSync(dir, { recursive: true, force: true });
process.exit(failures ? 1 : 0);
