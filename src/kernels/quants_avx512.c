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

/* ---- The x16 layouts (kernels.h) ---------------------------------------------------------
 * A group's block, its codes made unsigned, is lane_tile16's transposed tile (8 code vectors, 64
 * bytes apart): Q8_0's is stored so and read in place, Q5_0's is unpacked in registers (nibbles
 * and fifth-bit masks). Decode streams the codes front to back with one VPDPBUSD per 64 bytes of
 * codes and no horizontal sums, and prefill runs lane_run16 on the tiles without transposing. */

enum { X16_SPAN = 2048 }; /* activation blocks prepared at once (bounds the stack buffer) */

/* How the kernels read one type's layout: bytes per group block of codes and of scales, the bias B
 * of its unsigned codes (the sums start from -B * sum(a)), its 8 code vectors from a block's codes,
 * whether the stored codes are those vectors already, and whether it has mins (Q4_1, Q5_1: a Q8_1
 * activation, m after d in the scales, and kernels.h's acc_m added to the code sums). */
typedef void (*x16_codes_fn)(const uint8_t *c, __m512i v[8]);
typedef struct x16_type {
    size_t code_bytes, scale_bytes;
    int32_t bias;
    x16_codes_fn codes;
    bool in_place, mins;
} x16_type;

SYN_K_INLINE void x16_codes_q8_0(const uint8_t *c, __m512i v[8]) {
    SYN_K_UNROLL(8)
    for (int j = 0; j < 8; j++)
        v[j] = _mm512_load_si512(c + j * SYN_X16_VEC);
}

/* Q4_0's and Q4_1's: the low nibbles of vector j are dword j's codes, its high nibbles dword
 * j + 4's. */
SYN_K_INLINE void x16_codes_q4(const uint8_t *c, __m512i v[8]) {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    SYN_K_UNROLL(4)
    for (int j = 0; j < 4; j++) {
        const __m512i packed = _mm512_load_si512(c + j * SYN_X16_VEC);
        v[j] = _mm512_and_si512(packed, low4);
        v[j + 4] = _mm512_and_si512(_mm512_srli_epi16(packed, 4), low4);
    }
}

/* Q5_0's and Q5_1's: Q4's, plus 16 in the bytes mask j sets. */
SYN_K_INLINE void x16_codes_q5(const uint8_t *c, __m512i v[8]) {
    const __m512i sixteen = _mm512_set1_epi8(16);
    x16_codes_q4(c, v);
    SYN_K_UNROLL(8)
    for (int j = 0; j < 8; j++) {
        uint64_t m;
        memcpy(&m, c + SYN_X16_Q5_0_MASKS + 8 * j, sizeof m);
        v[j] = _mm512_mask_add_epi8(v[j], (__mmask64)m, v[j], sixteen);
    }
}

#define X16_Q8_0                                                                                   \
    ((x16_type){SYN_X16_Q8_0_CODES, SYN_X16_D_SCALES, 128, x16_codes_q8_0, true, false})
#define X16_Q5_0 ((x16_type){SYN_X16_Q5_0_CODES, SYN_X16_D_SCALES, 16, x16_codes_q5, false, false})
#define X16_Q4_0 ((x16_type){SYN_X16_Q4_0_CODES, SYN_X16_D_SCALES, 8, x16_codes_q4, false, false})
#define X16_Q5_1 ((x16_type){SYN_X16_Q5_0_CODES, SYN_X16_DM_SCALES, 0, x16_codes_q5, false, true})
#define X16_Q4_1 ((x16_type){SYN_X16_Q4_0_CODES, SYN_X16_DM_SCALES, 0, x16_codes_q4, false, true})

SYN_K_INLINE const uint8_t *x16_codes_at(const syn_x16 *w, const x16_type xt, int64_t n_blocks,
                                         int64_t g, int64_t k) {
    return w->codes + ((size_t)g * (size_t)n_blocks + (size_t)k) * xt.code_bytes;
}

/* The group block's 16 d (then, with mins, its 16 m). */
SYN_K_INLINE const uint16_t *x16_scales_at(const syn_x16 *w, const x16_type xt, int64_t n_blocks,
                                           int64_t g, int64_t k) {
    return (const uint16_t *)(w->scales +
                              ((size_t)g * (size_t)n_blocks + (size_t)k) * xt.scale_bytes);
}

SYN_K_INLINE __m512 x16_f16(const uint16_t *h) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)h));
}

/* acc plus one block of a group (codes c, scales sc) times activation block q: lane i, row i's
 * kernels.h step. */
SYN_K_INLINE __m512 x16_block(__m512 acc, const x16_type xt, const uint8_t *c, const uint16_t *sc,
                              const int8_t *q, const x86_act_aux *x) {
    __m512i v[8];
    xt.codes(c, v);
    __m512i half[2] = {_mm512_set1_epi32(x->corr), _mm512_setzero_si512()};
    SYN_K_UNROLL(8)
    for (int j = 0; j < 8; j++)
        half[j & 1] = x86_dpbusd_bcast(half[j & 1], v[j], q + 4 * j);
    const __m512i isum = _mm512_add_epi32(half[0], half[1]);
    const __m512 s = _mm512_mul_ps(x16_f16(sc), _mm512_set1_ps(x->d));
    return _mm512_add_ps(acc, _mm512_mul_ps(_mm512_cvtepi32_ps(isum), s));
}

/* acc_m plus one block's m times the activation block's sum s (kernels.h: p = m * s, then
 * acc_m + p). */
SYN_K_INLINE __m512 x16_min_step(__m512 acc_m, const uint16_t *sc, uint16_t s) {
    const __m512 p = _mm512_mul_ps(x16_f16(sc + SYN_X16_ROWS), _mm512_set1_ps(x86_fp16_f32(s)));
    return _mm512_add_ps(acc_m, p);
}

/* x86_x16_decode's step: pair i of the groups from c0 and s0 (codes, scales) with activation
 * block k (a; s: its Q8_1 sums, for the mins). */
typedef struct x16_decode {
    x16_type xt;
    const uint8_t *c0;
    const uint16_t *s0;
    const block_q8_0 *a;
    const uint16_t *s;
    const x86_act_aux *aux;
} x16_decode;

SYN_K_INLINE void x16_decode_step(const void *ctx, __m512 acc[2], int64_t i, int64_t k) {
    const x16_decode *d = ctx;
    const uint16_t *sc = d->s0 + (size_t)i * (d->xt.scale_bytes / sizeof(uint16_t));
    acc[0] =
        x16_block(acc[0], d->xt, d->c0 + (size_t)i * d->xt.code_bytes, sc, d->a[k].qs, &d->aux[k]);
    if (d->xt.mins) acc[1] = x16_min_step(acc[1], sc, d->s[k]);
}

/* Rows up to X16_SPAN blocks (every model's but the widest FFNs) run as x86_x16_decode's one
 * loop; longer rows span by span, group by group, the code sums continued in y, then (with mins)
 * each group's acc_m added. act: a Q8_0 activation row, or with mins a syn_act_q8_1. */
SYN_K_INLINE void x16_matvec(int64_t n_blocks, const syn_x16 *w, int64_t r0, int64_t r1,
                             const void *act, float *y, const x16_type xt) {
    const block_q8_0 *a = xt.mins ? ((const syn_act_q8_1 *)act)->q : act;
    const uint16_t *as = xt.mins ? ((const syn_act_q8_1 *)act)->s : NULL;
    const int64_t g0 = r0 / SYN_X16_ROWS, g1 = r1 / SYN_X16_ROWS;
    x86_act_aux aux[X16_SPAN];
    if (n_blocks <= X16_SPAN) {
        x86_span_aux(a, n_blocks, 0, 1, 0, n_blocks, xt.bias, aux);
        const x16_decode d = {
            xt, x16_codes_at(w, xt, n_blocks, g0, 0), x16_scales_at(w, xt, n_blocks, g0, 0), a, as,
            aux};
        x86_x16_decode(g0, g1, n_blocks, y, x16_decode_step, &d, xt.mins);
        return;
    }
    for (int64_t k0 = 0; k0 < n_blocks; k0 += X16_SPAN) {
        const int64_t kb = n_blocks - k0 < X16_SPAN ? n_blocks - k0 : X16_SPAN;
        x86_span_aux(a, n_blocks, 0, 1, k0, kb, xt.bias, aux);
        for (int64_t g = g0; g < g1; g++) {
            const uint8_t *c = x16_codes_at(w, xt, n_blocks, g, k0);
            float *yg = y + g * SYN_X16_ROWS;
            __m512 acc = k0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(yg);
            for (int64_t k = 0; k < kb; k++)
                acc = x16_block(acc, xt, c + k * xt.code_bytes,
                                x16_scales_at(w, xt, n_blocks, g, k0 + k), a[k0 + k].qs, &aux[k]);
            _mm512_storeu_ps(yg, acc);
        }
    }
    for (int64_t g = g0; xt.mins && g < g1; g++) {
        __m512 acc_m = _mm512_setzero_ps();
        for (int64_t k = 0; k < n_blocks; k++)
            acc_m = x16_min_step(acc_m, x16_scales_at(w, xt, n_blocks, g, k), as[k]);
        float *yg = y + g * SYN_X16_ROWS;
        _mm512_storeu_ps(yg, _mm512_add_ps(_mm512_loadu_ps(yg), acc_m));
    }
}

/* x86_lane_plan's steps over the x16 groups of rows [r0, r1), the code sums of every token: each
 * step's tile read in place (Q8_0) or unpacked into a buffer (the others), its scales converted
 * to floats, the next step's codes prefetched by lane_run16. */
SYN_K_INLINE void x16_lanes(int64_t n_blocks, const syn_x16 *w, int64_t r0, int64_t r1,
                            const block_q8_0 *a, int64_t n_tokens, float *y, int64_t y_stride,
                            const x16_type xt) {
    x86_act_aux aux[X86_MM_TC * X86_MM_KS];
    __m512 dw[X86_MM_KS];
    __m512i unpacked[X86_MM_KS * 8]; /* a step's codes, where the layout is not read in place */
    const int64_t g0 = r0 / SYN_X16_ROWS, n_tiles = (r1 - r0) / SYN_X16_ROWS;
    for (int64_t c0 = 0; c0 < n_tokens; c0 += X86_MM_TC) {
        const x86_lane_plan plan = x86_lane_plan_of(n_blocks, n_tiles, n_tokens, c0);
        for (int64_t step = 0; step < n_tiles * plan.n_spans; step++) {
            const x86_lane_step st = x86_plan_at(&plan, step, a, xt.bias, aux);
            const uint8_t *c = x16_codes_at(w, xt, n_blocks, g0 + st.tile, st.k0);
            for (int64_t k = 0; k < st.kb; k++) {
                dw[k] = x16_f16(x16_scales_at(w, xt, n_blocks, g0 + st.tile, st.k0 + k));
                if (!xt.in_place) xt.codes(c + k * xt.code_bytes, unpacked + 8 * k);
            }
            /* the next step's codes as 8 "rows", so that lane_run16 fetches all of them */
            x86_tile_ref next = {0};
            if (step + 1 < n_tiles * plan.n_spans) {
                const int64_t row = st.next_kb * (int64_t)xt.code_bytes / 8;
                next = (x86_tile_ref){
                    (const char *)x16_codes_at(w, xt, n_blocks, g0 + st.next_tile, st.next_k0), 8,
                    row, (size_t)row};
            }
            const int64_t r = r0 + st.tile * SYN_X16_ROWS;
            lane_run16(st.kb, st.k0 == 0,
                       xt.in_place ? (const __m256i *)c : (const __m256i *)unpacked,
                       (const __m256 *)dw, a + c0 * n_blocks + st.k0, n_blocks, st.aux, plan.nt,
                       y + c0 * y_stride + r, y_stride, SYN_X16_ROWS, &next);
        }
    }
}

/* The mins' terms of groups [g0, g1) (rows 16 g0 ..) for n_tokens tokens (s: their Q8_1 sums),
 * added to y as the rows' matmul adds them (syn_k_add_min_terms); (g1 - g0) * 16 * n_blocks <=
 * SYN_K_MIN_TERMS_MAX. */
SYN_K_INLINE void x16_add_min_terms(int64_t n_blocks, const syn_x16 *w, const x16_type xt,
                                    int64_t g0, int64_t g1, const uint16_t *s, int64_t n_tokens,
                                    float *y, int64_t y_stride) {
    float m[SYN_K_MIN_TERMS_MAX];
    for (int64_t g = g0; g < g1; g++)
        for (int64_t k = 0; k < n_blocks; k++) {
            float mk[SYN_X16_ROWS];
            _mm512_storeu_ps(mk, x16_f16(x16_scales_at(w, xt, n_blocks, g, k) + SYN_X16_ROWS));
            for (int i = 0; i < SYN_X16_ROWS; i++)
                m[((g - g0) * SYN_X16_ROWS + i) * n_blocks + k] = mk[i];
        }
    syn_k_add_min_terms(n_blocks, m, (g1 - g0) * SYN_X16_ROWS, s, n_tokens, y + g0 * SYN_X16_ROWS,
                        y_stride);
}

/* Matmul of an x16 matrix: x16_lanes; with mins, groups of rows at a time, each group's terms
 * added right after its code sums while its outputs are in cache, as the rows' matmul does
 * (X86_MIN_GROUP_ROWS). Fewer than 2 tokens, or rows too long for the mins' buffer, take the
 * matvec, as the rows' matmuls do. act: Q8_0 activation rows, or with mins a syn_act_q8_1. */
SYN_K_INLINE void x16_matmul(int64_t n_blocks, const syn_x16 *w, int64_t r0, int64_t r1,
                             const void *act, int64_t n_tokens, float *y, int64_t y_stride,
                             const x16_type xt) {
    const block_q8_0 *a = xt.mins ? ((const syn_act_q8_1 *)act)->q : act;
    const uint16_t *as = xt.mins ? ((const syn_act_q8_1 *)act)->s : NULL;
    if (n_tokens < 2 || (xt.mins && n_blocks * SYN_X16_ROWS > SYN_K_MIN_TERMS_MAX)) {
        for (int64_t t = 0; t < n_tokens; t++) {
            const syn_act_q8_1 at = {a + t * n_blocks, as ? as + t * n_blocks : NULL};
            x16_matvec(n_blocks, w, r0, r1, xt.mins ? (const void *)&at : (const void *)at.q,
                       y + t * y_stride, xt);
        }
        return;
    }
    if (!xt.mins) {
        x16_lanes(n_blocks, w, r0, r1, a, n_tokens, y, y_stride, xt);
        return;
    }
    int64_t group = SYN_K_MIN_TERMS_MAX / n_blocks; /* rows, >= 16 */
    if (group > X86_MIN_GROUP_ROWS) group = X86_MIN_GROUP_ROWS;
    group -= group % SYN_X16_ROWS;
    for (int64_t g = r0; g < r1; g += group) {
        const int64_t ge = g + group < r1 ? g + group : r1;
        x16_lanes(n_blocks, w, g, ge, a, n_tokens, y, y_stride, xt);
        x16_add_min_terms(n_blocks, w, xt, g / SYN_X16_ROWS, ge / SYN_X16_ROWS, as, n_tokens, y,
                          y_stride);
    }
}

#define X16_KERNELS(T, XT)                                                                         \
    void syn_matvec_x16_##T##_avx512(int64_t n_blocks, const syn_x16 *w, int64_t r0, int64_t r1,   \
                                     const void *act, float *y) {                                  \
        x16_matvec(n_blocks, w, r0, r1, act, y, XT);                                               \
    }                                                                                              \
    void syn_matmul_x16_##T##_avx512(int64_t n_blocks, const syn_x16 *w, int64_t r0, int64_t r1,   \
                                     const void *act, int64_t n_tokens, float *y,                  \
                                     int64_t y_stride) {                                           \
        x16_matmul(n_blocks, w, r0, r1, act, n_tokens, y, y_stride, XT);                           \
    }

X16_KERNELS(q8_0, X16_Q8_0)
X16_KERNELS(q5_0, X16_Q5_0)
X16_KERNELS(q4_0, X16_Q4_0)
X16_KERNELS(q5_1, X16_Q5_1)
X16_KERNELS(q4_1, X16_Q4_1)

/* Unsigned codes (Q4_0, Q5_0, Q4_1, Q5_1) straight into VPDPBUSD. */
SYN_K_INLINE __m256i dot_unsigned(__m256i u, __m256i a, __m256i c) { return dpbusd(c, u, a); }
X86_CODES_MATVECS(avx512, dot_unsigned)
X86_CODES_MATMULS(avx512, dpbusd, dot_unsigned, 2, 4, 2, lane_run16)
X86_CODES_MATMULS(avx512_ymm, dpbusd, dot_unsigned, 1, 4, 4,
                  NULL) /* AVX-VNNI's loop, for the tests */
