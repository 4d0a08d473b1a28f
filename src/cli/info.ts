/**
 * `kiln info`: what accelerators this machine has, their properties, every configuration option
 * (runtime/config.ts: value, default, where the value comes from, doc), and an eager demo on the
 * best device.
 */
import * as kiln from '../index.js';
import { cpuPathInfo, hugePagesAvailable, nativeThreads, type CpuPathInfo } from '../kernels/cpu/native/index.js';
import { wasmSgemmSummary, wasmThreads } from '../kernels/cpu/wasm-sgemm-run.js';
import { describeOptions, formatOptionValue, getOption, type OptionInfo } from '../runtime/config.js';

export interface InfoOptions {
  json: boolean;
  device?: string;
}

function pickDevice(requested?: string): string {
  if (requested) return requested;
  const available = kiln.probeAccelerators().filter((r) => r.available && r.type !== 'cpu');
  // Fall back to cpu when no GPU accelerator is usable, so the command works everywhere.
  return available.length > 0 ? `${available[0]!.type}:0` : 'cpu';
}

interface DemoResult {
  device: string;
  description: string;
  output: string;
  ms: number;
}

function demo(device: string): DemoResult {
  kiln.manualSeed(0);
  const x = kiln.randn([64, 128], { device });
  const w = kiln.randn([256, 128], { device });
  const b = kiln.zeros([256], { device });
  const run = () => kiln.topk(kiln.select(kiln.softmax(kiln.gelu(kiln.linear(x, w, b)), -1), 0, 0), 3);
  // One untimed call first: the first call of each kernel pays for JIT and Wasm compilation.
  run();
  const start = new kiln.Event(device);
  const end = new kiln.Event(device);
  start.record();
  // A small MLP head: softmax(gelu(x W^T + b)) over 256 classes, then the top-3 classes of row 0.
  const probs = kiln.softmax(kiln.gelu(kiln.linear(x, w, b)), -1);
  const top = kiln.topk(kiln.select(probs, 0, 0), 3);
  end.record();
  end.synchronize();
  const out = `top-3 probabilities ${top.values.toString()}\nat classes ${top.indices.toString()}\nrow sums ${kiln.sum(probs, -1).slice(0, 0, 4).toString()}`;
  return { device, description: 'softmax(gelu(linear(x [64, 128], W [256, 128], b))), topk of row 0', output: out, ms: start.elapsedTime(end) };
}

/** The CPU code path (native / wasm / js) and why; an unusable forced path is reported, not thrown. */
function cpuCodePath(): { path: string; forced: boolean; reason: string; threads?: number; compiler?: string; flags?: readonly string[] } {
  let info: CpuPathInfo;
  try {
    info = cpuPathInfo();
  } catch (e) {
    return { path: 'unavailable', forced: true, reason: (e as Error).message };
  }
  const t = info.toolchain;
  const wasm = info.path === 'wasm' ? { threads: wasmThreads(), reason: `${info.reason}; ${wasmSgemmSummary()}` } : {};
  return { path: info.path, forced: info.forced, reason: info.reason, ...(info.path === 'native' ? { threads: nativeThreads() } : {}), ...wasm, ...(t ? { compiler: t.compiler, flags: t.flags } : {}) };
}

/** An option for --json: values JSON cannot hold (unset, Infinity) as text. */
function optionJson(o: OptionInfo): Record<string, unknown> {
  const v = (x: unknown): unknown => (x === undefined || (typeof x === 'number' && !Number.isFinite(x)) ? formatOptionValue(x) : x);
  return { ...o, value: o.error !== undefined ? null : v(o.value), default: v(o.default) };
}

/** The options table: name, value, default, source, doc (`*`: part of the compile cache key). */
export function formatOptions(options: readonly OptionInfo[]): string {
  const rows = options.map((o) => [
    `${o.codegen ? '*' : ' '} ${o.name}`,
    o.error !== undefined ? 'INVALID' : formatOptionValue(o.value),
    formatOptionValue(o.default),
    o.source,
    o.error ?? `${o.doc}${o.setter ? ` [${o.setter}]` : ''}`,
  ]);
  const header = ['  option', 'value', 'default', 'source', 'doc'];
  const widths = header.slice(0, 4).map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: readonly string[]): string => r.map((c, i) => (i < 4 ? c.padEnd(widths[i]!) : c)).join('  ');
  return [line(header), ...rows.map(line)].map((l) => `  ${l}`).join('\n');
}

export function runInfo(options: InfoOptions): number {
  const probes = kiln.probeAccelerators();
  const cpuCode = cpuCodePath();
  // Where Qwen3 weights of 2 MiB or more live on the cpu (KILN_CPU_HUGE_PAGES; issue #17).
  const huge = getOption('KILN_CPU_HUGE_PAGES') ? hugePagesAvailable() : 'KILN_CPU_HUGE_PAGES=0';
  const cpuWeights = { hugePages: huge === true, reason: huge === true ? 'transparent huge pages (2 MiB-aligned mappings, MADV_HUGEPAGE)' : `ArrayBuffers: ${huge}` };
  const accelerators = probes.map((p) => {
    if (!p.available) return { ...p, devices: [] as unknown[] };
    const acc = kiln.getAccelerator(p.type);
    const devices = Array.from({ length: acc.deviceCount() }, (_, i) => ({
      device: p.type === 'cpu' ? 'cpu' : `${p.type}:${i}`,
      properties: acc.properties(i),
      memory: kiln.memoryStats(p.type === 'cpu' ? 'cpu' : `${p.type}:${i}`),
    }));
    return { ...p, devices };
  });
  const config = describeOptions();
  const device = pickDevice(options.device);
  const d = demo(device);
  if (options.json) {
    console.log(JSON.stringify({ version: kiln.version, accelerators, cpuCodePath: cpuCode, cpuWeights, options: config.map(optionJson), demo: d }, null, 2));
    return 0;
  }
  console.log(`kiln ${kiln.version} (node ${process.version}, ${process.platform}-${process.arch})\n`);
  console.log('Accelerators:');
  for (const a of accelerators) {
    console.log(`  ${a.type.padEnd(7)} ${a.available ? 'available' : 'not available'}: ${a.reason}`);
    for (const dev of a.devices as { device: string; properties: Record<string, unknown> }[]) {
      console.log(`    ${dev.device}`);
      for (const [k, v] of Object.entries(dev.properties)) console.log(`      ${k.padEnd(18)} ${String(v)}`);
    }
  }
  console.log(`\nCPU code path: ${cpuCode.path}${cpuCode.threads ? ` (${cpuCode.threads} threads)` : ''}: ${cpuCode.reason}`);
  console.log('  (KILN_CPU_PATH=native|wasm|js forces one; KILN_NUM_THREADS sets native threads, else they follow the 1-minute load average)');
  console.log(`CPU model weights: ${cpuWeights.reason}`);
  console.log('\nOptions (KILN_* environment variables and runtime overrides; * = part of the compile cache key):');
  console.log(formatOptions(config));
  console.log(`\nEager demo on ${d.device}: ${d.description}`);
  console.log(d.output.replace(/^/gm, '  '));
  console.log(`  (${d.ms.toFixed(3)} ms warm, timed with kiln.Event)`);
  return 0;
}
