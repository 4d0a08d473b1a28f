/**
 * scaled_dot_product_attention in compiled programs, on the float32 Wasm GEMM: per (batch, head)
 * S = Q K^T (K packed as the GEMM's B operand, exactly as a linear weight is), a row softmax with
 * the scale and the causal mask (top-left aligned, as the eager kernel and torch), then O = P V.
 * The eager kernel does the same math one query row at a time in scalar float64 JavaScript; here
 * the two products run at GEMM speed with float32 accumulation (differences ~1e-6).
 *
 * Handled: float32 [B, H, L, E] query and [B, H, S, E] key / value with the same batch and head
 * dims (any strides), no mask tensor, no dropout. Anything else returns false and the caller
 * dispatches the eager op.
 */
import type { Tensor } from '../../../tensor/tensor.js';
import { readable, type NumArray } from '../../../kernels/cpu/numeric.js';
import { GEMM_IMPORT_PAGES, GEMM_MR, GEMM_NR, type GemmArena, type GemmFn, gemmModule, instantiateGemm, packB, packedBytes } from '../../../kernels/cpu/wasm-gemm.js';

/** The GEMM's K-block depth here: head dims and sequence lengths of CPU-sized models fit one or two blocks. */
const KC = 512;

export class WasmAttention {
  private mm: GemmFn | undefined;
  private scratch = { at: 0, bytes: 0 };

  constructor(private readonly arena: GemmArena) {}

  /** Whether run() handles these arguments. */
  static accepts(q: Tensor, k: Tensor, v: Tensor, mask: unknown, dropout: unknown, enableGqa: unknown): boolean {
    if (mask !== null && mask !== undefined) return false;
    if (dropout !== 0 || enableGqa === true) return false;
    if (q.dtype !== 'float32' || k.dtype !== 'float32' || v.dtype !== 'float32') return false;
    if (q.shape.length !== 4 || k.shape.length !== 4 || v.shape.length !== 4) return false;
    const [B, H, , E] = q.shape as [number, number, number, number];
    const [Bk, Hk, S, Ek] = k.shape as [number, number, number, number];
    const [Bv, Hv, Sv] = v.shape as [number, number, number, number];
    return B === Bk && B === Bv && H === Hk && H === Hv && E === Ek && S === Sv && S > 0 && E > 0;
  }

  /** out[b, h] = softmax(scale Q K^T (+ causal mask)) V into a contiguous [B, H, L, Ev] output. */
  run(q: Tensor, k: Tensor, v: Tensor, causal: boolean, scaleArg: number | null, out: NumArray, outOffset: number): void {
    const [B, H, L, E] = q.shape as [number, number, number, number];
    const S = k.shape[2]!;
    const Ev = v.shape[3]!;
    if (B * H * L * Ev === 0) return;
    const scale = scaleArg ?? 1 / Math.sqrt(E);
    const Lp = Math.ceil(L / GEMM_MR) * GEMM_MR;
    const Sp = Math.ceil(S / GEMM_NR) * GEMM_NR;
    const Evp = Math.ceil(Ev / GEMM_NR) * GEMM_NR;
    // Regions: Q rows, packed K^T, scores / probabilities (rows of Sp), packed V, output tile.
    const qBytes = Lp * E * 4;
    const kBytes = packedBytes(E, S);
    const sBytes = Lp * Sp * 4;
    const vBytes = packedBytes(S, Ev);
    const oBytes = Lp * Evp * 4;
    const need = qBytes + kBytes + sBytes + vBytes + oBytes + 80;
    if (this.scratch.bytes < need) this.scratch = { at: this.arena.alloc(need), bytes: need };
    const base = this.scratch.at;
    const al = (a: number): number => (a + 15) & ~15;
    const qAt = al(base);
    const kAt = al(qAt + qBytes);
    const sAt = al(kAt + kBytes);
    const vAt = al(sAt + sBytes);
    const oAt = al(vAt + vBytes);
    this.mm ??= instantiateGemm(gemmModule(null, GEMM_IMPORT_PAGES), this.arena);
    const mm = this.mm;
    const f = this.arena.f32; // after the allocation above (growth replaces the view)
    const qr = readable(q);
    const kr = readable(k);
    const vr = readable(v);
    const [qs0, qs1, qs2, qs3] = q.strides as [number, number, number, number];
    const [ks0, ks1, ks2, ks3] = k.strides as [number, number, number, number];
    const [vs0, vs1, vs2, vs3] = v.strides as [number, number, number, number];
    f.fill(0, (qAt >> 2) + L * E, (qAt >> 2) + Lp * E);
    /** C = A . B over K blocks (A rows at byte stride lda; B packed with n padded columns). */
    const blocks = (K: number, a: number, lda: number, b: number, n: number, c: number, ldc: number): void => {
      for (let pc = 0; pc < K; pc += KC) {
        const kc = Math.min(KC, K - pc);
        mm(Lp / GEMM_MR, n / GEMM_NR, kc, a + pc * 4, lda, b + pc * n * 4, c, ldc, pc > 0 ? 1 : 0);
      }
    };
    for (let b = 0; b < B; b++) {
      for (let h = 0; h < H; h++) {
        // Q rows (dense, row length E).
        const qo = qr.offset + b * qs0 + h * qs1;
        for (let i = 0; i < L; i++) for (let e = 0, p = qo + i * qs2; e < E; e++, p += qs3) f[(qAt >> 2) + i * E + e] = qr.data[p]!;
        // B = K^T: B[e, s] = K[s, e]
        packB(this.arena, kAt, kr.data, kr.offset + b * ks0 + h * ks1, ks3, ks2, E, S, KC);
        blocks(E, qAt, E * 4, kAt, Sp, sAt, Sp * 4);
        // Row softmax of scale * scores over the allowed keys; masked and padding columns become 0.
        const s0 = sAt >> 2;
        for (let i = 0; i < L; i++) {
          const row = s0 + i * Sp;
          const end = causal ? Math.min(S, i + 1) : S;
          let mx = -Infinity;
          for (let j = 0; j < end; j++) {
            const x = f[row + j]! * scale;
            if (x > mx || Number.isNaN(x)) mx = Number.isNaN(mx) ? mx : x;
          }
          let sum = 0;
          for (let j = 0; j < end; j++) {
            const e = Math.exp(f[row + j]! * scale - mx);
            f[row + j] = e;
            sum += e;
          }
          // A row whose every score is -inf gives 0/0 = NaN, as the eager kernel does.
          const inv = 1 / sum;
          for (let j = 0; j < end; j++) f[row + j] = f[row + j]! * inv;
          for (let j = end; j < Sp; j++) f[row + j] = 0;
        }
        for (let i = L; i < Lp; i++) f.fill(0, s0 + i * Sp, s0 + (i + 1) * Sp);
        // B = V: B[s, e] = V[s, e]
        packB(this.arena, vAt, vr.data, vr.offset + b * vs0 + h * vs1, vs2, vs3, S, Ev, KC);
        blocks(S, sAt, Sp * 4, vAt, Evp, oAt, Evp * 4);
        const o0 = oAt >> 2;
        const dst = outOffset + (b * H + h) * L * Ev;
        if (Evp === Ev) out.set(f.subarray(o0, o0 + L * Ev), dst);
        else for (let i = 0; i < L; i++) out.set(f.subarray(o0 + i * Evp, o0 + i * Evp + Ev), dst + i * Ev);
      }
    }
  }
}
