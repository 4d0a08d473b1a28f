/**
 * Where the decode megakernel's time goes (issue #17; KILN_DECODE_MEGAKERNEL with
 * KILN_DECODE_MEGAKERNEL_TRACE): Qwen3-0.6B bfloat16 with seeded random weights, one sequence
 * decoding from `--pos`, the kernel's per-block barrier stamps (%globaltimer) read after each of
 * `--steps` steps. Per phase kind (those of a layer: five, or three under
 * KILN_DECODE_MEGAKERNEL_SYNC=flow) and over layers and steps, medians of:
 *   - total:   from the previous barrier's first release to this barrier's first release;
 *   - slowest: to the last block's arrival (the phase's critical path);
 *   - median:  to the median block's arrival (what a typical block's work takes);
 *   - release: from the last arrival to the first release (the barrier's own latency);
 * and the LM head (last release to the last block's end), the launch spread (first to last block
 * start), the kernel (first start to last end). Also which blocks arrive last in each phase.
 *
 *   node dist/bench/cuda-megakernel-phases.js [--pos 256] [--steps 40] [--json out.json]
 */
import fs from 'node:fs';
import * as kiln from '../src/index.js';
import { setOption } from '../src/runtime/config.js';
import { DecodeRunner } from '../src/serve/decode-runner.js';
import { PagedKvCache } from '../src/serve/kv-cache.js';

const argv = process.argv.slice(2);
const flag = (name: string, def: string): string => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1]! : def;
};
const pos0 = Number(flag('--pos', '256'));
const steps = Number(flag('--steps', '40'));
const jsonOut = flag('--json', '');
const WARM = 5;

setOption('KILN_DECODE_MEGAKERNEL', true);
setOption('KILN_DECODE_MEGAKERNEL_TRACE', true);
const model = kiln.models.Qwen3ForCausalLM.fromConfig(kiln.models.QWEN3_0_6B, { seed: 0, dtype: 'bfloat16', device: 'cuda' });
const blocks = Math.ceil((pos0 + WARM + steps + 1) / 16) + 1;
const cache = new PagedKvCache(model.kvGeometry(), { numBlocks: blocks });
const runner = new DecodeRunner(model, cache, 'compiled');
const dec = runner.wholeStepDecoder;
if (dec === null || dec.readTrace === undefined) throw new Error(`no traced megakernel: ${runner.wholeStepReason ?? 'no trace'}`);
const table = Array.from({ length: blocks }, (_, i) => i);
// The kernel's phase and stamp names, from one traced step.
kiln.noGrad(() => runner.run([{ tokenId: 1, position: 0, blockTable: table.slice(0, 1) }]));
const { phases: PHASES, stamps: STAMPS } = dec.readTrace()!;
const NP = PHASES.length;
// The attention stamps belong to the phase that holds attention ('attention' or, under flow, the first).
const attnPhase = Math.max(0, PHASES.indexOf('attention'));

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.floor(s.length / 2)]!;
};
const per: Record<string, { total: number[]; slowest: number[]; median: number[]; release: number[]; last: Map<number, number> }> = {};
for (const p of PHASES) per[p] = { total: [], slowest: [], median: [], release: [], last: new Map() };
const head: number[] = [];
// Attention stamps from the phase's start: all attending blocks, and the phase's last arrival.
const attnAll: number[][] = STAMPS.map(() => []);
const attnLast: number[][] = STAMPS.map(() => []);
const spread: number[] = [];
const kernel: number[] = [];
for (let s = 0; s < WARM + steps; s++) {
  const P = pos0 + s;
  kiln.noGrad(() => runner.run([{ tokenId: (100 + 7 * s) % 151936, position: P, blockTable: table.slice(0, Math.ceil((P + 1) / 16)) }]));
  const t = dec.readTrace()!;
  if (s < WARM) continue;
  const rows = t.arrive.length;
  const relMin = t.release.map((r) => Math.min(...r));
  spread.push(Math.max(...t.arrive[0]!) - Math.min(...t.arrive[0]!));
  for (let k = 1; k < rows - 1; k++) {
    const a = t.arrive[k]!;
    const amax = Math.max(...a);
    const ph = per[PHASES[(k - 1) % NP]!]!;
    ph.total.push(relMin[k]! - relMin[k - 1]!);
    ph.slowest.push(amax - relMin[k - 1]!);
    ph.median.push(median(a) - relMin[k - 1]!);
    ph.release.push(relMin[k]! - amax);
    const b = a.indexOf(amax);
    ph.last.set(b, (ph.last.get(b) ?? 0) + 1);
  }
  for (let l = 0; l < model.config.numHiddenLayers; l++) {
    // Stamps from the start of the phase that holds them; the last block to arrive at its end.
    const k = NP * l + attnPhase + 1;
    const r0 = relMin[k - 1]!;
    const a = t.arrive[k]!;
    const last = a.indexOf(Math.max(...a));
    t.attention[l]!.forEach((st, b) => st.forEach((v, j) => { if (!Number.isNaN(v) && v >= r0) { attnAll[j]!.push(v - r0); if (b === last) attnLast[j]!.push(v - r0); } }));
  }
  const end = Math.max(...t.arrive[rows - 1]!);
  head.push(end - relMin[rows - 2]!);
  kernel.push(end);
}
const us = (ns: number): number => Number((ns / 1000).toFixed(2));
const rowsOut = PHASES.map((p) => {
  const ph = per[p]!;
  const last = [...ph.last.entries()].sort((x, y) => y[1] - x[1]).slice(0, 3).map(([b, n]) => `${b}:${n}`);
  return { phase: p, total_us: us(median(ph.total)), slowest_us: us(median(ph.slowest)), median_us: us(median(ph.median)), release_us: us(median(ph.release)), last_blocks: last.join(' ') };
});
const layers = model.config.numHiddenLayers;
const summary = {
  kernel_us: us(median(kernel)),
  layers_us: us(rowsOut.reduce((a, r) => a + r.total_us * 1000, 0) * layers),
  lm_head_us: us(median(head)),
  launch_spread_us: us(median(spread)),
};
console.log('phase              total  slowest  median  release  (us, medians per layer)  last blocks');
for (const r of rowsOut) console.log(`${r.phase.padEnd(16)} ${String(r.total_us).padStart(7)} ${String(r.slowest_us).padStart(8)} ${String(r.median_us).padStart(7)} ${String(r.release_us).padStart(8)}  ${r.last_blocks}`);
console.log(`kernel ${summary.kernel_us} us = ${layers} layers x ${us(rowsOut.reduce((a, r) => a + r.total_us * 1000, 0))} us + LM head ${summary.lm_head_us} us (+ launch spread ${summary.launch_spread_us} us)`);
const attention = STAMPS.map((what, j) => ({ stamp: what, all_median_us: us(median(attnAll[j]!)), last_block_median_us: us(median(attnLast[j]!)), samples: attnAll[j]!.length }));
console.log(`stamps from the start of phase '${PHASES[attnPhase]}' (us): median block / the block that ends that phase last`);
for (const a of attention) console.log(`  ${a.stamp.padEnd(22)} ${String(a.all_median_us).padStart(7)} ${String(a.last_block_median_us).padStart(7)}  (${a.samples} samples)`);
if (jsonOut) fs.writeFileSync(jsonOut, JSON.stringify({ meta: { bench: 'cuda-megakernel-phases', pos: pos0, steps, kernel: dec.name }, summary, phases: rowsOut, attention }, null, 2));
runner.dispose();
cache.dispose();
