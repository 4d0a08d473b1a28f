/**
 * Whole compiled programs on disk. A `KilnProgram` is its lowered graph, its schedule, and each
 * kernel's generated candidates with the chosen one: plain data once lifted tensors are set aside.
 * `serializeProgram` stores exactly that (identity-preserving, see cache/object-graph.ts);
 * `deserializeProgram` rebuilds the program for a freshly traced graph with the same signature,
 * taking the lifted tensors from the fresh graph and instantiating the stored kernel sources
 * directly, so a hit skips lowering, scheduling, code generation and the worker pool's validation
 * (the sources were validated before they were stored, and the entry's checksum guards them).
 *
 * `compileWithProgramCache` is the backend's entry point: look the key up, rebuild on a hit, else
 * compile and store. Any problem with an entry (malformed, mismatched graph, kernel that does not
 * instantiate) is a miss: the entry is deleted and the program rebuilt and stored again.
 */
import type { BackendOptions, ProgramCacheStatus } from '../../backend.js';
import { getDiskCache } from '../../../runtime/cache/disk-cache.js';
import { decodeObjectGraph, encodeObjectGraph, NotSerializable } from '../../cache/object-graph.js';
import { PROGRAM_CODEC as CODEC } from '../../cache/program-codec.js';
import { PROGRAM_FORMAT_VERSION, programCacheKey } from '../../cache/program-key.js';
import type { Graph, GraphInput } from '../../ir.js';
import type { Lowered } from '../../lower/lower.js';
import type { Schedule } from '../../lower/schedule.js';
import { log } from '../../log.js';
import { decodeMode } from '../../mode.js';
import type { KernelFn } from './compile.js';
import { wasmKernelFn } from '../wasm/runtime.js';
import { nativeKernelFn } from '../c/runtime.js';
import { cpuPath } from '../../../kernels/cpu/native/path.js';
import type { KernelCode } from './emit.js';
import { KilnProgram } from './program.js';

/** Disk-cache namespace of whole programs. */
export const PROGRAM_NAMESPACE = 'kiln-programs';

/** The stored body. */
interface ProgramRecord {
  format: number;
  /** Input count and kinds of the graph it was built from, checked against the fresh graph. */
  inputs: ('arg' | 'lifted')[];
  program: unknown;
}

interface ProgramParts {
  low: Lowered;
  sched: Schedule;
  codes: KernelCode[];
  chosen: number[];
}

/** The JSON body for a program; throws NotSerializable for programs holding values it cannot store. */
export function serializeProgram(p: KilnProgram): ProgramRecord {
  const choices = p.kernelChoices();
  const parts: ProgramParts = { low: p.low, sched: p.sched, codes: choices.map((c) => c.code), chosen: choices.map((c) => c.chosen) };
  const encoded = encodeObjectGraph(parts, CODEC);
  let tensors = 0;
  for (const s of encoded.slots) if ((s as { x?: [string] }).x?.[0] === 'lifted-tensor') tensors++;
  const lifted = p.low.graph.inputs.filter((i) => i.source.kind === 'lifted').length;
  // Lifted inputs are the only tensors a program may hold; one anywhere else would be stored as a placeholder.
  if (tensors > lifted) throw new NotSerializable(`program cache: the program holds ${tensors - lifted} tensor(s) outside its lifted inputs`);
  return { format: PROGRAM_FORMAT_VERSION, inputs: p.low.graph.inputs.map((i) => i.source.kind), program: encoded };
}

/**
 * Turns stored candidates back into kernels without the pool or the kernel caches: their sources
 * and Wasm modules were validated before the program was stored, and the program entry's checksum
 * vouches for them (one disk read per warm start).
 */
function instantiate(codes: readonly KernelCode[], chosen: readonly number[]): KernelFn[] {
  return codes.map((c, i) => {
    const cand = c.candidates[chosen[i]!];
    if (!cand || typeof cand.source !== 'string') throw new Error(`program cache: kernel ${i} has no candidate ${chosen[i]}`);
    const js = new Function(cand.source)() as KernelFn;
    // A native candidate stored by a process on the native path runs its JS kernel on another path.
    if (cand.native) return cpuPath() === 'native' ? nativeKernelFn(cand.native, js) : js;
    return cand.wasm ? wasmKernelFn(cand.wasm.bytes, cand.wasm.nOutputs, js) : js;
  });
}

/**
 * Rebuilds a program from its stored body for `graph` (a fresh trace with the same signature).
 * Throws when the body does not fit (the caller treats that as a corrupt entry).
 */
export function deserializeProgram(body: unknown, graph: Graph, options: Pick<BackendOptions, 'mode'>): KilnProgram {
  const rec = body as Partial<ProgramRecord> | null;
  if (typeof rec !== 'object' || rec === null || rec.format !== PROGRAM_FORMAT_VERSION || !Array.isArray(rec.inputs)) throw new Error('program cache: not a program record');
  if (rec.inputs.length !== graph.inputs.length || rec.inputs.some((k, i) => k !== graph.inputs[i]!.source.kind)) {
    throw new Error('program cache: stored program has different graph inputs');
  }
  const parts = decodeObjectGraph(rec.program, CODEC) as ProgramParts;
  const { low, sched, codes, chosen } = parts;
  if (!low?.graph || !Array.isArray(low.nodes) || !(low.values instanceof Map) || !Array.isArray(sched?.steps) || !Array.isArray(sched.kernels)) {
    throw new Error('program cache: malformed program');
  }
  if (!Array.isArray(codes) || !Array.isArray(chosen) || codes.length !== sched.kernels.length || codes.some((c, i) => c.group !== sched.kernels[i])) {
    throw new Error('program cache: kernels do not match the schedule');
  }
  // The stored graph keeps its own value ids (the program's id space); its lifted sources come from the fresh trace.
  const inputs: GraphInput[] = low.graph.inputs.map((inp, i) => ({ id: inp.id, source: graph.inputs[i]!.source }));
  const storedGraph: Graph = { ...low.graph, inputs };
  const rebuilt: Lowered = { ...low, graph: storedGraph };
  return new KilnProgram(rebuilt, sched, undefined, decodeMode(options.mode).tuneOnFirstRun, { codes, chosen, fns: instantiate(codes, chosen) });
}

/** Devices a graph touches (its values' devices). */
function graphDevices(graph: Graph): string[] {
  const out = new Set<string>();
  for (const v of graph.values.values()) out.add(v.device.toString());
  return [...out];
}

/**
 * Compiles through the on-disk program cache. `options.cacheContext` (the graph signature and
 * guard key, from kiln.compile) turns it on; without it, or for graphs whose key is not stable
 * across processes, this is `build(graph)`.
 */
export function compileWithProgramCache(graph: Graph, options: BackendOptions, backend: string, build: (g: Graph) => KilnProgram): KilnProgram {
  const done = (program: KilnProgram, status: ProgramCacheStatus): KilnProgram => {
    program.diskCache = status;
    return program;
  };
  const ctx = options.cacheContext;
  if (!ctx) return done(build(graph), 'off');
  // The CPU code path (native / wasm / js) decides which kernel candidates exist: part of the key.
  const key = programCacheKey({ signature: ctx.signature, guardKey: ctx.guardKey, mode: options.mode, backend: `${backend}/cpu-${cpuPath()}`, devices: graphDevices(graph) });
  if (key === null) return done(build(graph), 'off');
  const cache = getDiskCache();
  const body = cache.get(PROGRAM_NAMESPACE, key);
  if (body !== undefined) {
    try {
      return done(deserializeProgram(body, graph, options), 'hit');
    } catch (e) {
      // Verified bytes that still do not make a program (e.g. written by a build whose format differed).
      log('recompiles', undefined, () => `program cache: discarding entry ${key.slice(0, 12)}: ${(e as Error).message}`);
      cache.delete(PROGRAM_NAMESPACE, key);
    }
  }
  const program = build(graph);
  try {
    cache.put(PROGRAM_NAMESPACE, key, serializeProgram(program));
  } catch (e) {
    if (!(e instanceof NotSerializable)) throw e;
    log('recompiles', undefined, () => `program cache: not storing a program: ${e.message}`);
  }
  return done(program, 'miss');
}
