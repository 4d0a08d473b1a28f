/**
 * The cpu's whole-step decoder (ops/library/whole-step.ts): a dense float32 or bfloat16 decoder's
 * decode step of one to four sequences as one native call (decode-step-c.ts) on the native cpu path. This module
 * checks that a model fits (dtypes, layouts), builds the object, keeps the table of the weights'
 * and caches' addresses the C side reads, and turns bad inputs into errors that name them.
 *
 * Addresses: koffi passes an ArrayBuffer (or a view of one) as a pointer to its data for the
 * length of a call; the table keeps those addresses across calls. A cpu storage's ArrayBuffer has
 * its data outside V8's heap and never moves, and the decoder holds every tensor it addresses, so
 * the addresses stay valid while the storages live; each run checks that no storage was freed or
 * given another buffer (a freed one throws, a new buffer rebuilds the table).
 */
import { registerWholeStepDecoder, type DenseDecoderSpec, type PhaseTime, type WholeStepDecoder, type WholeStepInputs } from '../../../ops/library/whole-step.js';
import { getOption } from '../../../runtime/config.js';
import type { DType } from '../../../tensor/dtype.js';
import { fmtShape, isContiguousStrides } from '../../../tensor/layout.js';
import { keep } from '../../../tensor/scope.js';
import { Tensor } from '../../../tensor/tensor.js';
import { CPU } from '../../../runtime/device.js';
import { DECODE_STEP_C_SOURCE, DS_DIMS, DS_ERRORS, DS_GLOBAL_PTRS, DS_LAYER_PTRS, DS_MAX_ROWS, DS_PHASE_KINDS } from './decode-step-c.js';
import { gemvFlags } from './gemv.js';
import type { NativeFn } from './koffi.js';
import { cpuPath } from './path.js';
import { loadPoolObject } from './pool.js';
import { nativeThreads } from './threads.js';

const OP = 'cpu decode step';

/** Counts whole steps run, and those whose attention split the keys into ranges (tests check the paths ran). */
export const cpuDecodeStepStats = { steps: 0, splitSteps: 0 };

interface DecodeStepLib {
  create: NativeFn;
  free: NativeFn;
  step: NativeFn;
  addr: NativeFn;
}

let lib: DecodeStepLib | undefined;

function library(): DecodeStepLib {
  if (lib) return lib;
  const l = loadPoolObject('kiln_decode_step', DECODE_STEP_C_SOURCE);
  lib = {
    create: l.func('void *kiln_ds_new(int64_t *dims, double eps, float scale)'),
    free: l.func('void kiln_ds_free(void *ctx)'),
    step: l.func('int32_t kiln_ds_step(void *ctx, int64_t *table, int64_t B, void *ids, void *pos, void *slots, void *lens, void *tables, void *logits, int32_t nthreads, int32_t flags, int32_t max_split, int32_t vec_rows, int64_t *bad, int64_t *trace)'),
    addr: l.func('int64_t kiln_ds_addr(void *p)'),
  };
  return lib;
}

/** Why `t` cannot be read as a dense `dtype` array of `shape` on the cpu, or null. */
function badTensor(name: string, t: Tensor, shape: readonly number[], dtype: DType): string | null {
  if (t.dtype !== dtype) return `${name} is ${t.dtype} (${dtype}, the embedding's dtype, needed)`;
  if (t.device.type !== 'cpu') return `${name} is on ${t.device.toString()}, not the cpu`;
  if (t.ndim !== shape.length || t.shape.some((s, i) => s !== shape[i])) return `${name} is ${fmtShape(t.shape)} (${fmtShape(shape)} expected)`;
  if (!isContiguousStrides(t.shape, t.strides)) return `${name} is not contiguous`;
  return null;
}

/** The tensors the step reads, in address-table order, or why the spec does not fit. */
function tensorsFor(spec: DenseDecoderSpec): Tensor[] | string {
  const { hidden: H, heads, kvHeads, headDim: D, intermediate: I, vocab } = spec;
  const dtype = spec.embed.dtype;
  if (dtype !== 'float32' && dtype !== 'bfloat16') return `the weights are ${dtype} (float32 or bfloat16 needed)`;
  if (heads % kvHeads !== 0) return `${heads} heads are not a multiple of ${kvHeads} kv heads`;
  if (D % 2 !== 0) return `head dim ${D} is odd (the rotary needs pairs)`;
  const L = spec.layers.length;
  const k0 = spec.keys[0];
  if (k0 === undefined || spec.keys.length !== L || spec.values.length !== L) return `the cache has ${spec.keys.length} key tensors for ${L} layers`;
  if (k0.ndim !== 4) return `cache tensors are ${fmtShape(k0.shape)} ([numBlocks, blockSize, kvHeads, headDim] expected)`;
  const cacheShape = [k0.shape[0]!, k0.shape[1]!, kvHeads, D];
  const maxPos = spec.cos.shape[0] ?? 0;
  const out: Tensor[] = [];
  const checks: (string | null)[] = [];
  const add = (name: string, t: Tensor, shape: readonly number[]): void => {
    checks.push(badTensor(name, t, shape, dtype));
    out.push(t);
  };
  spec.layers.forEach((w, i) => {
    const p = `layer ${i} `;
    const shapes: Record<(typeof DS_LAYER_PTRS)[number], [Tensor, number[]]> = {
      inputNorm: [w.inputNorm, [H]],
      q: [w.q, [heads * D, H]],
      k: [w.k, [kvHeads * D, H]],
      v: [w.v, [kvHeads * D, H]],
      qNorm: [w.qNorm, [D]],
      kNorm: [w.kNorm, [D]],
      o: [w.o, [H, heads * D]],
      postNorm: [w.postNorm, [H]],
      gate: [w.gate, [I, H]],
      up: [w.up, [I, H]],
      down: [w.down, [H, I]],
      keys: [spec.keys[i]!, cacheShape],
      values: [spec.values[i]!, cacheShape],
    };
    for (const name of DS_LAYER_PTRS) add(`${p}${name}`, ...shapes[name]);
  });
  const globals: Record<(typeof DS_GLOBAL_PTRS)[number], [Tensor, number[]]> = {
    embed: [spec.embed, [vocab, H]],
    finalNorm: [spec.finalNorm, [H]],
    lmHead: [spec.lmHead, [vocab, H]],
    cos: [spec.cos, [maxPos, D]],
    sin: [spec.sin, [maxPos, D]],
  };
  for (const name of DS_GLOBAL_PTRS) add(name, ...globals[name]);
  return checks.find((c) => c !== null) ?? out;
}

/** A tensor's data as a view koffi passes as a pointer to its first element. */
function dataView(t: Tensor): Uint8Array {
  const size = t.dtype === 'bfloat16' ? 2 : 4;
  return new Uint8Array(t.storage.cpuArrayBuffer(), t.offset * size, t.numel() * size);
}

/** Frees a decoder's C state once it is collected without dispose(). */
const freeing = new FinalizationRegistry<unknown>((ctx) => library().free(ctx));

class CpuDecodeStep implements WholeStepDecoder {
  readonly name = 'kiln_ds_step';
  readonly maxBatch = DS_MAX_ROWS;
  private readonly lib = library();
  private ctx: unknown = null;
  private readonly table: BigInt64Array;
  /** Each tensor's ArrayBuffer when the table was filled (a new one means the table is stale). */
  private readonly buffers: ArrayBuffer[];
  /** Static logits per batch size [B, vocab] (valid until the next step of that size). */
  private readonly logits = new Map<number, Tensor>();
  private readonly bad = new BigInt64Array(2);
  private readonly blocksPerRow: number;
  /** KILN_CPU_DECODE_STEP_TRACE: the last step's phase times (see kiln_ds_step), or null. */
  private readonly trace: BigInt64Array | null;

  constructor(
    private readonly spec: DenseDecoderSpec,
    private readonly tensors: readonly Tensor[],
  ) {
    const k0 = spec.keys[0]!;
    const dims: Record<(typeof DS_DIMS)[number], number> = {
      hidden: spec.hidden,
      heads: spec.heads,
      kvHeads: spec.kvHeads,
      headDim: spec.headDim,
      intermediate: spec.intermediate,
      layers: spec.layers.length,
      vocab: spec.vocab,
      blockSize: k0.shape[1]!,
      numBlocks: k0.shape[0]!,
      maxBlocks: spec.maxBlocks,
      maxPositions: spec.cos.shape[0]!,
      bf16: spec.embed.dtype === 'bfloat16' ? 1 : 0,
    };
    this.blocksPerRow = spec.maxBlocks;
    this.trace = getOption('KILN_CPU_DECODE_STEP_TRACE') ? new BigInt64Array(1 + 4 * (spec.layers.length * 7 + 2)) : null;
    // The attention scale of the model's eager step (Qwen3Attention.scaling).
    const scale = 1 / Math.sqrt(spec.headDim);
    this.ctx = this.lib.create(BigInt64Array.from(DS_DIMS.map((d) => BigInt(dims[d]))), spec.eps, scale);
    if (this.ctx === null) throw new Error(`${OP}: out of memory for the step's scratch (hidden ${spec.hidden}, intermediate ${spec.intermediate})`);
    freeing.register(this, this.ctx, this);
    this.buffers = tensors.map((t) => t.storage.cpuArrayBuffer());
    this.table = new BigInt64Array(tensors.length);
    this.fillTable();
  }

  private fillTable(): void {
    this.tensors.forEach((t, i) => (this.table[i] = BigInt(this.lib.addr(dataView(t)) as number | bigint)));
  }

  /** Throws if a tensor the step reads was disposed; rebuilds the table if one has a new buffer. */
  private checkStorages(): void {
    let moved = false;
    this.tensors.forEach((t, i) => {
      if (t.isDisposed || t.storage.isFreed) throw new Error(`${OP}: a tensor the step reads (${this.tensorName(i)}) was disposed`);
      const buf = t.storage.cpuArrayBuffer();
      if (buf !== this.buffers[i]) {
        this.buffers[i] = buf;
        moved = true;
      }
    });
    if (moved) this.fillTable();
  }

  /** Table entry i's name: 'layer 3 down', 'lmHead'. */
  private tensorName(i: number): string {
    const perLayer = DS_LAYER_PTRS.length;
    const layerEntries = perLayer * this.spec.layers.length;
    return i < layerEntries ? `layer ${Math.floor(i / perLayer)} ${DS_LAYER_PTRS[i % perLayer]!}` : DS_GLOBAL_PTRS[i - layerEntries]!;
  }

  run(inputs: WholeStepInputs): Tensor {
    if (this.ctx === null) throw new Error(`${OP}: the decoder was disposed`);
    const B = inputs.ids.shape[0] ?? 0;
    if (inputs.ids.ndim !== 1 || B < 1 || B > DS_MAX_ROWS) throw new Error(`${OP}: ids must be [B] with 1 <= B <= ${DS_MAX_ROWS}, got ${fmtShape(inputs.ids.shape)}`);
    const want: [keyof WholeStepInputs, number[], DType][] = [
      ['ids', [B], 'int64'],
      ['positions', [B], 'int64'],
      ['slots', [B], 'int64'],
      ['tables', [B, this.blocksPerRow], 'int32'],
      ['lens', [B], 'int32'],
    ];
    const views: (BigInt64Array | Int32Array)[] = [];
    for (const [key, shape, dtype] of want) {
      const t = inputs[key];
      if (t.dtype !== dtype || t.ndim !== shape.length || t.shape.some((s, j) => s !== shape[j]) || !isContiguousStrides(t.shape, t.strides) || t.device.type !== 'cpu') {
        throw new Error(`${OP}: ${key} must be a contiguous ${dtype} ${fmtShape(shape)} on the cpu, got ${t.dtype} ${fmtShape(t.shape)} on ${t.device.toString()}`);
      }
      const buf = t.storage.cpuArrayBuffer();
      views.push(dtype === 'int64' ? new BigInt64Array(buf, t.offset * 8, t.numel()) : new Int32Array(buf, t.offset * 4, t.numel()));
    }
    this.checkStorages();
    let logits = this.logits.get(B);
    if (logits === undefined) {
      // Kept: a step runs inside the engine's tensor scope, which would dispose it at the scope's end.
      logits = keep(Tensor.empty([B, this.spec.vocab], this.spec.embed.dtype, CPU));
      this.logits.set(B, logits);
    }
    const threads = nativeThreads();
    const [ids, positions, slots, tables, lens] = views;
    const rc = this.lib.step(this.ctx, this.table, B, ids, positions, slots, lens, tables, dataView(logits), threads, gemvFlags(threads), getOption('KILN_CPU_PAGED_SPLIT') ? 64 : 1, getOption('KILN_CPU_PAGED_VEC') ? 1 : 0, this.bad, this.trace) as number;
    if (rc < 1) throw new Error(this.describe(rc, views));
    cpuDecodeStepStats.steps++;
    if (rc > 1) cpuDecodeStepStats.splitSteps++;
    return new Tensor(logits.storage, logits.dtype, logits.shape, logits.strides, logits.offset);
  }

  /** The last step's phases in order with the ns each opened and ended (KILN_CPU_DECODE_STEP_TRACE), or null. */
  readPhaseTimes(): PhaseTime[] | null {
    const t = this.trace;
    if (t === null || t[0] === 0n) return null;
    const n = Number(t[0]);
    const start = t[3]!;
    return Array.from({ length: n }, (_, p) => ({
      kind: DS_PHASE_KINDS[Number(t[1 + 4 * p])] ?? 'unknown',
      layer: Number(t[2 + 4 * p]),
      openNs: Number(t[3 + 4 * p]! - start),
      endNs: Number(t[4 + 4 * p]! - start),
    }));
  }

  private describe(rc: number, views: readonly (BigInt64Array | Int32Array)[]): string {
    const k0 = this.spec.keys[0]!;
    const [numBlocks, blockSize] = [k0.shape[0]!, k0.shape[1]!];
    const b = Number(this.bad[0]);
    const at = (i: number): string => String(views[i]![b]);
    switch (rc) {
      case DS_ERRORS.oom:
        return `${OP}: out of memory for attention's scratch`;
      case DS_ERRORS.id:
        return `${OP}: inputIds[${b}] is ${at(0)}, outside the vocabulary [0, ${this.spec.vocab})`;
      case DS_ERRORS.position:
        return `${OP}: positions[${b}] is ${at(1)}, outside the rotary table's [0, ${this.spec.cos.shape[0]!})`;
      case DS_ERRORS.slot:
        return `${OP}: slotMapping[${b}] is ${at(2)}, outside the cache's slots [0, ${numBlocks * blockSize})`;
      case DS_ERRORS.length:
        return `${OP}: contextLens[${b}] is ${at(4)}, outside [0, ${this.blocksPerRow * blockSize}] (${this.blocksPerRow} blocks of ${blockSize})`;
      case DS_ERRORS.table:
        return `${OP}: blockTables[${b}, ${Number(this.bad[1])}] is outside the cache's blocks [0, ${numBlocks})`;
      default:
        return `${OP}: internal error ${rc}`;
    }
  }

  dispose(): void {
    if (this.ctx === null) return;
    freeing.unregister(this);
    this.lib.free(this.ctx);
    this.ctx = null;
    for (const t of this.logits.values()) t.dispose();
    this.logits.clear();
  }
}

registerWholeStepDecoder(
  'cpu',
  (spec) => {
    if (cpuPath() !== 'native') return `the cpu decode step needs the native cpu path (this process runs the ${cpuPath()} path)`;
    const tensors = tensorsFor(spec);
    if (typeof tensors === 'string') return `the cpu decode step does not take this model: ${tensors}`;
    return new CpuDecodeStep(spec, tensors);
  },
  // On by default: on the 2-core VM, alternating in one process, bfloat16 Qwen3-0.6B steps took
  // 59.8 -> 45.8 ms and float32 115.8 -> 94.8 ms (bench/results/cpu-decode-bound-qwen3-0.6b-2026-12-05-s24-*.json).
  { byDefault: true },
);
