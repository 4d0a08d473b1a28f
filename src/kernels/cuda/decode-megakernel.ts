/**
 * cuda's whole-step decoder (ops/library/whole-step.ts): a dense bfloat16 decoder's batch-1
 * decode step as one persistent kernel (codegen/decode-megakernel.ts). This module checks that a
 * model fits the kernel (dtypes, layouts, sizes), owns its device buffers (scratch rows, the
 * attention partials, the barrier words, the per-layer pointer table and the static logits) and
 * launches it. One launch per step, so it needs no CUDA graph: the host cost is one launch, made
 * cooperative (the driver starts every block at once or refuses) since the blocks wait for each other.
 */
import { registerWholeStepDecoder, type DenseDecoderSpec, type WholeStepDecoder, type WholeStepInputs } from '../../ops/library/whole-step.js';
import { deviceCheckCode, deviceErrorArgs } from '../../runtime/cuda/device-errors.js';
import { kernelFromSource } from '../../runtime/cuda/kernel-cache.js';
import { CudaError } from '../../runtime/cuda/driver.js';
import { launch } from '../../runtime/cuda/launch.js';
import { deviceInfo } from '../../runtime/cuda/properties.js';
import { CPU } from '../../runtime/device.js';
import type { DType } from '../../tensor/dtype.js';
import { fmtShape, isContiguousStrides } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import { uploadFromHost } from '../../tensor/transfer.js';
import { decodeMegakernelSource, megakernelBarriers, megakernelPrefetchTokens, megakernelPartFloats, megakernelPhases, megakernelSharedBytes, megakernelStampNames, megakernelSyncWords, megakernelUnsupported, MK_LAYER_PTRS, MK_THREADS, type DecodeMegakernelDims, type DecodeMegakernelVariant } from './codegen/decode-megakernel.js';
import { getOption, optionSource, type OptionName, type OptionValue } from '../../runtime/config.js';
import { ptrOf, streamOf } from './device.js';

const OP = 'decode megakernel';

/** Counts launches (tests check the path really ran). */
export const megakernelStats = { launches: 0 };

/** Why `t` cannot be read by the kernel as a dense bfloat16 array of `shape` on `spec`'s device, or null. */
function badTensor(spec: DenseDecoderSpec, name: string, t: Tensor, shape: readonly number[], dtype: DType = 'bfloat16'): string | null {
  if (t.dtype !== dtype) return `${name} is ${t.dtype} (${dtype} needed)`;
  if (!t.device.equals(spec.embed.device)) return `${name} is on ${t.device.toString()}, not ${spec.embed.device.toString()}`;
  if (t.ndim !== shape.length || t.shape.some((s, i) => s !== shape[i])) return `${name} is ${fmtShape(t.shape)} (${fmtShape(shape)} expected)`;
  if (!isContiguousStrides(t.shape, t.strides)) return `${name} is not contiguous`;
  if (ptrOf(t) % 16 !== 0) return `${name} does not start on a 16-byte boundary`;
  return null;
}

/** The kernel's sizes for the spec, or why it does not fit. */
function dimsFor(spec: DenseDecoderSpec): DecodeMegakernelDims | string {
  const { hidden: H, heads, kvHeads, headDim: D, intermediate: I, vocab } = spec;
  const L = spec.layers.length;
  const k0 = spec.keys[0];
  if (k0 === undefined || spec.keys.length !== L || spec.values.length !== L) return `the cache has ${spec.keys.length} key tensors for ${L} layers`;
  if (k0.ndim !== 4) return `cache tensors are ${fmtShape(k0.shape)} ([numBlocks, blockSize, kvHeads, headDim] expected)`;
  const [numBlocks, blockSize] = [k0.shape[0]!, k0.shape[1]!];
  const checks: (string | null)[] = [
    badTensor(spec, 'embed', spec.embed, [vocab, H]),
    badTensor(spec, 'finalNorm', spec.finalNorm, [H]),
    badTensor(spec, 'lmHead', spec.lmHead, [vocab, H]),
  ];
  const maxPos = spec.cos.shape[0] ?? 0;
  checks.push(badTensor(spec, 'cos', spec.cos, [maxPos, D]), badTensor(spec, 'sin', spec.sin, [maxPos, D]));
  spec.layers.forEach((w, i) => {
    const p = `layer ${i} `;
    checks.push(
      badTensor(spec, `${p}inputNorm`, w.inputNorm, [H]),
      badTensor(spec, `${p}q`, w.q, [heads * D, H]),
      badTensor(spec, `${p}k`, w.k, [kvHeads * D, H]),
      badTensor(spec, `${p}v`, w.v, [kvHeads * D, H]),
      badTensor(spec, `${p}qNorm`, w.qNorm, [D]),
      badTensor(spec, `${p}kNorm`, w.kNorm, [D]),
      badTensor(spec, `${p}o`, w.o, [H, heads * D]),
      badTensor(spec, `${p}postNorm`, w.postNorm, [H]),
      badTensor(spec, `${p}gate`, w.gate, [I, H]),
      badTensor(spec, `${p}up`, w.up, [I, H]),
      badTensor(spec, `${p}down`, w.down, [H, I]),
      badTensor(spec, `${p}keys`, spec.keys[i]!, [numBlocks, blockSize, kvHeads, D]),
      badTensor(spec, `${p}values`, spec.values[i]!, [numBlocks, blockSize, kvHeads, D]),
    );
  });
  const bad = checks.find((c) => c !== null);
  if (bad) return bad;
  if (numBlocks * blockSize * kvHeads * D >= 2 ** 31) return 'the cache holds 2^31 elements or more per layer';
  const dims: DecodeMegakernelDims = {
    hidden: H,
    heads,
    kvHeads,
    headDim: D,
    intermediate: I,
    layers: L,
    vocab,
    eps: spec.eps,
    blockSize,
    numBlocks,
    maxBlocks: spec.maxBlocks,
    // One block per SM (KILN_DECODE_MEGAKERNEL_GRID overrides it: tests of the launch's refusal).
    grid: getOption('KILN_DECODE_MEGAKERNEL_GRID') || deviceInfo(spec.embed.device.index).smCount,
  };
  return megakernelUnsupported(dims) ?? dims;
}

class CudaDecodeMegakernel implements WholeStepDecoder {
  readonly name: string;
  readonly maxBatch = 1;
  /** Contexts whose keys and values are all prefetched (megakernelPrefetchTokens); longer ones take the compiled step. */
  readonly maxContext: number;
  private readonly owned: Tensor[] = [];
  private readonly args: number[];
  private readonly argIndex: number;
  private readonly logits: Tensor;
  private readonly kernel;
  private readonly traceBuf: Tensor | null;
  private readonly dynamicShared: number;
  private readonly variant: DecodeMegakernelVariant;
  /** Launched cooperatively (KILN_DECODE_MEGAKERNEL_COOPERATIVE): every block resident, or an error. */
  private readonly cooperative = getOption('KILN_DECODE_MEGAKERNEL_COOPERATIVE');

  constructor(
    private readonly spec: DenseDecoderSpec,
    private readonly dims: DecodeMegakernelDims,
  ) {
    const device = spec.embed.device;
    const groups = getOption('KILN_DECODE_MEGAKERNEL_GROUPS');
    const pace = getOption('KILN_DECODE_MEGAKERNEL_PACE');
    const stream = getOption('KILN_DECODE_MEGAKERNEL_STREAM');
    // The early forms need the register stream ('ahead' holds its weights in the same shared
    // memory): under 'ahead' their defaults give way (set explicitly, the kernel refuses the mix
    // and says why).
    const early = <N extends OptionName>(name: N, off: OptionValue<N>): OptionValue<N> => (optionSource(name) === 'default' && stream !== 'next' ? off : getOption(name));
    const variant: DecodeMegakernelVariant = {
      loads: getOption('KILN_DECODE_MEGAKERNEL_LOADS'),
      trace: getOption('KILN_DECODE_MEGAKERNEL_TRACE'),
      stream,
      kvSlots: getOption('KILN_DECODE_MEGAKERNEL_KV_SLOTS'),
      kvLoad: early('KILN_DECODE_MEGAKERNEL_KV_LOAD', 'barrier'),
      constLoad: early('KILN_DECODE_MEGAKERNEL_CONST_LOAD', 'inline'),
      residLoad: early('KILN_DECODE_MEGAKERNEL_RESID_LOAD', 'end'),
      joinLoads: getOption('KILN_DECODE_MEGAKERNEL_JOIN_LOADS'),
      earlyAt: getOption('KILN_DECODE_MEGAKERNEL_EARLY_AT'),
      arrive: getOption('KILN_DECODE_MEGAKERNEL_ARRIVE'),
      poll: getOption('KILN_DECODE_MEGAKERNEL_POLL'),
      sync: getOption('KILN_DECODE_MEGAKERNEL_SYNC'),
      ...(groups > 0 ? { mlpGroups: groups } : {}),
      // Pacing applies to the register stream only ('ahead' loads into shared memory two phases early).
      ...(pace > 0 && stream === 'next' ? { pace } : {}),
    };
    this.variant = variant;
    this.maxContext = megakernelPrefetchTokens(dims);
    const { name, source, dynamicShared } = decodeMegakernelSource(dims, variant);
    this.dynamicShared = dynamicShared;
    const optin = deviceInfo(device.index).sharedMemPerBlockOptin;
    const shared = dynamicShared + megakernelSharedBytes(dims, variant);
    if (shared > optin) throw new Error(`${OP}: ${shared} bytes of shared memory exceed cuda:${device.index}'s ${optin} per block (KILN_DECODE_MEGAKERNEL_STREAM=next needs less)`);
    this.name = name;
    const { hidden: H, heads, kvHeads, headDim: D, intermediate: I, vocab } = dims;
    const alloc = (shape: number[], dtype: DType, zero = false): Tensor => {
      const t = Tensor.empty(shape, dtype, device, undefined, zero);
      this.owned.push(t);
      return t;
    };
    const upload = (values: readonly number[]): Tensor => {
      const host = Tensor.empty([values.length], 'int64', CPU);
      const words = new BigInt64Array(host.storage.cpuArrayBuffer(), 0, values.length);
      values.forEach((v, i) => (words[i] = BigInt(v)));
      const dev = alloc([values.length], 'int64');
      uploadFromHost(dev, host);
      host.dispose();
      return dev;
    };
    const table: number[] = [];
    spec.layers.forEach((w, i) => {
      const row = [w.inputNorm, w.q, w.k, w.v, w.qNorm, w.kNorm, w.o, w.postNorm, w.gate, w.up, w.down, spec.keys[i]!, spec.values[i]!].map(ptrOf);
      if (row.length !== MK_LAYER_PTRS) throw new Error(`${OP}: internal: ${row.length} pointers per layer`);
      table.push(...row);
    });
    const layers = upload(table);
    const h = alloc([H], 'bfloat16');
    const qkv = alloc([(heads + 2 * kvHeads) * D], 'bfloat16');
    const act = alloc([I], 'bfloat16');
    const part = alloc([megakernelPartFloats(dims, variant)], 'float32');
    // Barrier count, exit count (and under sync 'flow' the kv head and MLP group counters): zero at every launch (the kernel resets them).
    const sync = alloc([megakernelSyncWords(dims, variant)], 'int32', true);
    this.logits = alloc([1, vocab], 'bfloat16');
    const codes = upload([
      deviceCheckCode({ op: OP, what: "'inputIds' (token ids of the vocabulary)" }),
      deviceCheckCode({ op: OP, what: "the block table's entries (cache blocks)" }),
      deviceCheckCode({ op: OP, what: 'grid barriers (a block was not resident: the step was wrong; of the grid)' }),
    ]);
    this.traceBuf = variant.trace ? alloc([(megakernelBarriers(dims, variant) + 2) * dims.grid * 2 + dims.layers * dims.grid * megakernelStampNames(variant).length], 'int32', true) : null;
    const err = deviceErrorArgs(device.index);
    this.kernel = kernelFromSource(device.index, source, name, [
      'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr',
    ], [], dynamicShared);
    // Arguments 6..10 are the step's inputs, filled per run.
    this.argIndex = 6;
    this.args = [
      ptrOf(layers), ptrOf(spec.embed), ptrOf(spec.finalNorm), ptrOf(spec.lmHead), ptrOf(spec.cos), ptrOf(spec.sin),
      0, 0, 0, 0, 0,
      ptrOf(h), ptrOf(qkv), ptrOf(act), ptrOf(part), ptrOf(sync), ptrOf(this.logits),
      err.claim, err.report, ptrOf(codes), this.traceBuf ? ptrOf(this.traceBuf) : 0,
    ];
  }

  run(inputs: WholeStepInputs): Tensor | string {
    const { maxBlocks } = this.dims;
    const want: [keyof WholeStepInputs, number[], DType][] = [
      ['ids', [1], 'int64'],
      ['positions', [1], 'int64'],
      ['slots', [1], 'int64'],
      ['tables', [1, maxBlocks], 'int32'],
      ['lens', [1], 'int32'],
    ];
    want.forEach(([key, shape, dtype], i) => {
      const t = inputs[key];
      if (t.dtype !== dtype || t.ndim !== shape.length || t.shape.some((s, j) => s !== shape[j]) || !isContiguousStrides(t.shape, t.strides) || !t.device.equals(this.spec.embed.device)) {
        throw new Error(`${OP}: ${key} must be a contiguous ${dtype} ${fmtShape(shape)} on ${this.spec.embed.device.toString()}, got ${t.dtype} ${fmtShape(t.shape)} on ${t.device.toString()}`);
      }
      this.args[this.argIndex + i] = ptrOf(t);
    });
    try {
      launch(this.kernel, this.args, { grid: this.dims.grid, block: MK_THREADS, sharedBytes: this.dynamicShared, cooperative: this.cooperative }, streamOf(this.logits));
    } catch (e) {
      // 720 (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE): the driver cannot make all the blocks
      // resident now (another context or an MPS limit holds SMs). Nothing ran: the runner steps instead.
      if (e instanceof CudaError && e.code === 720) return `${this.dims.grid} blocks of ${MK_THREADS} threads cannot all be resident at once (${e.message})`;
      throw e;
    }
    megakernelStats.launches++;
    const out = this.logits;
    return new Tensor(out.storage, out.dtype, out.shape, out.strides, out.offset);
  }

  /**
   * The last launch's barrier stamps (KILN_DECODE_MEGAKERNEL_TRACE; waits for the device), in ns
   * from the earliest block start: arrive[k][b] and release[k][b] for row k = 0 (start), 1..barriers,
   * barriers + 1 (end); attention[layer][b]: block b's stamps in its attention phase (after
   * the q/k preparation, after the warps' token loop; a stamp the
   * block did not reach this launch is NaN); null without the trace.
   */
  readTrace(): { arrive: number[][]; release: number[][]; attention: number[][][]; phases: readonly string[]; stamps: readonly string[] } | null {
    if (this.traceBuf === null) return null;
    const raw = (this.traceBuf.toFlatArray() as number[]).map((v) => v >>> 0);
    const G = this.dims.grid;
    const rows = megakernelBarriers(this.dims, this.variant) + 2;
    const stamps = megakernelStampNames(this.variant);
    const nst = stamps.length;
    const t0 = Math.min(...raw.slice(0, 2 * G));
    // Differences modulo 2^32 (the stamps are the timer's low 32 bits; a launch lasts far less than 4 s).
    const rel = (v: number): number => (v - t0 + 2 ** 32) % 2 ** 32;
    const arrive: number[][] = [];
    const release: number[][] = [];
    for (let k = 0; k < rows; k++) {
      arrive.push(Array.from({ length: G }, (_, b) => rel(raw[(k * G + b) * 2]!)));
      release.push(Array.from({ length: G }, (_, b) => rel(raw[(k * G + b) * 2 + 1]!)));
    }
    const end = Math.max(...arrive[rows - 1]!);
    const base = rows * G * 2;
    const attention = Array.from({ length: this.dims.layers }, (_, l) =>
      Array.from({ length: G }, (_, b) =>
        Array.from({ length: nst }, (_, j) => {
          const v = rel(raw[base + (l * G + b) * nst + j]!);
          return v <= end ? v : NaN;
        }),
      ),
    );
    return { arrive, release, attention, phases: megakernelPhases(this.variant), stamps };
  }

  dispose(): void {
    for (const t of this.owned) t.dispose();
    this.owned.length = 0;
  }
}

// On by default (KILN_DECODE_MEGAKERNEL unset): batch-1 decode of Qwen3-0.6B bfloat16 ran 1,134 /
// 1,134 tok/s against the compiled step's 1,106 / 1,120 on an H200 and 1,044-1,048 against 977-996
// on an H100, and a cold start compiles one kernel instead of the batch-1 CUDA-graph step
// (bench/results/h200-s37-coop-2026-12-07.json, h100-s36-mk4/mk5-2026-12-07.json); its session-38
// default form 1,120 / 1,122 against 973 / 989 on an H100 (h100-s38-mk2-2026-12-07.json).
registerWholeStepDecoder(
  'cuda',
  (spec) => {
    const dims = dimsFor(spec);
    if (typeof dims === 'string') return `the cuda decode megakernel does not take this model: ${dims}`;
    return new CudaDecodeMegakernel(spec, dims);
  },
  { byDefault: true },
);
