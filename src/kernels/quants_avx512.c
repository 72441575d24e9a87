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

/* How the kernels read one type's layout: bytes per group block of codes, the bias B of its
 * unsigned codes (the sums start from -B * sum(a)), its 8 code vectors from a block's codes, and
 * whether the stored codes are those vectors already. */
typedef void (*x16_codes_fn)(const uint8_t *c, __m512i v[8]);
typedef struct x16_type {
    size_t code_bytes;
    int32_t bias;
    x16_codes_fn codes;
    bool in_place;
} x16_type;

SYN_K_INLINE void x16_codes_q8_0(const uint8_t *c, __m512i v[8]) {
    SYN_K_UNROLL(8)
    for (int j = 0; j < 8; j++)
        v[j] = _mm512_load_si512(c + j * 64);
}

SYN_K_INLINE void x16_codes_q5_0(const uint8_t *c, __m512i v[8]) {
    const __m512i low4 = _mm512_set1_epi8(0x0F), sixteen = _mm512_set1_epi8(16);
    SYN_K_UNROLL(4)
    for (int j = 0; j < 4; j++) {
        const __m512i packed = _mm512_load_si512(c + j * 64);
        v[j] = _mm512_and_si512(packed, low4);
        v[j + 4] = _mm512_and_si512(_mm512_srli_epi16(packed, 4), low4);
    }
    SYN_K_UNROLL(8)
    for (int j = 0; j < 8; j++) {
        uint64_t m;
        memcpy(&m, c + 4 * 64 + 8 * j, sizeof m);
        v[j] = _mm512_mask_add_epi8(v[j], (__mmask64)m, v[j], sixteen);
    }
}

#define X16_Q8_0 ((x16_type){(size_t)SYN_X16_ROWS * QK8_0, 128, x16_codes_q8_0, true})
#define X16_Q5_0 ((x16_type){4 * 64 + 8 * 8, 16, x16_codes_q5_0, false})

SYN_K_INLINE const uint8_t *x16_codes_at(const syn_x16 *w, const x16_type xt, int64_t n_blocks,
                                         int64_t g, int64_t k) {
    return w->codes + ((size_t)g * (size_t)n_blocks + (size_t)k) * xt.code_bytes;
}

SYN_K_INLINE const uint16_t *x16_scales_at(const syn_x16 *w, int64_t n_blocks, int64_t g,
                                           int64_t k) {
    return (const uint16_t *)w->scales + ((size_t)g * (size_t)n_blocks + (size_t)k) * SYN_X16_ROWS;
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
    const __m512 s = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sc)),
                                   _mm512_set1_ps(x->d));
    return _mm512_add_ps(acc, _mm512_mul_ps(_mm512_cvtepi32_ps(isum), s));
}

/* Rows up to X16_SPAN blocks (every model's but the widest FFNs) run as one loop over all the
 * blocks of all the groups, with no loop end between groups: each group's sums are stored after
 * every block (the last store is the result) and restarted by a mask. A loop per group, whose
 * exit every 28 blocks the CPU mispredicted, streamed 40 % slower (docs/BENCHMARKS.md). */
SYN_K_INLINE void x16_matvec(int64_t n_blocks, const syn_x16 *w, int64_t r0, int64_t r1,
                             const block_q8_0 *a, float *y, const x16_type xt) {
    const int64_t g0 = r0 / SYN_X16_ROWS, g1 = r1 / SYN_X16_ROWS;
    x86_act_aux aux[X16_SPAN];
    if (n_blocks <= X16_SPAN) {
        x86_span_aux(a, n_blocks, 0, 1, 0, n_blocks, xt.bias, aux);
        const uint8_t *c = x16_codes_at(w, xt, n_blocks, g0, 0);
        const uint16_t *sc = x16_scales_at(w, n_blocks, g0, 0);
        float *yg = y + g0 * SYN_X16_ROWS;
        __m512 acc = _mm512_setzero_ps();
        int64_t k = 0;
        const int64_t n = (g1 - g0) * n_blocks;
        for (int64_t i = 0; i < n; i++, c += xt.code_bytes, sc += SYN_X16_ROWS) {
            acc = x16_block(acc, xt, c, sc, a[k].qs, &aux[k]);
            _mm512_storeu_ps(yg, acc);
            const int64_t last = k == n_blocks - 1; /* arithmetic, not a branch */
            acc = _mm512_maskz_mov_ps((__mmask16)(last - 1), acc);
            yg += SYN_X16_ROWS * last;
            k = (k + 1) * (1 - last);
        }
        return;
    }
    for (int64_t k0 = 0; k0 < n_blocks; k0 += X16_SPAN) {
        const int64_t kb = n_blocks - k0 < X16_SPAN ? n_blocks - k0 : X16_SPAN;
        x86_span_aux(a, n_blocks, 0, 1, k0, kb, xt.bias, aux);
        for (int64_t g = g0; g < g1; g++) {
            const uint8_t *c = x16_codes_at(w, xt, n_blocks, g, k0);
            const uint16_t *sc = x16_scales_at(w, n_blocks, g, k0);
            float *yg = y + g * SYN_X16_ROWS;
            __m512 acc = k0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(yg);
            for (int64_t k = 0; k < kb; k++)
                acc = x16_block(acc, xt, c + k * xt.code_bytes, sc + k * SYN_X16_ROWS, a[k0 + k].qs,
                                &aux[k]);
            _mm512_storeu_ps(yg, acc);
        }
    }
}

/* x86_lane_plan's steps over the x16 groups of rows [r0, r1): each step's tile read in place
 * (Q8_0) or unpacked into a buffer (the others), its scales converted to floats, the next step's
 * codes prefetched by lane_run16. Fewer than 2 tokens take the matvec, as
 * syn_matmul_q8_0_avx512's min_lanes. */
SYN_K_INLINE void x16_matmul(int64_t n_blocks, const syn_x16 *w, int64_t r0, int64_t r1,
                             const block_q8_0 *a, int64_t n_tokens, float *y, int64_t y_stride,
                             const x16_type xt) {
    if (n_tokens < 2) {
        for (int64_t t = 0; t < n_tokens; t++)
            x16_matvec(n_blocks, w, r0, r1, a + t * n_blocks, y + t * y_stride, xt);
        return;
    }
    x86_act_aux aux[X86_MM_TC * X86_MM_KS];
    __m512 dw[X86_MM_KS];
    __m512i tile[X86_MM_KS * 8]; /* unpacked codes (not in_place) */
    const int64_t g0 = r0 / SYN_X16_ROWS, n_tiles = (r1 - r0) / SYN_X16_ROWS;
    for (int64_t c0 = 0; c0 < n_tokens; c0 += X86_MM_TC) {
        const x86_lane_plan plan = x86_lane_plan_of(n_blocks, n_tiles, n_tokens, c0);
        for (int64_t step = 0; step < n_tiles * plan.n_spans; step++) {
            int64_t t, k0, kb, next_t, next_k0, next_kb;
            x86_plan_step(&plan, step, &t, &k0, &kb);
            x86_plan_step(&plan, step + 1, &next_t, &next_k0, &next_kb);
            const x86_act_aux *xa = x86_plan_aux(&plan, step, a, xt.bias, aux);
            const uint8_t *c = x16_codes_at(w, xt, n_blocks, g0 + t, k0);
            const uint16_t *sc = x16_scales_at(w, n_blocks, g0 + t, k0);
            for (int64_t k = 0; k < kb; k++) {
                dw[k] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sc + k * 16)));
                if (!xt.in_place) xt.codes(c + k * xt.code_bytes, tile + 8 * k);
            }
            /* the next step's codes as 8 "rows", so that lane_run16 fetches all of them */
            x86_tile_ref next = {0};
            if (step + 1 < n_tiles * plan.n_spans) {
                const int64_t row = next_kb * (int64_t)xt.code_bytes / 8;
                next = (x86_tile_ref){
                    (const char *)x16_codes_at(w, xt, n_blocks, g0 + next_t, next_k0), 8, row,
                    (size_t)row};
            }
            const int64_t r = r0 + t * SYN_X16_ROWS;
            lane_run16(kb, k0 == 0, xt.in_place ? (const __m256i *)c : (const __m256i *)tile,
                       (const __m256 *)dw, a + c0 * n_blocks + k0, n_blocks, xa, plan.nt,
                       y + c0 * y_stride + r, y_stride, SYN_X16_ROWS, &next);
        }
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

/* Unsigned codes (Q4_0, Q5_0, Q4_1, Q5_1) straight into VPDPBUSD. */
SYN_K_INLINE __m256i dot_unsigned(__m256i u, __m256i a, __m256i c) { return dpbusd(c, u, a); }
X86_CODES_MATVECS(avx512, dot_unsigned)
X86_CODES_MATMULS(avx512, dpbusd, dot_unsigned, 2, 4, 2, lane_run16)
X86_CODES_MATMULS(avx512_ymm, dpbusd, dot_unsigned, 1, 4, 4,
                  NULL) /* AVX-VNNI's loop, for the tests */
