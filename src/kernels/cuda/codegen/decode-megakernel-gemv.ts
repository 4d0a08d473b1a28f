/**
 * CUDA C of the decode megakernel's row and GEMV building blocks (decode-megakernel.ts assembles
 * the kernel): a row into shared memory with its RMSNorm (and, under sync 'flow', the MLP groups'
 * down partials), the q/k/v row pointer, the GEMV work-unit macros (prefetch into registers or
 * shared memory, the paced word loads of variant.pace, dot products, split-row staging, the
 * gate/up silu product), and the norm-weight macros of variant.constLoad.
 */

/** The building blocks' source; pace: variant.pace (0: every word loaded before the barrier), flow: sync 'flow'. */
export function megakernelGemvSource(pace: number, flow: boolean): string {
  return `/**
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
#endif`;
}
