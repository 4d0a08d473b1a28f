/**
 * The decode megakernel's plan (issue #17): the model and launch sizes its source is specialised to
 * (DecodeMegakernelDims), the measurement variants (DecodeMegakernelVariant), and everything the
 * host derives from them without rendering the source: how each GEMV is split and held
 * (megakernelPlan), the attention splits, shared memory, scratch and sync sizes, the phases and
 * barriers of a launch, and why a model or variant is refused. decode-megakernel.ts renders the
 * CUDA C from the same functions, so the host's sizing and the kernel cannot disagree.
 */

/** Model and launch sizes the source is specialised to. */
export interface DecodeMegakernelDims {
  readonly hidden: number;
  readonly heads: number;
  readonly kvHeads: number;
  readonly headDim: number;
  readonly intermediate: number;
  readonly layers: number;
  readonly vocab: number;
  readonly eps: number;
  /** Cache tokens per block and cache blocks. */
  readonly blockSize: number;
  readonly numBlocks: number;
  /** Width of the block table row. */
  readonly maxBlocks: number;
  /** Blocks of the grid (one per SM). */
  readonly grid: number;
}

/** Source variants (measurement): how weights are loaded ahead of a barrier, and the phase trace. */
export interface DecodeMegakernelVariant {
  /**
   * 'asm' (default): the loads issued before a barrier are volatile PTX, which the compiler keeps
   * in program order before the barrier; 'ldg': plain __ldg, which it may sink to their use.
   */
  readonly loads: 'asm' | 'ldg';
  /** Each block stamps %globaltimer at every barrier's arrival and release (MkTrace). */
  readonly trace: boolean;
  /**
   * Weight streaming: 'next' loads each phase's weights into registers between the arrival at
   * and the wait on the barrier before it; 'ahead' two phases before it (the q/k/v and gate/up
   * weights into shared memory with cp.async, the o and down weights into registers).
   */
  readonly stream: 'next' | 'ahead';
  /**
   * Host C++ for the grid emulator (scripts/cuda-emu/grid-emu.h: a fiber per CUDA thread, every
   * block live, so the grid barriers work): no PTX, shared memory per emulated block.
   */
  readonly host?: boolean;
  /** Every GEMV split this many ways along K where its K allows it (tests: a small grid never picks a split). */
  readonly forceSplit?: number;
  /**
   * Where a warp keeps the cache slots of its prefetched tokens (fixed for the launch): 'registers'
   * (4 registers through the whole launch) or 'shared' (read back each layer). ptxas for
   * Qwen3-0.6B on sm_90: 104 bytes of spills a thread with registers (132 when they were 64-bit),
   * 24 with shared.
   */
  readonly kvSlots?: 'registers' | 'shared';
  /**
   * How a layer's phases wait for each other. 'grid' (five grid barriers a layer, as described
   * above). 'flow': three grid barriers a layer, where the data really is all-to-all (before the
   * o projection, before the MLP, after it); attention waits only for the blocks that wrote its
   * kv head's q/k/v rows (a counter per kv head), and the down projection is split along K over
   * `mlpGroups` groups of blocks: each group computes gate/up for its slice of the intermediate
   * row, waits for its own blocks only (a counter per group) and writes the down projection's
   * partial sums over that slice; the next layer adds the groups' partials in group order
   * (deterministic) where it reads the residual. Needs stream 'next'.
   */
  readonly sync?: 'grid' | 'flow';
  /** Groups of blocks of the 'flow' MLP (default: the most of 4, 3, 2, 1 that divide the intermediate size into multiples of 256). */
  readonly mlpGroups?: number;
  /**
   * Weight loads in flight per lane (stream 'next'; 0: off). Off, each phase's words are all
   * loaded between the barrier's arrival and wait (up to 96 KiB a block for Qwen3-0.6B's gate/up);
   * on, only the first `pace` are, and each later one is loaded `pace` words ahead of its use while
   * the GEMV runs. Measured (bench/cuda-sync-under-load.ts, H100): 4 loads in flight per lane of 15
   * warps (30 KiB per SM) already stream at the full 3.2 TB/s, and a grid barrier under them takes
   * 1.7 us against 1.0 idle, 5.5 under 60 KiB and 12.8 under 120 KiB.
   */
  readonly pace?: number;
  /**
   * When attention's prefetched keys and values (each warp's first UKV tokens, cache rows of earlier
   * steps: fixed for the launch) are loaded: 'barrier' (default) into registers between the arrival
   * at and the wait on the barrier before attention; 'early' at the start of the layer, with
   * cp.async into shared memory (32 KiB a block at head dim 128), so they land during the norm and
   * the q/k/v GEMV instead of being waited for after the barrier. Needs stream 'next'.
   */
  readonly kvLoad?: 'barrier' | 'early';
  /**
   * Where the small rows a phase reads from DRAM come from: 'inline' (default: loaded in the
   * phase's first round trip, with its activations from L2, so that round trip takes DRAM's
   * latency) or 'early' (copied with cp.async into shared memory a phase or more before their use:
   * the input norm's weights in the barrier window before the previous layer's down projection,
   * the post-attention norm's, the q/k norms' and the step's rotary rows at the start of the layer).
   * Needs stream 'next'.
   */
  readonly constLoad?: 'inline' | 'early';
  /**
   * When the o and down projections read the residual they add: 'end' (default: in the GEMV's
   * epilogue, an L2 round trip between the row's sum and the barrier's arrival) or 'early' (at the
   * phase's start, in the round trip of its first reads, kept in a register per round of the warp).
   */
  readonly residLoad?: 'end' | 'early';
  /**
   * How the loads of a thread's several outputs are ordered where each output takes an L2 round
   * trip: 'serial' (default: the attention fold's outputs, four a thread at Qwen3-0.6B's sizes,
   * one after another, and the value row's four elements each stored before the next is loaded,
   * so each output waits a round trip of its own) or 'joint' (every output's loads issued before
   * any is used: one round trip for the fold at up to 4 splits a head, one for the value row),
   * or 'hoist' (joint, and the fold's first chunk of loads issued before the splits' maxima and
   * sums are read: their round trips overlap, at the cost of 16 registers live across them).
   * The arithmetic and its order are the same, so the results are bit-identical.
   */
  readonly joinLoads?: 'serial' | 'joint' | 'hoist';
  /**
   * Where a layer issues its early copies (constLoad / kvLoad 'early'): 'start' (default: before
   * the input norm's loads) or 'norm' (after the norm's round trip, so it does not queue behind them).
   */
  readonly earlyAt?: 'start' | 'norm';
  /**
   * How a block arrives at a grid barrier: 'fence' (default: __threadfence, then a relaxed atomic
   * add) or 'release' (one red.release.gpu add: the release orders the block's writes, ordered
   * before it by __syncthreads, without a separate full fence), or 'flag' (an acq_rel atomic add;
   * the block whose add completes the count stores the barrier's number to a flag on its own
   * 128-byte line with a release store, and the others poll the flag, so the polls do not share
   * a line with the atomics; sync 'grid' only).
   */
  readonly arrive?: 'fence' | 'release' | 'flag';
  /**
   * How thread 0 polls a barrier's counter: 'acquire' (default: every poll an acquire load) or
   * 'relaxed' (relaxed loads until the count is reached, then one fence.acq_rel.gpu: the fence
   * pattern of the PTX memory model, which orders the block's later reads after the arrivals).
   */
  readonly poll?: 'acquire' | 'relaxed';
}

export const DEFAULT_VARIANT: DecodeMegakernelVariant = { loads: 'asm', trace: false, stream: 'next' };

/** How the source splits and holds each GEMV (from the sizes and the variant). */
export interface MegakernelPlan {
  /**
   * Warps per row (K split) of the q/k/v, o, gate/up and down GEMVs; under sync 'flow' gate/up and
   * down are the group's (its slice of the intermediate rows; the down rows over that slice).
   */
  readonly ks: { readonly qkv: number; readonly o: number; readonly gu: number; readonly down: number };
  /** Groups of blocks of the 'flow' MLP (1 under 'grid'). */
  readonly groups: number;
  /** 16-byte words a lane holds in registers and in shared memory. */
  readonly words: number;
  readonly smemWords: number;
  /** Most rounds of a split GEMV (rows of its staged partial sums). */
  readonly splitRounds: number;
}

/** Why the 'flow' MLP cannot have `n` groups of blocks on these sizes, or null. */
function groupsProblem(d: DecodeMegakernelDims, n: number): string | null {
  if (!Number.isInteger(n) || n < 1) return `${n} MLP groups (a positive integer is needed)`;
  if (d.intermediate % (n * 256) !== 0) return `${n} MLP groups over an intermediate size of ${d.intermediate} (each group's slice must be a multiple of 256)`;
  if (d.grid < n) return `${n} MLP groups on a grid of ${d.grid} blocks`;
  return null;
}

/** Groups of blocks of the 'flow' MLP: the variant's, else the most of 4, 3, 2 the sizes allow, else 1; 1 under 'grid'. */
export function megakernelGroups(d: DecodeMegakernelDims, v: DecodeMegakernelVariant = DEFAULT_VARIANT): number {
  if (v.sync !== 'flow') return 1;
  if (v.mlpGroups !== undefined) {
    const why = groupsProblem(d, v.mlpGroups);
    if (why !== null) throw new Error(`decode megakernel: ${why}`);
    return v.mlpGroups;
  }
  return [4, 3, 2].find((n) => groupsProblem(d, n) === null) ?? 1;
}

export function megakernelPlan(d: DecodeMegakernelDims, v: DecodeMegakernelVariant = DEFAULT_VARIANT): MegakernelPlan {
  const tw = d.grid * MK_WARPS;
  const qrows = d.heads * d.headDim;
  const kvrows = d.kvHeads * d.headDim;
  const groups = megakernelGroups(d, v);
  // Under 'flow' the MLP's GEMVs run over the smallest group's warps, on its slice of the intermediate row.
  const mlpWarps = v.sync === 'flow' ? Math.floor(d.grid / groups) * MK_WARPS : tw;
  const slice = d.intermediate / groups;
  const gemvs = {
    qkv: { rows: qrows + 2 * kvrows, k: d.hidden, gated: false, warps: tw },
    o: { rows: d.hidden, k: qrows, gated: false, warps: tw },
    gu: { rows: slice, k: d.hidden, gated: true, warps: mlpWarps },
    down: { rows: d.hidden, k: slice, gated: false, warps: mlpWarps },
  };
  const pick = (g: { rows: number; k: number; gated: boolean; warps: number }): number => {
    const f = v.forceSplit;
    if (f !== undefined && (g.k / f) % 256 === 0 && Number.isInteger(g.k / f)) return f;
    return gemvSplit(g.rows, g.k, g.warps, g.gated);
  };
  const ks = { qkv: pick(gemvs.qkv), o: pick(gemvs.o), gu: pick(gemvs.gu), down: pick(gemvs.down) };
  const w = (name: keyof typeof gemvs): number => wordsPerLane(gemvs[name].rows, gemvs[name].k, ks[name], gemvs[name].warps, gemvs[name].gated);
  const ahead = v.stream === 'ahead';
  let splitRounds = 1;
  for (const name of Object.keys(gemvs) as (keyof typeof gemvs)[]) if (ks[name] > 1) splitRounds = Math.max(splitRounds, Math.ceil((gemvs[name].rows * ks[name]) / gemvs[name].warps));
  return {
    ks,
    groups,
    // Registers: every phase's weights ('next'), or the o and down weights ('ahead'); the LM head's first row.
    words: ahead ? Math.max(w('o'), w('down'), d.hidden / 256) : Math.max(w('qkv'), w('o'), w('gu'), w('down'), d.hidden / 256),
    // Shared memory ('ahead'): the q/k/v and the gate/up weights, one at a time.
    smemWords: ahead ? Math.max(w('qkv'), w('gu')) : 0,
    splitRounds,
  };
}

export const MK_THREADS = 512;
export const MK_WARPS = MK_THREADS / 32;
/** Tokens a warp holds in registers across the barrier before attention (its first ones). */
export const KV_PREFETCH = 4;
/** Pointers per layer in the table the kernel reads (LayerPtrs). */
export const MK_LAYER_PTRS = 13;

/** Splits per kv head: as many as fit the grid with one work item per block. */
export function megakernelSplits(d: DecodeMegakernelDims): number {
  return Math.max(1, Math.min(64, Math.floor(d.grid / d.kvHeads)));
}

/**
 * Context length (tokens) whose keys and values the kernel's warps all load before attention's
 * token loop (UKV tokens a warp, NW warps a split, megakernelSplits splits a kv head): 1,024 for
 * Qwen3-0.6B on 132 SMs. Past it each warp loads its further tokens one at a time inside the loop,
 * a DRAM round trip each, so the decoder leaves longer contexts to the compiled step (maxContext).
 */
export function megakernelPrefetchTokens(d: DecodeMegakernelDims): number {
  return megakernelSplits(d) * MK_WARPS * KV_PREFETCH;
}

/** Why these sizes cannot run on the kernel, or null. */
export function megakernelUnsupported(d: DecodeMegakernelDims): string | null {
  if (![64, 128].includes(d.headDim)) return `head dim ${d.headDim} (supported: 64, 128)`;
  if (d.heads % d.kvHeads !== 0) return `${d.heads} query heads over ${d.kvHeads} kv heads`;
  const gq = d.heads / d.kvHeads;
  if (gq + 2 > MK_WARPS) return `${gq} query heads per kv head (at most ${MK_WARPS - 2})`;
  if (gq * d.headDim > MK_THREADS) return `${gq} x ${d.headDim} attention outputs per kv head (at most ${MK_THREADS})`;
  // The attention fold's outputs of one thread are a whole number of kv groups apart.
  if (MK_THREADS % (gq * d.headDim) !== 0) return `${gq} x ${d.headDim} attention outputs per kv head (a divisor of ${MK_THREADS} is needed)`;
  for (const [name, k] of [['hidden size', d.hidden], ['heads x head dim', d.heads * d.headDim], ['intermediate size', d.intermediate]] as const) {
    if (k % 256 !== 0) return `${name} ${k} (a multiple of 256 is needed)`;
    if (k > 8192) return `${name} ${k} (at most 8192)`;
  }
  if (d.grid * MK_WARPS > 1 << 20) return `grid ${d.grid}`;
  // Cache slots are int32 in the kernel.
  if (d.numBlocks * d.blockSize > 2 ** 31 - 1) return `${d.numBlocks} cache blocks of ${d.blockSize} tokens (at most 2^31 - 1 slots)`;
  // Attention takes one block per (kv head, split) at least.
  if (d.grid < d.kvHeads) return `a grid of ${d.grid} blocks for ${d.kvHeads} kv heads (one block per kv head at least)`;
  const shared = megakernelSharedBytes(d);
  if (shared > 48 * 1024) return `${shared} bytes of shared memory (at most 49152)`;
  return null;
}

/** Bytes of the kernel's static shared memory (struct Shared). */
export function megakernelSharedBytes(d: DecodeMegakernelDims, v: DecodeMegakernelVariant = DEFAULT_VARIANT): number {
  const gq = d.heads / d.kvHeads;
  const maxK = Math.max(d.hidden, d.heads * d.headDim, d.intermediate);
  const splitRows = 2 * megakernelPlan(d, v).splitRounds * MK_WARPS + 2 * d.heads * megakernelSplits(d);
  return 4 * (maxK + MK_WARPS + (gq + 2) * d.headDim + 2 * MK_WARPS * gq + MK_WARPS * gq * d.headDim + splitRows + MK_WARPS * KV_PREFETCH) + 4;
}

/** Most rounds (units per warp) of a GEMV split along K (its partial sums are staged per round). */
const MAX_SPLIT_ROUNDS = 4;

/** 16-byte words a lane holds for `rows` rows of K elements split `ks` ways, over `warps` warps. */
function wordsPerLane(rows: number, k: number, ks: number, warps: number, gated = false): number {
  return Math.ceil((rows * ks) / warps) * (k / ks / 256) * (gated ? 2 : 1);
}

/**
 * How many warps (of one block) share a row of an [rows, K] GEMV, each taking K / ks columns: the
 * split with the fewest words per lane (the busiest warp's bytes, so every block streams an equal
 * share where rows are fewer than warps), the smaller split on a tie.
 */
export function gemvSplit(rows: number, k: number, warps: number, gated = false): number {
  let best = 1;
  for (const ks of [2, 4]) {
    if ((k / ks) % 256 !== 0 || Math.ceil((rows * ks) / warps) > MAX_SPLIT_ROUNDS) continue;
    if (wordsPerLane(rows, k, ks, warps, gated) < wordsPerLane(rows, k, best, warps, gated)) best = ks;
  }
  return best;
}

export function megakernelName(d: DecodeMegakernelDims, v: DecodeMegakernelVariant = DEFAULT_VARIANT): string {
  const flow = `${v.sync === 'flow' ? `_flow${megakernelGroups(d, v)}` : ''}${(v.pace ?? 0) > 0 ? `_p${v.pace}` : ''}${v.kvLoad === 'early' ? '_kve' : ''}${v.constLoad === 'early' ? '_ce' : ''}${v.residLoad === 'early' ? '_re' : ''}${v.joinLoads === 'joint' ? '_jl' : v.joinLoads === 'hoist' ? '_jlh' : ''}${v.earlyAt === 'norm' ? '_ean' : ''}${v.arrive === 'release' ? '_arel' : v.arrive === 'flag' ? '_aflag' : ''}${v.poll === 'relaxed' ? '_prlx' : ''}`;
  const suffix = `${v.loads === 'asm' ? '' : `_${v.loads}`}${v.stream === 'next' ? '' : '_ahead'}${v.kvSlots === 'shared' ? '_kss' : ''}${flow}${v.trace ? '_trace' : ''}`;
  return `kiln_decode_mk_h${d.hidden}_q${d.heads}_kv${d.kvHeads}_d${d.headDim}_i${d.intermediate}_l${d.layers}_v${d.vocab}_bs${d.blockSize}_g${d.grid}${suffix}`;
}

/** Why this variant cannot run on these sizes (beyond megakernelUnsupported), or null. */
export function megakernelVariantProblem(d: DecodeMegakernelDims, v: DecodeMegakernelVariant): string | null {
  if ((v.pace ?? 0) > 0 && v.stream !== 'next') return `pace ${v.pace} with weights streamed '${v.stream}' (it needs 'next')`;
  if (v.pace !== undefined && (!Number.isInteger(v.pace) || v.pace < 0)) return `pace ${v.pace} (a whole number of loads is needed)`;
  if (v.arrive === 'flag' && v.sync === 'flow') return "grid barriers by a flag under sync 'flow' (its counters hold the flag's line)";
  if (v.residLoad === 'early' && v.stream !== 'next') return `residuals loaded early with weights streamed '${v.stream}' (it needs 'next')`;
  if (v.constLoad === 'early' && v.stream !== 'next') return `norm and rotary rows loaded early with weights streamed '${v.stream}' (it needs 'next')`;
  if (v.kvLoad === 'early' && v.stream !== 'next') return `keys and values loaded early with weights streamed '${v.stream}' (it needs 'next': 'ahead' holds its weights in the same shared memory)`;
  if (v.sync !== 'flow') return null;
  if (v.stream !== 'next') return `sync 'flow' with weights streamed '${v.stream}' (it needs 'next')`;
  // A block's kv heads are a 32-bit mask.
  if (d.kvHeads > 32) return `sync 'flow' with ${d.kvHeads} kv heads (at most 32)`;
  if (v.mlpGroups !== undefined) return groupsProblem(d, v.mlpGroups);
  return null;
}

/** The phases of a layer, each ended by one grid barrier: five under 'grid', three under 'flow'. */
export function megakernelPhases(v: DecodeMegakernelVariant = DEFAULT_VARIANT): readonly string[] {
  return v.sync === 'flow' ? ['norm + qkv + attention', 'o + residual', 'norm + gate/up + down'] : ['norm + qkv', 'attention', 'o + residual', 'norm + gate/up', 'down + residual'];
}

/** Grid barriers one launch passes: one per phase of every layer. */
export function megakernelBarriers(d: DecodeMegakernelDims, v: DecodeMegakernelVariant = DEFAULT_VARIANT): number {
  return megakernelPhases(v).length * d.layers;
}

/**
 * The trace stamps a block writes per layer besides the barriers' (MK_STAMP(j) writes stamp j):
 * after the q/k preparation and after the token loop of attention; under 'flow' also at the MLP
 * group's arrival and release.
 */
export function megakernelStampNames(v: DecodeMegakernelVariant = DEFAULT_VARIANT): readonly string[] {
  const attention = ['q/k prepared', 'token loop done'];
  return v.sync === 'flow' ? [...attention, 'mlp group arrived', 'mlp group released'] : attention;
}

/** Floats of the attention splits' partials (the start of the scratch `part`). */
export function attentionPartFloats(d: DecodeMegakernelDims): number {
  return Math.ceil((d.kvHeads * megakernelSplits(d) * (d.heads / d.kvHeads) * (d.headDim + 2)) / 4) * 4;
}

/** Floats of the float scratch `part`: the attention splits' partials, then under 'flow' the MLP groups' down partial sums ([groups, hidden]). */
export function megakernelPartFloats(d: DecodeMegakernelDims, v: DecodeMegakernelVariant = DEFAULT_VARIANT): number {
  return attentionPartFloats(d) + (v.sync === 'flow' ? megakernelGroups(d, v) * d.hidden : 0);
}

/** 32-bit words of `sync`: the grid barrier and the exit count; under 'flow' also a counter per kv head and per MLP group, each on its own 128-byte line. All zero between launches. */
export function megakernelSyncWords(d: DecodeMegakernelDims, v: DecodeMegakernelVariant = DEFAULT_VARIANT): number {
  // Under 'flow' each counter has a 128-byte line of its own (32 words): [0] the barrier and exit count, then the heads', then the groups'.
  // Under arrive 'flag' the flag is word 32 (a line of its own).
  return v.sync === 'flow' ? 32 * (1 + d.kvHeads + megakernelGroups(d, v)) : v.arrive === 'flag' ? 33 : 2;
}

/**
 * Under 'flow': the kv heads whose q/k/v rows each block computes (a mask per block, from the
 * q/k/v GEMV's units: warp gw takes units gw, gw + TW, ...), and how many blocks feed each head
 * (what attention on that head waits for).
 */
export function megakernelHeadFeeds(d: DecodeMegakernelDims, ksQkv: number): { masks: number[]; expect: number[] } {
  const tw = d.grid * MK_WARPS;
  const qrows = d.heads * d.headDim;
  const kvrows = d.kvHeads * d.headDim;
  const units = (qrows + 2 * kvrows) * ksQkv;
  const headOf = (r: number): number => (r < qrows ? Math.floor(r / ((d.heads / d.kvHeads) * d.headDim)) : Math.floor(((r - qrows) % kvrows) / d.headDim));
  const masks: number[] = [];
  const expect = new Array<number>(d.kvHeads).fill(0);
  for (let b = 0; b < d.grid; b++) {
    let m = 0;
    for (let u = b * MK_WARPS; u < units; u += tw) for (let w = 0; w < MK_WARPS && u + w < units; w++) m |= 1 << headOf(Math.floor((u + w) / ksQkv));
    masks.push(m >>> 0);
    for (let g = 0; g < d.kvHeads; g++) if ((m >>> g) & 1) expect[g]!++;
  }
  return { masks, expect };
}
