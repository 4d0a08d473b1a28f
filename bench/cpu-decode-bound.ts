/**
 * cpu decode at batch 1 against the memory-bandwidth bound (issue #17), float32 and bfloat16
 * weights side by side with the bandwidth probe in one process, so the shared machine's load hits
 * every number alike. Seeded random weights of a Qwen3 config, one engine per dtype (eager decode
 * path), each decoding one long request. Rounds of: the read-bandwidth probe (bandwidth-lib.ts,
 * best of 1 thread and all cores), then `steps` decode steps per variant (dtype x thread setting),
 * the variants' order rotating per round. Per variant:
 *   step_median_ms   the median decode step (engine.step(): forward, sampling, the host read);
 *   tok_s            1000 / step_median_ms;
 *   bound_tok_s      the median probed bandwidth / the weight bytes one token reads (every
 *                    parameter once; the tied LM head is the embedding, read whole for the logits);
 *   fraction         tok_s / bound_tok_s.
 * --threads auto,2 adds an A/B of thread settings ('auto': KILN_NUM_THREADS / the adaptive default);
 * --vary NAME=v1,v2 a variant per value of a number option (KILN_CPU_GEMV_ITEM_KIB=64,16).
 * --ab NAME runs every variant twice, with the boolean option NAME (src/runtime/config.ts) off and
 * on, in the same rotation (e.g. --ab KILN_CPU_GEMV_STREAM: the GEMV's weight order before / after);
 * --ab NAME1,NAME2 switches several options together (all off vs all on).
 *
 *   node dist/bench/cpu-decode-bound.js [--dtypes float32,bfloat16] [--rounds 6] [--steps 8] [--threads auto] [--ab OPTION[,OPTION]] [--json out.json]
 */
import { execSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import * as kiln from '../src/index.js';
import { setNativeThreads, sharedPoolStats } from '../src/kernels/cpu/native/index.js';
import { itemSize } from '../src/tensor/dtype.js';
import { dramProbeMiB, lastLevelCacheBytes, readBandwidth } from './bandwidth-lib.js';
import { OPTIONS, setOption, type OptionName } from '../src/runtime/config.js';
import type { DType } from '../src/index.js';

const { values: a } = parseArgs({
  options: {
    config: { type: 'string', default: 'qwen3-0.6b' },
    dtypes: { type: 'string', default: 'float32,bfloat16' },
    rounds: { type: 'string', default: '6' },
    steps: { type: 'string', default: '8' },
    prompt: { type: 'string', default: '16' },
    threads: { type: 'string', default: 'auto' },
    ab: { type: 'string' },
    vary: { type: 'string' },
    'probe-mib': { type: 'string' },
    json: { type: 'string' },
  },
});
const config = a.config === 'tiny' ? kiln.models.QWEN3_TINY : kiln.models.QWEN3_0_6B;
const rounds = Number(a.rounds);
const steps = Number(a.steps);
const promptLen = Number(a.prompt);
// The bandwidth probe's buffer: larger than the last-level cache (bandwidth-lib.ts dramProbeMiB), or --probe-mib.
const probeMiB = a['probe-mib'] ? Number(a['probe-mib']) : dramProbeMiB();
const median = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;

interface Variant {
  dtype: DType;
  threads: number | undefined;
  /** --ab: the option's value for this variant (undefined without --ab). */
  ab: boolean | undefined;
  /** --vary: the varied option's value for this variant (undefined without --vary). */
  vary: string | undefined;
  engine: kiln.serve.Engine;
  bytes: number;
  ms: number[];
  /** Weight bytes the pool's workers prefetched during the timed steps (KILN_CPU_WEIGHT_PREFETCH_MB). */
  prefetched: number;
}

function weightBytesPerToken(model: kiln.models.Qwen3ForCausalLM): number {
  const seen = new Set<unknown>();
  let bytes = 0;
  for (const [name, p] of model.namedParameters()) {
    if (seen.has(p.storage)) continue;
    seen.add(p.storage);
    if (name.endsWith('embed_tokens.weight') && !config.tieWordEmbeddings) continue;
    bytes += p.numel() * itemSize(p.dtype);
  }
  return bytes;
}

const abName = a.ab;
const abNames = (a.ab?.split(',') ?? []) as OptionName[];
for (const n of abNames) if ((OPTIONS as Record<string, { type: string }>)[n]?.type !== 'boolean') throw new Error(`cpu-decode-bound: --ab needs boolean options of src/runtime/config.ts, got ${n}`);
/** Sets every --ab option to `v` (undefined: back to the environment / default). */
const setAb = (v: boolean | undefined): void => {
  for (const n of abNames) setOption(n, v as never);
};
const abValues: (boolean | undefined)[] = abName === undefined ? [undefined] : [false, true];
// --vary NAME=v1,v2: one variant per value of a number option (set for its steps, then unset).
const [varyName, varyList] = (a.vary?.split('=') ?? []) as [OptionName | undefined, string | undefined];
if (varyName !== undefined && !['number', 'integer'].includes((OPTIONS as Record<string, { type: string }>)[varyName]?.type ?? '')) throw new Error(`cpu-decode-bound: --vary needs a number option of src/runtime/config.ts, got ${varyName}`);
const varyValues: (string | undefined)[] = varyName === undefined ? [undefined] : (varyList ?? '').split(',');
const setVary = (v: string | undefined): void => {
  if (varyName !== undefined) setOption(varyName, (v === undefined ? undefined : Number(v)) as never);
};
const maxNew = rounds * steps * 4 + 16;
const variants: Variant[] = [];
for (const dtype of a.dtypes.split(',') as DType[]) {
  // One model per dtype, or per --ab value (an option such as KILN_CPU_HUGE_PAGES acts when the
  // model is built).
  const models = new Map<boolean | undefined, kiln.models.Qwen3ForCausalLM>();
  for (const ab of abValues) {
    if (abName !== undefined) setAb(ab);
    models.set(ab, kiln.models.Qwen3ForCausalLM.fromConfig(config, { seed: 0, dtype, device: 'cpu' }).eval());
  }
  for (const t of a.threads.split(',')) for (const ab of abValues) for (const vary of varyValues) {
    if (abName !== undefined) setAb(ab);
    setVary(vary);
    const model = models.get(ab)!;
    const bytes = weightBytesPerToken(model);
    const engine = new kiln.serve.Engine(model, { numBlocks: Math.ceil((promptLen + maxNew + 2) / 16) + 4, maxNumSeqs: 1, decode: 'eager', prefixCaching: false });
    const prompt = Array.from({ length: promptLen }, (_, i) => (i * 7919 + 13) % config.vocabSize);
    engine.addRequest(prompt, { maxNewTokens: maxNew, ignoreEos: true });
    engine.step(); // prefill
    engine.step(); // first decode step: native builds
    variants.push({ dtype, threads: t === 'auto' ? undefined : Number(t), ab, vary, engine, bytes, ms: [], prefetched: 0 });
  }
}

const bw: number[] = [];
const bwThreads: number[] = [];
/** Per round: whether the probe's best read was of the huge-page buffer (bandwidth-lib.ts). */
const bwHuge: boolean[] = [];
/** The old 256 MiB probe beside it (when the probe is larger): what a cache-sized buffer reads. */
const bw256: number[] = [];
const load0 = os.loadavg();
const loads: number[] = [];
for (let r = 0; r < rounds; r++) {
  const probe = readBandwidth(probeMiB, 3);
  if (probe) {
    bw.push(probe.gbS);
    bwThreads.push(probe.threads);
    bwHuge.push(probe.hugePages);
  }
  if (probeMiB !== 256) {
    const small = readBandwidth(256, 3);
    if (small) bw256.push(small.gbS);
  }
  loads.push(os.loadavg()[0]!);
  for (let i = 0; i < variants.length; i++) {
    const v = variants[(i + r) % variants.length]!;
    setNativeThreads(v.threads);
    if (abName !== undefined) setAb(v.ab);
    setVary(v.vary);
    const pf0 = sharedPoolStats()?.prefetchedBytes ?? 0;
    for (let s = 0; s < steps; s++) {
      const t0 = performance.now();
      v.engine.step();
      v.ms.push(performance.now() - t0);
    }
    v.prefetched += (sharedPoolStats()?.prefetchedBytes ?? 0) - pf0;
  }
}
setNativeThreads(undefined);
if (abName !== undefined) setAb(undefined);
setVary(undefined);
const load1 = os.loadavg();
for (const v of variants) v.engine.dispose();

const gbS = bw.length ? median(bw) : null;
const results = variants.map((v) => {
  const stepMs = median(v.ms);
  const tokS = 1000 / stepMs;
  const bound = gbS === null ? null : (gbS * 1e9) / v.bytes;
  return {
    model: a.config, dtype: v.dtype, batch: 1, threads: v.threads ?? 'auto', ...(abName === undefined ? {} : { [abName]: v.ab }), ...(varyName === undefined ? {} : { [varyName]: Number(v.vary) }), decode_path: 'eager', steps: v.ms.length,
    step_median_ms: Number(stepMs.toFixed(2)), step_mean_ms: Number((v.ms.reduce((s, x) => s + x, 0) / v.ms.length).toFixed(2)),
    tok_s: Number(tokS.toFixed(2)), weight_bytes_per_token: v.bytes, prefetched_bytes_per_step: Math.round(v.prefetched / v.ms.length),
    bound_tok_s: bound === null ? null : Number(bound.toFixed(2)), fraction_of_bound: bound === null ? null : Number((tokS / bound).toFixed(3)),
  };
});
for (const [i, r] of results.entries()) console.log(`${r.dtype.padEnd(8)} threads ${String(r.threads).padEnd(4)}${abName === undefined ? '' : ` ${abName}=${variants[i]!.ab ? 1 : 0}`}${varyName === undefined ? '' : ` ${varyName}=${variants[i]!.vary}`} step ${String(r.step_median_ms).padStart(7)} ms  ${String(r.tok_s).padStart(6)} tok/s  bound ${String(r.bound_tok_s)} tok/s  ${r.fraction_of_bound === null ? '-' : (100 * r.fraction_of_bound).toFixed(1)}%${r.prefetched_bytes_per_step > 0 ? `  prefetched ${(r.prefetched_bytes_per_step / 2 ** 20).toFixed(0)} MiB a step` : ''}`);
console.log(`bandwidth median ${String(gbS)} GB/s (${probeMiB} MiB probe, last-level cache ${(lastLevelCacheBytes() / 2 ** 20).toFixed(0)} MiB; samples ${bw.join(' ')}${bw256.length ? `; 256 MiB probe: ${bw256.join(' ')}` : ''}); load ${load0.map((x) => x.toFixed(2)).join(' ')} -> ${load1.map((x) => x.toFixed(2)).join(' ')}`);

let commit = '';
try {
  commit = execSync('git rev-parse --short HEAD', { encoding: 'utf8' }).trim();
} catch {
  /* not a checkout */
}
const meta = {
  machine: os.hostname(), cpu: os.cpus()[0]?.model, cpus: os.cpus().length, date: new Date().toISOString(),
  command: `node dist/bench/cpu-decode-bound.js ${process.argv.slice(2).join(' ')}`, commit, node: process.version,
  loadavg_before: load0, loadavg_after: load1, loadavg_1m_per_round: loads, rounds, steps_per_round: steps,
};
if (a.json) fs.writeFileSync(a.json, JSON.stringify({ meta, probe_mib: probeMiB, last_level_cache_mib: lastLevelCacheBytes() / 2 ** 20, bandwidth_gb_s: gbS, bandwidth_samples_gb_s: bw, bandwidth_threads: bwThreads, bandwidth_huge_pages: bwHuge, bandwidth_256mib_samples_gb_s: bw256, results }, null, 2) + '\n');
