/**
 * CPU GEMM benchmark: GFLOP/s of the shared engine (src/kernels/cpu/gemm.ts) and of kiln.matmul
 * on float32 cubes, plus a transposed-B case (linear's layout).
 *
 *   npx tsc -p bench/tsconfig.json && node dist/bench/cpu-gemm.js [sizes...]
 */
import * as kiln from '../src/index.js';
import { gemm, gemmBackend, setGemmBackend } from '../src/kernels/cpu/gemm.js';

function randomArray(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = s / 4294967296 - 0.5;
  }
  return out;
}

function time(fn: () => void, minMs = 300): number {
  fn(); // warm-up (JIT)
  let best = Infinity;
  let total = 0;
  let reps = 0;
  while (total < minMs || reps < 2) {
    const t0 = performance.now();
    fn();
    const dt = performance.now() - t0;
    best = Math.min(best, dt);
    total += dt;
    reps++;
  }
  return best;
}

function report(label: string, n: number, ms: number): void {
  const gflops = (2 * n * n * n) / (ms * 1e6);
  console.log(`${label.padEnd(38)} ${String(n).padStart(5)}^3  ${ms.toFixed(1).padStart(8)} ms  ${gflops.toFixed(2).padStart(6)} GFLOP/s`);
}

console.log(`macro-kernel: ${gemmBackend()}`);
const sizes = process.argv.slice(2).map(Number).filter((x) => x > 0);
for (const n of sizes.length ? sizes : [256, 512, 1024]) {
  const a = randomArray(n * n, 1);
  const b = randomArray(n * n, 2);
  const c = new Float32Array(n * n);
  report(`gemm float32 (${gemmBackend()}, row-major A and B)`, n, time(() => gemm(n, n, n, 1, { data: a, offset: 0, rowStride: n, colStride: 1 }, { data: b, offset: 0, rowStride: n, colStride: 1 }, 0, { data: c, offset: 0, rowStride: n, colStride: 1 })));
  setGemmBackend('js');
  report('gemm float32 (JS micro-kernel)', n, time(() => gemm(n, n, n, 1, { data: a, offset: 0, rowStride: n, colStride: 1 }, { data: b, offset: 0, rowStride: n, colStride: 1 }, 0, { data: c, offset: 0, rowStride: n, colStride: 1 })));
  setGemmBackend('wasm');
  report(`gemm float32 (${gemmBackend()}, B transposed)`, n, time(() => gemm(n, n, n, 1, { data: a, offset: 0, rowStride: n, colStride: 1 }, { data: b, offset: 0, rowStride: 1, colStride: n }, 0, { data: c, offset: 0, rowStride: n, colStride: 1 })));
const ta = new kiln.Tensor(kiln.tensor(a).storage, 'float32', [n, n]);
const tb = new kiln.Tensor(kiln.tensor(b).storage, 'float32', [n, n]);
report('kiln.matmul float32', n, time(() => kiln.matmul(ta, tb).dispose()));
report('kiln.linear float32 (weight [n, n])', n, time(() => kiln.linear(ta, tb).dispose()));
}
