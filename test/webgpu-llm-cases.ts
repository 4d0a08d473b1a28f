/**
 * The cases of the webgpu ops a Qwen3 forward and generation need beyond pointwise, reductions and
 * GEMM (issue #20): indexSelect, embedding, cat, stack, indexPut_ by rows, int64 copies,
 * scaledDotProductAttention (causal, bool and float masks, grouped-query), rmsNorm,
 * llm.reshapeAndCache, llm.pagedAttention, llm.qkNormRotary and llm.applyRotaryEmb. Each case runs on a device from seeded CPU inputs: on
 * webgpu in its dtype, and as the reference on the CPU with float inputs widened to float64 (the
 * result rounded to the case's dtype), so webgpu-llm.test.ts compares values and
 * webgpu-validate.test.ts (Dawn's null backend) checks that every case compiles and encodes.
 */
import * as kiln from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';

export interface LlmCase {
  readonly label: string;
  readonly dtype: DType;
  /** The result on `device`; `wide` widens float inputs to float64 (the CPU reference). */
  readonly run: (device: 'cpu' | 'webgpu', wide: boolean) => Tensor;
}

const FLOATS: readonly DType[] = ['float32', 'float16', 'bfloat16'];

export function llmCases(): LlmCase[] {
  const cases: LlmCase[] = [];
  let seed = 100;
  for (const dtype of FLOATS) {
    const mk = (shape: number[]): ((device: string, wide: boolean) => Tensor) => {
      kiln.manualSeed(seed++);
      const host = kiln.randn(shape).to(dtype);
      return (device, wide) => (wide ? host.to('float64') : host).to(device);
    };
    const ints = (values: number[], dt: DType = 'int64') => (device: string): Tensor => kiln.tensor(values, { dtype: dt }).to(device);
    const add = (label: string, run: LlmCase['run']): void => void cases.push({ label: `${label} ${dtype}`, dtype, run });

    const table = mk([11, 7]);
    add('indexSelect dim 0 int64', (d, w) => kiln.indexSelect(table(d, w), 0, ints([3, 0, 10, 3])(d)));
    add('indexSelect dim 1 int32', (d, w) => kiln.indexSelect(table(d, w), 1, ints([6, 1], 'int32')(d)));
    add('indexSelect transposed', (d, w) => kiln.indexSelect(table(d, w).t(), 1, ints([2, 9])(d)));
    add('embedding [2, 3] ids', (d, w) => kiln.embedding(kiln.tensor([[1, 4, 10], [0, 0, 7]], { dtype: 'int64' }).to(d), table(d, w)));
    const a = mk([2, 3, 4]);
    const b = mk([2, 5, 4]);
    add('cat dim 1', (d, w) => kiln.cat([a(d, w), b(d, w)], 1));
    add('cat dim -1 transposed', (d, w) => kiln.cat([a(d, w).transpose(1, 2), b(d, w).transpose(1, 2)], -1));
    add('stack dim 1', (d, w) => kiln.stack([a(d, w), a(d, w).mul(2)], 1));
    const dst = mk([6, 2, 3]);
    const rows = mk([2, 2, 3]);
    add('indexPut_ rows', (d, w) => {
      const t = dst(d, w).clone();
      kiln.indexPut_(t, [ints([4, 1])(d)], rows(d, w));
      return t;
    });
    add('indexPut_ scalar, negative index', (d, w) => {
      const t = dst(d, w).clone();
      kiln.indexPut_(t, [ints([-1])(d)], 2.5);
      return t;
    });
    const q = mk([2, 4, 5, 8]);
    const k = mk([2, 2, 6, 8]);
    const v = mk([2, 2, 6, 8]);
    const sdpa = (d: string, w: boolean, mask: Tensor | null, causal: boolean, L = 5): Tensor =>
      kiln.scaledDotProductAttention(q(d, w).narrow(2, 0, L), k(d, w), v(d, w), mask, 0, causal, null, true);
    add('sdpa causal GQA', (d, w) => sdpa(d, w, null, true, 5));
    add('sdpa causal GQA L=1', (d, w) => sdpa(d, w, null, true, 1));
    add('sdpa bool mask', (d, w) => sdpa(d, w, kiln.tensor([[true, true, false, true, false, true]]).to(d), false));
    const fm = mk([5, 6]);
    add('sdpa float mask, scale', (d, w) => kiln.scaledDotProductAttention(q(d, w), k(d, w), v(d, w), fm(d, w), 0, false, 0.3, true));
    const x = mk([3, 4, 16]);
    const nw = mk([16]);
    add('rmsNorm weight', (d, w) => kiln.nn.functional.rmsNorm(x(d, w), [16], nw(d, w), 1e-6));
    add('rmsNorm no weight, transposed', (d, w) => kiln.nn.functional.rmsNorm(x(d, w).transpose(0, 1), [16], null, 1e-5));
    // Paged cache: 4 blocks of 4 tokens, 2 kv heads of 8, GQA 2.
    const kc = mk([4, 4, 2, 8]);
    const vc = mk([4, 4, 2, 8]);
    const nk = mk([3, 2, 8]);
    const nv = mk([3, 2, 8]);
    add('llm.reshapeAndCache (a skipped slot)', (d, w) => {
      const kk = kc(d, w).clone();
      const vv = vc(d, w).clone();
      kiln.llm.reshapeAndCache(nk(d, w), nv(d, w), kk, vv, ints([5, -1, 14])(d));
      return kiln.cat([kk, vv], 0);
    });
    // A decode step's keys and values: column slices of one buffer, int32 slots.
    const kvOne = mk([3, 2, 16]);
    add('llm.reshapeAndCache, k and v slices of one buffer, int32 slots', (d, w) => {
      const kk = kc(d, w).clone();
      const vv = vc(d, w).clone();
      const t = kvOne(d, w);
      kiln.llm.reshapeAndCache(t.narrow(2, 0, 8), t.narrow(2, 8, 8), kk, vv, ints([15, 0, -1], 'int32')(d));
      return kiln.cat([kk, vv], 0);
    });
    const pq = mk([3, 4, 8]);
    add('llm.pagedAttention (lengths 5, 0, 16)', (d, w) =>
      kiln.llm.pagedAttention(pq(d, w), kc(d, w), vc(d, w), kiln.tensor([[2, 0, 0, 0], [1, 1, 1, 1], [3, 1, 0, 2]], { dtype: 'int32' }).to(d), ints([5, 0, 16], 'int32')(d), 0.35),
    );
    // q/k norm + rotary as a decode step has it: q [3, 2, 16] and k [3, 1, 16] column slices of one
    // fused qkv output (one binding), cos/sin [3, 1, 16] broadcast over the heads.
    const qkv = mk([3, 64]);
    const wq = mk([16]);
    const wk = mk([16]);
    const cs = mk([3, 1, 16]);
    const sn = mk([3, 1, 16]);
    const flat = (r: { q: Tensor; k: Tensor }): Tensor => kiln.cat([r.q.reshape([-1]), r.k.reshape([-1])], 0);
    const qOf = (d: string, w: boolean): Tensor => qkv(d, w).narrow(1, 0, 32).view([3, 2, 16]);
    const kOf = (d: string, w: boolean): Tensor => qkv(d, w).narrow(1, 32, 16).view([3, 1, 16]);
    for (const neox of [true, false]) {
      const style = neox ? 'neox' : 'gpt-j';
      add(`llm.qkNormRotary ${style}, q/k slices of one qkv`, (d, w) => flat(kiln.llm.qkNormRotary(qOf(d, w), kOf(d, w), wq(d, w), wk(d, w), 1e-6, cs(d, w), sn(d, w), neox)));
      add(`llm.applyRotaryEmb ${style}, a slice`, (d, w) => kiln.llm.applyRotaryEmb(qOf(d, w), cs(d, w), sn(d, w), neox));
    }
    // Prefill layout: [B, H, T, D] transposed views of separate q and k (bindings over 8 on a device
    // with the default limit: two launches), cos/sin [T, D] broadcast.
    const q4 = mk([2, 5, 3, 16]);
    const k4 = mk([2, 5, 1, 16]);
    const c2 = mk([5, 16]);
    const s2 = mk([5, 16]);
    add('llm.qkNormRotary [B, H, T, D] transposed, separate q and k', (d, w) =>
      flat(kiln.llm.qkNormRotary(q4(d, w).transpose(1, 2), k4(d, w).transpose(1, 2), wq(d, w), wk(d, w), 1e-5, c2(d, w), s2(d, w), true)),
    );
    add('llm.applyRotaryEmb [B, H, T, D] transposed', (d, w) => kiln.llm.applyRotaryEmb(q4(d, w).transpose(1, 2), c2(d, w), s2(d, w), true));
  }
  cases.push({
    label: 'int64 copies: contiguous of a transposed view, fill, cat',
    dtype: 'int64',
    run: (d) => {
      const t = kiln.tensor([[1, -2, 3], [2 ** 40, 5, -(2 ** 35)]], { dtype: 'int64' }).to(d);
      return kiln.cat([t.t().contiguous().reshape([-1]), kiln.full([2], -7, { dtype: 'int64' }).to(d)], 0);
    },
  });
  return cases;
}
