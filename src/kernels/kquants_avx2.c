/*
 * kquants_avx2.c: Q4_K, Q5_K and Q6_K x Q8_K kernels for every x86 tier, and the AVX2 Q8_K and Q8_1
 * quantizers. kernels.h's k-quant sequence per super-block: exact int32 isum (and msum), then two
 * (one for Q6_K) float steps.
 *
 * Integer part (as ggml's AVX2 path): the codes are unsigned (Q4_K 0..15, Q5_K 0..31, Q6_K 0..63
 * before its -32), so maddubs(codes, a) gives exact int16 pair sums (at most 2 * 63 * 127 = 16002),
 * and madd with the sub-block scale broadcast as int16 turns them into int32 (scale * pair sum;
 * the sum of 16 or 32 such is exact). Q6_K's -32 comes out once per super-block as
 * 32 * sum_j scale[j] * bsums[j], Q4_K/Q5_K's mins as sum_j mn[j] * (bsums[2j] + bsums[2j+1]): one
 * madd each over the 16 bsums. VPDPBUSD would replace maddubs + madd but not the per-sub-block
 * scale multiply, so the VNNI tiers use this code too.
 *
 * A row is computed against up to 4 tokens at once (matmul's tile): each super-block's codes are
 * unpacked once for all of them. Every (row, token) output follows the same per-block sequence
 * however the tokens are grouped, so matvec, matmul and scalar agree bitwise.
 */
#include "kernels/codes.h"
#include "kernels/fp16.h"
#include "kernels/quants_x86.h"

enum { KQ_TOKENS = 4 }; /* tokens per row pass of matmul */

SYN_K_INLINE int32_t hsum_i32(__m256i v) { return x86_hsum8(v); }

/* sum over the 16 int16 of (b . m): the 16 bsums of a Q8_K block times per-sum weights m. */
SYN_K_INLINE __m256i bsums_dot(const block_q8_k *a, __m256i m) {
    return _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a->bsums), m);
}

/* codes (u8) . a (s8) over 32 bytes, times scale: 8 int32 partial sums. */
SYN_K_INLINE __m256i scaled_dot(__m256i codes, const int8_t *a, __m256i scale16) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(codes, _mm256_loadu_si256((const __m256i *)a)),
                             scale16);
}

/* The 6-bit scales and mins of a Q4_K / Q5_K super-block, scales as int16 broadcasts, mins as the
 * 16-lane multiplier of the bsums (min j on lanes 2j and 2j + 1). */
typedef struct k45_scales {
    int16_t sc[8];
    __m256i mins16;
} k45_scales;

SYN_K_INLINE void k45_unpack_scales(const uint8_t *scales, k45_scales *s) {
    uint8_t sc[8], mn[8];
    syn_k_scales_k45(scales, sc, mn);
    for (int j = 0; j < 8; j++)
        s->sc[j] = sc[j];
    const __m128i m8 = _mm_loadl_epi64((const __m128i *)mn);
    const __m128i m16 = _mm_cvtepu8_epi16(m8);
    s->mins16 = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
}

/* kernels.h's float steps of one Q4_K / Q5_K super-block. */
SYN_K_INLINE float k45_step(float acc, int32_t isum, int32_t msum, uint16_t d, uint16_t dmin,
                            float ad) {
    const float dd = x86_fp16_f32(d) * ad;
    const float p = (float)isum * dd;
    acc += p;
    const float dm = x86_fp16_f32(dmin) * ad;
    const float q = (float)msum * dm;
    acc -= q;
    return acc;
}

/* Row w (n_blocks super-blocks of Q4_K, or Q5_K when qh_of) against tokens a[t * n_blocks],
 * t < n_tok: y[t * y_stride] = the dot. */
SYN_K_INLINE void k45_row(int64_t n_blocks, const char *w, size_t block_bytes, size_t qs_at,
                          size_t qh_at, const block_q8_k *a, int64_t n_tok_stride, float *y,
                          int64_t y_stride, const int n_tok) {
    float acc[KQ_TOKENS] = {0};
    const __m256i low4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    for (int64_t b = 0; b < n_blocks; b++) {
        const char *blk = w + (size_t)b * block_bytes;
        const block_q4_k *head = (const block_q4_k *)blk; /* d, dmin and scales: the same in Q5_K */
        k45_scales s;
        k45_unpack_scales(head->scales, &s);
        const uint8_t *qs = (const uint8_t *)blk + qs_at;
        const __m256i qh =
            qh_at ? _mm256_loadu_si256((const __m256i *)(blk + qh_at)) : _mm256_setzero_si256();
        __m256i isum[KQ_TOKENS];
        SYN_K_UNROLL(4)
        for (int t = 0; t < n_tok; t++)
            isum[t] = _mm256_setzero_si256();
        SYN_K_UNROLL(4)
        for (int g = 0; g < 4; g++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * g));
            __m256i lo = _mm256_and_si256(q, low4),
                    hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
            if (qh_at) {
                lo = _mm256_or_si256(
                    lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * g), one), 4));
                hi = _mm256_or_si256(
                    hi,
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * g + 1), one), 4));
            }
            const __m256i sc_lo = _mm256_set1_epi16(s.sc[2 * g]),
                          sc_hi = _mm256_set1_epi16(s.sc[2 * g + 1]);
            SYN_K_UNROLL(4)
            for (int t = 0; t < n_tok; t++) {
                const int8_t *aq = a[t * n_tok_stride + b].qs + 64 * g;
                isum[t] =
                    _mm256_add_epi32(isum[t], _mm256_add_epi32(scaled_dot(lo, aq, sc_lo),
                                                               scaled_dot(hi, aq + 32, sc_hi)));
            }
        }
        SYN_K_UNROLL(4)
        for (int t = 0; t < n_tok; t++) {
            const block_q8_k *ab = &a[t * n_tok_stride + b];
            acc[t] = k45_step(acc[t], hsum_i32(isum[t]), hsum_i32(bsums_dot(ab, s.mins16)), head->d,
                              head->dmin, ab->d);
        }
    }
    SYN_K_UNROLL(4)
    for (int t = 0; t < n_tok; t++)
        y[t * y_stride] = acc[t];
}

/* Row w of Q6_K against tokens a[t * n_blocks], t < n_tok. */
SYN_K_INLINE void q6k_row(int64_t n_blocks, const block_q6_k *w, const block_q8_k *a,
                          int64_t n_tok_stride, float *y, int64_t y_stride, const int n_tok) {
    float acc[KQ_TOKENS] = {0};
    const __m256i low4 = _mm256_set1_epi8(0x0F), low2 = _mm256_set1_epi8(3);
    for (int64_t b = 0; b < n_blocks; b++) {
        const block_q6_k *blk = &w[b];
        /* -32 * sum_j scale[j] * bsums[j], per token */
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)blk->scales));
        __m256i isum[KQ_TOKENS];
        SYN_K_UNROLL(4)
        for (int t = 0; t < n_tok; t++)
            isum[t] = _mm256_slli_epi32(
                _mm256_sub_epi32(_mm256_setzero_si256(), bsums_dot(&a[t * n_tok_stride + b], sc16)),
                5);
        SYN_K_UNROLL(2)
        for (int h = 0; h < 2; h++) {
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)(blk->ql + 64 * h));
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(blk->ql + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(blk->qh + 32 * h));
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, low4),
                                   _mm256_slli_epi16(_mm256_and_si256(qh, low2), 4));
            q[1] = _mm256_or_si256(
                _mm256_and_si256(l1, low4),
                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), low2), 4));
            q[2] = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16(l0, 4), low4),
                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), low2), 4));
            q[3] = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), low2), 4));
            SYN_K_UNROLL(4)
            for (int k = 0; k < 4; k++) {
                /* elements 128h + 32k .. +31: sub-blocks 8h + 2k (low 16) and 8h + 2k + 1 */
                const int j = 8 * h + 2 * k;
                const __m256i sc = _mm256_set_m128i(_mm_set1_epi16(blk->scales[j + 1]),
                                                    _mm_set1_epi16(blk->scales[j]));
                SYN_K_UNROLL(4)
                for (int t = 0; t < n_tok; t++)
                    isum[t] = _mm256_add_epi32(
                        isum[t],
                        scaled_dot(q[k], a[t * n_tok_stride + b].qs + 128 * h + 32 * k, sc));
            }
        }
        SYN_K_UNROLL(4)
        for (int t = 0; t < n_tok; t++) {
            const float dd = x86_fp16_f32(blk->d) * a[t * n_tok_stride + b].d;
            const float p = (float)hsum_i32(isum[t]) * dd;
            acc[t] += p;
        }
    }
    SYN_K_UNROLL(4)
    for (int t = 0; t < n_tok; t++)
        y[t * y_stride] = acc[t];
}

#include "kernels/kquants_rows.h"

KQ_KERNELS(q4_k, GGML_TYPE_Q4_K, avx2, k_matmul)
KQ_KERNELS(q5_k, GGML_TYPE_Q5_K, avx2, k_matmul)
KQ_KERNELS(q6_k, GGML_TYPE_Q6_K, avx2, k_matmul)

/* ---- Q8_K quantizer (kernels.h's rule; bitwise the scalar one) ------------------------------- */

void syn_quantize_row_q8_k_avx2(const float *x, block_q8_k *y, int64_t n) {
    const __m256 sign_bit = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float *xb = x + b * QK_K;
        __m256 m = _mm256_setzero_ps();
        for (int i = 0; i < QK_K; i += 8)
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign_bit, _mm256_loadu_ps(xb + i)));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        memset(&y[b], 0, sizeof y[b]);
        if (amax == 0.0f) continue;
        /* the first element of largest |x| carries the sign */
        const __m256 vamax = _mm256_set1_ps(amax);
        int first = 0;
        for (int i = 0; i < QK_K; i += 8) {
            const int hit = _mm256_movemask_ps(_mm256_cmp_ps(
                _mm256_andnot_ps(sign_bit, _mm256_loadu_ps(xb + i)), vamax, _CMP_EQ_OQ));
            if (hit) {
                first = i + __builtin_ctz((unsigned)hit);
                break;
            }
        }
        const float iscale = -127.0f / xb[first];
        const __m256 vis = _mm256_set1_ps(iscale);
        for (int i = 0; i < QK_K; i += 32) {
            __m256i q[4];
            SYN_K_UNROLL(4)
            for (int k = 0; k < 4; k++) {
                const __m256 r =
                    _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(xb + i + 8 * k), vis),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                q[k] = _mm256_cvtps_epi32(r);
            }
            y[b].bsums[i / 16] = (int16_t)hsum_i32(_mm256_add_epi32(q[0], q[1]));
            y[b].bsums[i / 16 + 1] = (int16_t)hsum_i32(_mm256_add_epi32(q[2], q[3]));
            /* packs saturate 128 to 127: the rule's min(127, q); per-lane packs reordered by the
             * permute */
            const __m256i q8 =
                _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            _mm256_storeu_si256(
                (__m256i *)(y[b].qs + i),
                _mm256_permutevar8x32_epi32(q8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
        }
        y[b].d = 1.0f / iscale;
    }
}
