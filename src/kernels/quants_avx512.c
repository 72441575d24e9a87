/*
 * quants_avx512.c: AVX-512 VNNI matrix kernels of Q8_0 and (through the same drivers) Q4_0, Q5_0,
 * Q4_1, Q5_1; the quantizer and single-row dot are AVX2's.
 *
 * Strategy (quants_x86.h has the drivers): VPDPBUSD multiplies unsigned by signed bytes, so the
 * Q8_0 weights are offset by +128 (exact for any int8) and the int32 sums start from -128 * sum(a)
 * (the 4- and 5-bit codes are unsigned already: their sums start from -8 or -16 * sum(a), or 0).
 * Matvec streams rows front to back, folding each row's per-block sums with hadd trees. Matmul
 * puts rows in lanes (weights transposed per tile, activation dwords broadcast), so it needs no
 * horizontal sums; its tile is 16 rows (one 512-bit vector) x up to 8 tokens. Elsewhere the 256-bit
 * (VL) forms are used: on Zen 4 512-bit ops run as two 256-bit halves, so only where a 512-bit op
 * saves instructions and registers (the matmul token loop) do they pay. Bitwise equal to scalar
 * (kernels.h).
 */
#include "kernels/quants_x86.h"

/* -128 * (sum of each 4-byte group of a): the correction for the +128 offset of w below. */
SYN_K_INLINE __m256i prep_offset(__m256i a) {
    return _mm256_sub_epi32(
        _mm256_setzero_si256(),
        _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8((char)0x80), a));
}

/* (w + 128) as unsigned bytes times a, plus the correction: exactly w . a per 4-byte group. */
SYN_K_INLINE __m256i dot_block(__m256i w, __m256i a, __m256i c) {
    return _mm256_dpbusd_epi32(c, _mm256_xor_si256(w, _mm256_set1_epi8((char)0x80)), a);
}

SYN_K_INLINE __m256i dpbusd(__m256i acc, __m256i u8, __m256i s8) {
    return _mm256_dpbusd_epi32(acc, u8, s8);
}

void syn_matvec_q8_0_avx512(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                            int64_t r1, const void *act, float *y) {
    const block_q8_0 *a = act; /* the Q8_0 activation rows */
    x86_matvec(n_blocks, w, w_row_bytes, r0, r1, a, y, prep_offset, dot_block);
}

/* The 16-lane token loop: a 16-row tile's two transposed vectors per dword (adjacent in wp) as one
 * 512-bit vector, so each VPDPBUSD and each float step covers the whole tile; token tiles of up
 * to 8 tokens keep the 8 weight and 8 accumulator vectors in registers (the 256-bit loop's 4-token
 * tile spilled and reloaded them). Half the instructions per token at the same per-lane float
 * sequence, so the same bits.
 * acc[t] lane i: row i, token t. */
enum { LANES_TOK = 8 };

SYN_K_INLINE void lane_tile16(int64_t kb, const __m256i *wp, const __m256 *dwp, const block_q8_0 *a,
                              int64_t n_blocks, const x86_act_aux *aux, __m512 *acc,
                              const int n_tok, const x86_tile_ref *pf) {
    for (int64_t k = 0; k < kb; k++) {
        x86_prefetch_tile_line(pf, k, kb);
        __m512i wv[8];
        SYN_K_UNROLL(8)
        for (int j = 0; j < 8; j++)
            wv[j] = _mm512_loadu_si512((const void *)(wp + (k * 8 + j) * 2));
        const __m512 dw = _mm512_loadu_ps((const float *)(dwp + k * 2));
        SYN_K_UNROLL(8)
        for (int t = 0; t < n_tok; t++) {
            const int8_t *q = a[t * n_blocks + k].qs;
            /* two chains of 4 VPDPBUSDs, for latency */
            __m512i half[2] = {_mm512_set1_epi32(aux[t * X86_MM_KS + k].corr),
                               _mm512_setzero_si512()};
            SYN_K_UNROLL(8)
            for (int j = 0; j < 8; j++) {
                half[j & 1] = x86_dpbusd_bcast(half[j & 1], wv[j], q + 4 * j);
            }
            const __m512i isum = _mm512_add_epi32(half[0], half[1]);
            const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(aux[t * X86_MM_KS + k].d));
            acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(_mm512_cvtepi32_ps(isum), sc));
        }
    }
}

/* Tokens [0, n_tok) of a's tile: sums start at 0 in the first span and continue from y after;
 * *pf's lines are prefetched on the way. */
SYN_K_INLINE void lane_tokens16(int64_t kb, bool first_span, const __m256i *wp, const __m256 *dwp,
                                const block_q8_0 *a, int64_t n_blocks, const x86_act_aux *aux,
                                float *y, int64_t y_stride, int64_t n_rows, const int n_tok,
                                const x86_tile_ref *pf) {
    const __mmask16 m = n_rows >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n_rows) - 1);
    __m512 acc[LANES_TOK];
    SYN_K_UNROLL(8)
    for (int t = 0; t < n_tok; t++)
        acc[t] = first_span ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, y + t * y_stride);
    lane_tile16(kb, wp, dwp, a, n_blocks, aux, acc, n_tok, pf);
    SYN_K_UNROLL(8)
    for (int t = 0; t < n_tok; t++)
        _mm512_mask_storeu_ps(y + t * y_stride, m, acc[t]);
}

/* x86_lane_run_fn for 16-row tiles (n_vec 2): token tiles of LANES_TOK, then one of the rest; the
 * first token tile prefetches *pf. */
static void lane_run16(int64_t kb, bool first_span, const __m256i *wp, const __m256 *dwp,
                       const block_q8_0 *a, int64_t n_blocks, const x86_act_aux *aux, int64_t nt,
                       float *y, int64_t y_stride, int64_t n_rows, const x86_tile_ref *pf) {
    static const x86_tile_ref none = {0};
    int64_t t = 0;
    for (; t + LANES_TOK <= nt; t += LANES_TOK, pf = &none) {
        lane_tokens16(kb, first_span, wp, dwp, a + t * n_blocks, n_blocks, aux + t * X86_MM_KS,
                      y + t * y_stride, y_stride, n_rows, LANES_TOK, pf);
    }
    const block_q8_0 *at = a + t * n_blocks;
    const x86_act_aux *xt = aux + t * X86_MM_KS;
    float *yt = y + t * y_stride;
    switch (nt - t) {
    case 1:
        lane_tokens16(kb, first_span, wp, dwp, at, n_blocks, xt, yt, y_stride, n_rows, 1, pf);
        break;
    case 2:
        lane_tokens16(kb, first_span, wp, dwp, at, n_blocks, xt, yt, y_stride, n_rows, 2, pf);
        break;
    case 3:
        lane_tokens16(kb, first_span, wp, dwp, at, n_blocks, xt, yt, y_stride, n_rows, 3, pf);
        break;
    case 4:
        lane_tokens16(kb, first_span, wp, dwp, at, n_blocks, xt, yt, y_stride, n_rows, 4, pf);
        break;
    case 5:
        lane_tokens16(kb, first_span, wp, dwp, at, n_blocks, xt, yt, y_stride, n_rows, 5, pf);
        break;
    case 6:
        lane_tokens16(kb, first_span, wp, dwp, at, n_blocks, xt, yt, y_stride, n_rows, 6, pf);
        break;
    case 7:
        lane_tokens16(kb, first_span, wp, dwp, at, n_blocks, xt, yt, y_stride, n_rows, 7, pf);
        break;
    default: break;
    }
}

void syn_matmul_q8_0_avx512(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                            int64_t r1, const void *act, int64_t n_tokens, float *y,
                            int64_t y_stride) {
    const block_q8_0 *a = act; /* the Q8_0 activation rows */
    x86_matmul(n_blocks, w, w_row_bytes, r0, r1, a, n_tokens, y, y_stride, 2, 4, 2, dpbusd,
               lane_run16, prep_offset, dot_block);
}

void syn_matmul_q8_0_avx512_ymm(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                                int64_t r1, const void *act, int64_t n_tokens, float *y,
                                int64_t y_stride) {
    const block_q8_0 *a = act; /* the Q8_0 activation rows */
    x86_matmul(n_blocks, w, w_row_bytes, r0, r1, a, n_tokens, y, y_stride, 1, 4, 4, dpbusd, NULL,
               prep_offset, dot_block);
}

/* Unsigned codes (Q4_0, Q5_0, Q4_1, Q5_1) straight into VPDPBUSD. */
SYN_K_INLINE __m256i dot_unsigned(__m256i u, __m256i a, __m256i c) { return dpbusd(c, u, a); }
X86_CODES_MATVECS(avx512, dot_unsigned)
X86_CODES_MATMULS(avx512, dpbusd, dot_unsigned, 2, 4, 2, lane_run16)
X86_CODES_MATMULS(avx512_ymm, dpbusd, dot_unsigned, 1, 4, 4,
                  NULL) /* AVX-VNNI's loop, for the tests */
