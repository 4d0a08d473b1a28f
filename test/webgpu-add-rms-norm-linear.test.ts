/**
 * webgpu llm.addRmsNormLinear (kernels/webgpu/llm-add-rms-norm-linear.ts: the skinny GEMV with the
 * RMSNorm prologue of gemv-norm.ts) against a float64 loop: s = x + r in f32 (as the kernel and the
 * compiled add + rmsNorm compute it), h = s rounded to the dtype (bit for bit), y = (s * rstd) *
 * gamma rounded to the dtype, out = y W^T (+ b) rounded (gated: silu(g) * u of the rounded halves).
 * The bound on out allows each y element to land on the neighbouring value of the dtype (the
 * kernel's f32 rstd is not the float64 one), the f32 sums' error and the output's rounding.
 * Rows 1..8, K = 1024 (Qwen3-0.6B's hidden size) and widths of fewer / more 16-byte words than the
 * workgroup's 256 invocations, several N (a partial 8-column group; more groups than the grid's
 * workgroups, so that a workgroup walks two), residual or none, bias or
 * none, plain and gated, float32 / float16 (packed without shader-f16) / bfloat16, the prologue's
 * sum of squares through subgroups (with the weight prefetch) and through the workgroup tree
 * (without). Eligible cases are one dispatch;
 * the others (9 rows, K not whole words) run the parts and must still be right; opcheck against
 * the reference composition. The compile pass on
 * webgpu: webgpu-add-rms-norm-linear-decode.test.ts. WGSL on Dawn's null backend (shader-f16):
 * webgpu-validate-gemv.test.ts.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import { GEMV_THREADS, gemvRows } from '../src/kernels/webgpu/gemv-codegen.js';
import { gemvNormWorkgroupBytes } from '../src/kernels/webgpu/gemv-norm.js';
import { setGemvNormSubgroups } from '../src/kernels/webgpu/llm-add-rms-norm-linear.js';
import { setOption } from '../src/runtime/config.js';
import type { WebgpuAccelerator } from '../src/runtime/webgpu/webgpu-accelerator.js';
import type { DType } from '../src/tensor/dtype.js';
import { webgpuSkipReason } from './helpers/webgpu.js';
import { llmOpcheckSamples } from './samples/llm.js';

const skip = webgpuSkipReason();
const ULP: Record<string, number> = { float32: 2 ** -23, float16: 2 ** -10, bfloat16: 2 ** -7 };
const EPS = 1e-6;

function values(n: number, seed: number, lo: number, hi: number): number[] {
  let s = seed >>> 0;
  return Array.from({ length: n }, () => lo + ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32) * (hi - lo));
}

/** `v` rounded to `dtype` by Kiln's cpu conversion (round to nearest even), in bulk. */
function roundAll(v: readonly number[], dtype: DType): number[] {
  return kiln.tensor([...v], { dtype: 'float64' }).to(dtype).to('float64').toFlatArray() as number[];
}

interface Case {
  readonly M: number;
  readonly N: number;
  readonly K: number;
  readonly res: boolean;
  readonly bias: boolean;
  readonly gated: boolean;
}

const CASES: Case[] = [
  ...[1, 2, 3, 5, 8].map((M) => ({ M, N: 40, K: 1024, res: M !== 5, bias: M % 2 === 1, gated: M % 2 === 0 })),
  ...[1, 4].map((M) => ({ M, N: 19, K: 1024, res: true, bias: false, gated: true })),
  { M: 1, N: 21, K: 264, res: true, bias: true, gated: false },
  { M: 3, N: 13, K: 264, res: false, bias: false, gated: true },
  { M: 2, N: 9, K: 2056, res: true, bias: false, gated: false },
  { M: 1, N: 8, K: 8, res: true, bias: false, gated: false },
  // Not the kernel's: 9 rows; K not a whole number of words.
  { M: 9, N: 11, K: 64, res: true, bias: true, gated: false },
  { M: 1, N: 6, K: 30, res: true, bias: false, gated: true },
  // More 8-column groups than the grid's 1024 workgroups: workgroups walk two (the prefetched first step only in the first).
  { M: 1, N: 8200, K: 1024, res: true, bias: true, gated: false },
  { M: 2, N: 8200, K: 1024, res: false, bias: false, gated: true },
];

test('webgpu llm.addRmsNormLinear matches a float64 loop (norm-prologue GEMV, subgroups or not, and the fallback)', { skip }, () => {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  const limit = acc.bridge.adapter.limits.maxComputeWorkgroupStorageSize ?? 16384;
  const failures: string[] = [];
  let seed = 11;
  let fusedRuns = 0;
  try {
    for (const sg of [true, false]) {
      // Subgroups with the weight prefetch (the defaults), then the tree without it.
      setGemvNormSubgroups(sg);
      setOption('KILN_WEBGPU_GEMV_NORM_PREFETCH', sg);
      // The tree path on fewer cases: every pipeline compiles on first use (seconds each on SwiftShader).
      for (const dtype of (sg ? ['float32', 'float16', 'bfloat16'] : ['float32', 'float16']) as DType[]) {
        const V = dtype === 'float32' ? 4 : 8;
        for (const c of sg ? CASES : CASES.filter((_, i) => i % 3 === 0)) {
          const label = `${sg ? 'subgroups' : 'tree'} ${dtype} M=${c.M} N=${c.N} K=${c.K}${c.res ? ' residual' : ''}${c.bias ? ' bias' : ''}${c.gated ? ' gated' : ''}`;
          const rows = c.gated ? 2 * c.N : c.N;
          const x = kiln.tensor(values(c.M * c.K, seed++, -2, 2), { dtype }).reshape([c.M, c.K]);
          const r = c.res ? kiln.tensor(values(c.M * c.K, seed++, -2, 2), { dtype }).reshape([c.M, c.K]) : null;
          const g = kiln.tensor(values(c.K, seed++, 0.5, 1.5), { dtype });
          const w = kiln.tensor(values(rows * c.K, seed++, -2 / Math.sqrt(c.K), 2 / Math.sqrt(c.K)), { dtype }).reshape([rows, c.K]);
          const b = c.bias ? kiln.tensor(values(rows, seed++, -0.5, 0.5), { dtype }) : null;
          const [xv, gv, wv] = [x, g, w].map((t) => t.to('float64').toFlatArray() as number[]) as [number[], number[], number[]];
          const rv = r ? (r.to('float64').toFlatArray() as number[]) : null;
          const bv = b ? (b.to('float64').toFlatArray() as number[]) : null;
          const fused = c.M <= 8 && c.K % V === 0 && gemvNormWorkgroupBytes(gemvRows(c.M), c.K / V, c.gated, GEMV_THREADS) <= limit;

          const d0 = acc.dispatchCount;
          const got = kiln.llm.addRmsNormLinear(x.to('webgpu'), r ? r.to('webgpu') : null, g.to('webgpu'), EPS, w.to('webgpu'), b ? b.to('webgpu') : null, c.gated);
          const dispatches = acc.dispatchCount - d0;
          if (fused) fusedRuns++;
          if (fused && dispatches !== 1) failures.push(`${label}: ${dispatches} dispatches, want the norm GEMV's one`);
          if (!fused && dispatches < 3) failures.push(`${label}: ${dispatches} dispatches, want the parts' three or more`);
          assert.deepEqual([...got.out.shape], [c.M, c.N], label);
          const o = got.out.to('cpu').to('float64').toFlatArray() as number[];
          const hv = got.residual.to('cpu').to('float64').toFlatArray() as number[];

          // s in f32 (both operands are exact in f32), h its rounding; the fallback's eager add rounds the same way.
          const s = xv.map((v, i) => Math.fround(v + (rv ? rv[i]! : 0)));
          const hWant = roundAll(s, dtype);
          for (let i = 0; i < hv.length; i++) {
            if (hv[i] !== hWant[i]) {
              failures.push(`${label}: residual[${i}] = ${hv[i]}, want ${hWant[i]}`);
              break;
            }
          }
          // The fallback normalises the rounded sum (the eager add stores it).
          const sn = fused ? s : hWant;
          const yRaw: number[] = [];
          for (let m = 0; m < c.M; m++) {
            let ss = 0;
            for (let k = 0; k < c.K; k++) ss += sn[m * c.K + k]! ** 2;
            const rstd = 1 / Math.sqrt(ss / c.K + EPS);
            for (let k = 0; k < c.K; k++) yRaw.push(sn[m * c.K + k]! * rstd * gv[k]!);
          }
          const y = roundAll(yRaw, dtype);
          const ulp = ULP[dtype]!;
          const lin = (m: number, n: number): { v: number; slack: number } => {
            let v = bv ? bv[n]! : 0;
            let slack = 0;
            for (let k = 0; k < c.K; k++) {
              const t = y[m * c.K + k]! * wv[n * c.K + k]!;
              v += t;
              // A y element one ulp away, and the f32 sum's error.
              slack += Math.abs(t) * (ulp + c.K * 2 ** -24);
            }
            return { v, slack };
          };
          for (let m = 0; m < c.M; m++) {
            for (let n = 0; n < c.N; n++) {
              let want: number;
              let bound: number;
              if (!c.gated) {
                const l = lin(m, n);
                want = l.v;
                bound = l.slack + Math.abs(want) * ulp + 1e-30;
              } else {
                const lg = lin(m, n);
                const lu = lin(m, c.N + n);
                const [gr, ur] = roundAll([lg.v, lu.v], dtype) as [number, number];
                const silu = (v: number): number => v / (1 + Math.exp(-v));
                want = silu(gr) * ur;
                // g and u each up to their slack plus one ulp away (|d silu/dg| <= 1.1), then the product's rounding.
                const dg = lg.slack + Math.abs(gr) * ulp;
                const du = lu.slack + Math.abs(ur) * ulp;
                bound = 1.1 * dg * (Math.abs(ur) + du) + du * Math.abs(silu(gr)) + Math.abs(want) * ulp + 1e-30;
              }
              const v = o[m * c.N + n]!;
              if (!(Math.abs(v - want) <= bound)) failures.push(`${label} [${m}, ${n}]: got ${v}, want ${want} (bound ${bound})`);
            }
          }
          if (!(Math.max(...o.map(Math.abs)) > 1e-2)) failures.push(`${label}: no real result (all ~0)`);
        }
      }
    }
  } finally {
    setGemvNormSubgroups(true);
    setOption('KILN_WEBGPU_GEMV_NORM_PREFETCH', undefined);
  }
  assert.ok(fusedRuns >= 30, `the kernel ran ${fusedRuns} cases`);
  assert.deepEqual(failures.slice(0, 10), [], `${failures.length} failures`);
});

test('opcheck llm.addRmsNormLinear on webgpu: the kernel agrees with the reference composition', { skip }, () => {
  assert.equal(kiln.llm.llmChoice('llm.addRmsNormLinear', 'webgpu').name, 'webgpu-kernel');
  const report = kiln.llm.opcheck('llm.addRmsNormLinear', llmOpcheckSamples['llm.addRmsNormLinear']!, { device: 'webgpu' });
  assert.ok(report.implementations.includes('webgpu-kernel'));
});
