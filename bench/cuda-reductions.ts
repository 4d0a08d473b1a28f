/**
 * Eager cuda reductions and row kernels on the shapes that matter: last-dim rows of an LLM
 * (logits rows, norms over hidden and head dims), full reductions, and middle-dim reductions
 * (a non-last dim, batchNorm's statistics over NCHW and channels-last). Device time per call
 * (events around one call, median). Public API only, so the same file times any commit: run it at
 * two commits for an A/B (the rendered kernels of kernels/cuda/reduce-run.ts against the
 * hand-written row kernels before them).
 *
 *   node dist/bench/cuda-reductions.js [--reps 50] [--filter text] [--json out.json]
 */
import fs from 'node:fs';
import os from 'node:os';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { perCallMs } from './cuda-spin.js';

const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const reps = Number(flag('--reps') ?? 50);
const filter = flag('--filter') ?? '';

interface Case {
  readonly name: string;
  readonly shape: number[];
  readonly dtype: 'float32' | 'bfloat16';
  readonly channelsLast?: boolean;
  readonly fn: (x: Tensor) => unknown;
}

const cases: Case[] = [];
for (const dtype of ['float32', 'bfloat16'] as const) {
  for (const shape of [
    [1, 151936],
    [32, 151936],
  ]) {
    cases.push({ name: 'sum -1', shape, dtype, fn: (x) => kiln.sum(x, -1) });
    cases.push({ name: 'amax -1', shape, dtype, fn: (x) => kiln.amax(x, -1) });
    cases.push({ name: 'argmax -1', shape, dtype, fn: (x) => kiln.argmax(x, -1) });
    cases.push({ name: 'softmax -1', shape, dtype, fn: (x) => kiln.softmax(x, -1) });
    cases.push({ name: 'logSoftmax -1 f32', shape, dtype, fn: (x) => kiln.logSoftmax(x, -1, 'float32') });
    cases.push({ name: 'logsumexp -1', shape, dtype, fn: (x) => kiln.logsumexp(x, -1) });
  }
  for (const shape of [
    [128, 1024],
    [4096, 1024],
    [2048, 128],
  ]) {
    const w = kiln.ones([shape[1]!], { dtype, device: 'cuda' });
    const b = kiln.zeros([shape[1]!], { dtype, device: 'cuda' });
    cases.push({ name: 'rmsNorm', shape, dtype, fn: (x) => kiln.rmsNorm(x, [shape[1]!], w, 1e-6) });
    cases.push({ name: 'layerNorm', shape, dtype, fn: (x) => kiln.layerNorm(x, [shape[1]!], w, b) });
    cases.push({ name: 'sum -1', shape, dtype, fn: (x) => kiln.sum(x, -1) });
  }
  cases.push({ name: 'var -1', shape: [4096, 4096], dtype, fn: (x) => kiln.var(x, -1) });
  // Full reductions.
  cases.push({ name: 'sum all', shape: [1 << 24], dtype, fn: (x) => kiln.sum(x) });
  cases.push({ name: 'amax all', shape: [4096, 4096], dtype, fn: (x) => kiln.amax(x, []) });
  cases.push({ name: 'mean all', shape: [4096, 4096], dtype, fn: (x) => kiln.mean(x) });
  // Middle and leading dims.
  cases.push({ name: 'sum dim 1', shape: [32, 1024, 512], dtype, fn: (x) => kiln.sum(x, 1) });
  cases.push({ name: 'sum dim 1', shape: [8, 512, 1024], dtype, fn: (x) => kiln.sum(x, 1) });
  cases.push({ name: 'sum dim 0', shape: [4096, 64], dtype, fn: (x) => kiln.sum(x, 0) });
  cases.push({ name: 'amax dim 0', shape: [100000, 8], dtype, fn: (x) => kiln.amax(x, 0) });
  cases.push({ name: 'softmax dim 0', shape: [4096, 512], dtype, fn: (x) => kiln.softmax(x, 0) });
  cases.push({ name: 'mean (0,2,3)', shape: [16, 64, 112, 112], dtype, fn: (x) => kiln.mean(x, [0, 2, 3]) });
  cases.push({ name: 'mean (0,2,3)', shape: [16, 64, 112, 112], dtype, channelsLast: true, fn: (x) => kiln.mean(x, [0, 2, 3]) });
}

const rows: { name: string; shape: number[]; dtype: string; layout: string; ms: number; gbps: number }[] = [];
for (const c of cases) {
  const layout = c.channelsLast ? 'channelsLast' : 'contiguous';
  const label = `${c.name} ${c.dtype} ${JSON.stringify(c.shape)} ${layout}`;
  if (filter && !label.includes(filter)) continue;
  let x = kiln.randn(c.shape, { device: 'cuda' }).to(c.dtype);
  if (c.channelsLast) x = x.contiguous('channelsLast');
  const ms = perCallMs(() => void kiln.noGrad(() => c.fn(x)), reps, 5);
  // Bytes of the input read once: the floor every kernel here pays.
  const gbps = (x.numel() * (c.dtype === 'float32' ? 4 : 2)) / (ms * 1e6);
  rows.push({ name: c.name, shape: c.shape, dtype: c.dtype, layout, ms, gbps });
  console.log(`${label.padEnd(56)} ${ms.toFixed(4)} ms  ${gbps.toFixed(0).padStart(5)} GB/s (input once)`);
  x.dispose();
}
const out = flag('--json');
if (out) {
  const meta = { date: new Date().toISOString(), host: os.hostname(), command: `node dist/bench/cuda-reductions.js ${argv.join(' ')}`.trim(), reps };
  fs.writeFileSync(out, JSON.stringify({ meta, rows }, null, 1));
}
