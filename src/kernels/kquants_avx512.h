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

/* A tile's scales, lane i row i's (Q6_K: sc and d only). */
typedef struct kl_heads {
    __m512i sc[16]; /* row i's scale of sub-block j (Q4_K / Q5_K: 8 of 32; Q6_K: 16 of 16) */
    __m512i mn[4];  /* Q4_K / Q5_K: row i's mins 2m (low int16) and 2m + 1 (high) */
    __m512 d, dmin; /* f32 of row i's d and dmin */
} kl_heads;

typedef struct kl_tile {
    __m512i w[8 * 8]; /* [8g + k]: lane i = dword k of row i's codes 32g .. 32g + 31 */
    kl_heads h;
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

/* Q6_K's unsigned codes of a half h of the block, out[c][k] lane i = dword k of row i's codes
 * 128h + 32c .. + 31, assembled lane-wise from ql's dwords 64h + 4k (l0) and 64h + 32 + 4k (l1)
 * and qh's 32h + 4k: low nibbles of ql, 2-bit fields of qh. */
SYN_K_INLINE void kl_codes_q6_k(const __m512i l0[8], const __m512i l1[8], const __m512i qh[8],
                                __m512i out[4][8]) {
    /* each code: bits 0-3 selected from the nibble's byte (VPTERNLOGD 0xCA: low4 ? x : y), bits
     * 4-5 from qh shifted there, bits 6-7 cleared */
    const __m512i low4 = _mm512_set1_epi8(0x0F), low6 = _mm512_set1_epi8(0x3F);
    SYN_K_UNROLL(8)
    for (int k = 0; k < 8; k++) {
        const __m512i hb = qh[k];
        out[0][k] = _mm512_and_si512(
            _mm512_ternarylogic_epi32(low4, l0[k], _mm512_slli_epi16(hb, 4), 0xCA), low6);
        out[1][k] = _mm512_and_si512(
            _mm512_ternarylogic_epi32(low4, l1[k], _mm512_slli_epi16(hb, 2), 0xCA), low6);
        out[2][k] = _mm512_and_si512(
            _mm512_ternarylogic_epi32(low4, _mm512_srli_epi16(l0[k], 4), hb, 0xCA), low6);
        out[3][k] = _mm512_and_si512(_mm512_ternarylogic_epi32(low4, _mm512_srli_epi16(l1[k], 4),
                                                               _mm512_srli_epi16(hb, 2), 0xCA),
                                     low6);
    }
}

/* Q6_K's 16 int8 scales from lane i's dwords sw[q] = row i's scales 4q .. 4q + 3, each
 * sign-extended from its byte. */
SYN_K_INLINE void kl_scales_q6_k(const __m512i sw[4], kl_heads *h) {
    for (int q = 0; q < 4; q++)
        for (int j = 0; j < 4; j++)
            h->sc[4 * q + j] = _mm512_srai_epi32(_mm512_slli_epi32(sw[q], 24 - 8 * j), 24);
}

/* kl_fill for Q6_K in the manner of kl_fill_k45: ql and qh transposed as they are, the 6-bit
 * codes assembled lane-wise; the 16 int8 scales and d gathered as 4 + 1 dwords per row (d's from
 * 2 bytes before it: the dword after would run past the block). dmin and mn stay unset: Q6_K's
 * kl_tokens reads neither. */
SYN_K_INLINE void kl_fill_q6_k(const char *const rows[KL_ROWS], __m512i row_offsets, kl_tile *t) {
    for (int h = 0; h < 2; h++) {
        __m512i l0[8], l1[8], qh[8];
        kl_transpose16(rows, offsetof(block_q6_k, ql) + (size_t)64 * (size_t)h, l0);
        kl_transpose16(rows, offsetof(block_q6_k, ql) + (size_t)64 * (size_t)h + 32, l1);
        kl_transpose16(rows, offsetof(block_q6_k, qh) + (size_t)32 * (size_t)h, qh);
        kl_codes_q6_k(l0, l1, qh, (__m512i(*)[8])(t->w + 32 * h));
    }
    __m512i sw[4];
    for (int q = 0; q < 4; q++)
        sw[q] =
            _mm512_i32gather_epi32(row_offsets, rows[0] + offsetof(block_q6_k, scales) + 4 * q, 1);
    kl_scales_q6_k(sw, &t->h);
    const __m512i dd =
        _mm512_i32gather_epi32(row_offsets, rows[0] + offsetof(block_q6_k, d) - 2, 1);
    t->h.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
}

/* Q4_K / Q5_K's scales, mins, d and dmin from lane i's dwords of row i's block head: dd = d |
 * dmin, w0..w2 = the 12 packed scale bytes, decoded lane-wise as syn_k_scales_k45 does per row. */
SYN_K_INLINE void kl_heads_k45(__m512i dd, __m512i w0, __m512i w1, __m512i w2, kl_heads *h) {
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
        h->sc[j] = _mm512_and_si512(_mm512_srli_epi32(s_lo, 8 * j), byte);
        h->sc[4 + j] = _mm512_and_si512(_mm512_srli_epi32(s_hi, 8 * j), byte);
    }
    for (int m = 0; m < 4; m++) { /* mins 2m and 2m + 1 into the low bytes of the int16 halves */
        const __m512i pair = _mm512_srli_epi32(m < 2 ? m_lo : m_hi, 16 * (m % 2));
        const __m512i second = _mm512_and_si512(_mm512_srli_epi32(pair, 8), byte);
        h->mn[m] = _mm512_or_si512(_mm512_and_si512(pair, byte), _mm512_slli_epi32(second, 16));
    }
    h->d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
    h->dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
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
    const char *sc = rows[0] + offsetof(block_q4_k, scales);
    kl_heads_k45(_mm512_i32gather_epi32(row_offsets, rows[0], 1),
                 _mm512_i32gather_epi32(row_offsets, sc, 1),
                 _mm512_i32gather_epi32(row_offsets, sc + 4, 1),
                 _mm512_i32gather_epi32(row_offsets, sc + 8, 1), &t->h);
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

/* isum plus row i's sub-block sums of the 32 codes of chunk g (wv[k] lane i: dword k of them)
 * with token at, each times its scale: Q4_K / Q5_K's sub-block g, Q6_K's 2g and 2g + 1 (dwords
 * 0-3 and 4-7, each started from its -32 * bsum). */
SYN_K_INLINE __m512i kl_chunk(uint32_t type, const __m512i wv[8], const kl_heads *h,
                              const block_q8_k *at, int g, __m512i isum) {
    const int8_t *q = at->qs + 32 * g;
    if (type == GGML_TYPE_Q6_K) {
        __m512i s0 = _mm512_set1_epi32(-32 * at->bsums[2 * g]),
                s1 = _mm512_set1_epi32(-32 * at->bsums[2 * g + 1]);
        SYN_K_UNROLL(4)
        for (int k = 0; k < 4; k++) {
            s0 = x86_dpbusd_bcast(s0, wv[k], q + 4 * k);
            s1 = x86_dpbusd_bcast(s1, wv[4 + k], q + 16 + 4 * k);
        }
        return _mm512_add_epi32(isum, _mm512_add_epi32(_mm512_mullo_epi32(s0, h->sc[2 * g]),
                                                       _mm512_mullo_epi32(s1, h->sc[2 * g + 1])));
    }
    __m512i s2[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
    SYN_K_UNROLL(8)
    for (int k = 0; k < 8; k++)
        s2[k & 1] = x86_dpbusd_bcast(s2[k & 1], wv[k], q + 4 * k);
    return _mm512_add_epi32(isum, _mm512_mullo_epi32(_mm512_add_epi32(s2[0], s2[1]), h->sc[g]));
}

/* acc after lane i's kernels.h float steps of one super-block with token at: plus isum times
 * f32(d) * at.d, then (Q4_K / Q5_K) minus the mins' sum times f32(dmin) * at.d. */
SYN_K_INLINE __m512 kl_step(uint32_t type, const kl_heads *h, __m512i isum, const block_q8_k *at,
                            __m512 acc) {
    const __m512 ad = _mm512_set1_ps(at->d);
    const __m512 p = _mm512_mul_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(h->d, ad));
    acc = _mm512_add_ps(acc, p);
    if (type != GGML_TYPE_Q6_K) {
        __m512i msum = _mm512_setzero_si512();
        SYN_K_UNROLL(4)
        for (int mi = 0; mi < 4; mi++) {
            const int32_t b0 = at->bsums[4 * mi] + at->bsums[4 * mi + 1],
                          b1 = at->bsums[4 * mi + 2] + at->bsums[4 * mi + 3];
            const int32_t pair = (int32_t)(((uint32_t)b0 & 0xFFFFu) | (uint32_t)b1 << 16);
            msum = _mm512_add_epi32(msum, _mm512_madd_epi16(h->mn[mi], _mm512_set1_epi32(pair)));
        }
        const __m512 q = _mm512_mul_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(h->dmin, ad));
        acc = _mm512_sub_ps(acc, q);
    }
    return acc;
}

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
        for (int t = 0; t < n_tok; t++)
            isum[t] = kl_chunk(type, wv, &tile->h, &a[t * a_stride], g, isum[t]);
    }
    const __mmask16 m = n_rows >= KL_ROWS ? (__mmask16)0xFFFF : (__mmask16)((1u << n_rows) - 1);
    SYN_K_UNROLL(4)
    for (int t = 0; t < n_tok; t++) {
        float *yt = y + t * y_stride;
        const __m512 acc = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, yt);
        _mm512_mask_storeu_ps(yt, m, kl_step(type, &tile->h, isum[t], &a[t * a_stride], acc));
    }
}

/* ---- The x16 layouts of Q4_K, Q5_K and Q6_K (kernels.h) -----------------------------------------
 * A group block holds what kl_fill gathers and transposes from 16 rows, already in lanes: the
 * codes' dwords (Q4_K's packed nibbles, Q5_K's and its qh, Q6_K's ql and qh) and the heads'
 * dwords. */
SYN_K_INLINE size_t kx_code_bytes(uint32_t type) {
    return type == GGML_TYPE_Q6_K   ? SYN_X16_Q6_K_CODES
           : type == GGML_TYPE_Q5_K ? SYN_X16_Q5_K_CODES
                                    : SYN_X16_Q4_K_CODES;
}

SYN_K_INLINE size_t kx_scale_bytes(uint32_t type) {
    return type == GGML_TYPE_Q6_K ? SYN_X16_Q6_K_SCALES : SYN_X16_K45_SCALES;
}

SYN_K_INLINE __m512i kx_load(const uint8_t *p) { return _mm512_loadu_si512((const void *)p); }

/* The heads of a group block from its scales s. */
SYN_K_INLINE void kx_heads(uint32_t type, const uint8_t *s, kl_heads *h) {
    if (type == GGML_TYPE_Q6_K) {
        const __m512i sw[4] = {kx_load(s), kx_load(s + SYN_X16_VEC), kx_load(s + 2 * SYN_X16_VEC),
                               kx_load(s + 3 * SYN_X16_VEC)};
        kl_scales_q6_k(sw, h);
        h->d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + 4 * SYN_X16_VEC)));
    } else {
        kl_heads_k45(kx_load(s), kx_load(s + SYN_X16_VEC), kx_load(s + 2 * SYN_X16_VEC),
                     kx_load(s + 3 * SYN_X16_VEC), h);
    }
}

/* Q6_K's codes of half hh of a group block (codes c) as kl_codes_q6_k's out. */
SYN_K_INLINE void kx_codes_q6_k(const uint8_t *c, int hh, __m512i out[4][8]) {
    __m512i l0[8], l1[8], qh[8];
    SYN_K_UNROLL(8)
    for (int k = 0; k < 8; k++) {
        const uint8_t *at = c + hh * SYN_X16_Q6_K_HALF + k * 3 * SYN_X16_VEC;
        l0[k] = kx_load(at);
        l1[k] = kx_load(at + SYN_X16_VEC);
        qh[k] = kx_load(at + 2 * SYN_X16_VEC);
    }
    kl_codes_q6_k(l0, l1, qh, out);
}

/* Q4_K's or Q5_K's codes of sub-blocks 2p (low nibbles) and 2p + 1 (high) of a group block
 * (codes c); Q5_K's fifth bits (bits 2p and 2p + 1 of its qh bytes) shifted to bit 4 and each
 * code's bits 0-3 selected from its nibble (VPTERNLOGD 0xCA: low4 ? nibble : shifted qh). */
SYN_K_INLINE void kx_codes_k45(uint32_t type, const uint8_t *c, int p, __m512i lo[8],
                               __m512i hi[8]) {
    const __m512i low4 = _mm512_set1_epi8(0x0F), low5 = _mm512_set1_epi8(0x1F);
    SYN_K_UNROLL(8)
    for (int k = 0; k < 8; k++) {
        const __m512i packed = kx_load(c + (8 * p + k) * SYN_X16_VEC);
        const __m512i high = _mm512_srli_epi16(packed, 4);
        if (type != GGML_TYPE_Q5_K) {
            lo[k] = _mm512_and_si512(packed, low4);
            hi[k] = _mm512_and_si512(high, low4);
            continue;
        }
        const __m512i qh = kx_load(c + SYN_X16_Q4_K_CODES + k * SYN_X16_VEC);
        /* bit 2p to bit 4, bit 2p + 1 to bit 4: 16-bit shifts, whose bits carried across a byte
         * land in bits 0-3 (taken from the nibble) or 5-7 (cleared) */
        const __m512i b_lo =
            2 * p <= 4 ? _mm512_slli_epi16(qh, 4 - 2 * p) : _mm512_srli_epi16(qh, 2 * p - 4);
        const __m512i b_hi =
            2 * p + 1 <= 4 ? _mm512_slli_epi16(qh, 3 - 2 * p) : _mm512_srli_epi16(qh, 2 * p - 3);
        lo[k] = _mm512_and_si512(_mm512_ternarylogic_epi32(low4, packed, b_lo, 0xCA), low5);
        hi[k] = _mm512_and_si512(_mm512_ternarylogic_epi32(low4, high, b_hi, 0xCA), low5);
    }
}

/* kl_fill of a group block (codes c, scales s). */
SYN_K_INLINE void kx_fill(uint32_t type, const uint8_t *c, const uint8_t *s, kl_tile *t) {
    if (type == GGML_TYPE_Q6_K) {
        for (int hh = 0; hh < 2; hh++)
            kx_codes_q6_k(c, hh, (__m512i(*)[8])(t->w + 32 * hh));
    } else {
        for (int p = 0; p < 4; p++)
            kx_codes_k45(type, c, p, t->w + 16 * p, t->w + 16 * p + 8);
    }
    kx_heads(type, s, &t->h);
}

/* Rows in lanes over rows [r0, r1) of the rows at w (x NULL) or of x's groups (r0, r1 multiples of
 * 16): each super-block of a 16-row tile made a kl_tile once, for every token of a chunk. */
SYN_K_INLINE void kl_matmul(uint32_t type, int64_t n_blocks, const void *w, size_t w_row_bytes,
                            const syn_x16 *x, int64_t r0, int64_t r1, const block_q8_k *a,
                            int64_t n_tokens, float *y, int64_t y_stride) {
    const size_t block_bytes = type == GGML_TYPE_Q4_K   ? sizeof(block_q4_k)
                               : type == GGML_TYPE_Q5_K ? sizeof(block_q5_k)
                                                        : sizeof(block_q6_k);
    kl_tile tile;
    for (int64_t c0 = 0; c0 < n_tokens; c0 += KL_TC) {
        const int64_t nt = n_tokens - c0 < KL_TC ? n_tokens - c0 : KL_TC;
        for (int64_t r = r0; r < r1; r += KL_ROWS) {
            for (int64_t b = 0; b < n_blocks; b++) {
                /* A call of one chunk (a decode step of several sequences, a short prompt) reads
                 * the weights once, from memory: the first token call prefetches the next
                 * super-block of a whole tile's rows 8-15 (of x: the next group block's codes,
                 * as 8 "rows" of an eighth each), so the lines are asked for while the tokens run
                 * too, as in x86_matmul_lanes. Longer calls find the weights in cache from their
                 * second chunk on, where the split cost prefill (docs/BENCHMARKS.md): kl_fill then
                 * prefetches all 16 rows' next super-block itself, while x's codes, one
                 * contiguous stream, are left to the hardware prefetcher. */
                const bool split = n_tokens <= KL_TC && r + KL_ROWS <= r1 && b + 1 < n_blocks;
                kl_prefetch pf;
                if (x) {
                    const size_t at = (size_t)(r / KL_ROWS * n_blocks + b);
                    const uint8_t *c = x->codes + at * kx_code_bytes(type);
                    kx_fill(type, c, x->scales + at * kx_scale_bytes(type), &tile);
                    const size_t eighth = kx_code_bytes(type) / 8;
                    pf = (kl_prefetch){split ? (const char *)c + kx_code_bytes(type) : NULL, eighth,
                                       eighth};
                } else {
                    pf = (kl_prefetch){split ? (const char *)w + (size_t)(r + 8) * w_row_bytes +
                                                   (size_t)(b + 1) * block_bytes
                                             : NULL,
                                       w_row_bytes, block_bytes};
                    kl_fill(type, w, w_row_bytes, block_bytes, r, r1, b, n_blocks,
                            split ? 8 : KL_ROWS, &tile);
                }
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

/* x86_x16_decode's step for a k-quant: group block i (from codes c0, scales s0) with
 * activation block k. */
typedef struct kx_decode {
    uint32_t type;
    const uint8_t *c0, *s0;
    const block_q8_k *a;
} kx_decode;

SYN_K_INLINE void kx_decode_step(const void *ctx, __m512 acc[2], int64_t i, int64_t k) {
    const kx_decode *d = ctx;
    const uint32_t type = d->type;
    const uint8_t *c = d->c0 + (size_t)i * kx_code_bytes(type);
    kl_heads h;
    kx_heads(type, d->s0 + (size_t)i * kx_scale_bytes(type), &h);
    __m512i isum = _mm512_setzero_si512();
    if (type == GGML_TYPE_Q6_K) {
        for (int hh = 0; hh < 2; hh++) {
            __m512i cw[4][8];
            kx_codes_q6_k(c, hh, cw);
            SYN_K_UNROLL(4)
            for (int q = 0; q < 4; q++)
                isum = kl_chunk(type, cw[q], &h, &d->a[k], 4 * hh + q, isum);
        }
    } else {
        SYN_K_UNROLL(4)
        for (int p = 0; p < 4; p++) {
            __m512i lo[8], hi[8];
            kx_codes_k45(type, c, p, lo, hi);
            isum = kl_chunk(type, lo, &h, &d->a[k], 2 * p, isum);
            isum = kl_chunk(type, hi, &h, &d->a[k], 2 * p + 1, isum);
        }
    }
    acc[0] = kl_step(type, &h, isum, &d->a[k], acc[0]);
}

/* Decode over x's groups of rows [r0, r1), each block's sums in lanes straight from the layout. */
SYN_K_INLINE void kx_matvec(uint32_t type, int64_t n_blocks, const syn_x16 *x, int64_t r0,
                            int64_t r1, const block_q8_k *a, float *y) {
    const int64_t g0 = r0 / KL_ROWS;
    const kx_decode d = {type, x->codes + (size_t)(g0 * n_blocks) * kx_code_bytes(type),
                         x->scales + (size_t)(g0 * n_blocks) * kx_scale_bytes(type), a};
    x86_x16_decode(g0, r1 / KL_ROWS, n_blocks, y, kx_decode_step, &d, false);
}

/* Matmul of x's groups: the lane tiles from 2 tokens (a tile costs no transposition here), the
 * matvec for one. */
SYN_K_INLINE void kx_matmul(uint32_t type, int64_t n_blocks, const syn_x16 *x, int64_t r0,
                            int64_t r1, const block_q8_k *a, int64_t n_tokens, float *y,
                            int64_t y_stride) {
    if (n_tokens < 2) {
        for (int64_t t = 0; t < n_tokens; t++)
            kx_matvec(type, n_blocks, x, r0, r1, a + t * n_blocks, y + t * y_stride);
        return;
    }
    kl_matmul(type, n_blocks, NULL, 0, x, r0, r1, a, n_tokens, y, y_stride);
}

#define KQ_X16_KERNELS(T, TYPE, sfx)                                                               \
    void syn_matvec_x16_##T##_##sfx(int64_t n_blocks, const syn_x16 *w, int64_t r0, int64_t r1,    \
                                    const void *act, float *y) {                                   \
        kx_matvec(TYPE, n_blocks, w, r0, r1, act, y);                                              \
    }                                                                                              \
    void syn_matmul_x16_##T##_##sfx(int64_t n_blocks, const syn_x16 *w, int64_t r0, int64_t r1,    \
                                    const void *act, int64_t n_tokens, float *y,                   \
                                    int64_t y_stride) {                                            \
        kx_matmul(TYPE, n_blocks, w, r0, r1, act, n_tokens, y, y_stride);                          \
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
        kl_matmul(type, n_blocks, w, w_row_bytes, NULL, r0, r1, a, n_tokens, y, y_stride);
    else
        k_matmul(type, n_blocks, w, w_row_bytes, r0, r1, a, n_tokens, y, y_stride);
}

#define KQ_AVX512_KERNELS(sfx)                                                                     \
    KQ_KERNELS(q4_k, GGML_TYPE_Q4_K, sfx, k_matmul_any)                                            \
    KQ_KERNELS(q5_k, GGML_TYPE_Q5_K, sfx, k_matmul_any)                                            \
    KQ_KERNELS(q6_k, GGML_TYPE_Q6_K, sfx, k_matmul_any)

#endif
