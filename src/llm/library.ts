/**
 * The library's manifest entries (see manifest.ts for the meaning of each field). Pure ops with a
 * reference composition are `native`; ops that write their inputs in place, or whose work is data
 * dependent inside (routing, expert permutation, Sinkhorn), are `opaque`: the compiler calls them
 * as extern nodes and trusts only schema, meta and the declared mutation.
 */
import type { DType } from '../tensor/dtype.js';
import { registerManifestEntry, type ManifestEntry } from '../ops/library/manifest.js';

const FLOATS: readonly DType[] = ['float32', 'float16', 'bfloat16', 'float64'];
const TOKENS = { name: 'T', sizes: 'tokens: the leading dims of every token-indexed argument' };

const ENTRIES: readonly ManifestEntry[] = [
  {
    op: 'llm.rmsNorm',
    kind: 'native',
    mutates: [],
    dynamic: [TOKENS],
    requires: ['weight is 1-d with the size of the last dim of input, same dtype'],
    dtypes: FLOATS,
    backward: true,
  },
  {
    op: 'llm.fusedAddRmsNorm',
    kind: 'opaque',
    mutates: ['input', 'residual'],
    dynamic: [TOKENS],
    requires: ['input and residual have one shape and dtype and do not overlap'],
    dtypes: FLOATS,
    backward: 'in place (vLLM inference kernel); use llm.addRmsNorm for training',
  },
  {
    op: 'llm.addRmsNorm',
    kind: 'native',
    mutates: [],
    dynamic: [TOKENS],
    requires: ['input and residual have one shape and dtype'],
    dtypes: FLOATS,
    backward: true,
  },
  {
    op: 'llm.applyRotaryEmb',
    kind: 'native',
    mutates: [],
    dynamic: [TOKENS],
    requires: ['last dim even', 'cos and sin: the dtype of input, broadcast to its shape with the same last dim'],
    dtypes: FLOATS,
    backward: true,
  },
  {
    op: 'llm.qkNormRotary',
    kind: 'native',
    mutates: [],
    dynamic: [TOKENS],
    requires: ['q and k: one dtype, the same last dim D (even)', 'qWeight and kWeight 1-d of size D', 'cos and sin: the dtype of q, broadcast to q and to k with the same last dim'],
    dtypes: FLOATS,
    backward: 'inference fusion (kiln.compile maps rmsNorm + applyRotaryEmb onto it without grad); the unfused ops are differentiable',
  },
  { op: 'llm.siluAndMul', kind: 'native', mutates: [], dynamic: [TOKENS], requires: ['last dim even'], dtypes: FLOATS, backward: true },
  { op: 'llm.geluAndMul', kind: 'native', mutates: [], dynamic: [TOKENS], requires: ['last dim even'], dtypes: FLOATS, backward: true },
  {
    op: 'llm.rotaryEmbedding',
    kind: 'opaque',
    mutates: ['query', 'key'],
    dynamic: [TOKENS],
    requires: ['positions int32/int64 in [0, maxPosition)', 'rotary dim even and <= headSize', 'query/key do not overlap'],
    dtypes: FLOATS,
    backward: 'in place (vLLM inference kernel)',
  },
  {
    op: 'llm.topkSoftmax',
    kind: 'opaque',
    mutates: [],
    dynamic: [TOKENS],
    requires: ['topk <= experts'],
    dtypes: FLOATS,
    backward: true,
  },
  {
    op: 'llm.groupedTopk',
    kind: 'opaque',
    mutates: [],
    dynamic: [TOKENS],
    requires: ['experts divisible by numExpertGroup', 'topk <= topkGroup * experts per group'],
    dtypes: FLOATS,
    backward: true,
  },
  { op: 'llm.moeSum', kind: 'native', mutates: [], dynamic: [TOKENS], requires: [], dtypes: FLOATS, backward: true },
  {
    op: 'llm.fusedMoe',
    kind: 'opaque',
    mutates: [],
    dynamic: [TOKENS],
    requires: ['topkIds in [0, experts)', 'w13 [E, 2I, H] gate rows then up rows, w2 [E, H, I]'],
    dtypes: FLOATS,
    backward: true,
  },
  { op: 'llm.mhcPre', kind: 'opaque', mutates: [], dynamic: [TOKENS], requires: ['phi [n(n+2), nH], alpha [3], bias [n(n+2)]'], dtypes: FLOATS, backward: true },
  { op: 'llm.mhcPost', kind: 'opaque', mutates: [], dynamic: [TOKENS], requires: [], dtypes: FLOATS, backward: true },
  { op: 'llm.mhcHeadCollapse', kind: 'opaque', mutates: [], dynamic: [TOKENS], requires: ['phi [n, nH], alpha [1], bias [n]'], dtypes: FLOATS, backward: true },
  {
    op: 'llm.reshapeAndCache',
    kind: 'opaque',
    mutates: ['keyCache', 'valueCache'],
    dynamic: [TOKENS],
    requires: ['caches [numBlocks, blockSize, kvHeads, headDim] contiguous, one dtype', 'slotMapping in [-1, numBlocks * blockSize); -1 skips the token'],
    dtypes: FLOATS,
    backward: 'in place (vLLM inference kernel)',
  },
  {
    op: 'llm.linearSiluAndMul',
    kind: 'opaque',
    mutates: [],
    dynamic: [TOKENS],
    requires: ['weight [2I, K]: gate rows then up rows; bias [2I] or null; one dtype'],
    dtypes: FLOATS,
    backward: 'inference fusion of a decode step (kiln.compile maps linear + silu * mul onto it)',
  },
  {
    op: 'llm.gateUpSiluAndMul',
    kind: 'opaque',
    mutates: [],
    dynamic: [TOKENS],
    requires: ['gateWeight and upWeight [I, K] of the dtype of input (no bias)'],
    dtypes: FLOATS,
    backward: "inference fusion of a decode step (Qwen3's eager cpu decode calls it; the unfused ops are differentiable)",
  },
  {
    op: 'llm.addRmsNormLinear',
    kind: 'opaque',
    mutates: [],
    dynamic: [TOKENS],
    requires: ['residual null or the shape and dtype of input', 'normWeight [K]', 'weight [N, K] (gated: [2I, K], gate rows then up rows); bias [N] / [2I] or null; one dtype'],
    dtypes: FLOATS,
    backward: 'inference fusion of a decode step (kiln.compile maps add + rmsNorm + linear onto it)',
  },
  {
    op: 'llm.qkNormRotaryCache',
    kind: 'opaque',
    mutates: ['keyCache', 'valueCache'],
    dynamic: [TOKENS],
    requires: ['as llm.qkNormRotary for q, k and the tables', 'k and v [N, kvHeads, headDim] of the caches, as llm.reshapeAndCache'],
    dtypes: FLOATS,
    backward: 'inference fusion of a decode step (kiln.compile maps qkNormRotary + reshapeAndCache onto it)',
  },
  {
    op: 'llm.pagedAttention',
    kind: 'opaque',
    mutates: [],
    dynamic: [TOKENS],
    requires: ['one query token per row', 'query heads a multiple of kv heads', 'contextLens in [0, maxBlocks * blockSize]', 'blockTables entries below a row\'s length in [0, numBlocks)'],
    dtypes: FLOATS,
    backward: 'inference kernel (decode over a paged cache)',
  },
];

for (const e of ENTRIES) registerManifestEntry(e);
