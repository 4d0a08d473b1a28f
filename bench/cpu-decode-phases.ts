/**
 * Where the cpu whole-step decoder's time goes (issue #17; kernels/cpu/native/decode-step.ts with
 * KILN_CPU_DECODE_STEP_TRACE): Qwen3-0.6B (or --config) with seeded random weights, one sequence
 * decoding from `--pos`, each step's phase times read after it. Per phase kind, summed over a
 * step's layers, medians over the steps of:
 *   - work: from the phase opening to its last item's end (the threads' items, critical path);
 *   - tail: from that end to the next phase opening (the serial tail: a residual add + RMSNorm,
 *     the next GEMV's copy of x, run by the thread that finished last, plus the hand-over);
 *   - bytes / work as GB/s for the weight phases;
 * and the step from the first phase opening to the LM head's end, beside the read bandwidth probe
 * of the same process and the host time around the native call (engine step minus native step).
 *
 *   node dist/bench/cpu-decode-phases.js [--dtype bfloat16] [--pos 256] [--steps 20] [--threads N] [--config qwen3-0.6b] [--json out.json]
 */
import { execSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import * as kiln from '../src/index.js';
import { setNativeThreads } from '../src/kernels/cpu/native/threads.js';
import { setOption } from '../src/runtime/config.js';
import { DecodeRunner } from '../src/serve/decode-runner.js';
import { PagedKvCache } from '../src/serve/kv-cache.js';
import { readBandwidth } from './bandwidth-lib.js';

const argv = process.argv.slice(2);
const flag = (name: string, def: string): string => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1]! : def;
};
const dtype = flag('--dtype', 'bfloat16') as 'float32' | 'bfloat16';
const pos0 = Number(flag('--pos', '256'));
const steps = Number(flag('--steps', '20'));
const threads = flag('--threads', '');
const configName = flag('--config', 'qwen3-0.6b');
const jsonOut = flag('--json', '');
const WARM = 3;

if (threads !== '') setNativeThreads(Number(threads));
setOption('KILN_DECODE_MEGAKERNEL', true);
setOption('KILN_CPU_DECODE_STEP_TRACE', true);
const config = configName === 'qwen3-0.6b' ? kiln.models.QWEN3_0_6B : kiln.models.QWEN3_TINY;
const model = kiln.models.Qwen3ForCausalLM.fromConfig(config, { seed: 0, dtype, device: 'cpu' }).eval();
const blocks = Math.ceil((pos0 + WARM + steps + 1) / 16) + 1;
const cache = new PagedKvCache(model.kvGeometry(), { numBlocks: blocks });
const runner = new DecodeRunner(model, cache, 'eager');
const dec = runner.wholeStepDecoder;
if (dec === null || dec.readPhaseTimes === undefined) throw new Error(`no traced cpu decode step: ${runner.wholeStepReason ?? 'no trace'}`);
const table = Array.from({ length: blocks }, (_, i) => i);

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.floor(s.length / 2)]!;
};
const esz = dtype === 'bfloat16' ? 2 : 4;
const { hiddenSize: H, intermediateSize: I, numAttentionHeads: nh, numKeyValueHeads: nkv, headDim: D, vocabSize: V, numHiddenLayers: L } = model.config;
/** Weight bytes a phase kind streams per layer (the LM head once). */
const bytesPerLayer: Record<string, number> = { qkv: (nh + 2 * nkv) * D * H * esz, o: H * nh * D * esz, gateUp: 2 * I * H * esz, down: H * I * esz, lmHead: V * H * esz };
const work = new Map<string, number[]>();
const tail = new Map<string, number[]>();
const native: number[] = [];
const wall: number[] = [];
for (let s = 0; s < WARM + steps; s++) {
  const P = pos0 + s;
  const t0 = performance.now();
  kiln.noGrad(() => runner.run([{ tokenId: (100 + 7 * s) % V, position: P, blockTable: table.slice(0, Math.ceil((P + 1) / 16)) }]));
  const ms = performance.now() - t0;
  const ph = dec.readPhaseTimes()!;
  if (s < WARM) continue;
  wall.push(ms);
  native.push(ph[ph.length - 1]!.endNs - ph[0]!.openNs);
  const w = new Map<string, number>();
  const tl = new Map<string, number>();
  ph.forEach((p, i) => {
    w.set(p.kind, (w.get(p.kind) ?? 0) + (p.endNs - p.openNs));
    const next = ph[i + 1];
    if (next) tl.set(p.kind, (tl.get(p.kind) ?? 0) + (next.openNs - p.endNs));
  });
  for (const [k, v] of w) work.set(k, [...(work.get(k) ?? []), v]);
  for (const [k, v] of tl) tail.set(k, [...(tail.get(k) ?? []), v]);
}
const probe = readBandwidth(undefined, 3);
const ms = (ns: number): number => Number((ns / 1e6).toFixed(3));
const rows = [...work.keys()].map((kind) => {
  const wk = median(work.get(kind)!);
  const bytes = (bytesPerLayer[kind] ?? 0) * (kind === 'lmHead' ? 1 : L);
  return { phase: kind, work_ms: ms(wk), tail_ms: ms(median(tail.get(kind) ?? [0])), gb_s: bytes > 0 ? Number((bytes / wk).toFixed(1)) : null };
});
const summary = {
  native_step_ms: ms(median(native)),
  runner_step_ms: Number(median(wall).toFixed(3)),
  host_ms: Number((median(wall) - median(native) / 1e6).toFixed(3)),
  bandwidth_gb_s: probe?.gbS ?? null,
  threads: threads === '' ? 'auto' : Number(threads),
};
console.log('phase        work ms   tail ms   GB/s   (per step, summed over layers; medians over steps)');
for (const r of rows) console.log(`${r.phase.padEnd(12)} ${String(r.work_ms).padStart(8)} ${String(r.tail_ms).padStart(9)} ${String(r.gb_s ?? '-').padStart(6)}`);
console.log(`native step ${summary.native_step_ms} ms, runner step ${summary.runner_step_ms} ms (host ${summary.host_ms} ms); read probe ${String(summary.bandwidth_gb_s)} GB/s; ${dtype}, context ${pos0}-${pos0 + WARM + steps}, threads ${String(summary.threads)}`);
let commit = '';
try {
  commit = execSync('git rev-parse --short HEAD', { encoding: 'utf8' }).trim();
} catch {
  /* not a checkout */
}
const meta = { bench: 'cpu-decode-phases', machine: os.hostname(), cpus: os.cpus().length, cpu: os.cpus()[0]?.model ?? '', date: new Date().toISOString(), command: `node dist/bench/cpu-decode-phases.js ${argv.join(' ')}`, commit, config: configName, dtype, pos: pos0, steps, decoder: dec.name, loadavg: os.loadavg() };
if (jsonOut) fs.writeFileSync(jsonOut, JSON.stringify({ meta, summary, phases: rows }, null, 2));
runner.dispose();
cache.dispose();
