/**
 * Kiln side of the LLM library benchmark (issue #6): the eager library calls on cuda (kiln.llm.*,
 * dispatched to the cuda kernels of src/kernels/cuda/llm-*.ts) on the shapes and dtypes of
 * scripts/bench_llm_pytorch.py, timed the same way: a pair of kiln.Events around each call, median
 * of --reps after warm-up. Each row carries the bytes the op must move (reads + writes of the
 * activations; weights, positions and the cache are negligible) and the resulting GB/s. Also times
 * Kiln's 1 GiB device copy (kiln.clone) for a same-run bandwidth reference.
 *
 * With --sweep, the norm kernels' tuning knobs (serial or phased loads, weights prefetched, vectors
 * a thread holds) are first timed at several settings on the large shapes (recorded in the JSON's
 * meta.normSweep); the table itself always uses the library's defaults.
 *
 *   node dist/bench/llm-cuda.js --json kiln.json [--tokens 1 16 256 4096 16384] [--reps 50] [--sweep]
 *   python3 scripts/bench_llm_merge.py torch.json kiln.json out.json   (joins both sides)
 */
import fs from 'node:fs';
import * as kiln from '../src/index.js';
import { normTuning, setNormTuning, type NormTuning } from '../src/kernels/cuda/llm-norm.js';
import { itemSize, type DType } from '../src/tensor/dtype.js';

type T = kiln.Tensor;
const llm = kiln.llm;

function arg(name: string, fallback: string[]): string[] {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const out: string[] = [];
  for (let j = i + 1; j < process.argv.length && !process.argv[j]!.startsWith('--'); j++) out.push(process.argv[j]!);
  return out;
}

const jsonPath = arg('json', ['llm-cuda.json'])[0]!;
const tokensList = arg('tokens', ['1', '16', '256', '4096', '16384']).map(Number);
const dtypes = arg('dtype', ['float32', 'bfloat16']) as DType[];
let reps = Number(arg('reps', ['50'])[0]);
const warmup = Number(arg('warmup', ['5'])[0]);
const only = arg('only', []);

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

// Each case first runs for STEADY_MS of host time (at least `warmup` calls, at most STEADY_CALLS):
// the small rows' per-call time is mostly host dispatch, and V8 takes thousands of calls to reach
// its steady state there (bench/cuda-launch.ts); with 5 calls, rmsNorm [256, 8192] f32 measured
// 0.0140 ms in one run and 0.0176 in another (session 6).
const STEADY_MS = 60;
const STEADY_CALLS = 5000;

function timeMs(fn: () => void): number {
  const t0 = performance.now();
  for (let i = 0; i < STEADY_CALLS && (i < warmup || performance.now() - t0 < STEADY_MS); i++) fn();
  kiln.synchronize('cuda');
  const times: number[] = [];
  for (let i = 0; i < reps; i++) {
    const s = new kiln.Event('cuda');
    const e = new kiln.Event('cuda');
    s.record();
    fn();
    e.record();
    e.synchronize();
    times.push(s.elapsedTime(e));
  }
  return median(times);
}

/**
 * A [rows, cols] device tensor of random values without generating rows * cols randoms on the
 * host: a random tile of at most 64 rows, repeated on the device (values only need to be finite).
 */
function devRand(rows: number, cols: number, dtype: DType, seed: number, lo = -2, hi = 2): T {
  const r0 = Math.min(rows, 64);
  const tile = kiln.rand([r0, cols], { generator: new kiln.Generator(seed) }).mul(hi - lo).add(lo).to('cuda').to(dtype);
  const reps = Math.ceil(rows / r0);
  const big = kiln.contiguous(tile.unsqueeze(0).expand([reps, r0, cols])).reshape([reps * r0, cols]);
  return kiln.contiguous(big.narrow(0, 0, rows));
}

interface Row {
  op: string;
  variant: string;
  shape: number[];
  dtype: DType;
  kiln_ms: number;
  bytes: number;
  gbps: number;
}
const rows: Row[] = [];
let tuned: ReturnType<typeof sweep> | null = null;
let copy = { bytes: 0, kiln_ms: 0, gbps: 0 };

function add(op: string, variant: string, shape: number[], dtype: DType, bytes: number, fn: () => void): void {
  if (only.length > 0 && !only.includes(op)) return;
  const ms = timeMs(fn);
  const gbps = bytes / (ms * 1e-3) / 1e9;
  rows.push({ op, variant, shape, dtype, kiln_ms: ms, bytes, gbps });
  // Written after every row, so a run cut short by a time limit still leaves its rows.
  fs.writeFileSync(jsonPath, JSON.stringify({ meta: { reps, warmup, normSweep: tuned }, copy, rows }, null, 1));
  console.log(`${op.padEnd(20)} ${variant.padEnd(5)} ${JSON.stringify(shape).padEnd(18)} ${dtype.padEnd(9)} ${ms.toFixed(4).padStart(9)} ms ${gbps.toFixed(0).padStart(6)} GB/s`);
}

/**
 * Times rmsNorm and fusedAddRmsNorm at each knob setting on 256, 4096 and 16384 rows of 4096 and
 * 8192 (--sweep-reps reps each, default 30) and records the times (per op, dtype and shape); the
 * rows that follow use the library's defaults (restored here), so the table measures what users
 * get and the sweep shows whether another default would be faster. Settings: session 4's shipped
 * kernel (H at run time), the defaults, and one knob changed at a time.
 */
function sweep(): { defaults: NormTuning; best: Record<string, string>; ms: Record<string, Record<string, number>> } {
  const defaults = normTuning();
  const sweepReps = Number(arg('sweep-reps', ['30'])[0]);
  const ms: Record<string, Record<string, number>> = {};
  const shapes: [number, number, DType][] = [];
  for (const dtype of dtypes) for (const h of [4096, 8192]) for (const t of [256, 4096, 16384]) shapes.push([t, h, dtype]);
  const data = shapes.map(([t, h, dtype]) => ({ t, key: `${dtype} [${t}, ${h}]`, x: devRand(t, h, dtype, 2), r: devRand(t, h, dtype, 3), w: devRand(1, h, dtype, 1, 0.5, 1.5).reshape([h]) }));
  const settings: [string, Partial<NormTuning>][] = [
    ['s4 generic', { specializeH: false, streaming: false, resMinThreadsPerSm: 0, prefetchWeight: 'auto' }],
    ['defaults', {}],
    ['+pw', { prefetchWeight: true }],
    ['-pw', { prefetchWeight: false }],
    ['cs', { streaming: true }],
    ['m0', { minThreadsPerSm: 0 }],
    ['rm1024', { resMinThreadsPerSm: 1024 }],
    ['v2', { vecsPerThread: 2 }],
    ['pipe', { pipelineRows: true }],
    ['u2', { unpackTwice: true }],
    ['u2 m1280', { unpackTwice: true, minThreadsPerSm: 1280 }],
  ];
  const saved = { reps };
  reps = sweepReps;
  const totals: Record<string, { large: number; small: number }> = {};
  for (const [name, knobs] of settings) {
    setNormTuning({ ...defaults, gridCap: false, ...knobs });
    const row: Record<string, number> = {};
    const tot = { large: 0, small: 0 };
    for (const d of data) {
      const a = timeMs(() => llm.rmsNorm(d.x, d.w, 1e-6).dispose());
      const b = timeMs(() => void llm.fusedAddRmsNorm(d.x, d.r, d.w, 1e-6));
      row[`llm.rmsNorm ${d.key}`] = a;
      row[`llm.fusedAddRmsNorm ${d.key}`] = b;
      if (d.t === 16384) tot.large += a + b;
      if (d.t === 256) tot.small += a + b;
    }
    ms[name] = row;
    totals[name] = tot;
  }
  reps = saved.reps;
  for (const d of data) for (const t of [d.x, d.r, d.w]) t.dispose();
  setNormTuning(defaults);
  const names = settings.map(([n]) => n);
  // One line a shape: microseconds at each setting (columns in the order of the header).
  console.log(`sweep us: ${names.map((n) => n.padStart(10)).join(' ')}`);
  for (const key of Object.keys(ms[names[0]!]!)) console.log(`sweep ${key.replace('llm.', '').padEnd(42)} ${names.map((n) => (1000 * ms[n]![key]!).toFixed(1).padStart(10)).join(' ')}`);
  console.log(`sweep total 16384 rows: ${names.map((n) => `${n} ${(1000 * totals[n]!.large).toFixed(0)}`).join(', ')}`);
  console.log(`sweep total 256 rows:   ${names.map((n) => `${n} ${(1000 * totals[n]!.small).toFixed(1)}`).join(', ')}`);
  const bestOf = (f: (t: { large: number; small: number }) => number): string => names.reduce((b, n) => (f(totals[n]!) < f(totals[b]!) ? n : b), names[0]!);
  const best = { large: bestOf((t) => t.large), small: bestOf((t) => t.small) };
  console.log(`sweep: fastest at 16384 rows ${best.large}, at 256 rows ${best.small}; the table uses the defaults ${JSON.stringify(defaults)}`);
  return { defaults, best, ms };
}

/**
 * Runs every op's host path a few hundred times on tiny shapes first, so that V8 has optimised the
 * dispatch code before the first measured row (R1: the first rows measured twice the host time).
 */
function jitWarmup(): void {
  for (const dtype of dtypes) {
    const x = devRand(2, 64, dtype, 1);
    const r = devRand(2, 64, dtype, 2);
    const w = devRand(1, 64, dtype, 3).reshape([64]);
    const pos = kiln.tensor([1, 2], { dtype: 'int64' }).to('cuda');
    const cache = devRand(4, 16, dtype, 4);
    for (let i = 0; i < 300; i++) {
      llm.rmsNorm(x, w, 1e-6).dispose();
      llm.fusedAddRmsNorm(x, r, w, 1e-6);
      llm.siluAndMul(x).dispose();
      llm.geluAndMul(x, i % 2 ? 'tanh' : 'none').dispose();
      llm.rotaryEmbedding(pos, x, r, 16, cache, i % 2 === 0);
    }
    for (const t of [x, r, w, pos, cache]) t.dispose();
  }
  kiln.synchronize('cuda');
}

kiln.noGrad(() => {
  jitWarmup();
  tuned = process.argv.includes('--sweep') ? sweep() : null;
  const GiB = 1 << 30;
  const src = kiln.empty([GiB / 4], { device: 'cuda' });
  const copyMs = timeMs(() => kiln.clone(src).dispose());
  src.dispose();
  copy = { bytes: GiB, kiln_ms: copyMs, gbps: (2 * GiB) / (copyMs * 1e-3) / 1e9 };
  console.log(`kiln.clone 1 GiB: ${copyMs.toFixed(3)} ms, ${copy.gbps.toFixed(0)} GB/s (read + write)`);

  for (const dtype of dtypes) {
    const sz = itemSize(dtype);
    for (const hidden of [4096, 8192]) {
      const w = devRand(1, hidden, dtype, 1, 0.5, 1.5).reshape([hidden]);
      for (const t of tokensList) {
        const x = devRand(t, hidden, dtype, 2);
        const r = devRand(t, hidden, dtype, 3);
        const n = t * hidden * sz;
        add('llm.rmsNorm', '', [t, hidden], dtype, 2 * n, () => llm.rmsNorm(x, w, 1e-6).dispose());
        add('llm.fusedAddRmsNorm', '', [t, hidden], dtype, 4 * n, () => void llm.fusedAddRmsNorm(x, r, w, 1e-6));
        x.dispose();
        r.dispose();
      }
    }
    const d = 11008;
    for (const t of tokensList) {
      const x = devRand(t, 2 * d, dtype, 4);
      const n = t * d * sz;
      add('llm.siluAndMul', '', [t, 2 * d], dtype, 3 * n, () => llm.siluAndMul(x).dispose());
      add('llm.geluAndMul', 'none', [t, 2 * d], dtype, 3 * n, () => llm.geluAndMul(x, 'none').dispose());
      add('llm.geluAndMul', 'tanh', [t, 2 * d], dtype, 3 * n, () => llm.geluAndMul(x, 'tanh').dispose());
      x.dispose();
    }
    const [heads, hs, maxPos] = [32, 128, 8192];
    const inv = Array.from({ length: hs / 2 }, (_, i) => 10000 ** (-(2 * i) / hs));
    const cacheVals: number[] = [];
    for (let p = 0; p < maxPos; p++) {
      for (const f of inv) cacheVals.push(Math.cos(p * f));
      for (const f of inv) cacheVals.push(Math.sin(p * f));
    }
    const cache = kiln.tensor(cacheVals).reshape([maxPos, hs]).to('cuda').to(dtype);
    for (const t of tokensList) {
      const pos = kiln.randint(0, maxPos, [t], { generator: new kiln.Generator(5) }).to('cuda');
      const q = devRand(t, heads * hs, dtype, 6);
      const k = devRand(t, heads * hs, dtype, 7);
      const n = 2 * 2 * t * heads * hs * sz;
      for (const neox of [true, false]) add('llm.rotaryEmbedding', neox ? 'neox' : 'gptj', [t, heads, hs], dtype, n, () => void llm.rotaryEmbedding(pos, q, k, hs, cache, neox));
      q.dispose();
      k.dispose();
    }
  }
  fs.writeFileSync(jsonPath, JSON.stringify({ meta: { reps, warmup, normSweep: tuned }, copy, rows }, null, 1));
});
