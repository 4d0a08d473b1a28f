/**
 * Which launch config a compiled webgpu kernel runs with, decided once per kernel and call shape
 * (program.ts keeps the decisions, its disk entry stores them):
 *
 * - a `pick` hook (tests: every candidate in turn) chooses directly;
 * - without tuning (every mode but 'max-autotune', or a single candidate) the default config;
 * - in 'max-autotune' every candidate of `fusedCandidates` (workgroup sizes; for reductions a row
 *   per workgroup or a row per invocation) is launched on the call's own buffers and timed with
 *   kiln.Event, which on webgpu is a pair of device timestamps (timestamp-query; Kiln's Dawn toggles
 *   turn off the quantisation NVIDIA has by default); the fastest wins, and the autotuner stores it
 *   on disk (namespace 'autotune', keyed by the candidates' sources, the call shape and the device).
 *
 * No tuning, the default config, and a line under KILN_LOG=tune saying why, where timing would be
 * meaningless or harmful: the device has no timestamp queries or KILN_WEBGPU_TIMESTAMPS=0 (host
 * timing of a round trip to the device thread measures the thread, not the kernel), the kernel
 * writes a buffer it also reads (running it again would not compute the same), or nothing to run.
 */
import { type FusedConfig, type FusedLaunch, type FusedOperand, fusedCandidates, launchFused, prepareFused } from '../../../kernels/webgpu/fused/run.js';
import type { FusedGroup } from '../../../kernels/webgpu/fused/group.js';
import { type FusedLayout, layoutRows } from '../../../kernels/webgpu/fused/layout.js';
import { webgpu } from '../../../kernels/webgpu/device.js';
import { createHash } from '../../../platform/index.js';
import { runtimeLog } from '../../../runtime/notes.js';
import { autotune } from '../../autotune/index.js';

/** Chooses a candidate (an index into `candidates`, clamped). */
export type ConfigPick = (kernel: { readonly name: string; readonly candidates: readonly FusedConfig[] }) => number;

export interface ConfigRequest {
  readonly name: string;
  readonly fused: FusedGroup;
  /** The group's memo key (groupKey). */
  readonly key: string;
  readonly operands: readonly FusedOperand[];
  readonly L: FusedLayout;
  /** Time the candidates (mode 'max-autotune'). */
  readonly tune: boolean;
  readonly pick?: ConfigPick;
}

export interface ConfigDecision {
  readonly config: FusedConfig;
  /** How it was decided: timed now, read from the autotuner's disk cache, or without timing. */
  readonly how: 'tuned' | 'tuneCacheHits' | 'defaulted';
}

const show = (c: FusedConfig): string => `${c.strategy}/${c.workgroup}`;
const shape = (L: FusedLayout): string => (L.kind === 'reduce' ? `${L.oshape.join('x') || '1'} rows of ${L.rshape.join('x')}` : L.oshape.join('x') || 'scalar');

export function decideConfig(r: ConfigRequest): ConfigDecision {
  const candidates = fusedCandidates(r.L, r.fused.outputs.length);
  const first = candidates[0]!;
  if (r.pick) {
    const i = Math.max(0, Math.min(candidates.length - 1, Math.trunc(r.pick({ name: r.name, candidates }))));
    return { config: candidates[i]!, how: 'defaulted' };
  }
  if (!r.tune || candidates.length < 2) return { config: first, how: 'defaulted' };
  const keep = (why: string): ConfigDecision => {
    runtimeLog('tune', () => `webgpu max-autotune: ${r.name} (${shape(r.L)}) keeps the default config ${show(first)}: ${why}`);
    return { config: first, how: 'defaulted' };
  };
  const acc = webgpu();
  if (!acc.deviceTimestamps) {
    return keep(acc.hasFeature('timestamp-query') ? 'device timestamps are off (KILN_WEBGPU_TIMESTAMPS=0)' : `the adapter has no timestamp-query (features: ${acc.bridge.adapter.features.join(', ') || 'none'})`);
  }
  if (layoutRows(r.L) === 0) return keep('nothing to run (no rows)');
  const launches: FusedLaunch[] = [];
  for (const c of candidates) {
    const l = prepareFused(r.fused, r.operands, r.L, r.key, r.name, c);
    if (typeof l !== 'string') launches.push(l);
  }
  if (launches.length === 0) return keep('no candidate can launch');
  if (launches.some((l) => l.writesInput)) return keep('it writes a buffer it reads (a timed rerun would change the data)');
  const sources = createHash('sha256').update(launches.map((l) => l.source).join('\n')).digest('hex').slice(0, 32);
  const res = autotune({
    key: `webgpu:${sources}:${r.L.kind}:${r.L.oshape.join('x')}/${r.L.kind === 'reduce' ? r.L.rshape.join('x') : ''}`,
    device: 'webgpu',
    candidates: launches.map((l) => ({ config: l.config, run: () => launchFused(l, r.L) })),
  });
  if (res.disabled) return keep('KILN_AUTOTUNE=0');
  runtimeLog('tune', () =>
    res.fromCache
      ? `webgpu max-autotune: ${r.name} (${shape(r.L)}) uses ${show(res.best)} (stored winner of ${launches.length} candidates)`
      : `webgpu max-autotune: ${r.name} (${shape(r.L)}) picked ${show(res.best)} of ${res.timings.map((t) => `${show(t.config)} ${t.error === undefined ? `${(t.ms * 1000).toFixed(1)} us` : `failed (${t.error})`}`).join(', ')} (device timestamps)`,
  );
  return { config: res.best, how: res.fromCache ? 'tuneCacheHits' : 'tuned' };
}
