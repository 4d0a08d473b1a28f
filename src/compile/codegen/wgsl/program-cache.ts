/**
 * Compiled webgpu programs on disk (namespace 'webgpu-programs'), so a second process neither
 * lowers, schedules, renders WGSL nor re-tunes. The key is the compiled-program key every target
 * uses (cache/program-key.ts: graph signature, guard key, mode, compiler code hash, LLM library
 * choices, configuration fingerprint, and the device's properties, which on webgpu name the
 * adapter, its features, limits and Dawn toggles, everything a WGSL source depends on).
 *
 * The entry is the lowered graph and schedule (object-graph.ts, with the codec the cpu program
 * cache uses), plus what the program learns while it runs (program.ts `seed()`): each WGSL source
 * it launched under its memo key, and each kernel's config decision. Since sources are rendered at
 * a kernel's first launch (they depend on which operands share a buffer), the entry is written
 * when the program is built and again after a run that learned something new. A rebuilt program
 * adopts the stored sources (kernels/webgpu/fused/run.ts `adoptFused`): their pipelines are created
 * asynchronously on the device thread, all at once, and no source is rendered again. WGSL pipelines
 * themselves cannot be stored (WebGPU has no pipeline binaries); sources are what is reused.
 *
 * Anything wrong with an entry (malformed, another graph's inputs) is a miss: it is deleted and
 * the program rebuilt and stored again.
 */
import { getDiskCache } from '../../../runtime/cache/disk-cache.js';
import type { BackendOptions, ProgramCacheStatus } from '../../backend.js';
import { decodeObjectGraph, encodeObjectGraph, NotSerializable } from '../../cache/object-graph.js';
import { PROGRAM_CODEC } from '../../cache/program-codec.js';
import { PROGRAM_FORMAT_VERSION, programCacheKey } from '../../cache/program-key.js';
import type { Graph, GraphInput } from '../../ir.js';
import type { Lowered } from '../../lower/lower.js';
import type { Schedule } from '../../lower/schedule.js';
import { log } from '../../log.js';
import { WgslProgram, type WgslProgramOptions, type WgslProgramSeed } from './program.js';

export const WEBGPU_PROGRAM_NAMESPACE = 'webgpu-programs';

interface WgslProgramRecord {
  format: number;
  inputs: ('arg' | 'lifted')[];
  /** { low, sched } through the object-graph codec. */
  program: unknown;
  seed: WgslProgramSeed;
}

/** The lowered graph and schedule as stored (throws NotSerializable for what cannot be). */
function encodeParts(low: Lowered, sched: Schedule): unknown {
  const encoded = encodeObjectGraph({ low, sched }, PROGRAM_CODEC);
  let tensors = 0;
  for (const s of encoded.slots) if ((s as { x?: [string] }).x?.[0] === 'lifted-tensor') tensors++;
  const lifted = low.graph.inputs.filter((i) => i.source.kind === 'lifted').length;
  if (tensors > lifted) throw new NotSerializable(`program cache: the program holds ${tensors - lifted} tensor(s) outside its lifted inputs`);
  return encoded;
}

function isSeed(v: unknown): v is WgslProgramSeed {
  const s = v as Partial<WgslProgramSeed> | null;
  return (
    typeof s === 'object' &&
    s !== null &&
    Array.isArray(s.sources) &&
    Array.isArray(s.decisions) &&
    s.sources.every((x) => typeof x?.memo === 'string' && typeof x.source === 'string' && typeof x.label === 'string') &&
    s.decisions.every((d) => typeof d?.key === 'string' && typeof d.config?.strategy === 'string' && Number.isInteger(d.config.workgroup))
  );
}

/** Rebuilds a program from its entry for `graph` (a fresh trace with the same key); throws when it does not fit. */
function rebuild(body: unknown, graph: Graph, options: WgslProgramOptions): { program: WgslProgram; parts: unknown } {
  const rec = body as Partial<WgslProgramRecord> | null;
  if (typeof rec !== 'object' || rec === null || rec.format !== PROGRAM_FORMAT_VERSION || !Array.isArray(rec.inputs) || !isSeed(rec.seed)) throw new Error('not a webgpu program record');
  if (rec.inputs.length !== graph.inputs.length || rec.inputs.some((k, i) => k !== graph.inputs[i]!.source.kind)) throw new Error('the stored program has different graph inputs');
  const { low, sched } = decodeObjectGraph(rec.program, PROGRAM_CODEC) as { low: Lowered; sched: Schedule };
  if (!low?.graph || !Array.isArray(low.nodes) || !(low.values instanceof Map) || !Array.isArray(sched?.steps) || !Array.isArray(sched.kernels)) throw new Error('malformed program');
  // The stored graph keeps its value ids (the sources' memo keys name them); lifted sources come from the fresh trace.
  const inputs: GraphInput[] = low.graph.inputs.map((inp, i) => ({ id: inp.id, source: graph.inputs[i]!.source }));
  return { program: new WgslProgram({ ...low, graph: { ...low.graph, inputs } }, sched, { ...options, seed: rec.seed }), parts: rec.program };
}

/**
 * `build(graph)` through the disk cache: a hit rebuilds the stored program with its seed; a miss
 * builds, stores, and stores again whenever the program learns a source or a decision.
 */
export function compileWgslWithCache(graph: Graph, options: BackendOptions, programOptions: WgslProgramOptions, build: () => WgslProgram): WgslProgram {
  const done = (p: WgslProgram, status: ProgramCacheStatus): WgslProgram => {
    p.diskCache = status;
    return p;
  };
  const ctx = options.cacheContext;
  if (!ctx) return done(build(), 'off');
  const devices = [...new Set([...graph.values.values()].map((v) => v.device.toString()))];
  const key = programCacheKey({ signature: ctx.signature, guardKey: ctx.guardKey, mode: options.mode, backend: 'kiln/webgpu', devices });
  if (key === null) return done(build(), 'off');
  const cache = getDiskCache();
  const body = cache.get(WEBGPU_PROGRAM_NAMESPACE, key);
  let program: WgslProgram | undefined;
  let parts: unknown;
  let status: ProgramCacheStatus = 'miss';
  if (body !== undefined) {
    try {
      ({ program, parts } = rebuild(body, graph, programOptions));
      status = 'hit';
    } catch (e) {
      log('recompiles', undefined, () => `webgpu program cache: discarding entry ${key.slice(0, 12)}: ${(e as Error).message}`);
      cache.delete(WEBGPU_PROGRAM_NAMESPACE, key);
    }
  }
  if (program === undefined) {
    program = build();
    try {
      parts = encodeParts(program.low, program.sched);
    } catch (e) {
      if (!(e instanceof NotSerializable)) throw e;
      log('recompiles', undefined, () => `webgpu program cache: not storing a program: ${e.message}`);
      return done(program, 'miss');
    }
  }
  const p = program;
  const store = (): void => {
    const rec: WgslProgramRecord = { format: PROGRAM_FORMAT_VERSION, inputs: graph.inputs.map((i) => i.source.kind), program: parts, seed: p.seed() };
    cache.put(WEBGPU_PROGRAM_NAMESPACE, key, rec);
  };
  if (status === 'miss') store();
  p.onLearn = store;
  return done(p, status);
}
