/**
 * CUDA C of the whole-step decode kernel (issue #17, batch-1 decode): one persistent launch runs a
 * dense Qwen3-style decoder step for one sequence, every layer and the LM head, over Kiln's paged
 * cache, where the compiled step runs ~200 kernels (113 GEMVs at 4-5 us each, latency-bound: each
 * is one round trip of its weight plus launch, wait and tail).
 *
 * Design:
 * - Grid = one block per SM (512 threads, 16 warps), all resident (nothing else runs in Kiln's
 *   ordered stream while it does), synchronised by a grid barrier between phases: per layer
 *   (1) RMSNorm + q/k/v GEMV, (2) q/k norm + rotary + cache write + split attention, (3) o GEMV +
 *   residual, (4) RMSNorm + gate/up GEMV + silu * mul, (5) down GEMV + residual; then the final
 *   norm and the LM head. The norms are computed redundantly by every block (a 1024-element row):
 *   cheaper than a barrier.
 * - The point of one launch: weights do not depend on activations, so every warp issues the
 *   16-byte loads of its share of a phase's weights before the barrier that precedes the phase
 *   (variant.stream 'next': into registers, between the barrier's arrival and its wait; 'ahead':
 *   two phases earlier, q/k/v and gate/up through cp.async into shared memory), and the attention
 *   warps their keys and values (their cache slots are fixed for the launch). The barrier's
 *   latency and the weight's round trip then overlap, which separate kernels cannot do beyond
 *   PDL's one wave. Work units are rows, or rows split along K over 2 or 4 warps of one block
 *   where rows are fewer than warps (megakernelPlan), round-robin over the grid's warps.
 *   variant.pace (default 6) loads only a GEMV's first words a lane there and the rest that many
 *   ahead of their use: past ~30 KiB in flight per SM the loads only queue, and the barrier's
 *   release waits behind them (bench/cuda-sync-under-load.ts).
 * - Session 37's forms (the runtime's default since session 38, with joinLoads 'joint' and
 *   earlyAt 'norm'; DEFAULT_VARIANT here is the plain form): variant.kvLoad 'early' copies
 *   attention's prefetched keys and values into shared memory early in the layer (cp.async)
 *   instead of into registers at the barrier before attention; variant.constLoad 'early' copies
 *   the norm weights and the step's rotary rows a phase ahead, so a phase's first round trip reads
 *   only L2; variant.residLoad 'early' reads the o and down projections' residuals at the phase's
 *   start; variant.joinLoads 'joint' issues a thread's fold loads together (one L2 round trip).
 * - variant.sync 'flow' (opt-in) has three grid barriers a layer instead of five: attention waits
 *   on a counter per kv head, and the MLP runs in groups of blocks with the down projection split
 *   along K over the groups (partials added in group order by the next layer).
 * - The grid barrier has two halves: arrival (__syncthreads, then one thread's fence and atomic
 *   add) and wait (an acquire load polled). The loads are issued between them, because a fence
 *   also waits for its thread's loads in flight (measured on the H200: a barrier after the o
 *   projection took 2.7 us with the gate/up prefetch issued before its fence, 0.8 us elsewhere).
 * - Attention: work item (kv head, split) per block; a split is a contiguous run of at least
 *   NW x UKV tokens, whose keys and values each warp loads before the barrier (their cache slots
 *   are fixed for the launch); each warp keeps an online softmax for the kv head's query heads
 *   (the scores of its prefetched tokens reduced together), the warps merge in shared memory and
 *   the block writes its split's unnormalised partials. Every block folds all splits, in split
 *   order (deterministic), into its shared row at the start of the o projection: no ticket, no
 *   separate fold, no block waiting for another.
 * - Roundings are those of the compiled step's ops: every GEMV output, norm output, rotated head,
 *   residual sum, gate and up product and attention output is rounded to bfloat16 once; sums in
 *   float32.
 * - Data written in the launch by other blocks is read with ld.global.cg (L2; an SM's L1 is not
 *   coherent); weights and cache rows of earlier steps through the read-only path.
 * - The barrier counter is zero at every launch: the last block to leave resets it. A barrier
 *   that does not complete within ~2^24 polls (a block not resident) reports through the
 *   device-side error word and stops waiting, so a launch never hangs.
 * - variant.host renders the same kernel as host C++ for scripts/cuda-emu/grid-emu.h (no PTX),
 *   which test/cuda-megakernel-emu.test.ts runs against the cpu decode step without a GPU.
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
const MK_WARPS = MK_THREADS / 32;
/** Tokens a warp holds in registers across the barrier before attention (its first ones). */
const KV_PREFETCH = 4;
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
function attentionPartFloats(d: DecodeMegakernelDims): number {
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

/**
 * The kernel source. Parameters (in order): layers (LayerPtrs [L]), embed, finalNorm, lmHead,
 * cos, sin ([maxPositions, D]), ids, positions, slots (int64 [1]), table (int32 [maxBlocks]),
 * lens (int32 [1]), h, qkv, act (bfloat16 scratch), part (float scratch: the attention splits'
 * partials), sync (uint32: barrier, exit count), logits, claim, report, codes (int64 [3]: token id, block id,
 * barrier), trace (uint32 [barriers + 2][grid][2], the low 32 bits of %globaltimer in ns, under variant.trace: row 0 the start, row k
 * barrier k's arrival and release, the last row the end; else unused).
 */
export function decodeMegakernelSource(d: DecodeMegakernelDims, variant: DecodeMegakernelVariant = DEFAULT_VARIANT): { name: string; source: string; dynamicShared: number } {
  const why = megakernelUnsupported(d) ?? megakernelVariantProblem(d, variant);
  if (why !== null) throw new Error(`decode megakernel: unsupported model: ${why}`);
  const name = megakernelName(d, variant);
  const qrows = d.heads * d.headDim;
  const { ks, words, smemWords, splitRounds, groups } = megakernelPlan(d, variant);
  const ahead = variant.stream === 'ahead';
  const host = variant.host === true;
  const flow = variant.sync === 'flow';
  const pace = variant.pace ?? 0;
  const feeds = flow ? megakernelHeadFeeds(d, ks.qkv) : null;
  // Tables of the 'flow' head counters: constant memory on the GPU, plain arrays in the emulator.
  const table = (type: string, nameC: string, values: number[]): string => `${host ? 'static const' : '__constant__'} ${type} ${nameC}[${values.length}] = {${values.map((x) => `${x}u`).join(', ')}};`;
  const maxK = Math.max(d.hidden, qrows, d.intermediate);
  // The early copies of the layer (variant.constLoad / kvLoad 'early'): issued at the layer's start,
  // or after its input norm's round trip (variant.earlyAt 'norm') so that round trip does not queue
  // behind them.
  const afterNorm = variant.earlyAt === 'norm';
  const earlyCopies = `#if MK_CONST_EARLY
    // This layer's rows: the post-attention norm's weights, the q/k norms', the rotary rows.
    cp_rows(cw + H, L.post_norm, H);
    cp_rows(cw + 2 * H, L.q_norm, D);
    cp_rows(cw + 2 * H + D, L.k_norm, D);
    cp_rows(cw + 2 * H + 2 * D, cos_t + (long long)pos * D, D);
    cp_rows(cw + 2 * H + 3 * D, sin_t + (long long)pos * D, D);
    cp_async_commit();
#endif
#if MK_KV_EARLY
    // Attention's prefetched keys and values (variant.kvLoad 'early'): they land while the q/k/v
    // GEMV runs; attention waits for them after its q/k preparation.
    {
      uint2* skv = reinterpret_cast<uint2*>(smw);
#pragma unroll
      for (int u = 0; u < UKV; u++) {
        if (kslot[u] >= 0) {
          const long long e = ((long long)kslot[u] * NKV + g) * D + lane * DPL;
          cp_async_kv(&skv[((warp * UKV + u) * 2) * 32 + lane], L.kc + e);
          cp_async_kv(&skv[((warp * UKV + u) * 2 + 1) * 32 + lane], L.vc + e);
        }
      }
      cp_async_commit();
    }
#endif
`;
  const source = `
#define H ${d.hidden}
#define NH ${d.heads}
#define NKV ${d.kvHeads}
#define D ${d.headDim}
#define GQ (NH / NKV)
#define INTER ${d.intermediate}
#define NL ${d.layers}
#define VOCAB ${d.vocab}
#define BS ${d.blockSize}
#define NCB ${d.numBlocks}
#define MAXB ${d.maxBlocks}
#define G ${d.grid}
#define NT ${MK_THREADS}
#define NW ${MK_WARPS}
#define TW (G * NW)
#define QROWS (NH * D)
#define KVROWS (NKV * D)
#define RQKV (QROWS + 2 * KVROWS)
#define S ${megakernelSplits(d)}
#define DPL (D / 32)
#define MAXK ${maxK}
#define WORDS ${words}
#define WS ${Math.max(1, smemWords)}
#define GU_HALF ${flow ? '(ROUNDSG(IS, KS_GU) * KW(H, KS_GU))' : '(ROUNDS(INTER, KS_GU) * KW(H, KS_GU))'}
#define UKV ${KV_PREFETCH}
#define EPS ${d.eps.toExponential(9)}f
#define SCALE ${(1 / Math.sqrt(d.headDim)).toExponential(9)}f
#define MK_TRACE ${variant.trace ? 1 : 0}
#define KS_QKV ${ks.qkv}
#define KS_O ${ks.o}
#define KS_GU ${ks.gu}
#define KS_DOWN ${ks.down}
#define GPR ${splitRounds}
#define MK_STAMPS ${megakernelStampNames(variant).length}
#define MK_KSLOT_SHARED ${variant.kvSlots === 'shared' ? 1 : 0}
// variant.kvLoad 'early': attention's prefetched keys and values through cp.async into shared
// memory at the start of each layer (dynamic shared memory: [warp][token][key, value][lane]).
#define MK_KV_EARLY ${variant.kvLoad === 'early' ? 1 : 0}
// variant.constLoad 'early': bfloat16 rows in dynamic shared memory after the keys and values (cw):
// [0, H) the input norm's weights, [H, 2H) the post-attention norm's, then the q norm's, the k
// norm's, the step's cos and sin rows (D each).
#define MK_CONST_EARLY ${variant.constLoad === 'early' ? 1 : 0}
// variant.residLoad 'early': the residual rows of this warp's o and down units, loaded at the phase's start.
#define MK_RESID_EARLY ${variant.residLoad === 'early' ? 1 : 0}
// variant.joinLoads 'joint': a thread's fold outputs (FOLD_N of them) load their partials together,
// FOLD_U splits at a time; the value row's elements are all loaded before any is stored.
#define MK_JOIN_LOADS ${variant.joinLoads === 'joint' || variant.joinLoads === 'hoist' ? 1 : 0}
#define MK_FOLD_HOIST ${variant.joinLoads === 'hoist' ? 1 : 0}
// variant.arrive 'release' / variant.poll 'relaxed': the grid barrier's arrival and polls (grid_arrive, poll_until).
#define MK_ARRIVE ${variant.arrive === 'flag' ? 2 : variant.arrive === 'release' ? 1 : 0}
#define MK_POLL_RELAXED ${variant.poll === 'relaxed' ? 1 : 0}
#define FOLD_N ((QROWS + NT - 1) / NT)
#define FOLD_U 4
#define MK_CW_OFF ${variant.kvLoad === 'early' ? MK_WARPS * KV_PREFETCH * 2 * 32 * 8 : 0}
// sync 'flow': MLP groups NG (group g = blocks [g * G / NG, (g + 1) * G / NG)), each over a slice
// of IS intermediate rows; KS_GU and KS_DOWN are then its GEMVs' splits, whose rounds are bounded
// by the smallest group's warps (TWG). sync words: [0] grid barrier, [1] exit count,
// [SYNC_HEAD + SLINE * g] kv head g's q/k/v writers, [SYNC_GROUP + SLINE * grp] the group's gate/up
// writers: a 128-byte line per counter, so the atomics on one do not queue behind the others'.
#define MK_FLOW ${flow ? 1 : 0}
// variant.pace: words of a GEMV loaded before the barrier that precedes it (the rest while it runs).
#define PACE ${pace}
#define PREF_LIMIT ${pace > 0 ? 'PACE' : '(1 << 30)'}
#define NG ${groups}
#define IS (INTER / NG)
#define TWG ((G / NG) * NW)
#define SLINE 32
#define SYNC_HEAD SLINE
#define SYNC_GROUP (SLINE * (1 + NKV))
#define NSYNC ${megakernelSyncWords(d, variant)}
#define DPART ${attentionPartFloats(d)}
#if MK_TRACE
// Attention detail: stamp j of this block in this layer, after the barrier rows.
#define MK_STAMP(j) if (threadIdx.x == 0) trace[(long long)(NBAR + 2) * G * 2 + ((long long)layer * G + blockIdx.x) * MK_STAMPS + (j)] = mk_now()
#else
#define MK_STAMP(j)
#endif
#define NBAR ${megakernelBarriers(d, variant)}

typedef unsigned short bf_t;
${feeds ? `// Per block, the kv heads its q/k/v rows feed (bit g); per kv head, how many blocks feed it.
${table('unsigned int', 'mk_block_heads', feeds.masks)}
${table('unsigned int', 'mk_head_expect', feeds.expect)}` : ''}
#define MK_NEG_INF __int_as_float(0xff800000)

struct LayerPtrs {
  const bf_t* in_norm; const bf_t* wq; const bf_t* wk; const bf_t* wv; const bf_t* q_norm; const bf_t* k_norm;
  const bf_t* wo; const bf_t* post_norm; const bf_t* wg; const bf_t* wu; const bf_t* wd; bf_t* kc; bf_t* vc;
};

static __device__ __forceinline__ float bf(unsigned int h) { return __uint_as_float(h << 16); }
static __device__ __forceinline__ unsigned short tobf(float f) {
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}
static __device__ __forceinline__ float rbf(float f) { return bf(tobf(f)); }
/** DPL (<= 4) bfloat16 values held as floats, packed two to a word (exact: they are bfloat16 values). */
static __device__ __forceinline__ uint2 pack_row(const float* f) {
  unsigned int w[2] = {0u, 0u};
#pragma unroll
  for (int e = 0; e < DPL; e++) w[e >> 1] |= (unsigned int)tobf(f[e]) << ((e & 1) * 16);
  return make_uint2(w[0], w[1]);
}
static __device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
${
    variant.loads === 'asm' && !host
      ? `// Volatile: issued where written, before the barrier, not sunk to the use after it.
static __device__ __forceinline__ uint4 ldw(const bf_t* p) {
  uint4 r;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}
static __device__ __forceinline__ uint2 ldw2(const bf_t* p) {
  uint2 r;
  asm volatile("ld.global.nc.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
  return r;
}`
      : `static __device__ __forceinline__ uint4 ldw(const bf_t* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }
static __device__ __forceinline__ uint2 ldw2(const bf_t* p) { return __ldg(reinterpret_cast<const uint2*>(p)); }`
  }
${
    host
      ? `// Host emulation: copies complete at once; the grid emulator's clock does not advance.
static inline void cp_async16(void* smem, const void* gmem) { std::memcpy(smem, gmem, 16); }
static inline void cp_async_kv(void* smem, const void* gmem) { std::memcpy(smem, gmem, ${d.headDim / 32} * 2); }
static inline void cp_async_commit() {}
static inline void cp_async_wait_all() {}
static inline void cp_async_wait_1() {}
static inline unsigned int mk_now() { return 0u; }`
      : `static __device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned int a = (unsigned int)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(a), "l"(gmem) : "memory");
}
static __device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
/** A lane's DPL elements of a cache row (4 or 8 bytes: cp.async.ca, the sizes under 16 it takes). */
static __device__ __forceinline__ void cp_async_kv(void* smem, const void* gmem) {
  const unsigned int a = (unsigned int)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.ca.shared.global [%0], [%1], ${d.headDim / 32 * 2};" :: "r"(a), "l"(gmem) : "memory");
}
static __device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }
/** Waits for every cp.async group of this thread but the newest. */
static __device__ __forceinline__ void cp_async_wait_1() { asm volatile("cp.async.wait_group 1;" ::: "memory"); }
static __device__ __forceinline__ unsigned int mk_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return (unsigned int)t;
}`
  }
/** 8 weights (one 16-byte word) times 8 floats of x in shared memory. */
static __device__ __forceinline__ float dot8(uint4 w, const float* x) {
  const float4 a = *reinterpret_cast<const float4*>(x);
  const float4 b = *reinterpret_cast<const float4*>(x + 4);
  float s = bf(w.x & 0xffffu) * a.x;
  s = fmaf(bf(w.x >> 16), a.y, s);
  s = fmaf(bf(w.y & 0xffffu), a.z, s);
  s = fmaf(bf(w.y >> 16), a.w, s);
  s = fmaf(bf(w.z & 0xffffu), b.x, s);
  s = fmaf(bf(w.z >> 16), b.y, s);
  s = fmaf(bf(w.w & 0xffffu), b.z, s);
  s = fmaf(bf(w.w >> 16), b.w, s);
  return s;
}

__device__ __forceinline__ void kiln_report(unsigned long long* claim, volatile long long* report, long long code, long long value, long long size) {
  if (atomicCAS(claim, 0ULL, 1ULL) == 0ULL) { report[1] = value; report[2] = size; __threadfence_system(); report[0] = code; }
}

struct Shared {
  float xs[MAXK];
  float red[NW];
  float qk[GQ + 2][D];
  float wm[NW][GQ];
  float wl[NW][GQ];
  float wacc[NW][GQ][D];
  float gp[GPR][NW];
  float pm[NH][S];
  float pl[NH][S];
  float gp2[GPR][NW];
  int kslot[NW][UKV];
  int dead;
};
// megakernelSharedBytes (the host's sizing and limit checks) must cover the struct.
static_assert(sizeof(Shared) <= ${megakernelSharedBytes(d, variant)}, "megakernelSharedBytes undercounts struct Shared");

/**
 * Grid barrier number k (1-based) of this launch, in two halves so the next phase's weight loads
 * are issued between them: arrival (the block's writes made visible, then counted) and the wait.
 * The fence comes before those loads are issued: a fence also waits for the thread's loads in
 * flight (measured: with the loads before it, the barrier took as long as the block's whole
 * prefetch, up to 2.7 us after the o projection).
 */
${
    host
      ? `static inline void red_release_add(unsigned int* p, unsigned int v) { __threadfence(); atomicAdd(p, v); }
static inline unsigned int atom_acq_rel_add(unsigned int* p, unsigned int v) { return atomicAdd(p, v); }
static inline void st_release(unsigned int* p, unsigned int v) { *reinterpret_cast<volatile unsigned int*>(p) = v; }`
      : `static __device__ __forceinline__ void red_release_add(unsigned int* p, unsigned int v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}
static __device__ __forceinline__ unsigned int atom_acq_rel_add(unsigned int* p, unsigned int v) {
  unsigned int old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
static __device__ __forceinline__ void st_release(unsigned int* p, unsigned int v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}`
  }
static __device__ __forceinline__ unsigned int grid_arrive(unsigned int* bar, unsigned int k, unsigned int* trace, bool fence = true) {
  __syncthreads();
#if MK_TRACE
  if (threadIdx.x == 0) trace[((long long)k * G + blockIdx.x) * 2] = mk_now();
#endif
  unsigned int old = 0u;
  if (threadIdx.x == 0) {
    // No fence where the block has written nothing since its last one (the caller says).
#if MK_ARRIVE == 2
    // The count's value before this add is used only in grid_wait, after the weights' loads are issued.
    old = atom_acq_rel_add(bar, 1u);
#elif MK_ARRIVE == 1
    if (fence) red_release_add(bar, 1u);
    else atomicAdd(bar, 1u);
#else
    if (fence) __threadfence();
    atomicAdd(bar, 1u);
#endif
  }
  return old;
}
${
    host
      ? `// Host emulation: a poll lets the other fibers run (they are what the barrier waits for).
static inline unsigned int ld_acquire(const unsigned int* p) {
  emu_yield();
  return *reinterpret_cast<const volatile unsigned int*>(p);
}
static inline unsigned int ld_relaxed(const unsigned int* p) { return ld_acquire(p); }
static inline void fence_acq_rel() { __threadfence(); }`
      : `static __device__ __forceinline__ unsigned int ld_acquire(const unsigned int* p) {
  unsigned int v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
static __device__ __forceinline__ unsigned int ld_relaxed(const unsigned int* p) {
  unsigned int v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
static __device__ __forceinline__ void fence_acq_rel() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }`
  }
/** Thread 0 polls the counter until it reaches target (a block that never comes: reported, and the wait given up); the caller's __syncthreads releases the block. */
static __device__ __forceinline__ void poll_until(const unsigned int* counter, unsigned int target, Shared& sh, unsigned long long* claim, long long* report, long long code, unsigned int k) {
  if (threadIdx.x == 0 && !sh.dead) {
    unsigned int polls = 0;
#if MK_POLL_RELAXED
    while (ld_relaxed(counter) < target) {
#else
    while (ld_acquire(counter) < target) {
#endif
      if (++polls > (1u << 24)) { kiln_report(claim, report, code, (long long)k, (long long)G); sh.dead = 1; break; }
    }
#if MK_POLL_RELAXED
    fence_acq_rel();
#endif
  }
}
/** sync 'flow': the block's writes made visible, then counted on each counter of the mask (bit i: counters[i * SLINE]). */
static __device__ __forceinline__ void flag_arrive(unsigned int* counters, unsigned int mask) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    for (int i = 0; i < 32; i++)
      if ((mask >> i) & 1u) atomicAdd(counters + i * SLINE, 1u);
  }
}
static __device__ __forceinline__ void grid_wait(unsigned int* bar, unsigned int k, unsigned int old, Shared& sh, unsigned long long* claim, long long* report, long long code, unsigned int* trace) {
#if MK_ARRIVE == 2
  // The block that completed the count raises the flag (word 32); the others wait for it.
  if (threadIdx.x == 0 && old == k * G - 1u) st_release(bar + 32, k);
  else poll_until(bar + 32, k, sh, claim, report, code, k);
#else
  (void)old;
  poll_until(bar, k * G, sh, claim, report, code, k);
#endif
#if MK_TRACE
  if (threadIdx.x == 0) trace[((long long)k * G + blockIdx.x) * 2 + 1] = mk_now();
#endif
  __syncthreads();
}

/**
 * xs[0..n) = the bfloat16 row x (written in this launch: read through L2), normalised by RMSNorm
 * with weight w and rounded; or copied when w is null. With parts (sync 'flow'; n = H) the row is
 * x plus the MLP groups' down partial sums, added in group order and rounded as the down GEMV's
 * output, then the residual sum rounded (the compiled step's two roundings).
 */
static __device__ __forceinline__ float resid_row(const bf_t* x, const float* parts, int i) {
  float v = bf(__ldcg(x + i));
  if (parts != nullptr) {
    float t = 0.f;
#pragma unroll
    for (int q = 0; q < NG; q++) t += __ldcg(parts + q * H + i);
    v = rbf(v + rbf(t));
  }
  return v;
}
/** wsh: w is in shared memory (variant.constLoad 'early'), read with plain loads. */
static __device__ __forceinline__ void row_to_smem(const bf_t* x, const bf_t* w, int n, Shared& sh, const float* parts = nullptr, bool wsh = false) {
  float ss = 0.f;
  // The weights are loaded with x (one round trip for both), kept in the row's spare registers.
  float wr[(MAXK + NT - 1) / NT];
#pragma unroll
  for (int j = 0; j < (MAXK + NT - 1) / NT; j++) {
    const int i = threadIdx.x + j * NT;
    if (i < n) {
      const float v = resid_row(x, parts, i);
      wr[j] = w != nullptr ? (wsh ? bf(w[i]) : bf(__ldg(w + i))) : 0.f;
      sh.xs[i] = v;
      ss = fmaf(v, v, ss);
    }
  }
  if (w != nullptr) {
    ss = warp_sum(ss);
    if ((threadIdx.x & 31) == 0) sh.red[threadIdx.x >> 5] = ss;
    __syncthreads();
    float t = 0.f;
#pragma unroll
    for (int i = 0; i < NW; i++) t += sh.red[i];
    const float r = rsqrtf(t / (float)n + EPS);
#pragma unroll
    for (int j = 0; j < (MAXK + NT - 1) / NT; j++) {
      const int i = threadIdx.x + j * NT;
      if (i < n) sh.xs[i] = rbf(sh.xs[i] * r * wr[j]);
    }
  }
  __syncthreads();
}

/** This thread's 16-byte chunks of a copy of n bfloat16 (a multiple of 8) into shared memory (cp.async). */
static __device__ __forceinline__ void cp_rows(bf_t* dst, const bf_t* src, int n) {
  for (int c = threadIdx.x; c < n / 8; c += NT) cp_async16(dst + c * 8, src + c * 8);
}

static __device__ __forceinline__ const bf_t* qkv_row(const LayerPtrs& L, int r) {
  return r < QROWS ? L.wq + (long long)r * H : r < QROWS + KVROWS ? L.wk + (long long)(r - QROWS) * H : L.wv + (long long)(r - QROWS - KVROWS) * H;
}

// GEMV work units: unit u of an [N, K] weight split KS ways along K is row u / KS, columns
// (u % KS) * K / KS ... + K / KS; warp GWX of TWX takes units GWX, GWX + TWX, ... (at most RND
// rounds): the grid's warps (gw of TW, ROUNDS) or, under sync 'flow', an MLP group's (lgw of twg,
// ROUNDSG). The KS units of a row are consecutive warps of one block (KS divides NW, and TW and
// twg are multiples of NW), so their sums meet in shared memory.
#define KW(K, KS) ((K) / (KS) / 256)
#define ROUNDS(N, KS) (((N) * (KS) + TW - 1) / TW)
#define ROUNDSG(N, KS) (((N) * (KS) + TWG - 1) / TWG)

// Where a lane's weight word i goes and is read from: registers w[i], or shared memory
// (per warp WS words per lane, lanes adjacent: conflict-free 16-byte accesses).
#define TO_REG(i, p) w[i] = ldw(p)
#define TO_SMEM(i, p) cp_async16(&smw[(warp * WS + (i)) * 32 + lane], p)
#define REG_W(i) w[i]
#define SMEM_W(i) smw[(warp * WS + (i)) * 32 + lane]

/** Loads this warp's units of the weight whose row r starts at ROW_EXPR into words OFF... (PUT). */
#define PREFETCH_UNITS_X(N, K, KS, OFF, PUT, ROW_EXPR, GWX, TWX, RND)                 \\
  {                                                                                \\
    _Pragma("unroll") for (int j = 0; j < (RND); j++) {                            \\
      const int u = (GWX) + j * (TWX);                                             \\
      if (u < (N) * (KS)) {                                                        \\
        const int r = u / (KS);                                                    \\
        const bf_t* p = (ROW_EXPR) + (u % (KS)) * ((K) / (KS));                    \\
        _Pragma("unroll") for (int c = 0; c < KW(K, KS); c++)                      \\
          if ((OFF) + j * KW(K, KS) + c < PREF_LIMIT) PUT((OFF) + j * KW(K, KS) + c, p + c * 256 + lane * 8); \\
      }                                                                            \\
    }                                                                              \\
  }
#define PREFETCH_UNITS(N, K, KS, OFF, PUT, ROW_EXPR) PREFETCH_UNITS_X(N, K, KS, OFF, PUT, ROW_EXPR, gw, TW, ROUNDS(N, KS))

/**
 * variant.pace: word I of this warp's units of a GEMV whose words start at w[OFF] (the words past
 * the first PACE, loaded while the GEMV runs, PACE ahead of their use: PACE_AT(i) at each use).
 */
#define ISSUE_WORD(N, K, KS, OFF, ROW_EXPR, GWX, TWX, I)                               \\
  {                                                                                \\
    const int i_ = (I) - (OFF), j_ = i_ / KW(K, KS), c_ = i_ % KW(K, KS);          \\
    const int u = (GWX) + j_ * (TWX);                                              \\
    if (u < (N) * (KS)) {                                                          \\
      const int r = u / (KS);                                                      \\
      w[(I)] = ldw((ROW_EXPR) + (u % (KS)) * ((K) / (KS)) + c_ * 256 + lane * 8);  \\
    }                                                                              \\
  }
#define NO_ISSUE(i)

/** This warp's partial dot products with xs (one per round, warp-summed) into ACC[]. */
#define DOT_UNITS_XP(N, K, KS, OFF, SRC, ACC, GWX, TWX, RND, ISSUE)                   \\
  _Pragma("unroll") for (int j = 0; j < (RND); j++) {                              \\
    const int u = (GWX) + j * (TWX);                                               \\
    ACC[j] = 0.f;                                                                  \\
    if (u < (N) * (KS)) {                                                          \\
      const float* xp = sh.xs + (u % (KS)) * ((K) / (KS)) + lane * 8;              \\
      float a = 0.f;                                                               \\
      _Pragma("unroll") for (int c = 0; c < KW(K, KS); c++) {                      \\
        ISSUE((OFF) + j * KW(K, KS) + c);                                          \\
        a += dot8(SRC((OFF) + j * KW(K, KS) + c), xp + c * 256);                   \\
      }                                                                            \\
      ACC[j] = warp_sum(a);                                                        \\
    }                                                                              \\
  }
#define DOT_UNITS_X(N, K, KS, OFF, SRC, ACC, GWX, TWX, RND) DOT_UNITS_XP(N, K, KS, OFF, SRC, ACC, GWX, TWX, RND, NO_ISSUE)
#define DOT_UNITS(N, K, KS, OFF, SRC, ACC) DOT_UNITS_X(N, K, KS, OFF, SRC, ACC, gw, TW, ROUNDS(N, KS))
#define DOT_UNITS_P(N, K, KS, OFF, SRC, ACC, ISSUE) DOT_UNITS_XP(N, K, KS, OFF, SRC, ACC, gw, TW, ROUNDS(N, KS), ISSUE)

/**
 * variant.residLoad 'early': ARR[j] = VALUE (an expression of the row r) for round j of this warp's
 * units of an [H, K] GEMV split KS ways, at the lane that will store the row (lane 0 of its first warp).
 */
#define RESID_UNITS(ARR, KS, VALUE)                                                  \\
  float ARR[ROUNDS(H, KS)];                                                        \\
  _Pragma("unroll") for (int j = 0; j < ROUNDS(H, KS); j++) {                      \\
    const int u = gw + j * TW, r = u / (KS);                                       \\
    ARR[j] = (u < H * (KS) && u % (KS) == 0 && lane == 0) ? (VALUE) : 0.f;         \\
  }

/** Row sums of a split GEMV: the units' sums staged in GP, added in unit order by the row's first warp. */
#define STAGE_UNITS_X(KS, ACC, GP, RND)                                            \\
  if ((KS) > 1 && lane == 0) {                                                     \\
    _Pragma("unroll") for (int j = 0; j < (RND); j++) GP[j][warp] = ACC[j];        \\
  }
#define STAGE_UNITS(N, KS, ACC, GP) STAGE_UNITS_X(KS, ACC, GP, ROUNDS(N, KS))
static __device__ __forceinline__ float row_sum(float acc, const float (*gp)[NW], int j, int warp, int ks) {
  for (int q = 1; q < ks; q++) acc += gp[j][warp + q];
  return acc;
}

/** The GEMV of this warp's prefetched units with xs; EPI stores row r's sum acc (lane 0 of its first warp). */
#define GEMV_UNITS_XP(N, K, KS, SRC, EPI, GWX, TWX, RND, ISSUE)                       \\
  {                                                                                \\
    float accs_[RND];                                                              \\
    DOT_UNITS_XP(N, K, KS, 0, SRC, accs_, GWX, TWX, RND, ISSUE);                   \\
    STAGE_UNITS_X(KS, accs_, sh.gp, RND);                                          \\
    if ((KS) > 1) __syncthreads();                                                 \\
    _Pragma("unroll") for (int j = 0; j < (RND); j++) {                            \\
      const int u = (GWX) + j * (TWX);                                             \\
      if (u < (N) * (KS) && u % (KS) == 0 && lane == 0) {                          \\
        const int r = u / (KS);                                                    \\
        const float acc = row_sum(accs_[j], sh.gp, j, warp, (KS));                 \\
        EPI;                                                                       \\
      }                                                                            \\
    }                                                                              \\
  }
#define GEMV_UNITS_X(N, K, KS, SRC, EPI, GWX, TWX, RND) GEMV_UNITS_XP(N, K, KS, SRC, EPI, GWX, TWX, RND, NO_ISSUE)
#define GEMV_UNITS(N, K, KS, SRC, EPI) GEMV_UNITS_X(N, K, KS, SRC, EPI, gw, TW, ROUNDS(N, KS))
#define GEMV_UNITS_P(N, K, KS, SRC, EPI, ISSUE) GEMV_UNITS_XP(N, K, KS, SRC, EPI, gw, TW, ROUNDS(N, KS), ISSUE)

/**
 * Gate and up of this warp's units of N intermediate rows (warp GWX of TWX, RND rounds), and
 * silu(gate) * up of each row to act[ACT_OFF + row], rounded as the compiled step's ops.
 */
#define GATE_UP_UNITS(N, SRC, ISSUE, GWX, TWX, RND, ACT_OFF)                           \\
  {                                                                                \\
    float ag[RND], au[RND];                                                        \\
    DOT_UNITS_XP(N, H, KS_GU, 0, SRC, ag, GWX, TWX, RND, ISSUE);                   \\
    DOT_UNITS_XP(N, H, KS_GU, GU_HALF, SRC, au, GWX, TWX, RND, ISSUE);             \\
    STAGE_UNITS_X(KS_GU, ag, sh.gp, RND);                                          \\
    STAGE_UNITS_X(KS_GU, au, sh.gp2, RND);                                         \\
    if (KS_GU > 1) __syncthreads();                                                \\
    _Pragma("unroll") for (int j = 0; j < (RND); j++) {                            \\
      const int u = (GWX) + j * (TWX);                                             \\
      if (u < (N) * KS_GU && u % KS_GU == 0 && lane == 0) {                        \\
        const float gs = rbf(row_sum(ag[j], sh.gp, j, warp, KS_GU));               \\
        const float us = rbf(row_sum(au[j], sh.gp2, j, warp, KS_GU));              \\
        act[(ACT_OFF) + u / KS_GU] = tobf(gs / (1.0f + expf(-gs)) * us);           \\
      }                                                                            \\
    }                                                                              \\
  }
${
    pace === 0
      ? `#define PACE_QKV(i)
#define PACE_O(i)
#define PACE_GU(i)
#define PACE_DOWN(i)`
      : `// Each GEMV's word i + PACE, loaded at the use of word i (gate/up: the gate words, then the up words).
#define PACE_QKV(i) if ((i) + PACE < ROUNDS(RQKV, KS_QKV) * KW(H, KS_QKV)) ISSUE_WORD(RQKV, H, KS_QKV, 0, qkv_row(L, r), gw, TW, (i) + PACE)
#define PACE_O(i) if ((i) + PACE < ROUNDS(H, KS_O) * KW(QROWS, KS_O)) ISSUE_WORD(H, QROWS, KS_O, 0, L.wo + (long long)r * QROWS, gw, TW, (i) + PACE)
${
  flow
    ? `#define PACE_GU(i) if ((i) + PACE < GU_HALF) ISSUE_WORD(IS, H, KS_GU, 0, L.wg + (long long)(grp * IS + r) * H, lgw, twg, (i) + PACE) else if ((i) + PACE < 2 * GU_HALF) ISSUE_WORD(IS, H, KS_GU, GU_HALF, L.wu + (long long)(grp * IS + r) * H, lgw, twg, (i) + PACE)
#define PACE_DOWN(i) if ((i) + PACE < ROUNDSG(H, KS_DOWN) * KW(IS, KS_DOWN)) ISSUE_WORD(H, IS, KS_DOWN, 0, L.wd + (long long)r * INTER + grp * IS, lgw, twg, (i) + PACE)`
    : `#define PACE_GU(i) if ((i) + PACE < GU_HALF) ISSUE_WORD(INTER, H, KS_GU, 0, L.wg + (long long)r * H, gw, TW, (i) + PACE) else if ((i) + PACE < 2 * GU_HALF) ISSUE_WORD(INTER, H, KS_GU, GU_HALF, L.wu + (long long)r * H, gw, TW, (i) + PACE)
#define PACE_DOWN(i) if ((i) + PACE < ROUNDS(H, KS_DOWN) * KW(INTER, KS_DOWN)) ISSUE_WORD(H, INTER, KS_DOWN, 0, L.wd + (long long)r * INTER, gw, TW, (i) + PACE)`
}`
  }

#if MK_CONST_EARLY
// The copied rows (cw: see MK_CONST_EARLY); every copy this thread issued landed, then the block's.
#define IN_NORM_W cw
#define POST_NORM_W (cw + H)
#define MK_CONST_WAIT() do { cp_async_wait_all(); __syncthreads(); } while (0)
// The next layer's input norm weights (the final norm's after the last layer), over the first
// norm's region, read by nothing until then: issued in a barrier window, waited for at the next layer's start.
#define MK_NEXT_NORM_COPY() do { cp_rows(cw, layer + 1 < NL ? layers[layer + 1].in_norm : final_norm, H); cp_async_commit(); } while (0)
#else
#define IN_NORM_W nullptr
#define POST_NORM_W nullptr
#define MK_CONST_WAIT() do { } while (0)
#define MK_NEXT_NORM_COPY() do { } while (0)
#endif

extern "C" __global__ void __launch_bounds__(NT, 1) ${name}(
    const LayerPtrs* __restrict__ layers, const bf_t* __restrict__ embed, const bf_t* __restrict__ final_norm,
    const bf_t* __restrict__ lm_head, const bf_t* __restrict__ cos_t, const bf_t* __restrict__ sin_t,
    const long long* __restrict__ ids, const long long* __restrict__ positions, const long long* __restrict__ slots,
    const int* __restrict__ table, const int* __restrict__ lens,
    bf_t* h, bf_t* qkv, bf_t* act, float* part, unsigned int* sync, bf_t* logits,
    unsigned long long* claim, long long* report, const long long* __restrict__ codes, unsigned int* trace) {
${
    host
      ? `  Shared& sh = *reinterpret_cast<Shared*>(emu_block_shared());
  uint4* smw = reinterpret_cast<uint4*>(emu_block_shared() + ((sizeof(Shared) + 15) / 16) * 16);`
      : `  __shared__ Shared sh;
  extern __shared__ uint4 smw[];`
  }
#if MK_TRACE
  if (threadIdx.x == 0) { const unsigned int t = mk_now(); trace[blockIdx.x * 2] = t; trace[blockIdx.x * 2 + 1] = t; }
#endif
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int gw = blockIdx.x * NW + warp;
  unsigned int* bar = sync;
  if (threadIdx.x == 0) sh.dead = 0;${
    flow
      ? `
  // sync 'flow': this block's MLP group grp (blocks [gstart, gstart + gsize)), its warp lgw of twg
  // there, and the groups' down partial sums (read by the next layer and the final norm). Macros of
  // blockIdx and constants, so the compiler recomputes them where needed instead of keeping them
  // live through the launch (the kernel is at its register cap).
#define grp ((((int)blockIdx.x + 1) * NG - 1) / G)
#define gstart (grp * G / NG)
#define gsize ((unsigned int)((grp + 1) * G / NG - gstart))
#define lgw (((int)blockIdx.x - gstart) * NW + warp)
#define twg ((int)gsize * NW)
#define dpart (part + DPART)`
      : ''
  }

  // Step inputs (uploaded before the launch).
  long long id = ids[0];
  if (id < 0 || id >= VOCAB) {
    if (blockIdx.x == 0 && threadIdx.x == 0) kiln_report(claim, report, codes[0], id, VOCAB);
    id = 0;
  }
  const int pos = (int)positions[0];
  const long long slot_new = slots[0];
  const int len = lens[0];
  const bf_t* emb_row = embed + id * H;

  // This block's attention work: kv head g, split s over [t0, t1); a split holds at least NW tokens.
  const int item = blockIdx.x;
  const int g = item / S, s = item % S;
  int span = (len + S - 1) / S;
  if (span < NW * UKV) span = NW * UKV;
  const int n_active = len > 0 ? (len + span - 1) / span : 0;
  const bool attends = item < NKV * S && s < n_active;
  const int t0 = s * span;
  const int t1 = min(len, t0 + span);
  // Cache slots of this warp's first UKV tokens (-1: none, or the new token, which comes from registers).
  // Int32 (megakernelUnsupported bounds the cache's slots); variant.kvSlots 'shared' keeps them in
  // shared memory, read back each layer: 4 registers fewer live through the whole launch, where the
  // attention phase's prefetched rows press on the register cap.
#if MK_KSLOT_SHARED
  int* kslot = sh.kslot[warp];
#else
  int kslot[UKV];
#endif
#pragma unroll
  for (int u = 0; u < UKV; u++) {
    const int t = t0 + warp + u * NW;
    int slot = -1;
    if (attends && t < t1 && t != len - 1) {
      int b = table[t / BS];
      if (b < 0 || b >= NCB) { kiln_report(claim, report, codes[1], b, NCB); b = 0; }
      slot = b * BS + t % BS;
    }
    // Lane 0 writes the shared form; the block barrier of the first row_to_smem orders its reads.
    if (!MK_KSLOT_SHARED || lane == 0) kslot[u] = slot;
  }
#if MK_KV_EARLY && MK_KSLOT_SHARED
  // The first layer's early loads read the slots before any block barrier: lane 0 wrote them.
  __syncwarp();
#endif

  uint4 w[WORDS];
  unsigned int nbar = 0;
  unsigned int mk_old = 0;  // thread 0: the barrier count before its add (arrive 'flag')
#if MK_CONST_EARLY
  bf_t* cw = reinterpret_cast<bf_t*>(reinterpret_cast<unsigned char*>(smw) + MK_CW_OFF);
#endif
  {
    const LayerPtrs L = layers[0];
#if MK_CONST_EARLY
    cp_rows(cw, L.in_norm, H);
    cp_async_commit();
#endif
    ${ahead ? 'PREFETCH_UNITS(RQKV, H, KS_QKV, 0, TO_SMEM, qkv_row(L, r));\n    cp_async_commit();' : 'PREFETCH_UNITS(RQKV, H, KS_QKV, 0, TO_REG, qkv_row(L, r));'}
  }

  for (int layer = 0; layer < NL; layer++) {
    const LayerPtrs L = layers[layer];
    const bf_t* resid = layer == 0 ? emb_row : h;

    // (1) RMSNorm + q/k/v projections.
#if MK_CONST_EARLY
    // The input norm's weights (copied before the last barrier, or at the start for layer 0).
    cp_async_wait_all();
    __syncthreads();
#endif
${afterNorm ? '' : earlyCopies}    ${ahead ? 'cp_async_wait_all();\n    ' : ''}row_to_smem(resid, MK_CONST_EARLY ? IN_NORM_W : L.in_norm, H, sh, ${flow ? 'layer == 0 ? nullptr : dpart' : 'nullptr'}, MK_CONST_EARLY);
${afterNorm ? earlyCopies : ''}    ${ahead ? 'GEMV_UNITS(RQKV, H, KS_QKV, SMEM_W, qkv[r] = tobf(acc));' : 'GEMV_UNITS_P(RQKV, H, KS_QKV, REG_W, qkv[r] = tobf(acc), PACE_QKV);'}
    ${
      flow
        ? `// Attention on a kv head waits only for the blocks that wrote its q/k/v rows.
    flag_arrive(sync + SYNC_HEAD, mk_block_heads[blockIdx.x]);`
        : 'mk_old = grid_arrive(bar, ++nbar, trace);'
    }${ahead ? '\n    PREFETCH_UNITS(H, QROWS, KS_O, 0, TO_REG, L.wo + (long long)r * QROWS);' : ''}
    // Keys and values of this warp's first tokens: they do not depend on this step (under
    // MK_KV_EARLY already on their way into shared memory; read after the q/k preparation).
    uint2 kpre[UKV], vpre[UKV];
#pragma unroll
    for (int u = 0; u < UKV && !MK_KV_EARLY; u++) {
      if (kslot[u] >= 0) {
        const long long e = ((long long)kslot[u] * NKV + g) * D + lane * DPL;
#if ${d.headDim} == 128
        kpre[u] = ldw2(L.kc + e);
        vpre[u] = ldw2(L.vc + e);
#else
        kpre[u] = make_uint2(0u, 0u); vpre[u] = make_uint2(0u, 0u);
        for (int i = 0; i < DPL; i++) {
          reinterpret_cast<bf_t*>(&kpre[u])[i] = L.kc[e + i];
          reinterpret_cast<bf_t*>(&vpre[u])[i] = L.vc[e + i];
        }
#endif
      }
    }
    ${
      flow
        ? `if (attends) {
      poll_until(sync + SYNC_HEAD + SLINE * g, (unsigned int)(layer + 1) * mk_head_expect[g], sh, claim, report, codes[2], nbar + 1);
      __syncthreads();
    }`
        : 'grid_wait(bar, nbar, mk_old, sh, claim, report, codes[2], trace);'
    }

    // (2) q/k norm + rotary, the new token's cache rows, split attention.
    if (attends) {
      const bool has_new = len - 1 >= t0 && len - 1 < t1;
#if MK_CONST_EARLY
      // This layer's rows copied at its start (the keys and values, the newest group, may still be on their way).
#if MK_KV_EARLY
      cp_async_wait_1();
#else
      cp_async_wait_all();
#endif
      __syncthreads();
#endif
      // Warps 0..GQ-1: query heads g*GQ+j; warp GQ: the kv head's key; warp GQ+1: its value.
      if (warp < GQ + 1) {
        const bool is_q = warp < GQ;
        const bf_t* x = qkv + (is_q ? (g * GQ + warp) * D : QROWS + g * D);
        const bf_t* nw = is_q ? L.q_norm : L.k_norm;
        // Norm weights and rotary rows are loaded with the head (one round trip for all).
        float a[D / 64], b[D / 64], wa[D / 64], wb[D / 64], ca[D / 64], cb2[D / 64], sa[D / 64], sb[D / 64];
        const long long cb = (long long)pos * D;
        float ss = 0.f;
#pragma unroll
        for (int m = 0; m < D / 64; m++) {
          const int j = lane + 32 * m;
          a[m] = bf(__ldcg(x + j));
          b[m] = bf(__ldcg(x + j + D / 2));
#if MK_CONST_EARLY
          const bf_t* cn = cw + 2 * H + (is_q ? 0 : D);
          wa[m] = bf(cn[j]); wb[m] = bf(cn[j + D / 2]);
          ca[m] = bf(cw[2 * H + 2 * D + j]); cb2[m] = bf(cw[2 * H + 2 * D + j + D / 2]);
          sa[m] = bf(cw[2 * H + 3 * D + j]); sb[m] = bf(cw[2 * H + 3 * D + j + D / 2]);
#else
          wa[m] = bf(__ldg(nw + j)); wb[m] = bf(__ldg(nw + j + D / 2));
          ca[m] = bf(__ldg(cos_t + cb + j)); cb2[m] = bf(__ldg(cos_t + cb + j + D / 2));
          sa[m] = bf(__ldg(sin_t + cb + j)); sb[m] = bf(__ldg(sin_t + cb + j + D / 2));
#endif
          ss = fmaf(a[m], a[m], fmaf(b[m], b[m], ss));
        }
        ss = warp_sum(ss);
        const float rr = rsqrtf(ss / (float)D + EPS);
#pragma unroll
        for (int m = 0; m < D / 64; m++) {
          const int j = lane + 32 * m;
          const float n1 = rbf(a[m] * rr * wa[m]);
          const float n2 = rbf(b[m] * rr * wb[m]);
          const float o1 = rbf(n1 * ca[m] - n2 * sa[m]);
          const float o2 = rbf(n2 * cb2[m] + n1 * sb[m]);
          sh.qk[warp][j] = o1;
          sh.qk[warp][j + D / 2] = o2;
          if (!is_q && has_new && slot_new >= 0) {
            L.kc[(slot_new * NKV + g) * D + j] = tobf(o1);
            L.kc[(slot_new * NKV + g) * D + j + D / 2] = tobf(o2);
          }
        }
      } else if (warp == GQ + 1) {
        const bf_t* x = qkv + QROWS + KVROWS + g * D;
#if MK_JOIN_LOADS
        // All of the lane's elements loaded first: the stores below would otherwise hold each
        // later load behind the round trip of the one before (in-order issue waits on the operand).
        unsigned short vv[D / 32];
#pragma unroll
        for (int m = 0; m < D / 32; m++) vv[m] = __ldcg(x + lane + 32 * m);
#pragma unroll
        for (int m = 0; m < D / 32; m++) {
          const int j = lane + 32 * m;
          sh.qk[GQ + 1][j] = bf(vv[m]);
          if (has_new && slot_new >= 0) L.vc[(slot_new * NKV + g) * D + j] = vv[m];
        }
#else
        for (int j = lane; j < D; j += 32) {
          const unsigned short v = __ldcg(x + j);
          sh.qk[GQ + 1][j] = bf(v);
          if (has_new && slot_new >= 0) L.vc[(slot_new * NKV + g) * D + j] = v;
        }
#endif
      }
      __syncthreads();
      MK_STAMP(0);
#if MK_KV_EARLY
      {
        // This thread's own copies (each lane reads what it copied): no block or warp barrier needed.
        cp_async_wait_all();
        const uint2* skv = reinterpret_cast<const uint2*>(smw);
#pragma unroll
        for (int u = 0; u < UKV; u++) {
          kpre[u] = skv[((warp * UKV + u) * 2) * 32 + lane];
          vpre[u] = skv[((warp * UKV + u) * 2 + 1) * 32 + lane];
        }
      }
#endif
      float q[GQ][DPL];
#pragma unroll
      for (int hh = 0; hh < GQ; hh++)
#pragma unroll
        for (int e = 0; e < DPL; e++) q[hh][e] = sh.qk[hh][lane * DPL + e];
      float m[GQ], l[GQ], acc[GQ][DPL];
#pragma unroll
      for (int hh = 0; hh < GQ; hh++) {
        m[hh] = MK_NEG_INF; l[hh] = 0.f;
#pragma unroll
        for (int e = 0; e < DPL; e++) acc[hh][e] = 0.f;
      }
      // One online-softmax step of a token with its (scaled) scores sc[] and its value row's DPL
      // elements of this lane, packed bfloat16 (unpacked here: fewer live registers).
      auto take = [&](const float (&sc)[GQ], uint2 vw) {
        const bf_t* vb = reinterpret_cast<const bf_t*>(&vw);
        float vf[DPL];
#pragma unroll
        for (int e = 0; e < DPL; e++) vf[e] = bf(vb[e]);
#pragma unroll
        for (int hh = 0; hh < GQ; hh++) {
          const float mn = fmaxf(m[hh], sc[hh]);
          const float alpha = __expf(m[hh] - mn);
          const float p = __expf(sc[hh] - mn);
          l[hh] = l[hh] * alpha + p;
#pragma unroll
          for (int e = 0; e < DPL; e++) acc[hh][e] = fmaf(p, vf[e], acc[hh][e] * alpha);
          m[hh] = mn;
        }
      };
      // The prefetched tokens (a split holds at least UKV per warp): all their scores first, so the
      // UKV x GQ warp sums are independent and overlap, then the softmax steps in token order.
      {
        float sc[UKV][GQ];
#pragma unroll
        for (int u = 0; u < UKV; u++) {
          if (t0 + warp + u * NW == len - 1) {
            // The new token: its rotated key and value from shared memory (bfloat16 values), packed.
            kpre[u] = pack_row(&sh.qk[GQ][lane * DPL]);
            vpre[u] = pack_row(&sh.qk[GQ + 1][lane * DPL]);
          }
          const bf_t* kb = reinterpret_cast<const bf_t*>(&kpre[u]);
#pragma unroll
          for (int hh = 0; hh < GQ; hh++) {
            float d0 = 0.f;
#pragma unroll
            for (int e = 0; e < DPL; e++) d0 = fmaf(q[hh][e], bf(kb[e]), d0);
            sc[u][hh] = d0;
          }
        }
#pragma unroll
        for (int u = 0; u < UKV; u++)
#pragma unroll
          for (int hh = 0; hh < GQ; hh++) sc[u][hh] = warp_sum(sc[u][hh]) * SCALE;
#pragma unroll
        for (int u = 0; u < UKV; u++)
          if (t0 + warp + u * NW < t1) take(sc[u], vpre[u]);
      }
      // Tokens past the prefetched ones (contexts longer than S x NW x UKV), loaded here.
      for (int t = t0 + warp + UKV * NW; t < t1; t += NW) {
        float sc[GQ];
        uint2 kw, vw;
        if (t == len - 1) {
          kw = pack_row(&sh.qk[GQ][lane * DPL]);
          vw = pack_row(&sh.qk[GQ + 1][lane * DPL]);
        } else {
          int bk = table[t / BS];
          if (bk < 0 || bk >= NCB) { kiln_report(claim, report, codes[1], bk, NCB); bk = 0; }
          const long long e0 = (((long long)bk * BS + t % BS) * NKV + g) * D + lane * DPL;
          kw = make_uint2(0u, 0u); vw = make_uint2(0u, 0u);
#if ${d.headDim} == 128
          kw = __ldg(reinterpret_cast<const uint2*>(L.kc + e0));
          vw = __ldg(reinterpret_cast<const uint2*>(L.vc + e0));
#else
          for (int i = 0; i < DPL; i++) {
            reinterpret_cast<bf_t*>(&kw)[i] = L.kc[e0 + i];
            reinterpret_cast<bf_t*>(&vw)[i] = L.vc[e0 + i];
          }
#endif
        }
        const bf_t* kb = reinterpret_cast<const bf_t*>(&kw);
#pragma unroll
        for (int hh = 0; hh < GQ; hh++) {
          float d0 = 0.f;
#pragma unroll
          for (int e = 0; e < DPL; e++) d0 = fmaf(q[hh][e], bf(kb[e]), d0);
          sc[hh] = warp_sum(d0) * SCALE;
        }
        take(sc, vw);
      }
      if (lane == 0) {
#pragma unroll
        for (int hh = 0; hh < GQ; hh++) { sh.wm[warp][hh] = m[hh]; sh.wl[warp][hh] = l[hh]; }
      }
#pragma unroll
      for (int hh = 0; hh < GQ; hh++)
#pragma unroll
        for (int e = 0; e < DPL; e++) sh.wacc[warp][hh][lane * DPL + e] = acc[hh][e];
      __syncthreads();
      MK_STAMP(1);
      // Thread (hh, dd) merges the warps.
      const int hh = threadIdx.x / D, dd = threadIdx.x % D;
      float M = MK_NEG_INF, Lsum = 0.f, A = 0.f;
      if (hh < GQ) {
#pragma unroll
        for (int i = 0; i < NW; i++) M = fmaxf(M, sh.wm[i][hh]);
#pragma unroll
        for (int i = 0; i < NW; i++) {
          const float f = sh.wm[i][hh] == MK_NEG_INF ? 0.f : __expf(sh.wm[i][hh] - M);
          Lsum = fmaf(sh.wl[i][hh], f, Lsum);
          A = fmaf(sh.wacc[i][hh][dd], f, A);
        }
      }
      // The split's unnormalised partials; every block folds them at the start of the o projection.
      if (hh < GQ) {
        float* pp = part + ((long long)(g * S + s) * GQ + hh) * (D + 2);
        pp[dd] = A;
        if (dd == 0) { pp[D] = M; pp[D + 1] = Lsum; }
      }
    }
    mk_old = grid_arrive(bar, ++nbar, trace${flow ? ', attends' : ''});
    ${
      ahead
        ? `PREFETCH_UNITS(INTER, H, KS_GU, 0, TO_SMEM, L.wg + (long long)r * H);
    PREFETCH_UNITS(INTER, H, KS_GU, GU_HALF, TO_SMEM, L.wu + (long long)r * H);
    cp_async_commit();`
        : 'PREFETCH_UNITS(H, QROWS, KS_O, 0, TO_REG, L.wo + (long long)r * QROWS);'
    }
    grid_wait(bar, nbar, mk_old, sh, claim, report, codes[2], trace);

    // (3) o projection + residual. Its input, the attention output, is folded from the splits'
    // partials by every block: two L2 round trips (their maxima and sums, then the accumulators)
    // where a separate fold would take a ticket, read, write and be read again.
#if MK_RESID_EARLY
    // The residual of each of this warp's rows, in the fold's first round trip.
    RESID_UNITS(rs_o, KS_O, ${flow ? 'resid_row(resid, layer == 0 ? nullptr : dpart, r)' : 'bf(__ldcg(resid + r))'});
#define MK_RESID_O(r) rs_o[j]
#else
#define MK_RESID_O(r) ${flow ? 'resid_row(resid, layer == 0 ? nullptr : dpart, r)' : 'bf(__ldcg(resid + r))'}
#endif
#if MK_JOIN_LOADS
    // This thread's FOLD_N outputs i = threadIdx.x + k * NT, their splits FOLD_U at a time: each
    // chunk's loads of every output issued before any is used (one round trip a chunk, where the
    // serial form took one per output).
    // Output k's partial of split s2 is at FOLD_AT(k, s2) = fold0 + k's offset + s2 * GQ * (D + 2); NT is a multiple of
    // GQ * D (megakernelUnsupported), so output k's head is k * NT / D past output 0's, its kv
    // group k * NT / (GQ * D) past it: one pointer and constant offsets (the register cap).
    const int hq0 = (int)threadIdx.x / D;
    const float* fold0 = part + ((long long)((hq0 / GQ) * S) * GQ + hq0 % GQ) * (D + 2) + (int)threadIdx.x % D;
#define FOLD_AT(k, s2) (fold0 + (long long)(k) * (NT / (GQ * D)) * S * GQ * (D + 2) + (long long)(s2) * GQ * (D + 2))
#define FOLD_LOAD(pv, s0) \
    _Pragma("unroll") for (int u = 0; u < FOLD_U; u++) \
    _Pragma("unroll") for (int k = 0; k < FOLD_N; k++) pv[u][k] = ((s0) + u < n_active && (int)threadIdx.x + k * NT < QROWS) ? __ldcg(FOLD_AT(k, (s0) + u)) : 0.f;
    float pv[FOLD_U][FOLD_N];
#if MK_FOLD_HOIST
    // joinLoads 'hoist': the first chunk's loads go out before the maxima and sums are read, so
    // both share one round trip (the chunk does not depend on them; only its use does).
    FOLD_LOAD(pv, 0);
#endif
#endif
    for (int i = threadIdx.x; i < NH * n_active; i += NT) {
      const int hq = i / n_active, s2 = i % n_active;
      const float* pp = part + ((long long)((hq / GQ) * S + s2) * GQ + hq % GQ) * (D + 2);
      sh.pm[hq][s2] = __ldcg(pp + D);
      sh.pl[hq][s2] = __ldcg(pp + D + 1);
    }
    __syncthreads();
#if MK_JOIN_LOADS
    // Each head's split weights exp(m_s - M) and their sum, computed once per head (thread hq)
    // into its shared row in place of the maxima and sums: the outputs below then hold only their
    // accumulators (the register cap), and get the serial form's numbers in the same order.
    if ((int)threadIdx.x < NH) {
      const int hq = threadIdx.x;
      float M = MK_NEG_INF;
      for (int s2 = 0; s2 < n_active; s2++) M = fmaxf(M, sh.pm[hq][s2]);
      float Lsum = 0.f;
      for (int s2 = 0; s2 < n_active; s2++) {
        const float f = __expf(sh.pm[hq][s2] - M);
        Lsum = fmaf(sh.pl[hq][s2], f, Lsum);
        sh.pm[hq][s2] = f;
      }
      sh.pl[hq][0] = Lsum;
    }
    __syncthreads();
    {
      float fa[FOLD_N];
#pragma unroll
      for (int k = 0; k < FOLD_N; k++) fa[k] = 0.f;
      for (int s0 = 0; s0 < n_active; s0 += FOLD_U) {
        if (!MK_FOLD_HOIST || s0 > 0) { FOLD_LOAD(pv, s0); }
#pragma unroll
        for (int u = 0; u < FOLD_U; u++) {
          if (s0 + u >= n_active) break;
#pragma unroll
          for (int k = 0; k < FOLD_N; k++) fa[k] = fmaf(pv[u][k], sh.pm[min(hq0 + k * (NT / D), NH - 1)][s0 + u], fa[k]);
        }
      }
#undef FOLD_AT
#undef FOLD_LOAD
#pragma unroll
      for (int k = 0; k < FOLD_N; k++) {
        const int i = threadIdx.x + k * NT;
        if (i < QROWS) sh.xs[i] = rbf(fa[k] / sh.pl[i / D][0]);
      }
    }
#else
    for (int i = threadIdx.x; i < QROWS; i += NT) {
      const int hq = i / D, dd = i % D;
      float M = MK_NEG_INF;
      for (int s2 = 0; s2 < n_active; s2++) M = fmaxf(M, sh.pm[hq][s2]);
      float Lsum = 0.f, A = 0.f;
      const float* pp = part + ((long long)((hq / GQ) * S) * GQ + hq % GQ) * (D + 2) + dd;
#pragma unroll 4
      for (int s2 = 0; s2 < n_active; s2++) {
        const float f = __expf(sh.pm[hq][s2] - M);
        Lsum = fmaf(sh.pl[hq][s2], f, Lsum);
        A = fmaf(__ldcg(pp + (long long)s2 * GQ * (D + 2)), f, A);
      }
      sh.xs[i] = rbf(A / Lsum);
    }
#endif
    __syncthreads();
    GEMV_UNITS_P(H, QROWS, KS_O, REG_W, h[r] = tobf(MK_RESID_O(r) + rbf(acc)), PACE_O);
#undef MK_RESID_O
    mk_old = grid_arrive(bar, ++nbar, trace);
    ${
      ahead
        ? 'PREFETCH_UNITS(H, INTER, KS_DOWN, 0, TO_REG, L.wd + (long long)r * INTER);'
        : flow
          ? `PREFETCH_UNITS_X(IS, H, KS_GU, 0, TO_REG, L.wg + (long long)(grp * IS + r) * H, lgw, twg, ROUNDSG(IS, KS_GU));
    PREFETCH_UNITS_X(IS, H, KS_GU, GU_HALF, TO_REG, L.wu + (long long)(grp * IS + r) * H, lgw, twg, ROUNDSG(IS, KS_GU));`
          : `PREFETCH_UNITS(INTER, H, KS_GU, 0, TO_REG, L.wg + (long long)r * H);
    PREFETCH_UNITS(INTER, H, KS_GU, GU_HALF, TO_REG, L.wu + (long long)r * H);`
    }
    grid_wait(bar, nbar, mk_old, sh, claim, report, codes[2], trace);

${
      flow
        ? `    // (4) RMSNorm + gate/up projections of this group's slice + silu * mul; then, once the group's
    // blocks have all written theirs, the down projection's partial sums over the slice.
    MK_CONST_WAIT();
    row_to_smem(h, MK_CONST_EARLY ? POST_NORM_W : L.post_norm, H, sh, nullptr, MK_CONST_EARLY);
    GATE_UP_UNITS(IS, REG_W, PACE_GU, lgw, twg, ROUNDSG(IS, KS_GU), grp * IS);
    flag_arrive(sync + SYNC_GROUP + SLINE * grp, 1u);
    MK_STAMP(2);
    // The down weights of this block's units are loaded while the group's other blocks finish
    // (measured: loading them into shared memory at the barrier before the MLP instead shortened
    // this wait by ~1 us but lengthened that barrier's release by ~2 us; commit 2a5d935).
    PREFETCH_UNITS_X(H, IS, KS_DOWN, 0, TO_REG, L.wd + (long long)r * INTER + grp * IS, lgw, twg, ROUNDSG(H, KS_DOWN));
    MK_NEXT_NORM_COPY();
    poll_until(sync + SYNC_GROUP + SLINE * grp, (unsigned int)(layer + 1) * gsize, sh, claim, report, codes[2], nbar + 1);
    __syncthreads();
    MK_STAMP(3);

    // (5) down projection's partial sums over the slice (the next layer adds the groups' and the residual).
    row_to_smem(act + grp * IS, nullptr, IS, sh);
    GEMV_UNITS_XP(H, IS, KS_DOWN, REG_W, dpart[grp * H + r] = acc, lgw, twg, ROUNDSG(H, KS_DOWN), PACE_DOWN);
`
        : `    // (4) RMSNorm + gate/up projections + silu * mul.
    ${ahead ? 'cp_async_wait_all();\n    ' : ''}MK_CONST_WAIT();
    row_to_smem(h, MK_CONST_EARLY ? POST_NORM_W : L.post_norm, H, sh, nullptr, MK_CONST_EARLY);
    GATE_UP_UNITS(INTER, ${ahead ? 'SMEM_W, NO_ISSUE' : 'REG_W, PACE_GU'}, gw, TW, ROUNDS(INTER, KS_GU), 0);
    mk_old = grid_arrive(bar, ++nbar, trace);
    ${
      ahead
        ? `if (layer + 1 < NL) {
      const LayerPtrs L2 = layers[layer + 1];
      PREFETCH_UNITS(RQKV, H, KS_QKV, 0, TO_SMEM, qkv_row(L2, r));
      cp_async_commit();
    }`
        : 'PREFETCH_UNITS(H, INTER, KS_DOWN, 0, TO_REG, L.wd + (long long)r * INTER);\n    MK_NEXT_NORM_COPY();'
    }
    grid_wait(bar, nbar, mk_old, sh, claim, report, codes[2], trace);

    // (5) down projection + residual.
#if MK_RESID_EARLY
    // The residual of each of this warp's rows, loaded with the activation row (one round trip).
    RESID_UNITS(rs_d, KS_DOWN, bf(__ldcg(h + r)));
#define MK_RESID_D(r) rs_d[j]
#else
#define MK_RESID_D(r) bf(__ldcg(h + r))
#endif
    row_to_smem(act, nullptr, INTER, sh);
    GEMV_UNITS_P(H, INTER, KS_DOWN, REG_W, h[r] = tobf(MK_RESID_D(r) + rbf(acc)), PACE_DOWN);
#undef MK_RESID_D
`
    }
    mk_old = grid_arrive(bar, ++nbar, trace);
    if (${ahead ? 'false' : 'layer + 1 < NL'}) {
      ${ahead ? '' : 'const LayerPtrs L2 = layers[layer + 1];\n      PREFETCH_UNITS(RQKV, H, KS_QKV, 0, TO_REG, qkv_row(L2, r));'}
    } else if (layer + 1 == NL && gw < VOCAB) {
      // The LM head's first row.
#pragma unroll
      for (int c = 0; c < H / 256; c++) w[c] = ldw(lm_head + (long long)gw * H + c * 256 + lane * 8);
    }
    grid_wait(bar, nbar, mk_old, sh, claim, report, codes[2], trace);
  }

  // Final norm + LM head: rows streamed two deep (151936 rows do not fit in registers).
  MK_CONST_WAIT();
  row_to_smem(h, MK_CONST_EARLY ? IN_NORM_W : final_norm, H, sh, ${flow ? 'dpart' : 'nullptr'}, MK_CONST_EARLY);
  {
    uint4 cur[H / 256], nxt[H / 256];
    int r = gw;
#pragma unroll
    for (int c = 0; c < H / 256; c++) cur[c] = w[c];
    for (; r < VOCAB; r += TW) {
      const int rn = r + TW;
      if (rn < VOCAB) {
#pragma unroll
        for (int c = 0; c < H / 256; c++) nxt[c] = ldw(lm_head + (long long)rn * H + c * 256 + lane * 8);
      }
      float acc = 0.f;
#pragma unroll
      for (int c = 0; c < H / 256; c++) acc += dot8(cur[c], sh.xs + c * 256 + lane * 8);
      acc = warp_sum(acc);
      if (lane == 0) logits[r] = tobf(acc);
#pragma unroll
      for (int c = 0; c < H / 256; c++) cur[c] = nxt[c];
    }
  }

  // The last block out resets the barrier for the next launch.
  __syncthreads();
#if MK_TRACE
  if (threadIdx.x == 0) { const unsigned int t = mk_now(); trace[((long long)(NBAR + 1) * G + blockIdx.x) * 2] = t; trace[((long long)(NBAR + 1) * G + blockIdx.x) * 2 + 1] = t; }
#endif
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(sync + 1, 1u) == G - 1) {
      for (int i = 0; i < NSYNC; i++) sync[i] = 0u;
      __threadfence();
    }
  }
}
`;
  // 'ahead': the q/k/v and gate/up weights; else kvLoad 'early': [warp][token][key, value][lane] uint2, then constLoad 'early': the rows (MK_CONST_EARLY).
  const kvBytes = variant.kvLoad === 'early' ? MK_WARPS * KV_PREFETCH * 2 * 32 * 8 : 0;
  const constBytes = variant.constLoad === 'early' ? (2 * d.hidden + 4 * d.headDim) * 2 : 0;
  const dynamicShared = ahead ? MK_WARPS * smemWords * 32 * 16 : kvBytes + constBytes;
  if (!host) return { name, source, dynamicShared };
  // Host entry: the kernel over the emulated grid, its 21 arguments as raw addresses.
  const args = Array.from({ length: 21 }, (_, i) => `AnyPtr{(void*)a[${i}]}`).join(', ');
  const entry = `
extern "C" void mk_host_launch(const unsigned long long* a) {
  emu_grid_launch(G, NT, ${megakernelSharedBytes(d, variant) + 16 + dynamicShared}, [&]() { ${name}(${args}); });
}
`;
  return { name, source: source + entry, dynamicShared };
}
