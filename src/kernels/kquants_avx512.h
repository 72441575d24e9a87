/*
 * kquants_avx512.h: Q4_K, Q5_K and Q6_K x Q8_K matrix kernels of the AVX-512 VNNI tier, built
 * twice: by kquants_avx512.c, and with GFNI by kquants_gfni_avx512.c, whose row kernels (the matvec
 * and batches under kl_min_tokens) unpack codes by VGF2P8AFFINEQB, one instruction per
 * shift-and-mask; the rows-in-lanes matmul is the same in both. syn_kernels_get takes the GFNI
 * build where the CPU has GFNI. Each includes this file once and names its kernels with
 * KQ_AVX512_KERNELS(sfx). The integer scheme of kquants_avx2.c (maddubs of the unsigned codes by
 * the activation, madd by the sub-block scale as int16, here fused with the accumulation as
 * VPDPWSSD; bsums for the mins and Q6_K's -32) on 512-bit vectors, two sub-blocks (64 codes, 64
 * contiguous activation bytes) per instruction, the scale pair picked out of one register by
 * VPERMW, and the per-block sums of the tokens of a pass folded by one reduction tree. Same int32
 * sums, same float steps (kernels.h): bitwise equal to scalar and to the AVX2 kernels.
 */
#ifndef SYN_KERNELS_KQUANTS_AVX512_H
#define SYN_KERNELS_KQUANTS_AVX512_H

#include "kernels/codes.h"
#include "kernels/fp16.h"
#include "kernels/quants_x86.h"

enum { KQ_TOKENS = 4 }; /* tokens per row pass of matmul */

/* Lane sums of 4 vectors (16 int32 each), token t's in element t. */
SYN_K_INLINE __m128i reduce4_512(const __m512i v[KQ_TOKENS], const int n_tok) {
    __m256i h[4];
    SYN_K_UNROLL(4)
    for (int t = 0; t < 4; t++)
        h[t] = t < n_tok ? _mm256_add_epi32(_mm512_castsi512_si256(v[t]),
                                            _mm512_extracti64x4_epi64(v[t], 1))
                         : _mm256_setzero_si256();
    return x86_reduce4(h);
}

SYN_K_INLINE __m128i reduce4_256(const __m256i v[KQ_TOKENS], const int n_tok) {
    __m256i h[4];
    SYN_K_UNROLL(4)
    for (int t = 0; t < 4; t++)
        h[t] = t < n_tok ? v[t] : _mm256_setzero_si256();
    return x86_reduce4(h);
}

/* Per token t < n_tok: out_a[t] = the lane sum of a[t] (16 lanes), out_b[t] = that of b[t] (8). One
 * token (the matvec) takes one shared tree instead of two 4-token trees mostly of zeros. */
SYN_K_INLINE void reduce_pair(const __m512i a[KQ_TOKENS], const __m256i b[KQ_TOKENS],
                              const int n_tok, int32_t out_a[4], int32_t out_b[4]) {
    if (n_tok == 1) {
        const __m256i a8 =
            _mm256_add_epi32(_mm512_castsi512_si256(a[0]), _mm512_extracti64x4_epi64(a[0], 1));
        const __m256i h = _mm256_hadd_epi32(a8, b[0]); /* per 128-bit half: a pairs, then b pairs */
        const __m128i q = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        const __m128i r = _mm_hadd_epi32(q, q); /* [sum a, sum b, sum a, sum b] */
        out_a[0] = _mm_cvtsi128_si32(r);
        out_b[0] = _mm_extract_epi32(r, 1);
        return;
    }
    _mm_storeu_si128((__m128i *)out_a, reduce4_512(a, n_tok));
    _mm_storeu_si128((__m128i *)out_b, reduce4_256(b, n_tok));
}

/* acc + codes (u8) . a (s8) over 64 bytes, times per-16-lane int16 scales: VPMADDUBSW's int16
 * pairs, then VPDPWSSD multiplies them by the scales and adds into acc (one instruction where
 * VPMADDWD and VPADDD took two; the same wrapping int32 arithmetic, so the same sums). */
SYN_K_INLINE __m512i scaled_dot64_acc(__m512i acc, __m512i codes, const int8_t *a,
                                      __m512i scale16) {
    return _mm512_dpwssd_epi32(
        acc, _mm512_maddubs_epi16(codes, _mm512_loadu_si512((const void *)a)), scale16);
}

/* y[t * y_stride] (t < n_tok) = kernels.h's Q4_K / Q5_K dot of row w with token t's activation. */
SYN_K_INLINE void k45_row(int64_t n_blocks, const char *w, size_t block_bytes, size_t qs_at,
                          size_t qh_at, const block_q8_k *a, int64_t a_stride, float *y,
                          int64_t y_stride, const int n_tok) {
    float acc[KQ_TOKENS] = {0};
#if defined(__GFNI__)
    const __m512i nibbles = _mm512_setr_epi64(GF_LOW4, GF_LOW4, GF_LOW4, GF_LOW4, GF_HIGH4,
                                              GF_HIGH4, GF_HIGH4, GF_HIGH4);
#else
    const __m512i low4 = _mm512_set1_epi8(0x0F), one = _mm512_set1_epi8(1);
    const __m512i nibble_shift = _mm512_setr_epi64(0, 0, 0, 0, 4, 4, 4, 4);
#endif
    for (int64_t b = 0; b < n_blocks; b++) {
        const char *blk = w + (size_t)b * block_bytes;
        const block_q4_k *head = (const block_q4_k *)blk; /* d, dmin and scales: the same in Q5_K */
        uint8_t sc[8], mn[8];
        syn_k_scales_k45(head->scales, sc, mn);
        uint64_t sc64, mn64;
        memcpy(&sc64, sc, sizeof sc64);
        memcpy(&mn64, mn, sizeof mn64);
        const __m512i sc16 =
            _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc64)));
        const __m128i mn8 = _mm_cvtsi64_si128((long long)mn64);
        const __m256i mins16 =
            _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn8, mn8)); /* min j on lanes 2j, 2j + 1 */
        const uint8_t *qs = (const uint8_t *)blk + qs_at;
        const __m512i qh =
            qh_at ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + qh_at)))
                  : _mm512_setzero_si512();
        __m512i isum[KQ_TOKENS];
        SYN_K_UNROLL(4)
        for (int t = 0; t < n_tok; t++)
            isum[t] = _mm512_setzero_si512();
        SYN_K_UNROLL(4)
        for (int g = 0; g < 4; g++) {
            /* sub-block 2g (low nibbles) in the lower half, 2g + 1 (high nibbles) in the upper */
            const __m512i q =
                _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * g)));
#if defined(__GFNI__)
            __m512i codes = _mm512_gf2p8affine_epi64_epi8(q, nibbles, 0);
            if (qh_at) {
                const __m512i bit = _mm512_setr_epi64(GF_MOVE(2 * g, 4), GF_MOVE(2 * g, 4),
                                                      GF_MOVE(2 * g, 4), GF_MOVE(2 * g, 4),
                                                      GF_MOVE(2 * g + 1, 4), GF_MOVE(2 * g + 1, 4),
                                                      GF_MOVE(2 * g + 1, 4), GF_MOVE(2 * g + 1, 4));
                codes = _mm512_or_si512(codes, _mm512_gf2p8affine_epi64_epi8(qh, bit, 0));
            }
#else
            __m512i codes = _mm512_and_si512(_mm512_srlv_epi64(q, nibble_shift), low4);
            if (qh_at) {
                const __m512i bit = _mm512_setr_epi64(2 * g, 2 * g, 2 * g, 2 * g, 2 * g + 1,
                                                      2 * g + 1, 2 * g + 1, 2 * g + 1);
                codes = _mm512_or_si512(
                    codes, _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi64(qh, bit), one), 4));
            }
#endif
            const __m512i pick = _mm512_inserti64x4(_mm512_set1_epi16((short)(2 * g)),
                                                    _mm256_set1_epi16((short)(2 * g + 1)), 1);
            const __m512i scale = _mm512_permutexvar_epi16(pick, sc16);
            SYN_K_UNROLL(4)
            for (int t = 0; t < n_tok; t++)
                isum[t] = scaled_dot64_acc(isum[t], codes, a[t * a_stride + b].qs + 64 * g, scale);
        }
        __m256i msum[KQ_TOKENS];
        SYN_K_UNROLL(4)
        for (int t = 0; t < n_tok; t++)
            msum[t] = _mm256_madd_epi16(
                _mm256_loadu_si256((const __m256i *)a[t * a_stride + b].bsums), mins16);
        int32_t is[4], ms[4];
        reduce_pair(isum, msum, n_tok, is, ms);
        const float d = x86_fp16_f32(head->d), dmin = x86_fp16_f32(head->dmin);
        SYN_K_UNROLL(4)
        for (int t = 0; t < n_tok; t++) {
            const float ad = a[t * a_stride + b].d;
            const float dd = d * ad;
            const float p = (float)is[t] * dd;
            acc[t] += p;
            const float dm = dmin * ad;
            const float q = (float)ms[t] * dm;
            acc[t] -= q;
        }
    }
    SYN_K_UNROLL(4)
    for (int t = 0; t < n_tok; t++)
        y[t * y_stride] = acc[t];
}

/* The same for a Q6_K row. */
SYN_K_INLINE void q6k_row(int64_t n_blocks, const block_q6_k *w, const block_q8_k *a,
                          int64_t a_stride, float *y, int64_t y_stride, const int n_tok) {
    float acc[KQ_TOKENS] = {0};
    const __m512i low4 = _mm512_set1_epi8(0x0F);
#if defined(__GFNI__)
    /* bits 4-5 of the codes from qh bits 0-1 | 2-3 (q[0]) and 4-5 | 6-7 (q[1]); ql's high nibble */
    const __m512i qh_lo = _mm512_setr_epi64(GF_BITS45(0), GF_BITS45(0), GF_BITS45(0), GF_BITS45(0),
                                            GF_BITS45(2), GF_BITS45(2), GF_BITS45(2), GF_BITS45(2));
    const __m512i qh_hi = _mm512_setr_epi64(GF_BITS45(4), GF_BITS45(4), GF_BITS45(4), GF_BITS45(4),
                                            GF_BITS45(6), GF_BITS45(6), GF_BITS45(6), GF_BITS45(6));
    const __m512i high4 = _mm512_set1_epi64(GF_HIGH4);
#else
    const __m512i low2 = _mm512_set1_epi8(3);
    const __m512i shift_lo = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2),
                  shift_hi = _mm512_setr_epi64(4, 4, 4, 4, 6, 6, 6, 6);
#endif
    for (int64_t b = 0; b < n_blocks; b++) {
        const block_q6_k *blk = &w[b];
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)blk->scales));
        const __m512i sc512 = _mm512_castsi256_si512(sc16);
        __m512i isum[KQ_TOKENS];
        SYN_K_UNROLL(4)
        for (int t = 0; t < n_tok; t++)
            isum[t] = _mm512_setzero_si512();
        SYN_K_UNROLL(2)
        for (int h = 0; h < 2; h++) {
            /* ql[64h .. 64h + 63]: elements 128h + 0..63 take their low nibbles, + 64..127 their
             * high */
            const __m512i l = _mm512_loadu_si512((const void *)(blk->ql + 64 * h));
            const __m512i qh =
                _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk->qh + 32 * h)));
            __m512i q[2]; /* (low nibble & 15) | qh bits, by one VPTERNLOGD: (a & b) | c */
#if defined(__GFNI__)
            q[0] = _mm512_ternarylogic_epi32(l, low4, _mm512_gf2p8affine_epi64_epi8(qh, qh_lo, 0),
                                             0xEA);
            q[1] = _mm512_or_si512(_mm512_gf2p8affine_epi64_epi8(l, high4, 0),
                                   _mm512_gf2p8affine_epi64_epi8(qh, qh_hi, 0));
#else
            q[0] = _mm512_ternarylogic_epi32(
                l, low4,
                _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi64(qh, shift_lo), low2), 4),
                0xEA);
            q[1] = _mm512_ternarylogic_epi32(
                _mm512_srli_epi16(l, 4), low4,
                _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi64(qh, shift_hi), low2), 4),
                0xEA);
#endif
            SYN_K_UNROLL(2)
            for (int k = 0; k < 2; k++) {
                /* 64 elements from 128h + 64k: sub-blocks j..j + 3, 8 int16 lanes each */
                const int j = 8 * h + 4 * k;
                const long long x4 = 0x0001000100010001LL; /* an int16 index in each of 4 lanes */
                const __m512i pick =
                    _mm512_setr_epi64(j * x4, j * x4, (j + 1) * x4, (j + 1) * x4, (j + 2) * x4,
                                      (j + 2) * x4, (j + 3) * x4, (j + 3) * x4);
                const __m512i scale = _mm512_permutexvar_epi16(pick, sc512);
                SYN_K_UNROLL(4)
                for (int t = 0; t < n_tok; t++)
                    isum[t] = scaled_dot64_acc(isum[t], q[k],
                                               a[t * a_stride + b].qs + 128 * h + 64 * k, scale);
            }
        }
        /* the codes' -32: 32 * sum_j scale[j] * bsums[j], per token */
        __m256i bias[KQ_TOKENS];
        SYN_K_UNROLL(4)
        for (int t = 0; t < n_tok; t++)
            bias[t] = _mm256_madd_epi16(
                _mm256_loadu_si256((const __m256i *)a[t * a_stride + b].bsums), sc16);
        int32_t is[4], bs[4];
        reduce_pair(isum, bias, n_tok, is, bs);
        const float d = x86_fp16_f32(blk->d);
        SYN_K_UNROLL(4)
        for (int t = 0; t < n_tok; t++) {
            const float dd = d * a[t * a_stride + b].d;
            const float p = (float)(is[t] - 32 * bs[t]) * dd;
            acc[t] += p;
        }
    }
    SYN_K_UNROLL(4)
    for (int t = 0; t < n_tok; t++)
        y[t * y_stride] = acc[t];
}

#include "kernels/kquants_rows.h"

/* ---- Matmul with rows in lanes (prefill) --------------------------------------------------------
 * As the Q8_0 lane kernels (quants_x86.h): a tile of 16 rows' super-block is transposed and
 * unpacked once (kl_fill), lane i of w[8g + k] holding dword k of row i's codes 32g..32g+31
 * (unsigned: Q4_K 0..15, Q5_K 0..31, Q6_K 0..63), and every token of a chunk runs over it with its
 * activation dwords broadcast: VPDPBUSD leaves each sub-block's exact int32 sum in each row's lane,
 * VPMULLD scales it by the lane's own sub-block scale, and the mins (Q4_K / Q5_K) or Q6_K's -32
 * come from the token's bsums. The same int32 isum / msum and float steps per (row, token) as the
 * other kernels: bitwise equal. */
enum {
    KL_ROWS = 16, /* rows per tile: one 512-bit vector of int32 lanes */
    KL_TOK = 4,   /* tokens sharing each load of the tile's vectors */
    KL_TC = 64,   /* tokens per chunk: their outputs stay in cache across the row's super-blocks */
};

typedef struct kl_tile {
    __m512i w[8 * 8]; /* [8g + k]: lane i = dword k of row i's codes 32g .. 32g + 31 */
    __m512i
        sc[16];    /* lane i: row i's scale of sub-block j (Q4_K / Q5_K: 8 of 32; Q6_K: 16 of 16) */
    __m512i mn[4]; /* Q4_K / Q5_K, lane i: row i's mins 2m (low int16) and 2m + 1 (high) */
    __m512 d, dmin; /* lane i: f32 of row i's d and dmin */
} kl_tile;

/* Dword k of 32 bytes at offset at of each of the 16 rows, as lane i of out[k]. */
SYN_K_INLINE void kl_transpose16(const char *const rows[KL_ROWS], size_t at, __m512i out[8]) {
    __m256i x[8], lo[8], hi[8];
    for (int i = 0; i < 8; i++)
        x[i] = _mm256_loadu_si256((const __m256i *)(rows[i] + at));
    x86_transpose8_u8(x, lo, 1, false);
    for (int i = 0; i < 8; i++)
        x[i] = _mm256_loadu_si256((const __m256i *)(rows[8 + i] + at));
    x86_transpose8_u8(x, hi, 1, false);
    for (int k = 0; k < 8; k++)
        out[k] = _mm512_inserti64x4(_mm512_castsi256_si512(lo[k]), hi[k], 1);
}

/* kl_fill for Q6_K in the manner of kl_fill_k45: ql and qh transposed as they are, the 6-bit
 * codes assembled lane-wise (low nibbles of ql, 2-bit fields of qh); the 16 int8 scales and d
 * gathered as 4 + 1 dwords per row (d's from 2 bytes before it: the dword after would run past the
 * block). dmin and mn stay unset: Q6_K's kl_tokens reads neither. */
SYN_K_INLINE void kl_fill_q6_k(const char *const rows[KL_ROWS], __m512i row_offsets, kl_tile *t) {
    const __m512i low4 = _mm512_set1_epi8(0x0F), low2 = _mm512_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        __m512i l0[8], l1[8], qh[8];
        kl_transpose16(rows, offsetof(block_q6_k, ql) + (size_t)64 * (size_t)h, l0);
        kl_transpose16(rows, offsetof(block_q6_k, ql) + (size_t)64 * (size_t)h + 32, l1);
        kl_transpose16(rows, offsetof(block_q6_k, qh) + (size_t)32 * (size_t)h, qh);
        for (int k = 0; k < 8; k++) {
            const __m512i hb = qh[k];
            t->w[8 * (4 * h + 0) + k] = _mm512_or_si512(
                _mm512_and_si512(l0[k], low4), _mm512_slli_epi16(_mm512_and_si512(hb, low2), 4));
            t->w[8 * (4 * h + 1) + k] = _mm512_or_si512(
                _mm512_and_si512(l1[k], low4),
                _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hb, 2), low2), 4));
            t->w[8 * (4 * h + 2) + k] = _mm512_or_si512(
                _mm512_and_si512(_mm512_srli_epi16(l0[k], 4), low4),
                _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hb, 4), low2), 4));
            t->w[8 * (4 * h + 3) + k] = _mm512_or_si512(
                _mm512_and_si512(_mm512_srli_epi16(l1[k], 4), low4),
                _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hb, 6), low2), 4));
        }
    }
    for (int q = 0; q < 4; q++) { /* scales 4q .. 4q + 3, sign-extended from each byte */
        const __m512i sw =
            _mm512_i32gather_epi32(row_offsets, rows[0] + offsetof(block_q6_k, scales) + 4 * q, 1);
        for (int j = 0; j < 4; j++)
            t->sc[4 * q + j] = _mm512_srai_epi32(_mm512_slli_epi32(sw, 24 - 8 * j), 24);
    }
    const __m512i dd =
        _mm512_i32gather_epi32(row_offsets, rows[0] + offsetof(block_q6_k, d) - 2, 1);
    t->d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
}

/* kl_fill for Q4_K and Q5_K (five), the tile built from the rows' bytes as they are: the 16 rows'
 * 128 bytes of packed codes (and Q5_K's 32 bytes of fifth bits) are transposed as dwords first
 * and split after, on all 16 lanes at once (lane-wise, so the same tile: dword k of 32 packed
 * bytes holds dword k of both 32-code groups), and d, dmin and the 12 scale bytes come in as 4
 * gathered dwords per row and are decoded lane-wise as syn_k_scales_k45 does per row. Half the
 * shuffles of unpacking each row first, and no scalar work per row. */
SYN_K_INLINE void kl_fill_k45(const char *const rows[KL_ROWS], __m512i row_offsets, const bool five,
                              kl_tile *t) {
    const __m512i low4 = _mm512_set1_epi8(0x0F), one = _mm512_set1_epi8(1);
    __m512i qh[8];
    if (five) kl_transpose16(rows, offsetof(block_q5_k, qh), qh);
    const size_t qs_at = five ? offsetof(block_q5_k, qs) : offsetof(block_q4_k, qs);
    for (int g2 = 0; g2 < 4; g2++) { /* packed bytes 32 g2 .. + 31: codes 64 g2 .. + 63 */
        __m512i packed[8];
        kl_transpose16(rows, qs_at + (size_t)32 * (size_t)g2, packed);
        for (int k = 0; k < 8; k++) {
            __m512i lo = _mm512_and_si512(packed[k], low4);
            __m512i hi = _mm512_and_si512(_mm512_srli_epi16(packed[k], 4), low4);
            if (five) { /* bit 2 g2 of each qh byte for the low half's codes, bit 2 g2 + 1 for the
                           high */
                const __m512i b_lo = _mm512_and_si512(_mm512_srli_epi16(qh[k], 2 * g2), one);
                const __m512i b_hi = _mm512_and_si512(_mm512_srli_epi16(qh[k], 2 * g2 + 1), one);
                lo = _mm512_or_si512(lo, _mm512_slli_epi16(b_lo, 4));
                hi = _mm512_or_si512(hi, _mm512_slli_epi16(b_hi, 4));
            }
            t->w[8 * (2 * g2) + k] = lo;
            t->w[8 * (2 * g2 + 1) + k] = hi;
        }
    }
    /* lane i: row i's dwords of d | dmin and of scales[0..3], [4..7], [8..11] (Q5_K's at the same
     * offsets) */
    _Static_assert(offsetof(block_q5_k, scales) == offsetof(block_q4_k, scales),
                   "Q4_K and Q5_K share their head");
    const __m512i dd = _mm512_i32gather_epi32(row_offsets, rows[0], 1);
    const __m512i w0 =
        _mm512_i32gather_epi32(row_offsets, rows[0] + offsetof(block_q4_k, scales), 1);
    const __m512i w1 =
        _mm512_i32gather_epi32(row_offsets, rows[0] + offsetof(block_q4_k, scales) + 4, 1);
    const __m512i w2 =
        _mm512_i32gather_epi32(row_offsets, rows[0] + offsetof(block_q4_k, scales) + 8, 1);
    const __m512i lo6 = _mm512_set1_epi32(0x3F3F3F3F), lo4 = _mm512_set1_epi32(0x0F0F0F0F),
                  lo2 = _mm512_set1_epi32(0x03030303), byte = _mm512_set1_epi32(0xFF);
    const __m512i s_lo = _mm512_and_si512(w0, lo6), m_lo = _mm512_and_si512(w1, lo6);
    const __m512i s_hi =
        _mm512_or_si512(_mm512_and_si512(w2, lo4),
                        _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w0, 6), lo2), 4));
    const __m512i m_hi =
        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w2, 4), lo4),
                        _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w1, 6), lo2), 4));
    for (int j = 0; j < 4; j++) {
        t->sc[j] = _mm512_and_si512(_mm512_srli_epi32(s_lo, 8 * j), byte);
        t->sc[4 + j] = _mm512_and_si512(_mm512_srli_epi32(s_hi, 8 * j), byte);
    }
    for (int m = 0; m < 4; m++) { /* mins 2m and 2m + 1 into the low bytes of the int16 halves */
        const __m512i pair = _mm512_srli_epi32(m < 2 ? m_lo : m_hi, 16 * (m % 2));
        const __m512i second = _mm512_and_si512(_mm512_srli_epi32(pair, 8), byte);
        t->mn[m] = _mm512_or_si512(_mm512_and_si512(pair, byte), _mm512_slli_epi32(second, 16));
    }
    t->d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
    t->dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
}

/* The tile of rows [r, r + 16) (clamped to r1 - 1) at super-block b; prefetches the next
 * super-block of its first pf_rows rows (kl_matmul: the token loop asks for the others). The
 * gathers take int32 offsets: w_row_bytes <= INT32_MAX / KL_ROWS (k_matmul_any sees to it). */
SYN_K_INLINE void kl_fill(uint32_t type, const char *w, size_t w_row_bytes, size_t block_bytes,
                          int64_t r, int64_t r1, int64_t b, int64_t n_blocks, int pf_rows,
                          kl_tile *t) {
    const char *rows[KL_ROWS];
    int32_t off[KL_ROWS];
    for (int i = 0; i < KL_ROWS; i++) {
        const int64_t ri = r + i < r1 ? i : r1 - 1 - r;
        off[i] = (int32_t)((size_t)ri * w_row_bytes);
        rows[i] = w + (size_t)r * w_row_bytes + (size_t)off[i] + (size_t)b * block_bytes;
        if (b + 1 < n_blocks && i < pf_rows)
            for (size_t o = 0; o < block_bytes; o += 64)
                _mm_prefetch(rows[i] + block_bytes + o, _MM_HINT_T0);
    }
    const __m512i row_offsets = _mm512_loadu_si512((const void *)off);
    if (type == GGML_TYPE_Q6_K)
        kl_fill_q6_k(rows, row_offsets, t);
    else
        kl_fill_k45(rows, row_offsets, type == GGML_TYPE_Q5_K, t);
}

/* What a token call prefetches: the bytes at p + g * row_bytes for g < 8 (the next super-block of 8
 * of the tile's rows; p NULL: nothing). */
typedef struct kl_prefetch {
    const char *p;
    size_t row_bytes, bytes;
} kl_prefetch;

/* Tokens [0, n_tok) of a (their Q8_K block of this super-block a[t * a_stride]) against the tile:
 * y[t * y_stride + i] for the tile's n_rows lanes, from 0 at the first super-block, else continued.
 * Step g prefetches *pf's row g, so those lines are asked for while the tokens run. */
SYN_K_INLINE void kl_tokens(uint32_t type, const kl_tile *tile, const block_q8_k *a,
                            int64_t a_stride, float *y, int64_t y_stride, int64_t n_rows,
                            bool first, const int n_tok, const kl_prefetch *pf) {
    __m512i isum[KL_TOK];
    SYN_K_UNROLL(4)
    for (int t = 0; t < n_tok; t++)
        isum[t] = _mm512_setzero_si512();
    for (int g = 0; g < 8; g++) {
        if (pf->p)
            for (size_t o = 0; o < pf->bytes; o += 64)
                _mm_prefetch(pf->p + (size_t)g * pf->row_bytes + o, _MM_HINT_T0);
        __m512i wv[8];
        SYN_K_UNROLL(8)
        for (int k = 0; k < 8; k++)
            wv[k] = _mm512_load_si512((const void *)&tile->w[8 * g + k]);
        SYN_K_UNROLL(4)
        for (int t = 0; t < n_tok; t++) {
            const block_q8_k *at = &a[t * a_stride];
            const int8_t *q = at->qs + 32 * g;
            if (type == GGML_TYPE_Q6_K) {
                /* two sub-blocks of 16: dwords 0-3 and 4-7, each started from its -32 * bsum */
                __m512i s0 = _mm512_set1_epi32(-32 * at->bsums[2 * g]),
                        s1 = _mm512_set1_epi32(-32 * at->bsums[2 * g + 1]);
                SYN_K_UNROLL(4)
                for (int k = 0; k < 4; k++) {
                    s0 = x86_dpbusd_bcast(s0, wv[k], q + 4 * k);
                    s1 = x86_dpbusd_bcast(s1, wv[4 + k], q + 16 + 4 * k);
                }
                isum[t] = _mm512_add_epi32(
                    isum[t], _mm512_add_epi32(_mm512_mullo_epi32(s0, tile->sc[2 * g]),
                                              _mm512_mullo_epi32(s1, tile->sc[2 * g + 1])));
            } else {
                __m512i s[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
                SYN_K_UNROLL(8)
                for (int k = 0; k < 8; k++)
                    s[k & 1] = x86_dpbusd_bcast(s[k & 1], wv[k], q + 4 * k);
                isum[t] = _mm512_add_epi32(
                    isum[t], _mm512_mullo_epi32(_mm512_add_epi32(s[0], s[1]), tile->sc[g]));
            }
        }
    }
    const __mmask16 m = n_rows >= KL_ROWS ? (__mmask16)0xFFFF : (__mmask16)((1u << n_rows) - 1);
    SYN_K_UNROLL(4)
    for (int t = 0; t < n_tok; t++) {
        const block_q8_k *at = &a[t * a_stride];
        float *yt = y + t * y_stride;
        __m512 acc = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, yt);
        const __m512 ad = _mm512_set1_ps(at->d);
        const __m512 p = _mm512_mul_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(tile->d, ad));
        acc = _mm512_add_ps(acc, p);
        if (type != GGML_TYPE_Q6_K) {
            __m512i msum = _mm512_setzero_si512();
            SYN_K_UNROLL(4)
            for (int mi = 0; mi < 4; mi++) {
                const int32_t b0 = at->bsums[4 * mi] + at->bsums[4 * mi + 1],
                              b1 = at->bsums[4 * mi + 2] + at->bsums[4 * mi + 3];
                const int32_t pair = (int32_t)(((uint32_t)b0 & 0xFFFFu) | (uint32_t)b1 << 16);
                msum = _mm512_add_epi32(msum,
                                        _mm512_madd_epi16(tile->mn[mi], _mm512_set1_epi32(pair)));
            }
            const __m512 q = _mm512_mul_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(tile->dmin, ad));
            acc = _mm512_sub_ps(acc, q);
        }
        _mm512_mask_storeu_ps(yt, m, acc);
    }
}

SYN_K_INLINE void kl_matmul(uint32_t type, int64_t n_blocks, const void *w, size_t w_row_bytes,
                            int64_t r0, int64_t r1, const block_q8_k *a, int64_t n_tokens, float *y,
                            int64_t y_stride) {
    const size_t block_bytes = type == GGML_TYPE_Q4_K   ? sizeof(block_q4_k)
                               : type == GGML_TYPE_Q5_K ? sizeof(block_q5_k)
                                                        : sizeof(block_q6_k);
    kl_tile tile;
    for (int64_t c0 = 0; c0 < n_tokens; c0 += KL_TC) {
        const int64_t nt = n_tokens - c0 < KL_TC ? n_tokens - c0 : KL_TC;
        for (int64_t r = r0; r < r1; r += KL_ROWS) {
            for (int64_t b = 0; b < n_blocks; b++) {
                /* A call of one chunk (a decode step of several sequences, a short prompt) reads
                 * the weights once, from memory: a whole tile's rows 8-15 have their next
                 * super-block prefetched by the first token call, so the lines are asked for while
                 * the tokens run too, as in x86_matmul_lanes. Longer calls find the weights in
                 * cache from their second chunk on, where the split cost prefill
                 * (docs/BENCHMARKS.md). */
                const bool split = n_tokens <= KL_TC && r + KL_ROWS <= r1 && b + 1 < n_blocks;
                kl_prefetch pf = {split ? (const char *)w + (size_t)(r + 8) * w_row_bytes +
                                              (size_t)(b + 1) * block_bytes
                                        : NULL,
                                  w_row_bytes, block_bytes};
                kl_fill(type, w, w_row_bytes, block_bytes, r, r1, b, n_blocks, split ? 8 : KL_ROWS,
                        &tile);
                const block_q8_k *ab = a + c0 * n_blocks + b;
                float *yr = y + c0 * y_stride + r;
                const int64_t n_rows = r1 - r;
                int64_t t = 0;
                for (; t + KL_TOK <= nt; t += KL_TOK, pf.p = NULL)
                    kl_tokens(type, &tile, ab + t * n_blocks, n_blocks, yr + t * y_stride, y_stride,
                              n_rows, b == 0, KL_TOK, &pf);
                const block_q8_k *at = ab + t * n_blocks;
                float *yt = yr + t * y_stride;
                switch (nt - t) {
                case 1:
                    kl_tokens(type, &tile, at, n_blocks, yt, y_stride, n_rows, b == 0, 1, &pf);
                    break;
                case 2:
                    kl_tokens(type, &tile, at, n_blocks, yt, y_stride, n_rows, b == 0, 2, &pf);
                    break;
                case 3:
                    kl_tokens(type, &tile, at, n_blocks, yt, y_stride, n_rows, b == 0, 3, &pf);
                    break;
                default: break;
                }
            }
        }
    }
}

/* Matmul of a k-quant: rows in lanes once a tile's transposition (kl_fill's, of the stored bytes)
 * is shared by enough tokens (kl_min_tokens: where that path measured faster, docs/BENCHMARKS.md;
 * near the threshold the two are within the host's noise of each other), else a row against
 * KQ_TOKENS tokens per pass. */
SYN_K_INLINE int64_t kl_min_tokens(uint32_t type) { return type == GGML_TYPE_Q6_K ? 6 : 5; }

SYN_K_INLINE void k_matmul_any(uint32_t type, int64_t n_blocks, const void *w, size_t w_row_bytes,
                               int64_t r0, int64_t r1, const block_q8_k *a, int64_t n_tokens,
                               float *y, int64_t y_stride) {
    if (n_tokens >= kl_min_tokens(type) && w_row_bytes <= (size_t)INT32_MAX / KL_ROWS)
        kl_matmul(type, n_blocks, w, w_row_bytes, r0, r1, a, n_tokens, y, y_stride);
    else
        k_matmul(type, n_blocks, w, w_row_bytes, r0, r1, a, n_tokens, y, y_stride);
}

#define KQ_AVX512_KERNELS(sfx)                                                                     \
    KQ_KERNELS(q4_k, GGML_TYPE_Q4_K, sfx, k_matmul_any)                                            \
    KQ_KERNELS(q5_k, GGML_TYPE_Q5_K, sfx, k_matmul_any)                                            \
    KQ_KERNELS(q6_k, GGML_TYPE_Q6_K, sfx, k_matmul_any)

#endif
