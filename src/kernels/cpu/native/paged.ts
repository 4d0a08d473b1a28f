/**
 * The eager hook of the native paged-attention kernel (paged-c.ts): `nativePagedAttention` runs
 * llm.pagedAttention for float32 or bfloat16 caches and query on the native path, or returns null
 * (the JS kernel in kernels/cpu/llm-paged.ts then runs). The caller has validated lengths and
 * block ids.
 */
import type { OutMeta } from '../../../ops/schema.js';
import { isContiguousStrides } from '../../../tensor/layout.js';
import type { Tensor } from '../../../tensor/tensor.js';
import { getOption } from '../../../runtime/config.js';
import { allocOut } from '../numeric.js';
import type { NativeFn } from './koffi.js';
import { PAGED_C_SOURCE } from './paged-c.js';
import { cpuPath } from './path.js';
import { loadPoolObject } from './pool.js';
import { nativeThreads } from './threads.js';

let fn: NativeFn | undefined;
let calls = 0;
let splitCalls = 0;

/** How many native paged-attention calls this process made (tests check that it ran). */
export function nativePagedAttentionCalls(): number {
  return calls;
}

/** How many of them split the keys into ranges across threads (KILN_CPU_PAGED_SPLIT). */
export function nativePagedSplitCalls(): number {
  return splitCalls;
}

function paged(): NativeFn {
  if (fn) return fn;
  const lib = loadPoolObject('kiln_paged', PAGED_C_SOURCE);
  fn = lib.func(
    'int32_t kiln_paged_attention(int64_t B, int64_t H, int64_t D, int64_t kvh, int64_t block_size, int64_t max_blocks, void *q, int64_t qo, int32_t qbf16, void *kc, int64_t kco, void *vc, int64_t vco, int32_t cbf16, int32_t *tables, int32_t *lens, void *out, int64_t oo, int32_t obf16, float scale, int32_t nthreads, int32_t max_split, int32_t vec_rows)',
  );
  return fn;
}

const DTYPES: ReadonlySet<string> = new Set(['float32', 'bfloat16']);

function words(t: Tensor): Float32Array | Uint16Array {
  const buf = t.storage.cpuArrayBuffer();
  return t.dtype === 'bfloat16' ? new Uint16Array(buf, 0, t.storage.nbytes / 2) : new Float32Array(buf, 0, t.storage.nbytes / 4);
}

/** Below this many key and value bytes read per call, one thread (a wake-up costs more). */
const PARALLEL_BYTES = 256 << 10;

export function nativePagedAttention(
  meta: OutMeta, q: Tensor, keyCache: Tensor, valueCache: Tensor, kvHeads: number, blockSize: number, tables: ArrayLike<number>, maxBlocks: number, lens: ArrayLike<number>, scale: number,
): Tensor | null {
  const dtype = q.dtype;
  if (!DTYPES.has(dtype) || keyCache.dtype !== dtype || valueCache.dtype !== dtype || meta.dtype !== dtype) return null;
  if (!isContiguousStrides(q.shape, q.strides) || !isContiguousStrides(meta.shape, meta.strides)) return null;
  if (cpuPath() !== 'native') return null;
  const f = paged();
  calls++;
  const [B, H, D] = q.shape as [number, number, number];
  const out = allocOut(meta);
  if (B * H * D === 0) return out;
  let total = 0;
  for (let b = 0; b < B; b++) total += lens[b]!;
  const threads = total * kvHeads * D * 2 * (dtype === 'bfloat16' ? 2 : 4) >= PARALLEL_BYTES ? nativeThreads() : 1;
  const bf = dtype === 'bfloat16' ? 1 : 0;
  const rc = f(B, H, D, kvHeads, blockSize, maxBlocks, words(q), q.offset, bf, words(keyCache), keyCache.offset, words(valueCache), valueCache.offset, bf,
    Int32Array.from(tables), Int32Array.from(lens), words(out), out.offset, bf, scale, threads, getOption('KILN_CPU_PAGED_SPLIT') ? 64 : 1, getOption('KILN_CPU_PAGED_VEC') ? 1 : 0) as number;
  if (rc < 0) throw new Error(`llm.pagedAttention [${B}, ${H}, ${D}]: out of memory`);
  if (rc > 1) splitCalls++;
  return out;
}
