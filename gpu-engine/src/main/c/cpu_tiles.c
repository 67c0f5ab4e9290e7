/*
 * The CPU backend's hot loops in C with AVX-512 intrinsics, reached through JNI from
 * io.longsieve.cpu.kernels.NativeTiles: a block of Gemm (rows x panels of a packed weight matrix; prefill
 * rows packed, decode rows read in place) and one task of TiledAttention (a tile of query rows over the
 * packed key/value tiles in prefill, one position straight from the key/value list in decode).
 *
 * Why C: the Java tiles (VectorPackedTiles, VectorTiles) are the same loops, but on each k step of an
 * 8x32 tile (2 loads, 8 broadcasts, 16 FMAs) JDK 17's C2 adds about 15 scalar instructions of index
 * arithmetic, and ran the products 1.6-2x below PyTorch's; gcc adds 3 (bench/RESULTS.md, issue 35).
 *
 * Same bits as the Java path, by construction, so the CPU backend stays one fp32 reference whichever
 * path runs (NativeTilesTest compares them):
 *  - every product is one fused multiply-add chain over k in ascending order, from zero (or from the
 *    running output for attention's P.V), whatever the tile height or the k slicing;
 *  - the epilogues, the exponentials, the online softmax and decode's score reductions are the Java
 *    operations one for one (VectorTiles.epilogue, exp2Below, rowsStayBelow, softmaxStep, softmaxKeep,
 *    scores, ScalarTiles.exp2);
 *  - built with -ffp-contract=off, so gcc fuses nothing the Java code does not.
 * Layouts and constants (NR = 32 panel columns, KEY_TILE = 64, the packed row groups 8/4/2/1) are
 * Tiles' and TiledAttention's; NativeTiles refuses to load unless Java's constants match.
 */
#include <immintrin.h>
#include <jni.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define L 16          /* floats in a vector */
#define NR 32         /* columns of a packed panel: two vectors */
#define KT 64         /* TiledAttention.KEY_TILE */
#define BLOCK 8       /* TileWorkspace.BLOCK: rows whose scores are computed together */
#define KC 192        /* VectorPackedTiles.KC: depth of a panel slice kept in L1 */

enum { STORE = 0, ADD = 1, BIAS = 2, SWIGLU = 3, ACCUMULATE = 4 }; /* Tiles' modes */

/* ScalarTiles' constants */
#define EXP2_LO (-126.0f)
#define EXP2_HI 127.0f
#define LOG2E 1.44269504088896341f
#define P0 1.535336188319500e-4f
#define P1 1.339887440266574e-3f
#define P2 9.618437357674640e-3f
#define P3 5.550332471162809e-2f
#define P4 2.402264791363012e-1f
#define P5 6.931472028550421e-1f
#define MAGIC 12582912.0f
#define MAGIC_BITS 0x4B400000u
#define SLACK 8.0f /* Tiles.SLACK */

/* ---------------------------------------------------------------- exponentials */

/* VectorTiles.exp2Below: 2^x per lane for x <= 127, lanes below -126 (-inf included) give 0 */
static inline __m512 exp2_below(__m512 x) {
  __mmask16 under = _mm512_cmp_ps_mask(x, _mm512_set1_ps(EXP2_LO), _CMP_LT_OQ);
  __m512 magic = _mm512_set1_ps(MAGIC);
  __m512 t = _mm512_add_ps(x, magic);
  __m512 r = _mm512_sub_ps(x, _mm512_sub_ps(t, magic));
  __m512 p = _mm512_fmadd_ps(r, _mm512_set1_ps(P0), _mm512_set1_ps(P1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P5));
  __m512 y = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  __m512i bits = _mm512_slli_epi32(
      _mm512_sub_epi32(_mm512_castps_si512(t), _mm512_set1_epi32((int) (MAGIC_BITS - 127))), 23);
  return _mm512_maskz_mov_ps((__mmask16) ~under, _mm512_mul_ps(y, _mm512_castsi512_ps(bits)));
}

/* VectorTiles.exp2: the upper clamp, then exp2Below */
static inline __m512 exp2_vec(__m512 x) {
  return exp2_below(_mm512_min_ps(x, _mm512_set1_ps(EXP2_HI)));
}

/* ScalarTiles.exp2, one lane */
static float exp2_scalar(float x) {
  if (!(x >= EXP2_LO)) return x < EXP2_LO ? 0.0f : x; /* NaN stays NaN */
  x = x < EXP2_HI ? x : EXP2_HI;
  float t = x + MAGIC;
  float r = x - (t - MAGIC);
  float p = __builtin_fmaf(r, P0, P1);
  p = __builtin_fmaf(p, r, P2);
  p = __builtin_fmaf(p, r, P3);
  p = __builtin_fmaf(p, r, P4);
  p = __builtin_fmaf(p, r, P5);
  float y = __builtin_fmaf(p, r, 1.0f);
  uint32_t tb, eb;
  memcpy(&tb, &t, 4);
  eb = (tb - (MAGIC_BITS - 127)) << 23;
  float scale;
  memcpy(&scale, &eb, 4);
  return y * scale;
}

/* ---------------------------------------------------------------- register tiles */

/*
 * C(h rows, NR) = A . B over k, or C + A . B with load. A is packed (Tiles.packRows: the h rows side
 * by side, ap[i * h + t] = A[t][i]) or row-major (a[t * lda + i]); B a panel, k rows of NR floats.
 * Always inlined with a constant h, so the accumulators live in registers.
 */
static inline __attribute__((always_inline)) void tile_rows(int h, int packed, const float *a, int lda,
                                                            const float *b, int k, float *c, int ldc, int load) {
  __m512 acc0[8], acc1[8];
  for (int t = 0; t < h; t++) {
    acc0[t] = load ? _mm512_loadu_ps(c + (size_t) t * ldc) : _mm512_setzero_ps();
    acc1[t] = load ? _mm512_loadu_ps(c + (size_t) t * ldc + L) : _mm512_setzero_ps();
  }
  for (int i = 0; i < k; i++) {
    __m512 b0 = _mm512_loadu_ps(b + (size_t) i * NR), b1 = _mm512_loadu_ps(b + (size_t) i * NR + L);
    for (int t = 0; t < h; t++) {
      __m512 x = _mm512_set1_ps(packed ? a[(size_t) i * h + t] : a[(size_t) t * lda + i]);
      acc0[t] = _mm512_fmadd_ps(x, b0, acc0[t]);
      acc1[t] = _mm512_fmadd_ps(x, b1, acc1[t]);
    }
  }
  for (int t = 0; t < h; t++) {
    _mm512_storeu_ps(c + (size_t) t * ldc, acc0[t]);
    _mm512_storeu_ps(c + (size_t) t * ldc + L, acc1[t]);
  }
}

/*
 * dst[j * 8 + t] = src[t * lda + j] for t, j < 8: an 8x8 block of 8 rows, transposed in registers
 * (the usual unpack / shuffle / lane-swap sequence). The scalar packing loop below wrote one float per
 * instruction at a stride of 8 and took about 7% of a prefill matrix product; this takes a few percent.
 */
static inline void transpose8(const float *src, int lda, float *dst) {
  __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + (size_t) lda),
         r2 = _mm256_loadu_ps(src + 2 * (size_t) lda), r3 = _mm256_loadu_ps(src + 3 * (size_t) lda),
         r4 = _mm256_loadu_ps(src + 4 * (size_t) lda), r5 = _mm256_loadu_ps(src + 5 * (size_t) lda),
         r6 = _mm256_loadu_ps(src + 6 * (size_t) lda), r7 = _mm256_loadu_ps(src + 7 * (size_t) lda);
  /* pairs of rows interleaved: t0 = r0[0] r1[0] r0[1] r1[1] | r0[4] r1[4] r0[5] r1[5], ... */
  __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
         t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
         t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  /* four rows' column j in each 128-bit lane: u0 = columns 0 | 4 of rows 0-3, ... */
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
         u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
         u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
         u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  /* rows 0-3 and 4-7 of one column joined */
  _mm256_storeu_ps(dst, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(dst + 8, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(dst + 16, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(dst + 24, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(dst + 32, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(dst + 40, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(dst + 48, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(dst + 56, _mm256_permute2f128_ps(u3, u7, 0x31));
}

/* Tiles.packRows: rows in groups of 8 while 8 remain, then 4, 2, 1; the group at row r from ap + r * k */
static void pack_rows(int rows, const float *a, int lda, int k, float *ap) {
  for (int r = 0; r < rows;) {
    int left = rows - r, h = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
    float *dst = ap + (size_t) r * k;
    int i0 = 0; /* columns [0, i0) of a group of 8 go through the register transpose */
    if (h == 8) {
      for (; i0 + 8 <= k; i0 += 8) transpose8(a + (size_t) r * lda + i0, lda, dst + (size_t) i0 * 8);
    }
    for (int t = 0; t < h; t++) {
      const float *src = a + (size_t) (r + t) * lda;
      for (int i = i0; i < k; i++) dst[(size_t) i * h + t] = src[i];
    }
    r += h;
  }
}

/* All rows of a packed block (groups 8/4/2/1 from ap) against the panel over k in [k0, k0 + kc) */
static void packed_rows(int rows, const float *ap, int k, int k0, int kc, const float *b, float *c, int ldc,
                        int load) {
  int r = 0;
  for (; r + 8 <= rows; r += 8) tile_rows(8, 1, ap + (size_t) r * k + (size_t) k0 * 8, 0, b, kc, c + (size_t) r * ldc, ldc, load);
  for (; r + 4 <= rows; r += 4) tile_rows(4, 1, ap + (size_t) r * k + (size_t) k0 * 4, 0, b, kc, c + (size_t) r * ldc, ldc, load);
  for (; r + 2 <= rows; r += 2) tile_rows(2, 1, ap + (size_t) r * k + (size_t) k0 * 2, 0, b, kc, c + (size_t) r * ldc, ldc, load);
  if (r < rows) tile_rows(1, 1, ap + (size_t) r * k + k0, 0, b, kc, c + (size_t) r * ldc, ldc, load);
}

/* VectorTiles.epilogue: one row's products acc[0 .. NR) into c as mode says */
static void epilogue(const float *acc, float *c, int cols, int mode, const float *aux) {
  __m512 v0 = _mm512_loadu_ps(acc), v1 = _mm512_loadu_ps(acc + L);
  if (mode == SWIGLU) { /* silu(gate) . up = g / (1 + 2^(-g log2 e)) . up */
    __m512 g = _mm512_mul_ps(
        _mm512_div_ps(v0, _mm512_add_ps(exp2_vec(_mm512_mul_ps(v0, _mm512_set1_ps(-LOG2E))), _mm512_set1_ps(1.0f))), v1);
    __mmask16 m = cols >= L ? (__mmask16) 0xFFFF : (__mmask16) ((1u << cols) - 1);
    _mm512_mask_storeu_ps(c, m, g);
    return;
  }
  if (mode == BIAS) {
    v0 = _mm512_add_ps(v0, _mm512_loadu_ps(aux));
    v1 = _mm512_add_ps(v1, _mm512_loadu_ps(aux + L));
  }
  __mmask16 m0 = cols >= L ? (__mmask16) 0xFFFF : (__mmask16) ((1u << cols) - 1);
  __mmask16 m1 = cols >= NR ? (__mmask16) 0xFFFF : cols > L ? (__mmask16) ((1u << (cols - L)) - 1) : 0;
  if (mode == ADD) {
    v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, c), v0);
    v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, c + L), v1);
  }
  _mm512_mask_storeu_ps(c, m0, v0);
  _mm512_mask_storeu_ps(c + L, m1, v1);
}

/* VectorPackedTiles.packedTile: a packed block of rows against one panel, then the epilogue */
static void packed_tile(int rows, const float *ap, const float *b, int k, float *c, int ldc, int cols, int mode,
                        const float *aux, float *scratch) {
  int direct = mode == STORE && cols == NR;
  float *t = direct ? c : scratch;
  int ldt = direct ? ldc : NR;
  for (int k0 = 0; k0 < k; k0 += KC) {
    int kc = k - k0 < KC ? k - k0 : KC;
    packed_rows(rows, ap, k, k0, kc, b + (size_t) k0 * NR, t, ldt, k0 > 0);
  }
  if (direct) return;
  for (int r = 0; r < rows; r++) epilogue(scratch + (size_t) r * NR, c + (size_t) r * ldc, cols, mode, aux);
}

/*
 * Gemm.block for a block of at least 8 rows: rows [r0, r1) of x (row-major, cols wide) packed into
 * `packed`, then panel by panel [p0, p1) of the packed matrix, each panel `width` output columns
 * (NR, or NR / 2 for a gate/up pair), into out (row stride outDim).
 */
/* Rows of A (row-major, stride lda) against a panel over all of k, from zero or from C with load: 4, 2, 1 rows at a time */
static void plain_rows(int rows, const float *a, int lda, const float *b, int k, float *c, int ldc, int load) {
  int r = 0;
  for (; r + 8 <= rows; r += 8) tile_rows(8, 0, a + (size_t) r * lda, lda, b, k, c + (size_t) r * ldc, ldc, load);
  for (; r + 4 <= rows; r += 4) tile_rows(4, 0, a + (size_t) r * lda, lda, b, k, c + (size_t) r * ldc, ldc, load);
  for (; r + 2 <= rows; r += 2) tile_rows(2, 0, a + (size_t) r * lda, lda, b, k, c + (size_t) r * ldc, ldc, load);
  if (r < rows) tile_rows(1, 0, a + (size_t) r * lda, lda, b, k, c + (size_t) r * ldc, ldc, load);
}

/* VectorTiles.tile for a few rows read in place (decode): the same chains, then the epilogue */
static void plain_tile(int rows, const float *a, int lda, const float *b, int k, float *c, int ldc, int cols, int mode,
                       const float *aux, float *scratch) {
  if (mode == STORE && cols == NR) {
    plain_rows(rows, a, lda, b, k, c, ldc, 0);
    return;
  }
  plain_rows(rows, a, lda, b, k, scratch, NR, 0);
  for (int r = 0; r < rows; r++) epilogue(scratch + (size_t) r * NR, c + (size_t) r * ldc, cols, mode, aux);
}

/* Gemm.block: with `packed` (8 rows or more) the rows are packed first; without it (decode) read in place */
static void gemm_block(float *out, const float *x, int r0, int r1, int outDim, int cols, const float *panels, int p0,
                       int p1, int width, int mode, const float *bias, float *packed, float *scratch) {
  int rows = r1 - r0;
  if (packed) pack_rows(rows, x + (size_t) r0 * cols, cols, cols, packed);
  for (int p = p0; p < p1; p++) {
    int col = p * width, cw = outDim - col < width ? outDim - col : width;
    const float *panel = panels + (size_t) p * cols * NR, *aux = bias ? bias + (size_t) p * NR : NULL;
    float *c = out + (size_t) r0 * outDim + col;
    if (packed) packed_tile(rows, packed, panel, cols, c, outDim, cw, mode, aux, scratch);
    else plain_tile(rows, x + (size_t) r0 * cols, cols, panel, cols, c, outDim, cw, mode, aux, scratch);
  }
}

JNIEXPORT void JNICALL Java_io_longsieve_cpu_kernels_NativeTiles_gemmBlock(
    JNIEnv *env, jclass cls, jfloatArray outA, jfloatArray xA, jint r0, jint r1, jint outDim, jint cols,
    jfloatArray panelsA, jint p0, jint p1, jint width, jint mode, jfloatArray biasA, jfloatArray packedA,
    jfloatArray scratchA) {
  (void) cls;
  float *out = (*env)->GetPrimitiveArrayCritical(env, outA, NULL);
  float *x = (*env)->GetPrimitiveArrayCritical(env, xA, NULL);
  float *panels = (*env)->GetPrimitiveArrayCritical(env, panelsA, NULL);
  float *bias = biasA ? (*env)->GetPrimitiveArrayCritical(env, biasA, NULL) : NULL;
  float *packed = packedA ? (*env)->GetPrimitiveArrayCritical(env, packedA, NULL) : NULL;
  float *scratch = (*env)->GetPrimitiveArrayCritical(env, scratchA, NULL);
  gemm_block(out, x, r0, r1, outDim, cols, panels, p0, p1, width, mode, bias, packed, scratch);
  (*env)->ReleasePrimitiveArrayCritical(env, scratchA, scratch, 0);
  if (packedA) (*env)->ReleasePrimitiveArrayCritical(env, packedA, packed, 0);
  if (biasA) (*env)->ReleasePrimitiveArrayCritical(env, biasA, bias, JNI_ABORT);
  (*env)->ReleasePrimitiveArrayCritical(env, panelsA, panels, JNI_ABORT);
  (*env)->ReleasePrimitiveArrayCritical(env, xA, x, JNI_ABORT);
  (*env)->ReleasePrimitiveArrayCritical(env, outA, out, 0);
}

/* ---------------------------------------------------------------- attention */

/* VectorTiles.rowsStayBelow */
static int rows_stay_below(const float *s, int rows, const float *m, int r0) {
  for (int t = 0; t < rows; t++) if (m[r0 + t] == -INFINITY) return 0;
  __mmask16 above = 0;
  for (int t = 0; t < rows; t++) {
    __m512 limit = _mm512_set1_ps(m[r0 + t] + SLACK);
    for (int j = 0; j < KT; j += L) above |= _mm512_cmp_ps_mask(_mm512_loadu_ps(s + t * KT + j), limit, _CMP_GT_OQ);
  }
  return above == 0;
}

/* VectorTiles.softmaxKeep */
static void softmax_keep(float *s, const float *m, float *l, int r) {
  __m512 shift = _mm512_set1_ps(m[r]), sum = _mm512_setzero_ps();
  for (int j = 0; j < KT; j += L) {
    __m512 p = exp2_below(_mm512_sub_ps(_mm512_loadu_ps(s + j), shift));
    _mm512_storeu_ps(s + j, p);
    sum = _mm512_add_ps(sum, p);
  }
  _mm512_storeu_ps(l + (size_t) r * L, _mm512_add_ps(_mm512_loadu_ps(l + (size_t) r * L), sum));
}

/* VectorTiles.softmaxStep (the row's output o, width floats) */
static void softmax_step(float *s, float *m, float *l, int r, float *o, int width) {
  float mOld = m[r], mNew = mOld;
  int exceeds = mOld == -INFINITY;
  if (!exceeds) {
    __m512 limit = _mm512_set1_ps(mOld + SLACK);
    __mmask16 above = 0;
    for (int j = 0; j < KT; j += L) above |= _mm512_cmp_ps_mask(_mm512_loadu_ps(s + j), limit, _CMP_GT_OQ);
    exceeds = above != 0;
  }
  if (exceeds) {
    float tileMax = -INFINITY;
    for (int j = 0; j < KT; j++) tileMax = s[j] > tileMax ? s[j] : tileMax;
    if (tileMax == -INFINITY) {
      memset(s, 0, KT * sizeof(float));
      return;
    }
    mNew = mOld > tileMax ? mOld : tileMax;
  }
  if (mNew != mOld) {
    __m512 alpha = _mm512_set1_ps(exp2_scalar(mOld - mNew)); /* 0 while the row had seen nothing */
    _mm512_storeu_ps(l + (size_t) r * L, _mm512_mul_ps(_mm512_loadu_ps(l + (size_t) r * L), alpha));
    for (int e = 0; e < width; e += L) _mm512_storeu_ps(o + e, _mm512_mul_ps(_mm512_loadu_ps(o + e), alpha));
    m[r] = mNew;
  }
  softmax_keep(s, m, l, r);
}

/*
 * TileWorkspace.softmaxAndValues: rows [rb, rb + rn) of a task with their scores of key tile j0 in s (BLOCK, KT):
 * the logit bias (bias: the tile's (heads, KT), or NULL), the entries each row must not see masked to -inf,
 * the online-softmax step, then the probabilities times the tile's value panels (vt: (dPad / NR, KT, NR))
 * into the running outputs.
 */
static void softmax_and_values(int rb, int rn, int heads, int j0, int jStart, int jEnd, const int *from, const int *to,
                               float *s, const float *bias, const float *vt, float *m, float *l, float *o, int dPad) {
  int kOff = jStart - j0;
  for (int r = rb; r < rb + rn; r++) {
    float *sr = s + (r - rb) * KT;
    int i = r / heads;
    if (bias) {
      const float *br = bias + (r % heads) * KT;
      for (int j = 0; j < KT; j += L) _mm512_storeu_ps(sr + j, _mm512_add_ps(_mm512_loadu_ps(sr + j), _mm512_loadu_ps(br + j)));
    }
    int lo = (from[i] > jStart ? from[i] : jStart) - j0;
    int a = lo < KT ? lo : KT;
    int hi = (to[i] < jEnd ? to[i] : jEnd) - j0;
    int bEnd = hi > a ? hi : a;
    for (int j = 0; j < a; j++) sr[j] = -INFINITY;
    for (int j = bEnd; j < KT; j++) sr[j] = -INFINITY;
  }
  if (rows_stay_below(s, rn, m, rb)) {
    for (int r = rb; r < rb + rn; r++) softmax_keep(s + (r - rb) * KT, m, l, r);
  } else {
    for (int r = rb; r < rb + rn; r++) softmax_step(s + (r - rb) * KT, m, l, r, o + (size_t) r * dPad, dPad);
  }
  /* probabilities (row-major, stride KT) times the value panels, into the running outputs */
  for (int c = 0; c < dPad / NR; c++) {
    plain_rows(rn, s + kOff, KT, vt + ((size_t) c * KT + kOff) * NR, jEnd - jStart, o + (size_t) rb * dPad + c * NR,
               dPad, 1);
  }
}

/* Whether any position of rows [rb, rb + rn) sees an entry of [jStart, jEnd) */
static int block_sees(int rb, int rn, int heads, int jStart, int jEnd, const int *from, const int *to) {
  for (int i = rb / heads; i <= (rb + rn - 1) / heads; i++) if (from[i] < jEnd && to[i] > jStart) return 1;
  return 0;
}

/*
 * TileWorkspace.attendPacked after its packRows: the task's rows (position r / heads, head r % heads)
 * over the key tiles of the entries [first, last) they see. qp: the rows' queries packed (rows, d); k, v,
 * bias: the call's packed tiles (TiledAttention.PackedTiles), the task's list entry j0 in tile
 * tileBase + j0 / KT; from, to: each position's entries; m, l, o: the running max, lane sums and
 * unnormalised outputs.
 */
JNIEXPORT void JNICALL Java_io_longsieve_cpu_kernels_NativeTiles_attendPacked(
    JNIEnv *env, jclass cls, jint rows, jint heads, jint d, jint dPad, jint first, jint last, jintArray fromA,
    jintArray toA, jfloatArray qpA, jfloatArray kA, jfloatArray vA, jfloatArray biasA, jint tileBase, jfloatArray mA,
    jfloatArray lA, jfloatArray oA) {
  (void) cls;
  int *from = (*env)->GetPrimitiveArrayCritical(env, fromA, NULL);
  int *to = (*env)->GetPrimitiveArrayCritical(env, toA, NULL);
  float *qp = (*env)->GetPrimitiveArrayCritical(env, qpA, NULL);
  float *kp = (*env)->GetPrimitiveArrayCritical(env, kA, NULL);
  float *vp = (*env)->GetPrimitiveArrayCritical(env, vA, NULL);
  float *bias = biasA ? (*env)->GetPrimitiveArrayCritical(env, biasA, NULL) : NULL;
  float *m = (*env)->GetPrimitiveArrayCritical(env, mA, NULL);
  float *l = (*env)->GetPrimitiveArrayCritical(env, lA, NULL);
  float *o = (*env)->GetPrimitiveArrayCritical(env, oA, NULL);
  float s[BLOCK * KT]; /* a row block's scores, then probabilities */
  for (int j0 = first - first % KT; j0 < last; j0 += KT) {
    int jStart = j0 > first ? j0 : first, jEnd = last < j0 + KT ? last : j0 + KT;
    size_t t = (size_t) (tileBase + j0 / KT);
    int c0 = (jStart - j0) / NR, c1 = (jEnd - j0 + NR - 1) / NR;
    for (int rb = 0; rb < rows; rb += BLOCK) {
      int rn = rows - rb < BLOCK ? rows - rb : BLOCK;
      if (!block_sees(rb, rn, heads, jStart, jEnd, from, to)) continue;
      /* scores: the block's packed queries (groups 8, or 4/2/1 for a last short block) against the key panels */
      for (int c = c0; c < c1; c++) {
        const float *kb = kp + t * KT * d + (size_t) c * d * NR;
        packed_rows(rn, qp + (size_t) rb * d, d, 0, d, kb, s + c * NR, KT, 0);
      }
      softmax_and_values(rb, rn, heads, j0, jStart, jEnd, from, to, s, bias ? bias + t * heads * KT : NULL,
                         vp + t * KT * dPad, m, l, o, dPad);
    }
  }
  (*env)->ReleasePrimitiveArrayCritical(env, oA, o, 0);
  (*env)->ReleasePrimitiveArrayCritical(env, lA, l, 0);
  (*env)->ReleasePrimitiveArrayCritical(env, mA, m, 0);
  if (biasA) (*env)->ReleasePrimitiveArrayCritical(env, biasA, bias, JNI_ABORT);
  (*env)->ReleasePrimitiveArrayCritical(env, vA, vp, JNI_ABORT);
  (*env)->ReleasePrimitiveArrayCritical(env, kA, kp, JNI_ABORT);
  (*env)->ReleasePrimitiveArrayCritical(env, qpA, qp, JNI_ABORT);
  (*env)->ReleasePrimitiveArrayCritical(env, toA, to, JNI_ABORT);
  (*env)->ReleasePrimitiveArrayCritical(env, fromA, from, JNI_ABORT);
}

/* ---------------------------------------------------------------- attention, one position (decode) */

/* VectorTiles.foldToHalves (16 lanes): each 8-lane half summed into its first lane by lane swaps 4, 2, 1 */
static inline __m512 fold_to_halves(__m512 t) {
  t = _mm512_add_ps(t, _mm512_shuffle_f32x4(t, t, 0xB1)); /* lane i ^ 4 */
  t = _mm512_add_ps(t, _mm512_permute_ps(t, 0x4E));       /* lane i ^ 2 */
  return _mm512_add_ps(t, _mm512_permute_ps(t, 0xB1));    /* lane i ^ 1 */
}

/*
 * VectorTiles.scores: s[r * KT + col] = q_r . key(col) for r < rows and col in [c0, c1), key(col) from
 * keys + keyAt[col]: one vector chain over d per row, two rows reduced together in one butterfly (row 0 in
 * the low lanes, row 1 in the high ones), then the tail one fma at a time.
 */
static void scores_direct(int rows, const float *q, int d, const float *keys, const int *keyAt, int c0, int c1,
                          float *s) {
  int vd = d - d % L;
  for (int col = c0; col < c1; col++) {
    const float *k = keys + keyAt[col];
    int r = 0;
    for (; r + 2 <= rows; r += 2) {
      const float *q0 = q + (size_t) r * d, *q1 = q0 + d;
      __m512 a0 = _mm512_setzero_ps(), a1 = a0;
      for (int e = 0; e < vd; e += L) {
        __m512 kv = _mm512_loadu_ps(k + e);
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q0 + e), kv, a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(q1 + e), kv, a1);
      }
      __m512 lowHigh = _mm512_mask_blend_ps(0xFF00, a0, a1), highLow = _mm512_mask_blend_ps(0xFF00, a1, a0);
      __m512 t = fold_to_halves(_mm512_add_ps(lowHigh, _mm512_shuffle_f32x4(highLow, highLow, 0x4E))); /* lane i ^ 8 */
      float s0 = _mm512_cvtss_f32(t), s1 = _mm256_cvtss_f32(_mm512_extractf32x8_ps(t, 1));
      for (int e = vd; e < d; e++) {
        s0 = __builtin_fmaf(q0[e], k[e], s0);
        s1 = __builtin_fmaf(q1[e], k[e], s1);
      }
      s[r * KT + col] = s0;
      s[(r + 1) * KT + col] = s1;
    }
    if (r < rows) {
      const float *q0 = q + (size_t) r * d;
      __m512 a0 = _mm512_setzero_ps();
      for (int e = 0; e < vd; e += L) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q0 + e), _mm512_loadu_ps(k + e), a0);
      float s0 = _mm512_cvtss_f32(fold_to_halves(_mm512_add_ps(a0, _mm512_shuffle_f32x4(a0, a0, 0x4E))));
      for (int e = vd; e < d; e++) s0 = __builtin_fmaf(q0[e], k[e], s0);
      s[r * KT + col] = s0;
    }
  }
}

/*
 * TileWorkspace.attendDirect after its clamp of each position's entries: rows (positions x heads) over
 * the entries [first, last) of a KvList given by its fields (KvList's keyOffset, slot, valueOffset,
 * biasOffset), scores straight from the keys, each tile's values copied into vp ((dPad / NR, KT, NR)),
 * queries q (rows, d) as they are; m, l, o as in attendPacked.
 */
JNIEXPORT void JNICALL Java_io_longsieve_cpu_kernels_NativeTiles_attendDirect(
    JNIEnv *env, jclass cls, jint rows, jint heads, jint d, jint dPad, jint first, jint last, jintArray fromA,
    jintArray toA, jfloatArray qA, jfloatArray keysA, jint keyBase, jint keyStride, jintArray keyIdxA, jint keyIdxOff,
    jfloatArray valuesA, jint valueBase, jint valueStride, jintArray valueIdxA, jint valueIdxOff, jfloatArray biasA,
    jint biasBase, jint biasStride, jfloatArray vpA, jfloatArray mA, jfloatArray lA, jfloatArray oA) {
  (void) cls;
  int *from = (*env)->GetPrimitiveArrayCritical(env, fromA, NULL);
  int *to = (*env)->GetPrimitiveArrayCritical(env, toA, NULL);
  float *q = (*env)->GetPrimitiveArrayCritical(env, qA, NULL);
  float *keys = (*env)->GetPrimitiveArrayCritical(env, keysA, NULL);
  int *keyIdx = keyIdxA ? (*env)->GetPrimitiveArrayCritical(env, keyIdxA, NULL) : NULL;
  float *values = (*env)->GetPrimitiveArrayCritical(env, valuesA, NULL);
  int *valueIdx = valueIdxA ? (*env)->GetPrimitiveArrayCritical(env, valueIdxA, NULL) : NULL;
  float *bias = biasA ? (*env)->GetPrimitiveArrayCritical(env, biasA, NULL) : NULL;
  float *vp = (*env)->GetPrimitiveArrayCritical(env, vpA, NULL);
  float *m = (*env)->GetPrimitiveArrayCritical(env, mA, NULL);
  float *l = (*env)->GetPrimitiveArrayCritical(env, lA, NULL);
  float *o = (*env)->GetPrimitiveArrayCritical(env, oA, NULL);
  float s[BLOCK * KT];
  int keyAt[KT];
  float biasTile[bias ? heads * KT : 1]; /* (heads, KT) a tile's logit biases times log2 e */
  memset(biasTile, 0, sizeof(biasTile)); /* entries a tile lacks are masked after the bias is added */
  for (int j0 = first - first % KT; j0 < last; j0 += KT) {
    int jStart = j0 > first ? j0 : first, jEnd = last < j0 + KT ? last : j0 + KT;
    for (int j = jStart; j < jEnd; j++) {
      int col = j - j0, slot = valueIdx ? valueIdx[valueIdxOff + j] : j;
      keyAt[col] = keyBase + (keyIdx ? keyIdx[keyIdxOff + j] : j) * keyStride;
      const float *v = values + (size_t) valueBase + (size_t) slot * valueStride;
      for (int c = 0; c * NR < d; c++) {
        int n = d - c * NR < NR ? d - c * NR : NR;
        memcpy(vp + ((size_t) c * KT + col) * NR, v + c * NR, (size_t) n * sizeof(float));
      }
      if (bias) {
        for (int hh = 0; hh < heads; hh++) biasTile[hh * KT + col] = bias[biasBase + slot * biasStride + hh] * LOG2E;
      }
    }
    for (int rb = 0; rb < rows; rb += BLOCK) {
      int rn = rows - rb < BLOCK ? rows - rb : BLOCK;
      if (!block_sees(rb, rn, heads, jStart, jEnd, from, to)) continue;
      scores_direct(rn, q + (size_t) rb * d, d, keys, keyAt, jStart - j0, jEnd - j0, s);
      softmax_and_values(rb, rn, heads, j0, jStart, jEnd, from, to, s, bias ? biasTile : NULL, vp, m, l, o, dPad);
    }
  }
  (*env)->ReleasePrimitiveArrayCritical(env, oA, o, 0);
  (*env)->ReleasePrimitiveArrayCritical(env, lA, l, 0);
  (*env)->ReleasePrimitiveArrayCritical(env, mA, m, 0);
  (*env)->ReleasePrimitiveArrayCritical(env, vpA, vp, 0);
  if (biasA) (*env)->ReleasePrimitiveArrayCritical(env, biasA, bias, JNI_ABORT);
  if (valueIdxA) (*env)->ReleasePrimitiveArrayCritical(env, valueIdxA, valueIdx, JNI_ABORT);
  (*env)->ReleasePrimitiveArrayCritical(env, valuesA, values, JNI_ABORT);
  if (keyIdxA) (*env)->ReleasePrimitiveArrayCritical(env, keyIdxA, keyIdx, JNI_ABORT);
  (*env)->ReleasePrimitiveArrayCritical(env, keysA, keys, JNI_ABORT);
  (*env)->ReleasePrimitiveArrayCritical(env, qA, q, JNI_ABORT);
  (*env)->ReleasePrimitiveArrayCritical(env, toA, to, JNI_ABORT);
  (*env)->ReleasePrimitiveArrayCritical(env, fromA, from, JNI_ABORT);
}
