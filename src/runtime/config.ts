/**
 * Kiln's configuration in one place: every KILN_* environment variable and every runtime setter
 * that tunes behaviour is declared here once (name, type, default, one-line doc), read through
 * `getOption`, listed by `kiln info` (`describeOptions`) and hashed as a whole into the compile
 * cache keys (`configFingerprint`, a part of the compiled-program, autotune and GEMM-tuning keys).
 *
 * Resolution, highest first: a runtime override (`setOption`, which the modules' exported setters
 * such as setCpuPath call), then the environment variable, then the declared default. An empty
 * environment value means unset for every option. Options marked `once` look at the environment
 * only at their first read (they were constants computed when their module loaded; overrides
 * still apply); the others read it at every `getOption`, so a changed process.env takes effect
 * (the parse is memoised per raw string, so a read costs about what the old direct read did).
 * Runtime-only options (`env: false`, dotted names) have no variable: only their setter sets them.
 *
 * Parse errors name the variable and what it accepts (e.g. "KILN_CPU_PATH must be one of native,
 * wasm, js, auto; got 'gpu'"). Booleans take 0/1, true/false, on/off (any case).
 *
 * `codegen: true` marks options that can change generated code, which kernels run, or tuning
 * results; only those are in the fingerprint, so a log setting or the cache folder never makes the
 * compile cache miss. This is the bottom layer: it imports nothing from src/ outside runtime/.
 */
import { createHash, env } from '../platform/index.js';

type OptionType = 'boolean' | 'integer' | 'number' | 'string' | 'enum';

interface Decl {
  readonly type: OptionType;
  readonly default: unknown;
  readonly doc: string;
  /** Part of configFingerprint: may change generated code, the kernels chosen, or tuning results. */
  readonly codegen: boolean;
  /** Read from the environment variable of this name (false: runtime-only, set by its setter). */
  readonly env: boolean;
  /** enum: the accepted values (the first parse of each is the canonical spelling). */
  readonly values?: readonly string[];
  /** enum: other spellings accepted from the environment, mapped to a value. */
  readonly aliases?: Readonly<Record<string, string>>;
  /** integer / number: the least accepted value. */
  readonly min?: number;
  /** The environment is read once, at the first read (see the header). */
  readonly once?: boolean;
  /** What overrides it at run time (exported setters, or assignable properties). */
  readonly setter?: string;
}

/** The declarations, sorted by name within each group. */
export const OPTIONS = {
  KILN_AUTOTUNE: { type: 'boolean', default: true, env: true, codegen: true, doc: 'Autotuning of generated kernels; 0: nothing is timed and the first candidate config wins' },
  KILN_BENCH_STEADY_MS: { type: 'integer', min: 0, default: 3000, env: true, codegen: false, doc: "`kiln bench` and the webgpu side-by-side benchmarks on an accelerator first run the functions round-robin until their device time stops falling (the rounds of the last 300 ms no more than 2% faster than those before; src/bench/steady.ts), for at most this many milliseconds: under Dawn/Vulkan an H100's SM clock took seconds of half-busy load to climb from its idle 345 MHz back to 1980 (issue #20, session 29); 0: no such warm-up" },
  KILN_BENCH_WARM_MS: { type: 'integer', min: 0, default: 10, env: true, codegen: false, doc: "`kiln bench` on an accelerator runs each function for this many milliseconds (calls until then, then a sync) right before each of its timed runs, so a run is timed at the clock sustained work brings the GPU to, not after the idle gaps of compiles and the other variant (issue #20: webgpu kernels timed at 345-600 MHz median SM clock ran 4x slower); 0: no warm-up before each run, as before" },
  KILN_BENCH_FAIL: { type: 'string', default: undefined, env: true, codegen: false, doc: 'Test hook: `kiln bench` makes these workloads (comma-separated) throw after building, to show a failed workload is reported and exits 1' },
  KILN_BUILD_NOTE_MS: { type: 'integer', min: 0, default: 500, env: true, codegen: false, doc: 'A native (cc) or NVRTC build taking at least this many ms prints a one-line note on stderr; 0: every build' },
  KILN_CACHE_DIR: { type: 'string', default: undefined, env: true, codegen: false, doc: 'Folder of the on-disk cache (default $XDG_CACHE_HOME/kiln, else ~/.cache/kiln; `kiln cache info`)' },
  KILN_CACHE_MAX_MB: { type: 'number', min: 0, default: 2048, env: true, codegen: false, doc: 'Size cap of the on-disk cache in MiB: past it, least recently used files are evicted after a write; 0: no cap' },
  KILN_CC: { type: 'string', default: undefined, env: true, codegen: false, doc: 'C compiler of the native cpu path (default: the first of cc, gcc, clang that works; its identity is in the object key)' },
  KILN_COMPILE_FAST_CALL: { type: 'boolean', default: true, env: true, codegen: false, doc: "Last-call fast path of compiled functions; 0: the full guard check on every call (read when a function is compiled)" },
  KILN_COMPILE_VERIFY: { type: 'boolean', default: false, env: true, codegen: false, doc: 'kiln.compile re-traces every call and fails on any difference from the compiled trace (a closed-over value that changed); default of the verify option, read when a function is compiled' },
  KILN_COMPILE_WORKERS: { type: 'integer', min: 0, default: undefined, env: true, codegen: false, setter: 'setCompileWorkers', doc: 'Compile worker pool size; 0 compiles in-process (default max(1, min(8, cores - 1)))' },
  KILN_CPU_DECODE_STEP_TRACE: { type: 'boolean', default: false, env: true, codegen: false, doc: "Measurement: the cpu whole-step decoder records when each phase of a step opened and ended (bench/cpu-decode-phases.ts reads them; read when the decoder is made); off: no clock reads" },
  KILN_CPU_GEMV: { type: 'boolean', default: true, env: true, codegen: true, doc: 'Linears of at most 4 rows (decode) on the native cpu path stream the float32 / bfloat16 weight once (GEMV); 0: the GEMM / JS engine as before' },
  KILN_CPU_GEMV_STREAM: { type: 'boolean', default: true, env: true, codegen: true, doc: 'The native cpu GEMV reads one weight row at a time, front to back (one sequential stream per thread); 0: 4 (float32) or 8 (AVX512-BF16) interleaved rows per pass as before (A/B: bench/cpu-decode-bound.ts --ab)' },
  KILN_CPU_GEMV_SPLIT: { type: 'boolean', default: true, env: true, codegen: false, doc: 'The native cpu GEMV splits each weight\'s rows evenly over the threads, one contiguous run per thread; 0: items of KILN_CPU_GEMV_ITEM_KIB claimed from a shared counter as before (A/B: bench/cpu-decode-bound.ts --ab)' },
  KILN_CPU_WEIGHT_PREFETCH_MB: { type: 'integer', min: 0, default: 0, env: true, codegen: false, doc: 'The native cpu GEMV: pool workers waiting between jobs prefetch the weights the next GEMVs of a repeating sequence (a decode step) will read, up to this many MiB past the one being read (kernels/cpu/native/pool-c.ts, pf_*), so DRAM streams while the host issues ops; 0: off (the default: it did not shorten a Qwen3-0.6B decode step on the H200 host or the 2-core VM, bench/results/h200-s22-cpupf-2026-12-05.json)' },
  KILN_CPU_GEMV_SPLIT_MAX_THREADS: { type: 'integer', min: 1, default: 4, env: true, codegen: false, doc: 'KILN_CPU_GEMV_SPLIT applies to GEMV calls on at most this many threads (measured: better at 2, worse at 16 in Qwen3-0.6B bfloat16 decode; 3 to 8 not measured); set it high to force the split for an A/B' },
  KILN_CPU_GEMV_ITEM_KIB: { type: 'number', min: 1, default: 64, env: true, codegen: false, doc: 'Weight bytes (KiB) per work item of the native cpu GEMV when KILN_CPU_GEMV_SPLIT is 0: threads claim items from one counter, so a call ends when its last item does; 64 as before (A/B: scripts/device/gemv-sizes.mjs)' },
  KILN_CPU_HUGE_PAGES: { type: 'boolean', default: true, env: true, codegen: false, doc: 'Qwen3 models built or loaded on the cpu keep each weight of at least 2 MiB in a 2 MiB-aligned mapping advised for transparent huge pages (Linux; kernels/cpu/native/huge-pages.ts), which the decode GEMVs stream faster; 0: ArrayBuffers as before (A/B: bench/cpu-decode-bound.ts --ab)' },
  KILN_CPU_PAGED_SPLIT: { type: 'boolean', default: true, env: true, codegen: false, doc: 'The native cpu llm.pagedAttention splits each sequence\'s keys into ranges across the threads when there are fewer (sequence, kv head) items than two per thread (flash-decoding: batch-1 decode at long contexts), merged by rescaling; 0: one item per (sequence, kv heads) as before' },
  KILN_CPU_PAGED_VEC: { type: 'boolean', default: true, env: true, codegen: false, doc: 'The native cpu llm.pagedAttention widens each bfloat16 key and value row in registers where the head dim is a multiple of 16 (no float copy of the row; a tree sum per score); 0: the row copied to float32 first as before' },
  KILN_CPU_PATH: { type: 'enum', values: ['native', 'wasm', 'js', 'auto'], default: 'auto', env: true, codegen: true, setter: 'setCpuPath', doc: 'Code path of cpu GEMMs and compiled kernels; auto: native where a C compiler works, else wasm, else js' },
  KILN_CUDA_CONV_IMPL: { type: 'enum', values: ['auto', 'im2col'], default: 'auto', env: true, once: true, codegen: true, setter: 'convImpl.mode', doc: 'Eager cuda conv2d: auto (implicit GEMM wherever it applies) or im2col (always im2col + cuBLASLt)' },
  KILN_CUDA_CONV_TF32: { type: 'boolean', default: true, env: true, once: true, codegen: true, setter: 'backends.cuda.allowTf32Conv', doc: 'float32 cuda convolutions on TF32 tensor cores' },
  KILN_CUDA_FAST_MATH: { type: 'boolean', default: true, env: true, once: true, codegen: true, doc: 'Fast float exp/sigmoid/silu/tanh in generated cuda kernels' },
  KILN_CUDA_GRAPHS: { type: 'boolean', default: undefined, env: true, codegen: true, doc: "CUDA graph replay of compiled cuda programs: 0 never, 1 always; unset: 'reduce-overhead' always, other modes where measured faster" },
  KILN_CUDA_PAGED_ATTN: { type: 'enum', values: ['v1', 'v2', 'v3'], default: 'v3', env: true, codegen: true, doc: "cuda llm.pagedAttention kernel: v3 (the default since session 17's H200 A/B: v2 with the next chunk's K/V loads in flight during the current chunk's math, exp2 softmax, and splits that keep every block resident: 1 split at batch 64 on an H200; Qwen3-0.6B bf16 decode batch 8 5,840 -> 6,393 tok/s, batch 64 25,057 -> 28,689), v1 (a split kernel plus a separate reduce kernel) or v2 (chunks split over blocks, 16-byte K/V loads, the splits folded by the last-arriving block in the same launch)" },
  KILN_CUDA_PAGED_UNROLL: { type: 'integer', min: 0, default: 0, env: true, codegen: true, doc: 'cuda llm.pagedAttention v3 only: token batches a warp loads per chunk (1..8, each double-buffered in registers); 0: the kernel rule (at most 2; 2 for bfloat16 Qwen3 heads). For benchmarks' },
  KILN_CUDA_PAGED_INDEX: { type: 'enum', values: ['fast', 'div'], default: 'fast', env: true, codegen: true, doc: "cuda llm.pagedAttention v3 only: how a token's cache address is formed. fast: a shift and a mask for a power-of-two block size and 32-bit products when the cache has fewer than 2^31 elements; div: integer division by the run-time block size and 64-bit products (the form before session 18, for an A/B)" },
  KILN_CUDA_PAGED_PIPE: { type: 'enum', values: ['pingpong', 'copy'], default: 'pingpong', env: true, codegen: true, doc: "cuda llm.pagedAttention v3 only: its chunk loop. pingpong (default): the loop unrolled by two over two named buffers, 16-byte K/V loads as predicated PTX loads into zeroed registers, so nothing waits for a load before its use and two chunks can be in flight (H200, Qwen3-0.6B heads, batch 64, context 256: 28.9 -> 25.4 us; bench/results/h200-s18-pp-2026-12-03.json); copy: the next chunk's registers copied into the current chunk's at the end of each iteration (the form of sessions 17-18)" },
  KILN_CUDA_PAGED_SPLITS: { type: 'integer', min: 0, default: 0, env: true, codegen: true, doc: 'cuda llm.pagedAttention v3 only: splits per (sequence, kv head) pair, bounded by 64 and the table width; 0: the kernel rule (as many as keep all blocks resident at once). For benchmarks' },
  KILN_CUDA_MATMUL_TF32: { type: 'boolean', default: false, env: true, once: true, codegen: true, setter: 'backends.cuda.matmul.allowTf32, setFloat32MatmulPrecision', doc: 'float32 cuda GEMMs on TF32 tensor cores (default exact fp32)' },
  KILN_DECODE_GATE_UP: { type: 'boolean', default: true, env: true, codegen: false, doc: "Eager cpu decode steps of Qwen3 run each MLP's gate and up projections and silu * mul as one llm.gateUpSiluAndMul (one native gated GEMV; silu(g) * u rounded once) in place of four ops; 0: the ops as before (A/B: bench/cpu-decode-bound.ts --ab)" },
  KILN_DECODE_QKV: { type: 'boolean', default: true, env: true, codegen: false, doc: "Eager cpu decode steps of Qwen3 run each attention layer's q, k and v projections as one llm.qkvLinear (one native GEMV job over the three weights, the same bits as three linears) in place of three linears; 0: three as before (A/B: bench/cpu-decode-bound.ts --ab)" },
  KILN_DECODE_MEGAKERNEL: { type: 'boolean', default: undefined, env: true, codegen: false, doc: "The engine's decode runs small-batch steps through the device's whole-step decoder where one is registered and the model fits it (ops/library/whole-step.ts): on the cpu one native call per step of 1 to 4 sequences for a dense float32 or bfloat16 Qwen3 on the native path (kernels/cpu/native/decode-step.ts; the eager step's bits), on cuda batch-1 steps as one persistent kernel for a dense bfloat16 Qwen3 (kernels/cuda/decode-megakernel.ts: every layer and the LM head in one launch, each phase's weights loaded before the grid barrier that precedes it). Unset: on for both (cuda's since session 37: on an H200 1,134 tok/s against the compiled step's 1,106-1,120, bench/results/h200-s37-coop-2026-12-07.json); 1 or 0 decides for every device. Larger batches, and models a decoder does not take, keep the eager or compiled step (read when the decode runner is made)" },
  KILN_DECODE_MEGAKERNEL_LOADS: { type: 'enum', values: ['asm', 'ldg'], default: 'asm', env: true, codegen: true, doc: "How the decode megakernel loads the weights it needs after a grid barrier before reaching it: asm (volatile PTX loads, kept before the barrier in program order) or ldg (__ldg, which the compiler may sink to their use). For the A/B" },
  KILN_DECODE_MEGAKERNEL_STREAM: { type: 'enum', values: ['next', 'ahead'], default: 'next', env: true, codegen: true, doc: "When the decode megakernel loads each phase's weights: next (into registers, between the arrival at and the wait on the grid barrier before the phase) or ahead (two phases before: the q/k/v and gate/up weights into shared memory with cp.async, the o and down weights into registers; ~96 KiB of shared memory per block for Qwen3-0.6B)" },
  KILN_DECODE_MEGAKERNEL_KV_SLOTS: { type: 'enum', values: ['registers', 'shared'], default: 'shared', env: true, codegen: true, doc: "Where the decode megakernel keeps the cache slots of each warp's prefetched tokens: shared (default: read back each layer; ptxas: 24 bytes of spills a thread for Qwen3-0.6B; on an H100 1,029 / 1,028 tok/s against 1,006 / 1,006, bench/results/h100-s27-mk-2026-12-06.json) or registers (live through the launch: 104 bytes of spills)" },
  KILN_DECODE_MEGAKERNEL_KV_LOAD: { type: 'enum', values: ['barrier', 'early'], default: 'early', env: true, codegen: true, doc: "When the decode megakernel loads attention's prefetched keys and values (each warp's first four tokens of its split, cache rows of earlier steps): barrier (into registers between the arrival at and the wait on the barrier before attention) or early (default: in the layer's first phase (KILN_DECODE_MEGAKERNEL_EARLY_AT), with cp.async into 32 KiB of shared memory, landing during the q/k/v GEMV). Needs KILN_DECODE_MEGAKERNEL_STREAM=next; under =ahead the default gives way" },
  KILN_DECODE_MEGAKERNEL_CONST_LOAD: { type: 'enum', values: ['inline', 'early'], default: 'early', env: true, codegen: true, doc: "Where the decode megakernel's small DRAM rows come from: inline (the norm weights, q/k norm weights and the step's rotary rows loaded in the first round trip of the phase that uses them, beside its activations from L2, so that round trip takes DRAM's latency) or early (default: copied with cp.async into shared memory a phase or more before: the input norm's in the barrier window before the previous layer's down projection, the others in the layer's first phase). Needs KILN_DECODE_MEGAKERNEL_STREAM=next; under =ahead the default gives way" },
  KILN_DECODE_MEGAKERNEL_RESID_LOAD: { type: 'enum', values: ['end', 'early'], default: 'early', env: true, codegen: true, doc: "When the decode megakernel's o and down projections read the residual they add: end (in the GEMV's epilogue: an L2 round trip between the row's sum and the barrier) or early (default: at the phase's start, in the round trip of its first reads). Needs KILN_DECODE_MEGAKERNEL_STREAM=next; under =ahead the default gives way" },
  KILN_DECODE_MEGAKERNEL_JOIN_LOADS: { type: 'enum', values: ['serial', 'joint', 'hoist'], default: 'joint', env: true, codegen: true, doc: "How the decode megakernel orders the loads of a thread's several outputs where each takes an L2 round trip (the attention fold at the start of the o projection, the value row): serial (one output's after another: a round trip each), joint (default: all issued before any is used: one round trip; bit-identical results) or hoist (joint, with the fold's first loads issued before the splits' maxima and sums are read, so the two round trips overlap). With the early forms, on an H100: 1,120 / 1,122 tok/s against 1,036 / 1,038 for the session-37 form (bench/results/h100-s38-mk2-2026-12-07.json)" },
  KILN_DECODE_MEGAKERNEL_EARLY_AT: { type: 'enum', values: ['start', 'norm'], default: 'norm', env: true, codegen: true, doc: "Where a decode megakernel layer issues its early copies (KILN_DECODE_MEGAKERNEL_CONST_LOAD / _KV_LOAD=early): start (before the input norm's loads) or norm (default: after the norm's round trip, so it does not queue behind them; on an H100 1,120 / 1,122 tok/s against 1,101 / 1,103)" },
  KILN_DECODE_MEGAKERNEL_ARRIVE: { type: 'enum', values: ['fence', 'release', 'flag'], default: 'fence', env: true, codegen: true, doc: "How a decode megakernel block arrives at a grid barrier: fence (default: __threadfence, then an atomic add), release (one red.release.gpu add, no separate full fence) or flag (an acq_rel atomic add; the block that completes the count raises a flag on its own line, which the others poll; not under KILN_DECODE_MEGAKERNEL_SYNC=flow). Measurement (issue #17)" },
  KILN_DECODE_MEGAKERNEL_POLL: { type: 'enum', values: ['acquire', 'relaxed'], default: 'acquire', env: true, codegen: true, doc: "How the decode megakernel polls a grid barrier: acquire (default: every poll an acquire load) or relaxed (relaxed loads, then one fence.acq_rel.gpu once the count is reached). Measurement (issue #17)" },
  KILN_DECODE_MEGAKERNEL_SYNC: { type: 'enum', values: ['grid', 'flow'], default: 'grid', env: true, codegen: true, doc: "How the decode megakernel's phases wait for each other: grid (five grid barriers a layer) or flow (three: before the o projection, before the MLP and after it; attention waits for a counter of its kv head's q/k/v writers, and the MLP runs in groups of blocks (KILN_DECODE_MEGAKERNEL_GROUPS), each computing gate/up over its slice of the intermediate row, waiting for its own blocks only and writing the down projection's partial sums over the slice, which the next layer adds in group order). Needs KILN_DECODE_MEGAKERNEL_STREAM=next" },
  KILN_DECODE_MEGAKERNEL_PACE: { type: 'integer', min: 0, default: 6, env: true, codegen: true, doc: "Weight loads in flight per lane in the decode megakernel (KILN_DECODE_MEGAKERNEL_STREAM=next): n loads the first n words of each GEMV between the arrival at and the wait on the barrier before it and each later word n ahead of its use while the GEMV runs; 0 loads all of a phase's words there (a burst of up to 96 KiB a block, which the barrier's release then waits behind: bench/cuda-sync-under-load.ts). Default 6: on an H100, 1,044-1,048 tok/s against 1,027-1,031 with 0 (bench/results/h100-s36-mk4/mk5-2026-12-07.json)" },
  KILN_DECODE_MEGAKERNEL_GROUPS: { type: 'integer', min: 0, default: 0, env: true, codegen: true, doc: "Groups of blocks of the decode megakernel's MLP under KILN_DECODE_MEGAKERNEL_SYNC=flow (each group's slice of the intermediate row a multiple of 256); 0: the most of 4, 3, 2 the model allows" },
  KILN_DECODE_MEGAKERNEL_COOPERATIVE: { type: 'boolean', default: true, env: true, codegen: false, doc: "Launch the decode megakernel cooperatively (cuLaunchKernelEx with the cooperative attribute): the driver starts every block at once or fails the launch with an error, where a plain launch sharing the GPU with another context could leave a grid barrier waiting (the kernel then reports the barrier and stops waiting). Off: a plain launch (the A/B)" },
  KILN_DECODE_MEGAKERNEL_GRID: { type: 'integer', min: 0, default: 0, env: true, codegen: true, doc: "Blocks of the decode megakernel's grid; 0 (default): one per SM, the kernel's design. Tests: a grid larger than the device holds at once is refused by the cooperative launch, and the engine then runs its compiled step" },
  KILN_DECODE_MEGAKERNEL_TRACE: { type: 'boolean', default: false, env: true, codegen: true, doc: "Measurement: the decode megakernel stamps %globaltimer at each block's arrival at and release from every grid barrier (bench/cuda-megakernel-phases.ts reads them); off: no stamps" },
  KILN_DECODE_NORM_CHAIN: { type: 'boolean', default: true, env: true, codegen: false, doc: "Eager cpu decode steps of Qwen3 fold each layer's closing residual add into the next norm (one llm.addRmsNorm in place of an add and an rmsNorm); 0: the two ops as before (A/B: bench/cpu-decode-bound.ts --ab)" },
  KILN_DECODE_QK_CACHE: { type: 'boolean', default: true, env: true, codegen: false, doc: "Eager cpu decode steps of Qwen3 run each layer's q/k norms, rotaries and paged-cache write as one llm.qkNormRotaryCache (one native call) in place of five ops; 0: the ops as before (A/B: bench/cpu-decode-bound.ts --ab)" },
  KILN_GC_THRESHOLD_MB: { type: 'integer', min: 0, default: 128, env: true, codegen: false, doc: 'Growth of allocated tensor memory (MiB) after which unreachable tensors are collected synchronously (GC + finalizers; after a pass that frees little, the next waits for twice the growth), also tried before out-of-memory; 0 off' },
  KILN_GEMM_AUTOTUNE: { type: 'boolean', default: true, env: true, once: true, codegen: true, doc: "Times each new cuBLASLt GEMM problem's candidate algorithms; 0 keeps the heuristic's first choice" },
  KILN_GEMM_SEARCH: { type: 'boolean', default: undefined, env: true, once: true, codegen: true, doc: "cuBLASLt algorithm search for under-occupied GEMMs: 1 every dtype, 0 none; unset: exact-fp32 problems only" },
  KILN_GEMM_SPLITK: { type: 'boolean', default: true, env: true, once: true, codegen: true, doc: 'Split-K variants among the timed cuBLASLt candidates; 0: the heuristic offers only' },
  KILN_GEMM_SPLIT_WAVES: { type: 'number', min: 0, default: undefined, env: true, once: true, codegen: true, doc: 'Occupancy (waves) under which a GEMM gets split-K candidates (unset: 0.5, or 4 for searched exact-fp32 problems)' },
  KILN_GEMM_TUNE_LOG: { type: 'boolean', default: false, env: true, once: true, codegen: false, doc: "Prints each tuned cuBLASLt problem's candidates and times to stderr" },
  KILN_HORIZONTAL_FUSION: { type: 'boolean', default: true, env: true, codegen: true, doc: 'Horizontal linear fusion (concatenated weights) in inference programs (read when a function is compiled)' },
  KILN_LLM_POLICY: { type: 'string', default: undefined, env: true, once: true, codegen: true, setter: 'setLlmPolicy (kept in llm/policy.ts)', doc: 'LLM library policy as JSON, e.g. {"prefer":["reference"],"deny":["vendor"]}' },
  KILN_LOG: { type: 'string', default: undefined, env: true, once: true, codegen: false, doc: 'Logs on stderr, comma-separated: compiler graph, output_code, guards, recompiles; runtime build, cache, device, tune; all' },
  KILN_NUM_THREADS: { type: 'integer', min: 1, default: undefined, env: true, codegen: false, setter: 'setNativeThreads', doc: 'Threads of native cpu kernels (default: the cores, fewer while the 1-minute load average oversubscribes them)' },
  KILN_NVCC: { type: 'string', default: 'nvcc', env: true, codegen: false, doc: 'nvcc used by the offline generated-source check (scripts/cuda-nvcc-check.mjs)' },
  KILN_PDL: { type: 'enum', values: ['0', '1', 'all', 'wait'], aliases: { off: '0', false: '0', on: '1', true: '1' }, default: '0', env: true, codegen: true, doc: 'Programmatic dependent launch on sm_90+: 1 after kernels, all on every launch, wait without early trigger, 0 off' },
  KILN_PTXAS: { type: 'string', default: 'ptxas', env: true, codegen: false, doc: 'ptxas used by the offline generated-source check' },
  KILN_QK_NORM_ROTARY: { type: 'boolean', default: true, env: true, codegen: true, doc: 'q/k norm + rotary fusion in inference programs (read when a function is compiled)' },
  KILN_QK_NORM_ROTARY_CACHE: { type: 'boolean', default: true, env: true, codegen: true, doc: "Compiled decode steps fuse each layer's llm.qkNormRotary with its llm.reshapeAndCache into one llm.qkNormRotaryCache launch (cuda; needs KILN_QK_NORM_ROTARY); on by default since the H200 A/B (bench/results/h200-s15-decode-fusions-ab-2026-12-03.json) (read when a function is compiled)" },
  KILN_ASYNC_STEPS: { type: 'boolean', default: false, env: true, codegen: false, doc: "The serve engine's default for asyncSteps: launch the next decode step before reading the sampled ids of the last (ids fed on the device); unset: on for compiled decode on cuda (H200 A/B, bench/results/h200-s15-final-2026-12-03.json), off elsewhere (read when an Engine is made)" },
  KILN_ADD_RMSNORM_LINEAR: { type: 'boolean', default: undefined, env: true, codegen: true, doc: "Compiled inference programs fuse the residual add + RMSNorm before a linear (or llm.linearSiluAndMul) into one llm.addRmsNormLinear: on cuda (bfloat16, rows <= KILN_GEMV_MAX_ROWS) and webgpu (float32 / float16 / bfloat16, rows <= 8, K whole 16-byte words) the GEMV computes the norm in its prologue, one launch fewer per norm. Unset: webgpu at one row only (H200, session 19: Qwen3-0.6B float16 decode at batch 1, step median 2.57 / 2.56 / 2.49 -> 2.35 / 2.33 / 2.24 ms in three alternating pairs; at batch 8 2,067 / 2,340 -> 1,322 / 1,307 tok/s; on cuda no gain at batch 1, 1,027 / 1,075 -> 994 / 1,046 tok/s); 1: every size the kernels take, cuda too; 0: nowhere (read when a function is compiled)" },
  KILN_LINEAR_GELU: { type: 'boolean', default: true, env: true, codegen: true, doc: "Compiled inference programs fuse a linear whose only reader is a GELU into one llm.linearGelu where a device has its kernel (webgpu: the GELU in the GEMM's or the split-K combine's epilogue, one dispatch and one pass over the output fewer); 0: off (read when a function is compiled)" },
  KILN_LINEAR_SILU_MUL: { type: 'boolean', default: true, env: true, codegen: true, doc: "Compiled inference programs fuse a SwiGLU MLP's concatenated gate/up linear with silu * mul into one llm.linearSiluAndMul (on cuda the bfloat16 GEMV with the activation in its epilogue, on webgpu the skinny GEMV's gated variant); on by default since the H200 A/B (bench/results/h200-s15-decode-fusions-ab-2026-12-03.json) (read when a function is compiled)" },
  KILN_QUIET: { type: 'boolean', default: false, env: true, codegen: false, doc: 'Silences the slow-build notes on stderr (warnings and KILN_LOG output stay)' },
  KILN_SGEMM: { type: 'boolean', default: false, env: true, once: true, codegen: true, setter: 'setSimtLinear', doc: "Exact-fp32 linear GEMMs on Kiln's SIMT kernel instead of cuBLASLt (experiment)" },
  KILN_DEVICE_RANDOM: { type: 'boolean', default: true, env: true, codegen: false, doc: "Seeded random weights on cuda are drawn by a GPU kernel, bit-identical to the host draw (kernels/cuda/random-draw.ts); 0: drawn on the host and uploaded (the reference path)" },
  KILN_GEMV_MAX_ROWS: { type: 'number', min: 0, default: 1, env: true, codegen: true, doc: "bfloat16 linear products of at most this many rows (up to 8) run on Kiln's weight-streaming GEMV kernel instead of cuBLASLt; 0: never. Default 1: H200 A/B, decode batch 1 faster, batch 8 slower (bench/results/h200-s10-gemv-ab-2026-12-02.json)" },
  KILN_MMA_GEMV_MAX_ROWS: { type: 'number', min: 0, default: 8, env: true, codegen: true, doc: "bfloat16 linear products (and cuda llm.linearSiluAndMul) of 2 up to this many rows (at most 64) that the GEMV does not take run on Kiln's weight-streaming tensor-core kernel (kernels/cuda/mma-gemv.ts: mma.sync with the weight rows as the MMA's M) instead of cuBLASLt; 0: never. Default 8: on the H200 the step's linears at 8 rows took 0.909 ms against cuBLASLt's 1.058 and decode at batch 8 ran 5,322-5,331 tok/s against 5,083-5,096, while at 64 rows the kernel was 2.3x slower than cuBLASLt (bench/results/h200-s16-mma-2026-12-03.json)" },
  KILN_CUDA_REPLAY_SKIP: { type: 'string', default: undefined, env: true, codegen: true, doc: "Measurement only (its outputs are wrong): a compiled cuda program leaves out the steps whose label contains any of these substrings separated by | (labels as bench/cuda-profile.ts prints them: 'extern <op>', e.g. 'extern linear', or a fused kernel's kind and ops, e.g. 'reduce add+mul+mean'), so a graph replay timed with and without a class of steps (bench/cuda-profile.ts's compiled_ms) shows what that class costs in place" },
  KILN_CUDA_L2_PREFETCH: { type: 'enum', values: ['0', 'attn'], aliases: { off: '0', false: '0', on: 'attn', true: 'attn', '1': 'attn' }, default: '0', env: true, codegen: true, doc: "Compiled cuda programs: before each paged-attention step, prefetch into L2 the weights of the linears that follow it, up to the next attention step and KILN_CUDA_L2_PREFETCH_MB (compile/codegen/cuda/l2-prefetch-plan.ts), so a decode step's GEMVs read them from L2 while attention leaves DRAM idle; a hint only, the results are the same bits. attn: on, 0: off (the default: it made Qwen3-0.6B decode slower on the H200, batch 1 1,028 / 1,077 -> 970 / 1,036 tok/s, bench/results/h200-s22-pf-2026-12-05.json)" },
  KILN_CUDA_L2_PREFETCH_MB: { type: 'integer', min: 1, default: 24, env: true, codegen: true, doc: 'KILN_CUDA_L2_PREFETCH: MiB one prefetch may ask for (about half of the H200\'s 50 MB L2: the weights must still be there when their GEMVs run)' },
  KILN_GEMV_PREFETCH: { type: 'enum', values: ['0', '1', 'always', 'trigger'], aliases: { off: '0', false: '0', on: '1', true: '1' }, default: 'trigger', env: true, codegen: true, doc: "Under PDL (KILN_PDL) the bfloat16 GEMVs' first blocks prefetch the weight's first bytes (up to 24 MiB) into L2 before their griddepcontrol.wait, so the weight streams while the previous kernel runs, and a GEMV grid of one wave triggers its dependents early; 1: only when PDL is on, always: also without PDL (measurement), trigger (the default since session 22): only the one-wave early trigger, no prefetch (Qwen3-0.6B bfloat16 decode on the H200, alternating: batch 1 1,021 / 1,076 / 1,076 -> 1,102 / 1,118 / 1,120 tok/s, batch 8 and 64 unchanged; bench/results/h200-s22-trig-2026-12-05.json), 0: off (sources as before)" },
  KILN_CUDA_COL_REDUCE: { type: 'boolean', default: false, env: true, codegen: true, doc: "Compiled cuda reductions over few long strided rows that lie next to each other (BatchNorm over channels_last) may use the coalesced 'col' strategy, as their default and as a max-autotune candidate; off until it is measured on a GPU (checked on the host emulator and with nvcc only)" },
  KILN_CUDA_COL_FEW_ROWS: { type: 'boolean', default: true, env: true, codegen: true, doc: "Compiled cuda reduce groups with very few long contiguous rows that split cannot run (full-size outputs or several levels: an MSE loss fused with its producers is one row of 12.8M elements, which a block per row ran on one SM) default to the 'col' strategy with one row per tile (H200, session 13: the conv-stack training step compiled 37.7 -> 22.6 ms against eager 23.3); 0: a block per row as before" },
  KILN_MOE_GEMV_MAX_PAIRS: { type: 'number', min: 0, default: 256, env: true, codegen: true, doc: "cuda llm.fusedMoe with at most this many (token, slot) pairs (a decode step: tokens x top-k) runs as two weight-streaming kernels with no host read, so a MoE decode step is one CUDA graph (kernels/cuda/llm-moe-gemv.ts); more pairs use the grouped per-expert GEMMs, which read the per-expert counts back; 0: always grouped. Default 256 (was 64): Qwen3-30B-A3B's layer shapes (4 layers) decode at batch 32 (256 pairs) at 8,461 tok/s on the H200 with it against 2,249 grouped (bench/results/h200-s16-final-2026-12-03.json)" },
  KILN_TUNE_STORE: { type: 'boolean', default: true, env: true, codegen: false, doc: 'Stores GEMM autotune winners and CUDA graph decisions on disk; 0 re-measures in every process' },
  KILN_WEBGPU_ATTN_PREFILL: { type: 'enum', values: ['auto', 'tiled', 'rows', 'matrix', 'matrix-split'], default: 'auto', env: true, codegen: true, doc: "webgpu flash-attention prefill (more than 8 query rows a head): auto (the default: from 512 query rows a head, kernels/webgpu/flash-attention.ts MATRIX_MIN_ROWS, matrix in the planner's form (the key split where row tiles of 4 subgroups would give fewer than 256 workgroups); from 128 rows, MATRIX_SPLIT_MIN_ROWS, the key split where that rule holds; else tiled), matrix (float16 on subgroup matrices where the device has them, row tiles: kernels/webgpu/flash-attention-matrix.ts; elsewhere as tiled), matrix-split (the same in the key-split form, a workgroup's subgroups sharing the key blocks of one matrix tile of query rows: flash-attention-matrix-split.ts; elsewhere as tiled), tiled (kernels/webgpu/flash-attention-tiled.ts: a 128-invocation workgroup per tile of 16 or 32 query rows, keys and values in blocks in workgroup memory, several invocations a row) or rows (one invocation per query row with its row and accumulator in registers, 64 rows a workgroup: the form before; about 355 us an attention of a 128-token Qwen3-0.6B float32 prefill on an H100); tiled falls back to rows where its smallest tile does not fit the workgroup memory" },
  KILN_WEBGPU_ATTN_MATRIX_FORM: { type: 'enum', values: ['two-pass', 'online'], default: 'two-pass', env: true, codegen: true, doc: "The float16 webgpu attention prefill on subgroup matrices, row-tile plans: two-pass (default: each key block read twice, the row maxima and sums first) or online (one pass: the output accumulators rescaled through workgroup memory as a row's maximum grows; three barriers a block against seven). Measurement (issue #20): not yet timed on a GPU" },
  KILN_WEBGPU_ATTN_WORDS: { type: 'boolean', default: true, env: true, codegen: true, doc: "The tiled webgpu attention prefill reads the query, keys and values as 16-byte words (4 float32 or 8 float16 each), every load of a block issued before any store, where each operand is contiguous along its head dim with whole-word offsets and strides (flash-attention-tiled.ts, wordCopy); 0: one element per load as before" },
  KILN_WEBGPU_F16_STORE: { type: 'enum', values: ['auto', 'exact', 'native'], default: 'auto', env: true, codegen: true, doc: "How webgpu kernels round float16 results when storing them: auto (the default: the device's own conversion, pack2x16float clamped to the float16 range with overflow and NaN from the bits, if a probe of rounding-deciding values run once per process gives the integer code's bits on every one; else the integer code; kernels/webgpu/f16-store-probe.ts), exact (always the integer code: round to nearest even, subnormals, as torch) or native (always the device's conversion). Casts inside kernels keep the integer code. Issue #20: the float16 tiled attention prefill at 1024 tokens took 1623 us with the integer code and 643 with WGSL's conversion (H100)" },
  KILN_WEBGPU_BACKEND: { type: 'enum', values: ['auto', 'vulkan', 'metal', 'd3d12', 'null'], default: 'auto', env: true, once: true, codegen: false, doc: "Dawn backend of the webgpu accelerator; null validates WGSL and encodes work but computes nothing (CI without a GPU)" },
  KILN_WEBGPU_CONV_GEMM: { type: 'boolean', default: true, env: true, codegen: true, doc: 'webgpu conv2d runs as a tiled implicit GEMM (conv-gemm.ts) where a group has 8 or more output channels; 0: the direct kernel (one invocation per output element) everywhere' },
  KILN_WEBGPU_CONV_IM2COL: { type: 'boolean', default: true, env: true, codegen: true, doc: 'float16 webgpu conv2d of one group with a channels_last output runs on the staged subgroup-matrix GEMM through an explicit im2col (conv-im2col.ts: weight packed to [O, K], input gathered to [pixels, K], one GEMM with the bias) where the device has that kernel; 0: the implicit f32-FMA GEMM (conv-gemm.ts)' },
  KILN_WEBGPU_CONV_CARRY: { type: 'boolean', default: true, env: true, codegen: true, doc: "The implicit float16 conv GEMM (KILN_WEBGPU_CONV_IMPLICIT) steps each invocation's (kh, kw, c) by carries from one K step to the next instead of dividing k by C and KW for every word of every step (H100, session 34: conv-stack float16 compiled 0.418-0.421 -> 0.388-0.389 ms); 0: the divisions" },
  KILN_WEBGPU_CONV_IMPLICIT: { type: 'boolean', default: true, env: true, codegen: true, doc: "float16 webgpu conv2d on the im2col route whose channels_last input has a multiple of 8 channels (whole 16-byte words per tap) reads the GEMM's A words straight from the input through im2col addresses (GemmSpec.aConv) instead of gathering A [pixels, K] first (for conv-stack's 3x3 64 -> 64 layer, 231 MB written and read again); 0: the explicit gather" },
  KILN_WEBGPU_CONV_BN_FOLD: { type: 'boolean', default: true, env: true, codegen: true, doc: "webgpu conv2dBatchNorm (the compiler's conv -> eval BatchNorm [-> ReLU] fold) on the float16 im2col route folds the BatchNorm into the packed weight and the GEMM's bias and runs the ReLU in the GEMM's epilogue (conv-bn.ts: one write of the output instead of three passes); 0: conv2d, then batchNorm and relu as separate ops" },
  KILN_WEBGPU_ROBUSTNESS: { type: 'boolean', default: false, env: true, once: true, codegen: true, doc: "Keep Dawn's shader robustness (every buffer access clamped to the buffer) in Node; off by default (Dawn toggle disable_robustness): Kiln's shaders are its own and stay in bounds, and the clamping cost 44% of the float16 subgroup-matrix GEMM on the H200 (8192^3: 103.9 -> 183.9 TFLOP/s, session 14). Browsers keep robustness whatever this says" },
  KILN_WEBGPU_DAWN_TOGGLES: { type: 'string', default: undefined, env: true, once: true, codegen: true, doc: "Experiments: more Dawn toggles for the webgpu device, comma-separated; a name is enabled, '-name' disabled (e.g. disable_robustness: no bounds clamping in shaders, for measuring what it costs). Joined to Kiln's own (dawn-options.ts); read when the device opens" },
  KILN_WEBGPU_GEMM_SMALL: { type: 'boolean', default: true, env: true, codegen: true, doc: "webgpu single-batch GEMMs with fewer than 256 output tiles (a 128-token prefill's projections, mlp-64x512): the staged float16 subgroup-matrix kernel takes 64x64 tiles instead of 128x128, and a K of 256 or more is split into slices (one workgroup z each, f32 partial sums combined in slice order by a second kernel that applies alpha, bias and beta) until about 256 workgroups run; 0: one 128x128 (float16) or 64x64 (tiled) tile per workgroup walking the whole K" },
  KILN_WEBGPU_GEMM_SPLIT_TARGET: { type: 'number', min: 1, default: 256, env: true, codegen: true, doc: 'Workgroups a single-batch webgpu GEMM aims for where KILN_WEBGPU_GEMM_SMALL splits K: products with fewer output tiles split K until about this many workgroups run (and the staged float16 kernel takes 64x64 tiles under it). 256 by default; for experiments (bench/webgpu-gemm-shapes.ts variants +split=N)' },
  KILN_WEBGPU_GEMM_SPLIT_TILE: { type: 'enum', values: ['small', 'large'], default: 'large', env: true, codegen: true, doc: "Tile of the webgpu tiled GEMM where KILN_WEBGPU_GEMM_SMALL splits K (float32 and bfloat16 single-batch products with fewer than 256 output tiles, as a 128-token prefill's projections): large (the default: 128x128 where M and N are both at least 128, a quarter of the tiles with more K slices each; Qwen3-0.6B float32 forward 10.03 -> 9.48 ms on an H100, bench/results/h100-s28-attn-2026-12-06.json) or small (64x64 everywhere, the form before)" },
  KILN_WEBGPU_GEMM_TILE: { type: 'enum', values: ['auto', 'small', 'large'], default: 'auto', env: true, codegen: true, doc: "Tile of the webgpu tiled GEMM (float32 and bfloat16, and float16 without subgroup matrices) where it runs unsplit: large (128x128 per workgroup, each invocation an 8x8 block read from vec4 workgroup tiles, 4 vec4 loads per 64 FMAs instead of 8 scalar loads per 16, global loads double-buffered in registers; issue #20) or small (64x64, the form before); auto (the default): large where M and N are both at least 128 and there are at least 256 tiles of 128x128 (all batches), else small. H100 through Dawn/Vulkan, alternating: mlp-2048x4096 float32 5.93 -> 4.02 ms, transformer-block 5.93 -> 4.54 ms (bench/results/h100-s25-wg-2026-12-05.json). Read at every launch" },
  KILN_WEBGPU_GEMV: { type: 'boolean', default: true, env: true, codegen: true, doc: 'webgpu GEMMs of at most 8 rows whose operands are contiguous along K (a decode step\'s projections) run on the skinny GEMV kernel (gemv-codegen.ts: 8 columns per workgroup, 16-byte loads; H200, session 13: Qwen3-0.6B float16 decode 6.2 -> 36.8 tok/s); 0: the tiled and subgroup-matrix GEMMs' },
  KILN_WEBGPU_GEMV_NORM_PREFETCH: { type: 'boolean', default: true, env: true, codegen: true, doc: "webgpu llm.addRmsNormLinear (the GEMV with the add + RMSNorm prologue, KILN_ADD_RMSNORM_LINEAR) loads its first K step of the weight before the prologue, so the norm's latency overlaps the weight's; 0: after it (A/B)" },
  KILN_WEBGPU_PAGED_VECV: { type: 'boolean', default: false, env: true, codegen: true, doc: "webgpu llm.pagedAttention reads value rows as 16-byte words and splits each block's value pass over key groups as well as dims (paged-attention-source.ts pagedSplitSourceV: 16 dependent loads per block instead of 64, tree reductions for the block max and sums) where the rows are whole words; off by default until measured on a GPU (correct on SwiftShader against float64, slower there: its barriers are costly on a CPU)" },
  KILN_WEBGPU_REDUCE_UNROLL: { type: 'integer', min: 1, default: 1, env: true, codegen: true, doc: "webgpu reductions of the 'workgroup' strategy (one row per workgroup: norms, softmax, sums; eager and compiled) load this many elements per invocation per loop step before using any (clamped to the row, masked in the combine), so their memory latencies overlap and a pass over a [1, 1024] row with 256 invocations is one round trip instead of four; stores of a pass wait until all its lanes are computed. Same summation order as 1 (one element per step: the strided loop before issue #20). Rows that fit KILN_WEBGPU_REDUCE_REGISTERS take the register form instead. Default 1 (off): on the H200 the unrolled form's old bit-identity test failed (float32 rmsNorm over 3 x 2500; likely the driver's fma contraction of the loop form, not an error: the test now checks each form against float64), though it is faster there (eager rmsNorm [1, 1024] 12.1 against 14.3 us, compiled add + RMSNorm 15.3 against 18.2; bench/results/h200-s16-final-2026-12-03.json)" },
  KILN_WEBGPU_REDUCE_REGISTERS: { type: 'integer', min: 0, default: 8, env: true, codegen: true, doc: "webgpu reductions of the 'workgroup' strategy (one row per workgroup: norms, softmax, sums, the compiled residual add + RMSNorm; eager and compiled) whose row has at most this many elements per invocation (8: rows up to 2048 at 256 invocations) keep the row in registers (fused/render.ts residentLoads): every invocation issues all its loads first, once, and every pass (each reduction level, the full-size stores) computes from the registers, so a [1, 1024] norm makes one memory round trip instead of one per loop step and a second pass that reloads the row (issue #20). Values are combined in the same order per invocation as the strided loop; 0: off (the strided loop, or KILN_WEBGPU_REDUCE_UNROLL)" },
  KILN_WEBGPU_GEMV_UNROLL: { type: 'integer', min: 0, default: 4, env: true, codegen: true, doc: "Words (16 bytes) each lane of the webgpu GEMV loads per K step (kernels/webgpu/gemv-codegen.ts gemvUnroll); 0 follows K (the lane's share of the row, 4 to 16, 8 gated). 4 stays the default: on the H200 the K-following form made Qwen3-0.6B float16 decode slower (step median 2.38-2.51 against 2.37-2.43 ms at batch 1, 3.89 against 3.36 at batch 8; bench/results/h200-s20-gemv-*)" },
  KILN_WEBGPU_GEMV_COLS4_MAX_N: { type: 'integer', min: 0, default: 0, env: true, codegen: true, doc: 'webgpu GEMV: projections of at most this many output columns run 4 columns a workgroup (128 invocations, twice the workgroups) instead of 8; 0 (default): always 8. Not measured yet (kernels/webgpu/gemv-codegen.ts gemvCols says why it might help)' },
  KILN_WEBGPU_GEMV_TEAM_SUBGROUP: { type: 'boolean', default: false, env: true, codegen: true, doc: "The webgpu GEMV adds a column team's 32 partial sums with subgroupAdd where the device's subgroups are exactly 32 wide (a team is one subgroup), instead of workgroup memory, a barrier and a serial sum. Off by default: on the H200 Qwen3-0.6B float16 decode at batch 1 measured no gain (step median 2.37-2.44 ms on against 2.36-2.41 off, alternating; bench/results/h200-s20-measure2-*)" },
  KILN_WEBGPU_PAGED_LANES: { type: 'integer', min: 0, default: 4096, env: true, codegen: true, doc: "webgpu paged decode attention (and llm.qkNormRotaryPagedAttention) takes the lanes form up to this table capacity in tokens: one workgroup per (sequence, kv head, head group) that loads a whole chunk of keys and values in three rounds (kernels/webgpu/paged-attention-lanes.ts; issue #20); 0: off (the split / fused forms)" },
  KILN_WEBGPU_PAGED_LANES_HG: { type: 'integer', min: 0, default: 1, env: true, codegen: true, doc: 'Most query heads per workgroup where the webgpu lanes attention form applies and the workgroups stay at most 128 (a batch of few sequences): more workgroups, each key and value row read once per head group; 0: the plan of every form (up to 8 heads sharing a kv head). H200, Qwen3-0.6B float16 batch 1: the kernel 11.4 -> 9.5 us at a 300-token context, decode step median 2.09-2.20 -> 1.99-2.05 ms (bench/results/h200-s20-hg-*)' },
  KILN_WEBGPU_PAGED_LANES_WG: { type: 'integer', min: 128, default: 512, env: true, codegen: true, doc: 'Invocations per workgroup of the webgpu lanes attention form (a multiple of 64, capped by the device; fewer where its workgroup memory does not fit)' },
  KILN_WEBGPU_PAGED_FUSED: { type: 'boolean', default: true, env: true, codegen: true, doc: "webgpu llm.pagedAttention runs its split kernel and its combine pass as one dispatch where the splits fit one workgroup (splits x 64 invocations and their workgroup memory within the device's limits; the scalar value pass, not KILN_WEBGPU_PAGED_VECV): the splits' partials merge in workgroup memory behind a barrier, same arithmetic (issue #20: Qwen3-0.6B decode at batch 1 launches 28 dispatches a step fewer); 0: two dispatches" },
  KILN_WEBGPU_QK_ATTN: { type: 'boolean', default: true, env: true, codegen: true, doc: "Compiled webgpu decode steps fuse each layer's llm.qkNormRotaryCache with the llm.pagedAttention that reads its rotated q and caches into one llm.qkNormRotaryPagedAttention (src/llm/qk-norm-rotary-attention-pass.ts), whose kernel is the fused paged-attention workgroup (KILN_WEBGPU_PAGED_FUSED) normalising and rotating its query heads and its kv head's new key row, writing the key and value rows into the cache slot, then attending: one dispatch a layer fewer at batch 1 (issue #20), same roundings; with several sequences (a row may read a slot another row writes), or where the fused form or its bindings do not apply, the kernel runs the two ops (read when the step is traced)" },
  KILN_WEBGPU_PAGED_UNROLL: { type: 'boolean', default: true, env: true, codegen: true, doc: "webgpu llm.pagedAttention issues the loads of 8 key words (key pass) and of 8 keys' value elements (scalar value pass) before using any, instead of one per loop step (a chain of 16 + 64 load latencies per 64-key block for 128-dim float16: the fixed cost of a short context, issue #20), and the combine pass loads 4 splits' partials per step; same products in the same order; 0: one per step" },
  KILN_WEBGPU_ROTARY_REGISTERS: { type: 'boolean', default: true, env: true, codegen: true, doc: "webgpu llm.qkNormRotary / llm.qkNormRotaryCache / llm.applyRotaryEmb kernels (llm-rotary.ts) issue all of a head row's loads first (x pairs, weights, cos, sin, the value row of a cache write), keep them in registers, sum the squares with subgroupAdd where the device has subgroups, and store from registers, instead of a norm loop, a tree reduction, and a second pass that reloads the row (issue #20: the decode step's qkNormRotaryCache was 21.7 us on the H200); 0: the loop form" },
  KILN_WEBGPU_SPLIT_ARG: { type: 'boolean', default: true, env: true, codegen: true, doc: 'webgpu argmax / argmin over long rows (8192 or more elements) of fewer than 128 rows split each row over workgroups and merge the parts in a second dispatch (argreduce-split.ts: a greedy decode step\'s argmax over the vocabulary); 0: one workgroup per row' },
  KILN_WEBGPU_SUBGROUP_MATRIX: { type: 'boolean', default: true, env: true, codegen: true, doc: "float16 webgpu GEMMs use subgroup matrices (Dawn's chromium-experimental-subgroup-matrix) where the device has them with shader-f16 and a fixed subgroup size; 0: the tiled f32-FMA GEMM" },
  KILN_WEBGPU_MATH: { type: 'enum', values: ['v2', 'v1', 'v3', 'fast'], default: 'v2', env: true, codegen: true, doc: "Form of the WGSL float32 math library (kernels/math/wgsl-libm/) and of float16 stores: v2 (branch-free exp without float-to-int conversions, tanh without divergent branches; the library's ulp bounds of test/webgpu-math.test.ts), v1 (the forms before issue #20, for an A/B), v3 (exp and tanh on WGSL's builtin exp2 over [-0.5, 0.5] after a Cody-Waite reduction, with bounds derived from WGSL's accuracy table: exp 5.5 ulp, tanh 6, sigmoid 18 (wgsl-libm/v3.ts; on SwiftShader less accurate than v2, within those bounds); float16 stores rounded by branch-free integer code, the same bits as v2's), fast (diagnostic: WGSL's builtin exp/tanh/division and f16() stores, which WGSL bounds loosely and SwiftShader computes wrongly at the edges: only to measure what the exact math costs, bench/webgpu-elementwise-math.ts). Read at every kernel render, so it can be switched within a process" },
  KILN_WEBGPU_FAST_MATH: { type: 'enum', values: ['exp2', 'reduced', 'off'], default: 'exp2', env: true, codegen: true, doc: "Fast float math in kiln.compile's webgpu kernels (wgsl-libm/fast.ts), as KILN_CUDA_FAST_MATH in the cuda ones (eager kernels never use it): exp, sigmoid, silu and tanh on WGSL's builtin exp2 instead of the library's exact forms, with NaN, infinities, overflow and underflow still as torch. exp2: 2^t by exp2(t) (WGSL bounds it to 3 + 2|t| ulp; about 2 ulp on NVIDIA); reduced: exp2 over [-0.5, 0.5] and a power of two from bits (4 + 1.32|x| ulp for e^x by the spec on any implementation, six operations more); off: the library's forms (KILN_WEBGPU_MATH)" },
  KILN_WEBGPU_VEC16_GROUPS: { type: 'integer', min: 1, default: 8192, env: true, codegen: false, doc: "Most workgroups of a vectorised compiled webgpu pointwise launch whose every binding is native float16 (its loop is grid-stride, so fewer groups compute the same): on an H100 elementwise-4096 float16 ran 0.0384 ms with 8192 against 0.0419 with 16384 (session 35's grid sweep); 65535 is the dispatch limit (no cap)" },
  KILN_WEBGPU_NAN_HOIST: { type: 'boolean', default: true, env: true, codegen: true, doc: "Compiled webgpu pointwise kernels with fast math test their inputs for NaN once at each store instead of inside every fast exp / sigmoid / tanh and relu, where that gives the same results (kernels/webgpu/fused/nan-hoist.ts)" },
  KILN_WEBGPU_REPLAY: { type: 'boolean', default: true, env: true, codegen: false, doc: "compiled webgpu programs in mode 'reduce-overhead' (the serve engine's compiled decode) record their commands on the device thread once and replay them (compile/codegen/wgsl/replay.ts); 0: every call issues its dispatches" },
  KILN_WEBGPU_ENCODE_AHEAD: { type: 'boolean', default: true, env: true, codegen: false, doc: "After a webgpu replay the device thread encodes the recording's next replay in slices while it has nothing else to do (the GPU finishing the step, the host sampling), so the next replay only submits its finished command buffers (runtime/webgpu/worker.ts; issue #20: Dawn's encoding cost about 6-7 us a dispatch on the H200's host, most of a batch-1 decode step). H200, Qwen3-0.6B float16 batch 1, alternating: step median 3.17-4.16 -> 2.75-2.92 ms (bench/results/h200-s18-ab1-2026-12-03.json); 0: encode at the replay" },
  KILN_WEBGPU_REPLAY_MIN_STEPS: { type: 'integer', min: 1, default: 32, env: true, codegen: false, doc: "Outside mode 'reduce-overhead', compiled webgpu programs of at least this many kernel and extern steps are recorded and replayed too (compile/codegen/wgsl/target.ts), each call's results copied out of the static outputs (as cuda's default mode replays graphs): a Qwen3-0.6B forward's 535 steps cost the host more than the GPU when issued one by one (issue #20). Read when a program is compiled" },
  KILN_WEBGPU_REPLAY_SKIP: { type: 'string', default: undefined, env: true, codegen: false, doc: 'Measurement only (its outputs are wrong): a webgpu replay leaves out the dispatches whose pipeline label contains any of these substrings separated by | (a label has commas), so a decode step timed with and without a kernel class shows what that class costs in place, barriers included (scripts/device/s20.sh)' },
  KILN_WEBGPU_REPLAY_SUBMIT: { type: 'integer', min: 0, default: 64, env: true, codegen: false, doc: 'A webgpu replay submits its work after every this many dispatches, so the GPU starts while the device thread encodes the rest (0: one submit for the whole replay)' },
  KILN_WEBGPU_SM_PLAN: { type: 'string', default: undefined, env: true, codegen: true, doc: 'Experiments: the staged float16 subgroup matrix GEMM\'s plan instead of the planner\'s, "sgm,sgn,tm,tn,ks[,stages=0|1|2][,group=G]": subgroups along M and N, matrices per subgroup along M and N, matrix K slices per K step; stages 2 double-buffers the workgroup tiles (one barrier per K step), 0 loads matrices straight from the operands (whole tiles only); group G walks output tiles in bands of G tile rows. A plan the device cannot run throws at the first product, saying why (scripts/device/wggemm-sweep.sh)' },
  KILN_WEBGPU_SM_SMALL_DEEP: { type: 'boolean', default: true, env: true, codegen: true, doc: "Small single-batch float16 products on the staged subgroup matrix GEMM (those that split K) take K steps twice as deep where their 64x64 tiles are at most 128, and 32x32 tiles where they have at most 64 rows and fewer than 16 such tiles (H100, session 34: Qwen3 128-token qkv 21.1 -> 18.2 us, mlp-64x512's layer 10.3 -> 7.6 us); 0: the 64x64 tiles with the planner's K step" },
  KILN_WEBGPU_SM_REFILL: { type: 'enum', values: ['halves', 'words'], default: 'halves', env: true, codegen: true, doc: "How the staged float16 subgroup matrix GEMM stores a prefetched 16-byte word into its workgroup tiles: halves (8 float16 stores into f16 arrays) or words (one store through a vec4<u32> view of an untyped workgroup buffer, read by the matrix loads through an f16 view; Dawn's buffer<N> and bufferView). KILN_WEBGPU_SM_PLAN's refill= overrides it. H100, session 34: the same time for every GEMM shape measured (8192^3 183.3 vs 183.4 TFLOP/s), though the mma-peak kernel's K step rose from 223 to 319 TFLOP/s with it, so halves stays the default" },
  KILN_WEBGPU_SM_KERNEL: { type: 'enum', values: ['v1', 'staged'], default: 'staged', env: true, codegen: true, doc: "Which float16 subgroup matrix GEMM runs: v1 (gemm-subgroup-matrix.ts: element-wise tile fills) or staged (gemm-subgroup-matrix-staged.ts: 128x128 tiles of 16-byte words with register prefetch, 4x4 matrices per subgroup; operands whose contiguous dim is a multiple of 8 with aligned strides, others stay on v1). H200, session 13: float16 8192^3 at 103 TFLOP/s staged, 11.3 v1" },
  KILN_WEBGPU_TIMESTAMPS: { type: 'boolean', default: true, env: true, codegen: true, doc: "webgpu events are device-timed with timestamp queries where the adapter has them; 0: host-timed, and max-autotune keeps the default WGSL configs (KILN_LOG=tune says so)" },
  KILN_WEBGPU_NATIVE_COMPOSITES: { type: 'boolean', default: true, env: true, codegen: true, doc: "kiln.compile on webgpu leaves sigmoid and silu whole (float32; the decompose pass skips them: compile/target.ts nativeComposites), so the fused kernel renders their fast forms (one exp2, a division by [1, 2]) instead of the decomposition's exp, clamp, NaN select and range-guarded reciprocal; read when a function is compiled; 0: decomposed as on other targets" },
  KILN_WEBGPU_VEC_STEPS: { type: 'integer', min: 1, default: 1, env: true, codegen: true, doc: "Vectorised webgpu pointwise kernels (KILN_WEBGPU_VEC_POINTWISE): vectors each invocation handles per loop step, all loaded before any is computed (fused/render.ts), so an invocation has that many loads in flight instead of one: a kernel whose math holds many registers (few invocations resident per SM) or whose vectors are small (float16: 8 bytes) otherwise cannot keep enough bytes in flight to reach copy bandwidth (issue #20). Lanes compute the same statements in the same order, so values are those of 1; read at every launch (part of the pipeline key); at most 8 are used" },
  KILN_WEBGPU_VEC_POINTWISE: { type: 'boolean', default: true, env: true, codegen: true, doc: "webgpu pointwise kernels (eager and compiled) whose operands are contiguous along the innermost dim, or broadcast along it, with vector-aligned offsets and strides, read and write 4 (or 2) elements per invocation step (vec4<f32>, 16-bit pairs and quads as whole u32 words, no atomics) with a scalar tail (kernels/webgpu/fused/vector.ts); read at every launch, so it can be switched within a process for an A/B; 0: one element per invocation as before" },
  'cpu.gemmBackend': { type: 'enum', values: ['wasm', 'js'], default: 'wasm', env: false, codegen: true, setter: 'setGemmBackend', doc: 'Macro-kernel of the float64/JS cpu GEMM (wasm falls back to js where unsupported)' },
  'cpu.wasmThreads': { type: 'integer', min: 1, default: undefined, env: false, codegen: false, setter: 'setWasmThreads', doc: "Threads of the Wasm float32 GEMM (unset: the native thread count)" },
  'cuda.attentionPath': { type: 'enum', values: ['auto', 'math'], default: 'auto', env: false, codegen: true, setter: 'setCudaAttentionPath', doc: 'cuda attention: auto (fused kernel where it applies) or math (composed GEMMs)' },
  'cuda.longTopk': { type: 'enum', values: ['auto', 'select', 'segments', 'radix'], default: 'auto', env: false, codegen: true, setter: 'setLongTopk', doc: 'First pass of cuda topk on rows longer than a block sort; auto picks by k' },
  'cuda.pdl.enabled': { type: 'boolean', default: undefined, env: false, codegen: true, setter: 'setPdlEnabled', doc: 'Overrides whether PDL is on (unset: KILN_PDL)' },
  'cuda.pdl.policy': { type: 'enum', values: ['after-kernel', 'all'], default: undefined, env: false, codegen: true, setter: 'setPdlPolicy', doc: 'Overrides which PDL launches get the attribute (unset: KILN_PDL)' },
  'cuda.gemv.prefetchParts': { type: 'enum', values: ['both', 'prefetch', 'trigger'], default: undefined, env: false, codegen: true, setter: 'setGemvPrefetchParts', doc: "Which parts of KILN_GEMV_PREFETCH the GEMVs get where it is on (unset: both): the L2 prefetch before the PDL wait, the one-wave early trigger after it, or both (bench/cuda-gemv-chain.ts attributes the gain)" },
  'cuda.pointwiseWaves': { type: 'number', min: 1, default: Infinity, env: false, codegen: true, setter: 'setPointwiseWaves', doc: 'Grid cap of generated pointwise cuda kernels, in waves (Infinity: a block per work unit)' },
} as const satisfies Record<string, Decl>;

type Declared = typeof OPTIONS;
export type OptionName = keyof Declared;
/** The names that are environment variables. */
export type EnvOptionName = { [N in OptionName]: Declared[N]['env'] extends true ? N : never }[OptionName];

type BaseValue<D> = D extends { readonly type: 'boolean' }
  ? boolean
  : D extends { readonly type: 'integer' | 'number' }
    ? number
    : D extends { readonly type: 'enum'; readonly values: readonly (infer V)[] }
      ? V
      : string;
/** The value type of an option: undefined is a value of options declared without a default. */
export type OptionValue<N extends OptionName> = BaseValue<Declared[N]> | (Declared[N]['default'] extends undefined ? undefined : never);

export type OptionSource = 'override' | 'env' | 'default';

const decl = (name: OptionName): Decl => OPTIONS[name];

function isDeclared(name: string): name is OptionName {
  return Object.hasOwn(OPTIONS, name);
}

function checkName(name: string, where: string): OptionName {
  if (!isDeclared(name)) throw new RangeError(`${where}: unknown option '${name}' (declared: ${Object.keys(OPTIONS).join(', ')})`);
  return name;
}

function expected(d: Decl): string {
  switch (d.type) {
    case 'boolean':
      return '0/1, true/false or on/off';
    case 'integer':
      return d.min === 1 ? 'a positive integer' : d.min === 0 ? 'a non-negative integer' : `an integer >= ${d.min ?? '-inf'}`;
    case 'number':
      return `a number >= ${d.min ?? '-inf'}`;
    case 'enum':
      return `one of ${d.values!.join(', ')}`;
    case 'string':
      return 'a string';
  }
}

/** The value of `raw` (an environment string) for option `name`; unset or empty gives the default. */
export function parseOption<N extends OptionName>(name: N, raw: string | undefined): OptionValue<N> {
  const d = decl(checkName(name, 'parseOption'));
  if (raw === undefined || raw.trim() === '') return d.default as OptionValue<N>;
  const s = raw.trim();
  const bad = (): never => {
    throw new RangeError(`${name} must be ${expected(d)}; got '${raw}'`);
  };
  switch (d.type) {
    case 'boolean': {
      const v = s.toLowerCase();
      if (v === '0' || v === 'false' || v === 'off') return false as OptionValue<N>;
      if (v === '1' || v === 'true' || v === 'on') return true as OptionValue<N>;
      return bad();
    }
    case 'integer': {
      if (!/^[+-]?\d+$/.test(s)) return bad();
      const n = Number(s);
      return (Number.isSafeInteger(n) && n >= (d.min ?? -Infinity) ? n : bad()) as OptionValue<N>;
    }
    case 'number': {
      const n = Number(s);
      return (Number.isFinite(n) && n >= (d.min ?? -Infinity) ? n : bad()) as OptionValue<N>;
    }
    case 'enum': {
      const v = s.toLowerCase();
      const value = d.values!.includes(v) ? v : d.aliases?.[v];
      return (value ?? bad()) as OptionValue<N>;
    }
    case 'string':
      // Paths and JSON keep their spelling (only an all-blank value counts as unset).
      return raw as OptionValue<N>;
  }
}

/** Why `value` is not a value of option `name`, or null when it is. */
function invalidValue(d: Decl, value: unknown): string | null {
  switch (d.type) {
    case 'boolean':
      return typeof value === 'boolean' ? null : 'a boolean';
    case 'integer':
      return Number.isInteger(value) && (value as number) >= (d.min ?? -Infinity) ? null : expected(d);
    case 'number':
      return typeof value === 'number' && (value as number) >= (d.min ?? -Infinity) ? null : expected(d);
    case 'enum':
      return d.values!.includes(value as string) ? null : expected(d);
    case 'string':
      return typeof value === 'string' ? null : 'a string';
  }
}

const overrides = new Map<OptionName, unknown>();
/** Per option: the raw environment string last parsed and its value (for `once` options, the first). */
const envMemo = new Map<OptionName, { readonly raw: string | undefined; readonly value: unknown }>();

/** The environment's value of an env option (the default when unset), memoised per raw string. */
function envValue(name: OptionName, d: Decl): { raw: string | undefined; value: unknown } {
  const memo = envMemo.get(name);
  if (memo !== undefined && d.once) return memo;
  const raw = env[name];
  if (memo !== undefined && memo.raw === raw) return memo;
  const fresh = { raw, value: parseOption(name, raw) };
  envMemo.set(name, fresh);
  return fresh;
}

/** Environment values read inside withOptionSnapshot, per option (null outside one). */
let snapshot: Map<OptionName, unknown> | null = null;

/**
 * Runs `fn` with each environment-backed option read from process.env at most once: a hot path
 * that no user code runs inside (an eager decode step: hundreds of ops, each reading a few options)
 * pays one environment lookup per option instead of one per read. Overrides (setOption) still apply
 * at once; nested calls share the outer snapshot.
 */
export function withOptionSnapshot<T>(fn: () => T): T {
  if (snapshot !== null) return fn();
  snapshot = new Map();
  try {
    return fn();
  } finally {
    snapshot = null;
  }
}

/** The value in effect: the override, else the environment, else the default. */
export function getOption<N extends OptionName>(name: N): OptionValue<N> {
  if (overrides.has(name)) return overrides.get(name) as OptionValue<N>;
  if (snapshot !== null && snapshot.has(name)) return snapshot.get(name) as OptionValue<N>;
  const d = decl(name);
  const value = d.env ? envValue(name, d).value : d.default;
  snapshot?.set(name, value);
  return value as OptionValue<N>;
}

/**
 * Overrides option `name` for this process (what the modules' setters call); undefined removes
 * the override, so the environment or the default applies again. The value is checked against
 * the declaration.
 */
export function setOption<N extends OptionName>(name: N, value: OptionValue<N> | undefined): void {
  const d = decl(checkName(name, 'setOption'));
  if (value === undefined) {
    overrides.delete(name);
    return;
  }
  const why = invalidValue(d, value);
  if (why !== null) throw new RangeError(`setOption('${name}'): expected ${why}, got ${typeof value === 'string' ? `'${value}'` : String(value)}`);
  overrides.set(name, value);
}

/** Where the value in effect comes from. */
export function optionSource(name: OptionName): OptionSource {
  if (overrides.has(name)) return 'override';
  const d = decl(name);
  if (!d.env) return 'default';
  const raw = d.once ? (envMemo.get(name)?.raw ?? env[name]) : env[name];
  return raw !== undefined && raw.trim() !== '' ? 'env' : 'default';
}

/**
 * Runs `fn` with environment variable `name` set to `value` (undefined: removed), restoring it
 * afterwards. For tools that point child processes and the per-call options at another value
 * (e.g. `kiln bench` compiling into a fresh KILN_CACHE_DIR).
 */
export function withEnvOption<T>(name: EnvOptionName, value: string | undefined, fn: () => T): T {
  const saved = env[name];
  const put = (v: string | undefined): void => {
    if (v === undefined) delete env[name];
    else env[name] = v;
  };
  put(value);
  try {
    return fn();
  } finally {
    put(saved);
  }
}

export interface OptionInfo {
  readonly name: OptionName;
  readonly type: OptionType;
  /** enum: the accepted values. */
  readonly values?: readonly string[];
  readonly default: unknown;
  /** The value in effect (undefined also when `error` says the environment's value is invalid). */
  readonly value: unknown;
  readonly source: OptionSource;
  readonly doc: string;
  /** Whether it is an environment variable (else runtime-only). */
  readonly env: boolean;
  readonly codegen: boolean;
  readonly setter?: string;
  /** The parse error of an invalid environment value. */
  readonly error?: string;
}

/** Every declared option with its value in effect and where it comes from (for `kiln info`). */
export function describeOptions(): OptionInfo[] {
  return (Object.keys(OPTIONS) as OptionName[]).map((name) => {
    const d = decl(name);
    let value: unknown;
    let error: string | undefined;
    try {
      value = getOption(name);
    } catch (e) {
      error = (e as Error).message;
    }
    return {
      name,
      type: d.type,
      ...(d.values ? { values: d.values } : {}),
      default: d.default,
      value,
      source: optionSource(name),
      doc: d.doc,
      env: d.env,
      codegen: d.codegen,
      ...(d.setter ? { setter: d.setter } : {}),
      ...(error !== undefined ? { error } : {}),
    };
  });
}

/** An option value as stable text (Infinity and unset have no JSON of their own). */
export function formatOptionValue(value: unknown): string {
  if (value === undefined) return '(unset)';
  if (typeof value === 'number' && !Number.isFinite(value)) return String(value);
  return typeof value === 'string' ? value : JSON.stringify(value);
}

let fingerprintMemo: { text: string; hash: string } | undefined;

/**
 * sha256 (hex) of the resolved values of every `codegen` option, by name. Part of the keys of
 * compiled programs (compile/cache/program-key.ts, and so of CUDA-graph decisions), autotune
 * winners and cuBLASLt tuning (not of kernel binaries: those are keyed by their source, which
 * already reflects every option that shapes it), so a program or tuning result stored under one
 * configuration is never reused under another; options that only steer plumbing (logs, folders,
 * worker and thread counts, tool paths) are left out, so they never make the cache miss.
 */
export function configFingerprint(): string {
  const parts: string[] = [];
  for (const name of Object.keys(OPTIONS) as OptionName[]) {
    if (decl(name).codegen) parts.push(`${name}=${encodeForHash(getOption(name))}`);
  }
  const text = parts.join('\n');
  if (fingerprintMemo?.text !== text) fingerprintMemo = { text, hash: createHash('sha256').update(text).digest('hex') };
  return fingerprintMemo.hash;
}

/** Distinct text for every distinct value (unset, strings and numbers never collide). */
function encodeForHash(value: unknown): string {
  if (value === undefined) return '-';
  if (typeof value === 'string') return JSON.stringify(value);
  return `#${String(value)}`;
}
