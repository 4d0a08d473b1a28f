/**
 * The benchmark workloads of ARCHITECTURE.md ("Benchmark workloads"), as data plus builders.
 *
 * Every workload has three sizes: `full` (the GPU size, what PyTorch peers are measured on),
 * `cpu` (the default on the cpu device) and `tiny` (a few hundred elements; what the tests run, so
 * the benchmark can never silently stop working). `build()` creates the module(s) and the inputs
 * once, from a seed, in eval mode, and returns `run()`: the eager forward under `kiln.noGrad`.
 *
 * Weights and inputs are drawn in float32 on the cpu from a private Generator, then cast to the
 * dtype and moved to the device, so one seed gives the same model on every device and dtype.
 * The compiler will plug in through the same `BuiltWorkload` (it compiles `forward` / `run`).
 */
import * as kiln from '../index.js';
import type { DType, Tensor } from '../index.js';
import { Generator } from '../tensor/random.js';

const { nn } = kiln;

export type BenchSize = 'full' | 'cpu' | 'tiny';
export const BENCH_SIZES: readonly BenchSize[] = ['full', 'cpu', 'tiny'];

export interface BuildOptions {
  size: BenchSize;
  device?: string;
  dtype?: DType;
  /** Seed for weights and inputs (default 0). */
  seed?: number;
}

/** A workload with its modules and inputs built; `run()` is one eager forward. */
export interface BuiltWorkload {
  readonly name: string;
  readonly size: BenchSize;
  readonly device: string;
  readonly dtype: DType;
  /** The input tensors (already on the device, in the dtype; integer ids stay int64). */
  readonly inputs: readonly Tensor[];
  /** The module run by `forward`, or null for the pure-function workloads. */
  readonly module: kiln.nn.Module | null;
  /** The workload's forward as a function of its inputs (what a compiler would take). */
  readonly forward: (...inputs: Tensor[]) => Tensor;
  /** Expected output shape. */
  readonly outputShape: readonly number[];
  /** forward(...inputs) under kiln.noGrad. */
  run(): Tensor;
  /** Releases the module's parameters and the inputs. */
  dispose(): void;
}

export interface WorkloadSpec {
  readonly name: string;
  /** One line: what it computes at the full size. */
  readonly description: string;
  /** Shapes / hyper-parameters per size, for the report and the tests. */
  readonly sizes: Record<BenchSize, string>;
  /** Skipped on the cpu device (full and cpu sizes) unless `--include-slow`. */
  readonly slowOnCpu: boolean;
  build(options: BuildOptions): BuiltWorkload;
}

// ---------------------------------------------------------------------------------------------
// helpers

interface Ctx {
  size: BenchSize;
  device: string;
  dtype: DType;
  gen: Generator;
}

function ctxOf(options: BuildOptions): Ctx {
  return { size: options.size, device: options.device ?? 'cpu', dtype: options.dtype ?? 'float32', gen: new Generator(options.seed ?? 0) };
}

/** Standard-normal input drawn in float32 on the cpu, then cast and moved. */
function randnInput(c: Ctx, shape: readonly number[], memoryFormat: 'contiguous' | 'channelsLast' = 'contiguous'): Tensor {
  return kiln.noGrad(() => {
    let t = kiln.randn([...shape], { generator: c.gen });
    if (c.dtype !== 'float32') t = t.to(c.dtype);
    if (c.device !== 'cpu') t = t.to(c.device);
    if (memoryFormat === 'channelsLast') t = t.contiguous('channelsLast');
    return t;
  });
}

function place<M extends kiln.nn.Module>(c: Ctx, m: M): M {
  m.eval();
  if (c.dtype !== 'float32') m.to(c.dtype);
  if (c.device !== 'cpu') m.to(c.device);
  return m;
}

function built(
  c: Ctx,
  name: string,
  module: kiln.nn.Module | null,
  inputs: Tensor[],
  forward: (...inputs: Tensor[]) => Tensor,
  outputShape: readonly number[],
): BuiltWorkload {
  return {
    name,
    size: c.size,
    device: c.device,
    dtype: c.dtype,
    inputs,
    module,
    forward,
    outputShape,
    run: () => kiln.noGrad(() => forward(...inputs)),
    dispose: () => {
      for (const t of inputs) t.dispose();
      for (const t of moduleTensors(module)) t.dispose();
    },
  };
}

/** Every tensor held directly by the module or a submodule (parameters, buffers, other state). */
function moduleTensors(module: kiln.nn.Module | null): Set<Tensor> {
  const out = new Set<Tensor>();
  if (module) for (const m of module.modules()) for (const v of Object.values(m)) if (v instanceof kiln.Tensor) out.add(v);
  return out;
}

/**
 * Builds inside a kiln.scope, keeping the inputs and the module's tensors, so the initialisers'
 * temporaries are released at once instead of waiting for the garbage collector.
 */
function scopedBuild(spec: WorkloadSpec): WorkloadSpec {
  return {
    ...spec,
    build: (options) =>
      kiln.scope(() => {
        const w = spec.build(options);
        for (const t of w.inputs) kiln.keep(t);
        for (const t of moduleTensors(w.module)) kiln.keep(t);
        return w;
      }),
  };
}

// ---------------------------------------------------------------------------------------------
// elementwise

/** y = x*1.5+0.5; y = relu(y)*sigmoid(x); y = y + tanh(x*0.5); y = y - exp(-x*x)*0.1; return y*2-1 */
export function elementwiseForward(x: Tensor): Tensor {
  let y = kiln.add(kiln.mul(x, 1.5), 0.5);
  y = kiln.mul(kiln.relu(y), kiln.sigmoid(x));
  y = kiln.add(y, kiln.tanh(kiln.mul(x, 0.5)));
  y = kiln.sub(y, kiln.mul(kiln.exp(kiln.neg(kiln.mul(x, x))), 0.1));
  return kiln.sub(kiln.mul(y, 2), 1);
}

function elementwise(n: number): WorkloadSpec {
  const tiny = n >= 4096 ? 16 : 8;
  return {
    name: `elementwise-${n}`,
    description: `x [${n}, ${n}]; y = x*1.5+0.5; y = relu(y)*sigmoid(x); y = y + tanh(x*0.5); y = y - exp(-x*x)*0.1; y*2-1`,
    sizes: { full: `x [${n}, ${n}]`, cpu: `x [${n}, ${n}]`, tiny: `x [${tiny}, ${tiny}]` },
    slowOnCpu: false,
    build(options) {
      const c = ctxOf(options);
      const m = c.size === 'tiny' ? tiny : n;
      const x = randnInput(c, [m, m]);
      return built(c, this.name, null, [x], elementwiseForward, [m, m]);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// MLP

/** Linear(d, h) -> GELU(erf) -> Linear(h, d), with bias. */
export class Mlp extends nn.Module {
  fc1: kiln.nn.Linear;
  act: kiln.nn.GELU;
  fc2: kiln.nn.Linear;

  constructor(dim: number, hidden: number, generator?: Generator) {
    super();
    this.fc1 = new nn.Linear(dim, hidden, true, { generator });
    this.act = new nn.GELU('none');
    this.fc2 = new nn.Linear(hidden, dim, true, { generator });
  }

  forward(x: Tensor): Tensor {
    return this.fc2.forward(this.act.forward(this.fc1.forward(x)));
  }
}

function mlp(name: string, dims: Record<BenchSize, [rows: number, features: number]>): WorkloadSpec {
  const fmt = ([r, f]: [number, number]): string => `x [${r}, ${f}], Linear(${f}, ${f}) -> GELU -> Linear(${f}, ${f})`;
  return {
    name,
    description: `${fmt(dims.full)}, with bias`,
    sizes: { full: fmt(dims.full), cpu: fmt(dims.cpu), tiny: fmt(dims.tiny) },
    slowOnCpu: false,
    build(options) {
      const c = ctxOf(options);
      const [rows, f] = dims[c.size];
      const module = place(c, new Mlp(f, f, c.gen));
      const x = randnInput(c, [rows, f]);
      return built(c, name, module, [x], (t) => module.forward(t), [rows, f]);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// transformer block

/** Pre-LN block: x + proj(causalSdpa(qkv(ln1(x)))); then h + mlp(ln2(h)). */
export class TransformerBlock extends nn.Module {
  ln1: kiln.nn.LayerNorm;
  qkv: kiln.nn.Linear;
  proj: kiln.nn.Linear;
  ln2: kiln.nn.LayerNorm;
  mlp: Mlp;

  constructor(
    readonly dim: number,
    readonly heads: number,
    mlpHidden: number,
    generator?: Generator,
  ) {
    super();
    if (dim % heads !== 0) throw new Error(`TransformerBlock: dim ${dim} is not a multiple of heads ${heads}`);
    this.ln1 = new nn.LayerNorm(dim);
    this.qkv = new nn.Linear(dim, 3 * dim, true, { generator });
    this.proj = new nn.Linear(dim, dim, true, { generator });
    this.ln2 = new nn.LayerNorm(dim);
    this.mlp = new Mlp(dim, mlpHidden, generator);
  }

  forward(x: Tensor): Tensor {
    const [B, T, C] = x.shape as [number, number, number];
    const H = this.heads;
    const D = C / H;
    // [B, T, 3C] -> [B, T, 3, H, D] -> [3, B, H, T, D]
    const qkv = kiln.permute(kiln.view(this.qkv.forward(this.ln1.forward(x)), [B, T, 3, H, D]), [2, 0, 3, 1, 4]);
    const q = kiln.select(qkv, 0, 0);
    const k = kiln.select(qkv, 0, 1);
    const v = kiln.select(qkv, 0, 2);
    const o = kiln.scaledDotProductAttention(q, k, v, null, 0, true);
    const h = kiln.add(x, this.proj.forward(kiln.reshape(kiln.transpose(o, 1, 2), [B, T, C])));
    return kiln.add(h, this.mlp.forward(this.ln2.forward(h)));
  }
}

interface BlockDims {
  batch: number;
  seq: number;
  dim: number;
  heads: number;
  mlp: number;
}

function transformerBlock(dims: Record<BenchSize, BlockDims>): WorkloadSpec {
  const fmt = (d: BlockDims): string => `x [${d.batch}, ${d.seq}, ${d.dim}], ${d.heads} heads, MLP ${d.mlp}`;
  return {
    name: 'transformer-block',
    description: `${fmt(dims.full)}; pre-LN: LN -> QKV -> causal SDPA -> Linear + residual; LN -> MLP(GELU) + residual`,
    sizes: { full: fmt(dims.full), cpu: fmt(dims.cpu), tiny: fmt(dims.tiny) },
    slowOnCpu: false,
    build(options) {
      const c = ctxOf(options);
      const d = dims[c.size];
      const module = place(c, new TransformerBlock(d.dim, d.heads, d.mlp, c.gen));
      const x = randnInput(c, [d.batch, d.seq, d.dim]);
      return built(c, this.name, module, [x], (t) => module.forward(t), [d.batch, d.seq, d.dim]);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// conv stack

/** Conv2d(c, 64, 7, s2, p3) -> BN -> ReLU -> Conv2d(64, 64, 3, p1) -> BN -> ReLU. */
export class ConvStack extends nn.Module {
  conv1: kiln.nn.Conv2d;
  bn1: kiln.nn.BatchNorm2d;
  conv2: kiln.nn.Conv2d;
  bn2: kiln.nn.BatchNorm2d;

  constructor(inChannels: number, channels: number, generator?: Generator) {
    super();
    this.conv1 = new nn.Conv2d(inChannels, channels, 7, { stride: 2, padding: 3, generator });
    this.bn1 = new nn.BatchNorm2d(channels);
    this.conv2 = new nn.Conv2d(channels, channels, 3, { padding: 1, generator });
    this.bn2 = new nn.BatchNorm2d(channels);
    // Non-trivial eval statistics and affine parameters, so BatchNorm is not the identity.
    kiln.noGrad(() => {
      for (const bn of [this.bn1, this.bn2]) {
        bn.runningMean!.copy_(kiln.mul(kiln.randn([channels], { generator }), 0.1));
        bn.runningVar!.copy_(kiln.add(kiln.rand([channels], { generator }), 0.5));
        bn.weight!.copy_(kiln.add(kiln.rand([channels], { generator }), 0.5));
        bn.bias!.copy_(kiln.mul(kiln.randn([channels], { generator }), 0.1));
      }
    });
  }

  forward(x: Tensor): Tensor {
    const y = kiln.relu(this.bn1.forward(this.conv1.forward(x)));
    return kiln.relu(this.bn2.forward(this.conv2.forward(y)));
  }
}

function convStack(dims: Record<BenchSize, [n: number, c: number, h: number, w: number, channels: number]>): WorkloadSpec {
  const fmt = ([n, c, h, w, ch]: [number, number, number, number, number]): string => `x [${n}, ${c}, ${h}, ${w}] channels_last, ${ch} channels`;
  return {
    name: 'conv-stack',
    description: `${fmt(dims.full)}; Conv2d(3,64,7,s2,p3) -> BatchNorm(eval) -> ReLU -> Conv2d(64,64,3,p1) -> BatchNorm -> ReLU`,
    sizes: { full: fmt(dims.full), cpu: fmt(dims.cpu), tiny: fmt(dims.tiny) },
    slowOnCpu: false,
    build(options) {
      const c = ctxOf(options);
      const [n, cin, h, w, ch] = dims[c.size];
      const module = place(c, new ConvStack(cin, ch, c.gen));
      const x = randnInput(c, [n, cin, h, w], 'channelsLast');
      const ho = Math.floor((h + 6 - 7) / 2) + 1;
      const wo = Math.floor((w + 6 - 7) / 2) + 1;
      return built(c, this.name, module, [x], (t) => module.forward(t), [n, ch, ho, wo]);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Qwen3-0.6B forward

/** A 1-layer, small-vocabulary Qwen3 with the 0.6B model's structure (GQA 2:1, q/k norms, tied embeddings). */
export function tinyQwen3Config(): kiln.models.Qwen3Config {
  return kiln.models.QWEN3_0_6B.with({
    vocabSize: 96,
    hiddenSize: 32,
    intermediateSize: 64,
    numHiddenLayers: 1,
    numAttentionHeads: 4,
    numKeyValueHeads: 2,
    headDim: 8,
    maxPositionEmbeddings: 64,
  });
}

function qwen3(): WorkloadSpec {
  const seqLen: Record<BenchSize, number> = { full: 128, cpu: 16, tiny: 8 };
  return {
    name: 'qwen3-0.6b-forward',
    description: 'Qwen3-0.6B shapes (28 layers, hidden 1024, vocab 151936), seeded random weights, ids [1, 128], causal forward to logits',
    sizes: { full: 'Qwen3-0.6B, ids [1, 128]', cpu: 'Qwen3-0.6B, ids [1, 16]', tiny: '1 layer, hidden 32, vocab 96, ids [1, 8]' },
    slowOnCpu: true,
    build(options) {
      const c = ctxOf(options);
      const config = c.size === 'tiny' ? tinyQwen3Config() : kiln.models.QWEN3_0_6B;
      const model = kiln.models.Qwen3ForCausalLM.fromConfig(config, { seed: options.seed ?? 0, dtype: c.dtype, device: c.device });
      model.eval();
      const T = seqLen[c.size];
      const ids = kiln.noGrad(() => {
        const t = kiln.randint(0, config.vocabSize, [1, T], { dtype: 'int64', generator: c.gen });
        return c.device === 'cpu' ? t : t.to(c.device);
      });
      return built(c, this.name, model, [ids], (t) => model.forward(t), [1, T, config.vocabSize]);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// the list

export const WORKLOADS: readonly WorkloadSpec[] = [
  elementwise(4096),
  elementwise(1024),
  mlp('mlp-2048x4096', { full: [2048, 4096], cpu: [256, 1024], tiny: [8, 16] }),
  mlp('mlp-64x512', { full: [64, 512], cpu: [64, 512], tiny: [4, 8] }),
  transformerBlock({
    full: { batch: 8, seq: 512, dim: 1024, heads: 16, mlp: 4096 },
    cpu: { batch: 1, seq: 128, dim: 512, heads: 8, mlp: 2048 },
    tiny: { batch: 2, seq: 8, dim: 32, heads: 4, mlp: 64 },
  }),
  convStack({ full: [16, 3, 224, 224, 64], cpu: [2, 3, 64, 64, 64], tiny: [1, 3, 12, 12, 8] }),
  qwen3(),
].map(scopedBuild);

export const WORKLOAD_NAMES: readonly string[] = WORKLOADS.map((w) => w.name);

export function getWorkload(name: string): WorkloadSpec {
  const w = WORKLOADS.find((x) => x.name === name);
  if (!w) throw new Error(`bench: unknown workload '${name}' (known: ${WORKLOAD_NAMES.join(', ')})`);
  return w;
}
