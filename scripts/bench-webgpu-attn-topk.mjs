#!/usr/bin/env node
/**
 * Times webgpu topk [40, 3000] k = 50 and scaledDotProductAttention (prefill [1, 16, 512, 64]
 * causal and not, decode q [1, 16, 1, 64] over 4096 keys) through the public API, median of a few
 * reps after a warm-up, device drained each rep. `node scripts/bench-webgpu-attn-topk.mjs [dist]`
 * (default ./dist), e.g. once per commit for an A/B. On SwiftShader (development.md) these are CPU
 * emulation times, which say little about a GPU.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const root = path.resolve(process.argv[2] ?? 'dist');
const kiln = await import(pathToFileURL(path.join(root, 'src/index.js')).href);
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

function bench(label, f, reps) {
  f()?.dispose?.();
  kiln.synchronize('webgpu');
  const ts = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    const r = f();
    kiln.synchronize('webgpu');
    ts.push(performance.now() - t0);
    r?.dispose?.();
  }
  console.log(`${label}: median ${median(ts).toFixed(1)} ms (min ${Math.min(...ts).toFixed(1)}, ${reps} reps)`);
}

const on = (shape) => kiln.randn(shape).to('webgpu');
const x = on([40, 3000]);
bench('topk [40,3000] k=50', () => kiln.topk(x, 50, 1).values, 5);
const [q, k, v] = [on([1, 16, 512, 64]), on([1, 16, 512, 64]), on([1, 16, 512, 64])];
bench('sdpa prefill [1,16,512,64] causal', () => kiln.scaledDotProductAttention(q, k, v, null, 0, true), 3);
bench('sdpa prefill [1,16,512,64] non-causal', () => kiln.scaledDotProductAttention(q, k, v, null, 0, false), 3);
const [qd, kd, vd] = [on([1, 16, 1, 64]), on([1, 16, 4096, 64]), on([1, 16, 4096, 64])];
bench('sdpa decode q [1,16,1,64] kv 4096', () => kiln.scaledDotProductAttention(qd, kd, vd, null, 0, false), 5);
