/* type_kernels_check.c: see type_kernels_check.h. Weights are random bytes (every bit pattern of
 * qs, qh and the packed scales is a valid block) with finite fp16 scales; activations are random
 * floats, some blocks zero or with ties, quantized by each tier's own quantizers. */
#include "type_kernels_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/codes.h"
#include "kernels/fp16.h"

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint32_t next_u32(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* A finite fp16 scale in about [2^-10, 2^-2], either sign when signed. */
static uint16_t random_scale(int is_signed) {
    uint16_t h = (uint16_t)(((5 + next_u32() % 9) << 10) | (next_u32() & 0x3FF));
    return is_signed && next_u32() % 2 ? (uint16_t)(h | 0x8000) : h;
}

typedef struct type_case {
    uint32_t type;
    const char *name;
    size_t block_bytes;
    int block_elems;
    uint32_t act; /* GGML_TYPE_Q8_0, Q8_1 or Q8_K */
    /* byte offsets of the fp16 fields to make finite (the rest stays random) */
    int f16_at[2];
    int n_f16;
} type_case;

static const type_case cases[] = {
    {GGML_TYPE_Q4_0, "q4_0", sizeof(block_q4_0), QK4_0, GGML_TYPE_Q8_0, {0}, 1},
    {GGML_TYPE_Q5_0, "q5_0", sizeof(block_q5_0), QK5_0, GGML_TYPE_Q8_0, {0}, 1},
    {GGML_TYPE_Q4_1, "q4_1", sizeof(block_q4_1), QK4_1, GGML_TYPE_Q8_1, {0, 2}, 2},
    {GGML_TYPE_Q5_1, "q5_1", sizeof(block_q5_1), QK5_1, GGML_TYPE_Q8_1, {0, 2}, 2},
    {GGML_TYPE_Q8_0, "q8_0", sizeof(block_q8_0), QK8_0, GGML_TYPE_Q8_0, {0}, 1},
    {GGML_TYPE_Q4_K, "q4_k", sizeof(block_q4_k), QK_K, GGML_TYPE_Q8_K, {0, 2}, 2},
    {GGML_TYPE_Q5_K, "q5_k", sizeof(block_q5_k), QK_K, GGML_TYPE_Q8_K, {0, 2}, 2},
    {GGML_TYPE_Q6_K,
     "q6_k",
     sizeof(block_q6_k),
     QK_K,
     GGML_TYPE_Q8_K,
     {offsetof(block_q6_k, d)},
     1},
};

static void random_weights(const type_case *tc, unsigned char *w, size_t row_bytes, int64_t n_rows,
                           int64_t n_blocks) {
    for (int64_t r = 0; r < n_rows; r++) {
        unsigned char *row = w + (size_t)r * row_bytes;
        for (size_t i = 0; i < row_bytes; i++)
            row[i] = (unsigned char)next_u32();
        for (int64_t b = 0; b < n_blocks; b++) {
            for (int f = 0; f < tc->n_f16; f++) {
                const uint16_t h = random_scale(1);
                memcpy(row + (size_t)b * tc->block_bytes + (size_t)tc->f16_at[f], &h, sizeof h);
            }
        }
    }
}

/* Activations of n floats: normal-ish values, with a zero block, a block of ties (x * id = k + 0.5
 * for its largest value's scale) and repeated maxima of both signs. */
static void random_floats(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        x[i] = ((float)(next_u32() % 20001) - 10000.0f) / 3000.0f;
    if (n >= 64) memset(x + 32, 0, 32 * sizeof(float));
    if (n >= 96)
        for (int i = 64; i < 96; i++)
            x[i] = (float)((i % 7) - 3) * 0.5f + (i == 64 ? 127.0f : 0.0f);
    if (n >= 512) {
        x[300] = 9.0f;
        x[301] = -9.0f;
    }
}

/* One activation set quantized by tier k for type tc: n_tokens rows of n_blocks * block_elems. */
typedef struct act_set {
    block_q8_0 *q;
    uint16_t *s;
    block_q8_k *k;
    syn_act_q8_1 q8_1;
} act_set;

static void quantize_acts(const syn_kernels *k, const type_case *tc, const float *x,
                          int64_t n_tokens, int64_t n_elems, act_set *a) {
    for (int64_t t = 0; t < n_tokens; t++) {
        const float *xt = x + t * n_elems;
        if (tc->act == GGML_TYPE_Q8_K) {
            k->quantize_row_q8_k(xt, a->k + t * (n_elems / QK_K), n_elems);
        } else if (tc->act == GGML_TYPE_Q8_1) {
            k->quantize_row_q8_1(xt, a->q + t * (n_elems / QK8_0), a->s + t * (n_elems / QK8_0),
                                 n_elems);
        } else {
            k->quantize_row_q8_0(xt, a->q + t * (n_elems / QK8_0), n_elems);
        }
    }
    a->q8_1 = (syn_act_q8_1){a->q, a->s};
}

static const void *act_arg(const type_case *tc, const act_set *a, int64_t t, int64_t n_blocks,
                           syn_act_q8_1 *tmp) {
    if (tc->act == GGML_TYPE_Q8_K) return a->k + t * n_blocks;
    if (tc->act == GGML_TYPE_Q8_1) {
        *tmp = (syn_act_q8_1){a->q + t * n_blocks, a->s + t * n_blocks};
        return tmp;
    }
    return a->q + t * n_blocks;
}

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        n_failed++;                                                                                \
        printf("FAIL: ");                                                                          \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
    } while (0)

/* Where tier k reads an x16 layout of tc's type (kernels.h): w's whole groups packed, every row's
 * blocks read back (syn_x16_block) equal the file's, and k's x16 matmul and matvec (the last
 * token) over whole-group row ranges (all, the first group, the last) equal scalar's outputs on
 * the rows bitwise and leave the outputs of the other rows alone. */
static int x16_passed; /* check_x16's passed checks, for type_kernels_check_x16 */

static int check_x16(const syn_kernels *k, const syn_kernels *ref, const char *name,
                     const type_case *tc, const unsigned char *w, size_t row_bytes, int64_t n_rows,
                     int64_t n_blocks, int64_t n_tokens, const act_set *a, const void *act,
                     int *n_passed) {
    const syn_x16_kernels *xk = &k->x16[tc->type];
    const int64_t n_groups = n_rows / SYN_X16_ROWS;
    if (!xk->matvec || n_groups == 0) return 0;
    int n_failed = 0;
    const size_t blocks = (size_t)(n_groups * n_blocks);
    const size_t code_bytes = (syn_x16_code_bytes(tc->type) * blocks + 63) / 64 * 64;
    uint8_t *codes = aligned_alloc(64, code_bytes);
    uint8_t *scales = malloc(syn_x16_scale_bytes(tc->type) * blocks);
    const size_t n_out = (size_t)(n_rows * n_tokens);
    float *want = malloc(sizeof(float) * n_out), *got = malloc(sizeof(float) * n_out);
    _Alignas(8) unsigned char block[256];
    if (!codes || !scales || !want || !got) {
        FAIL("out of memory");
        goto done;
    }
    syn_x16_pack(tc->type, n_blocks, w, row_bytes, 0, n_groups, codes, scales);
    const syn_x16 x = {codes, scales};
    int bad_blocks = 0;
    for (int64_t r = 0; r < n_groups * SYN_X16_ROWS; r++) {
        for (int64_t b = 0; b < n_blocks; b++) {
            syn_x16_block(tc->type, &x, n_blocks, r, b, block);
            if (memcmp(block, w + (size_t)r * row_bytes + (size_t)b * tc->block_bytes,
                       tc->block_bytes) != 0)
                bad_blocks++;
        }
    }
    if (bad_blocks) FAIL("%s %s x16: %d blocks read back differ", name, tc->name, bad_blocks);
    ref->mat[tc->type].matmul(n_blocks, w, row_bytes, 0, n_rows, act, n_tokens, want, n_rows);
    const int64_t ranges[][2] = {{0, n_groups * SYN_X16_ROWS},
                                 {0, SYN_X16_ROWS},
                                 {(n_groups - 1) * SYN_X16_ROWS, n_groups * SYN_X16_ROWS}};
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        const int64_t r0 = ranges[i][0], r1 = ranges[i][1];
        for (size_t o = 0; o < n_out; o++)
            got[o] = -1.0f;
        xk->matmul(n_blocks, &x, r0, r1, act, n_tokens, got, n_rows);
        int bad = 0, bad_mv = 0;
        for (int64_t t = 0; t < n_tokens; t++)
            for (int64_t r = 0; r < n_rows; r++) {
                const float v = r >= r0 && r < r1 ? want[t * n_rows + r] : -1.0f;
                if (memcmp(&got[t * n_rows + r], &v, sizeof v) != 0) bad++;
            }
        const int64_t t = n_tokens - 1;
        for (int64_t r = 0; r < n_rows; r++)
            got[r] = -1.0f;
        syn_act_q8_1 tmp;
        xk->matvec(n_blocks, &x, r0, r1, act_arg(tc, a, t, n_blocks, &tmp), got);
        for (int64_t r = 0; r < n_rows; r++) {
            const float v = r >= r0 && r < r1 ? want[t * n_rows + r] : -1.0f;
            if (memcmp(&got[r], &v, sizeof v) != 0) bad_mv++;
        }
        if (bad || bad_mv)
            FAIL("%s %s x16: %lld rows x %lld blocks x %lld tokens, rows [%lld, %lld): %d matmul "
                 "and %d matvec outputs differ from scalar",
                 name, tc->name, (long long)n_rows, (long long)n_blocks, (long long)n_tokens,
                 (long long)r0, (long long)r1, bad, bad_mv);
        else {
            (*n_passed)++;
            x16_passed++;
        }
    }
done:
    free(codes);
    free(scales);
    free(want);
    free(got);
    return n_failed;
}

/* One shape: matvec and matmul of tier k equal scalar's bitwise, and matmul equals k's matvec. */
static int check_shape(const syn_kernels *k, const syn_kernels *ref, const char *name,
                       const type_case *tc, int64_t n_rows, int64_t n_blocks, int64_t n_tokens,
                       int *n_passed) {
    int n_failed = 0;
    const size_t row_bytes = (size_t)n_blocks * tc->block_bytes + 2 * (size_t)(next_u32() % 3);
    const int64_t n_elems = n_blocks * tc->block_elems;
    unsigned char *w = malloc(row_bytes * (size_t)n_rows);
    float *x = malloc(sizeof(float) * (size_t)(n_elems * n_tokens));
    act_set a = {0}, ar = {0};
    const size_t nq = (size_t)(n_elems / QK8_0 * n_tokens),
                 nk = (size_t)(n_elems / QK_K * n_tokens) + 1;
    a.q = malloc(sizeof(block_q8_0) * nq);
    a.s = malloc(sizeof(uint16_t) * nq);
    a.k = malloc(sizeof(block_q8_k) * nk);
    ar.q = malloc(sizeof(block_q8_0) * nq);
    ar.s = malloc(sizeof(uint16_t) * nq);
    ar.k = malloc(sizeof(block_q8_k) * nk);
    float *y = malloc(sizeof(float) * (size_t)(n_rows * n_tokens)),
          *yr = malloc(sizeof(float) * (size_t)(n_rows * n_tokens));
    float *yv = malloc(sizeof(float) * (size_t)n_rows);
    if (!w || !x || !a.q || !a.s || !a.k || !ar.q || !ar.s || !ar.k || !y || !yr || !yv) {
        FAIL("out of memory");
        goto done;
    }
    random_weights(tc, w, row_bytes, n_rows, n_blocks);
    random_floats(x, n_elems * n_tokens);
    quantize_acts(k, tc, x, n_tokens, n_elems, &a);
    quantize_acts(ref, tc, x, n_tokens, n_elems, &ar);
    const int same_act =
        tc->act == GGML_TYPE_Q8_K ? memcmp(a.k, ar.k, sizeof(block_q8_k) * (nk - 1)) == 0
        : tc->act == GGML_TYPE_Q8_1
            ? memcmp(a.q, ar.q, sizeof(block_q8_0) * nq) == 0 && memcmp(a.s, ar.s, 2 * nq) == 0
            : memcmp(a.q, ar.q, sizeof(block_q8_0) * nq) == 0;
    if (!same_act) FAIL("%s %s: the activation quantizer differs from scalar's", name, tc->name);

    const void *act = tc->act == GGML_TYPE_Q8_K   ? (const void *)a.k
                      : tc->act == GGML_TYPE_Q8_1 ? (const void *)&a.q8_1
                                                  : (const void *)a.q;
    const syn_type_kernels *mk = &k->mat[tc->type], *mr = &ref->mat[tc->type];
    if (!mk->matvec || !mk->matmul) {
        FAIL("%s %s: no kernels", name, tc->name);
        goto done;
    }
    /* rows [1, n_rows): row 0 is left out, so a call never starts at row 0 */
    mr->matmul(n_blocks, w, row_bytes, 1, n_rows, act, n_tokens, yr, n_rows);
    mk->matmul(n_blocks, w, row_bytes, 1, n_rows, act, n_tokens, y, n_rows);
    int bad = 0, bad_mv = 0;
    for (int64_t t = 0; t < n_tokens; t++) {
        syn_act_q8_1 tmp;
        mk->matvec(n_blocks, w, row_bytes, 1, n_rows, act_arg(tc, &a, t, n_blocks, &tmp), yv);
        for (int64_t r = 1; r < n_rows; r++) {
            if (memcmp(&y[t * n_rows + r], &yr[t * n_rows + r], sizeof(float)) != 0) bad++;
            if (memcmp(&yv[r], &yr[t * n_rows + r], sizeof(float)) != 0) bad_mv++;
        }
    }
    if (bad || bad_mv)
        FAIL("%s %s: %lld rows x %lld blocks x %lld tokens: %d matmul and %d matvec outputs differ "
             "from scalar",
             name, tc->name, (long long)n_rows, (long long)n_blocks, (long long)n_tokens, bad,
             bad_mv);
    else
        (*n_passed)++;
    n_failed +=
        check_x16(k, ref, name, tc, w, row_bytes, n_rows, n_blocks, n_tokens, &a, act, n_passed);
done:
    free(w);
    free(x);
    free(a.q);
    free(a.s);
    free(a.k);
    free(ar.q);
    free(ar.s);
    free(ar.k);
    free(y);
    free(yr);
    free(yv);
    return n_failed;
}

int type_kernels_check(const syn_kernels *k, const syn_kernels *ref, const char *name,
                       int *n_passed) {
    int n_failed = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const type_case *tc = &cases[c];
        const int64_t kq = tc->block_elems == QK_K;
        /* widths of the models in use (896, 4864, 2048, 8192 elements) and odd ones */
        const int64_t widths[] = {kq ? 1 : 28, kq ? 3 : 152, kq ? 8 : 64, kq ? 32 : 7,
                                  kq ? 19 : 256};
        const int64_t tokens[] = {1, 2, 3, 5,
                                  6, 7, 8, 17}; /* 6, 7: the k-quants' lane path, 3 left after 4s */
        for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
            for (size_t j = 0; j < sizeof tokens / sizeof tokens[0]; j++)
                n_failed += check_shape(k, ref, name, tc, 1 + 23 + (int64_t)(next_u32() % 20),
                                        widths[i], tokens[j], n_passed);
        /* a prompt's worth: 64+ tokens take the lane matmuls' longest k-spans */
        n_failed += check_shape(k, ref, name, tc, 37, widths[1], 70, n_passed);
        /* 1 to 3 rows (check_shape's matvec starts at row 1): the x86 matvec finishes each row's
         * sum while the next row's products are computed, the last row after the loop */
        for (int64_t n_rows = 2; n_rows <= 4; n_rows++) {
            n_failed += check_shape(k, ref, name, tc, n_rows, widths[0], 1, n_passed);
            n_failed += check_shape(k, ref, name, tc, n_rows, widths[3], 2, n_passed);
        }
    }
    /* the x86 lane matmul's two step orders (quants_x86.h, x86_matmul_lanes): a row tile's spans in
     * turn while tokens x spans <= 256 (25 tokens x 10 spans of 152 blocks), span by span past it
     * (26), and a call of two token chunks (300 tokens over 33 blocks: 256 x 2 spans, then 44 x 2)
     */
    static const int64_t order_shapes[][2] = {{152, 25}, {152, 26}, {33, 300}};
    for (size_t c = 0; c < 5; c++) /* the 32-value types */
        for (size_t i = 0; i < 3; i++)
            n_failed += check_shape(k, ref, name, &cases[c], 21, order_shapes[i][0],
                                    order_shapes[i][1], n_passed);
    /* rows longer than the unpacked types' stack buffer (unpacked.c: 3855 blocks) take the row-dot
     * path, and past SYN_K_MIN_TERMS_MAX (8192) the x86 Q4_1 / Q5_1 matmul takes its matvec */
    static const int64_t long_rows[] = {4000, 8200};
    for (size_t c = 0; c < 4; c++)
        for (size_t i = 0; i < 2; i++)
            n_failed += check_shape(k, ref, name, &cases[c], 3, long_rows[i], 2, n_passed);
    return n_failed;
}

int type_kernels_check_x16(const syn_kernels *k, const syn_kernels *ref, const char *name,
                           uint32_t type, int *n_passed, int *n_x16_passed) {
    int n_failed = 0;
    const int x16_before = x16_passed;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const type_case *tc = &cases[c];
        if (tc->type != type) continue;
        const int64_t kq = tc->block_elems == QK_K ? 8 : 1;
        /* several groups; rows past the decode's one-loop span (2048 blocks of 32); two token
         * chunks (300 tokens); one group of one block */
        const int64_t shapes[][3] = {{48, 28, 9}, {64, 2100 / kq, 3}, {32, 40, 300}, {16, 1, 17}};
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            n_failed +=
                check_shape(k, ref, name, tc, shapes[i][0], shapes[i][1], shapes[i][2], n_passed);
    }
    *n_x16_passed += x16_passed - x16_before;
    return n_failed;
}

/* ---- The specification ----------------------------------------------------------------------- */

/* Float64 dot of one weight row and one activation row from the codes (codes.h) and the scales. */
static double exact_dot(const type_case *tc, const unsigned char *w, const act_set *a,
                        int64_t n_blocks) {
    double acc = 0.0;
    for (int64_t b = 0; b < n_blocks; b++) {
        const unsigned char *blk = w + (size_t)b * tc->block_bytes;
        int8_t c[QK_K];
        uint8_t u[QK_K], sc[8], mn[8];
        switch (tc->type) {
        case GGML_TYPE_Q4_0: syn_k_codes_q4_0((const block_q4_0 *)blk, c); break;
        case GGML_TYPE_Q5_0: syn_k_codes_q5_0((const block_q5_0 *)blk, c); break;
        case GGML_TYPE_Q4_1: syn_k_codes_q4_1((const block_q4_1 *)blk, c); break;
        case GGML_TYPE_Q5_1: syn_k_codes_q5_1((const block_q5_1 *)blk, c); break;
        case GGML_TYPE_Q8_0: memcpy(c, ((const block_q8_0 *)blk)->qs, QK8_0); break;
        case GGML_TYPE_Q6_K: syn_k_codes_q6_k((const block_q6_k *)blk, c); break;
        default: {
            const block_q5_k *b5 = (const block_q5_k *)blk;
            const block_q4_k *b4 = (const block_q4_k *)blk;
            if (tc->type == GGML_TYPE_Q5_K)
                syn_k_codes_k45(b5->qs, b5->qh, b5->scales, u, sc, mn);
            else
                syn_k_codes_k45(b4->qs, NULL, b4->scales, u, sc, mn);
        }
        }
        if (tc->act == GGML_TYPE_Q8_K) {
            const block_q8_k *ak = &a->k[b];
            for (int i = 0; i < QK_K; i++) {
                double wv;
                if (tc->type == GGML_TYPE_Q6_K) {
                    const block_q6_k *b6 = (const block_q6_k *)blk;
                    wv = (double)syn_k_fp16_to_f32(b6->d) * b6->scales[i / 16] * c[i];
                } else {
                    const block_q4_k *b4 =
                        (const block_q4_k *)blk; /* d, dmin, scales: same place in Q5_K */
                    wv = (double)syn_k_fp16_to_f32(b4->d) * sc[i / 32] * u[i] -
                         (double)syn_k_fp16_to_f32(b4->dmin) * mn[i / 32];
                }
                acc += wv * (double)ak->d * ak->qs[i];
            }
        } else {
            const block_q8_0 *aq = &a->q[b];
            uint16_t d, m = 0;
            memcpy(&d, blk, sizeof d);
            if (tc->act == GGML_TYPE_Q8_1) memcpy(&m, blk + 2, sizeof m);
            for (int i = 0; i < QK8_0; i++)
                acc += (double)syn_k_fp16_to_f32(d) * c[i] * (double)syn_k_fp16_to_f32(aq->d) *
                       aq->qs[i];
            if (tc->act == GGML_TYPE_Q8_1)
                acc += (double)syn_k_fp16_to_f32(m) * (double)syn_k_fp16_to_f32(a->s[b]);
        }
    }
    return acc;
}

int type_kernels_check_spec(const syn_kernels *ref, int *n_passed) {
    int n_failed = 0;
    enum { ROWS = 16, BLOCKS = 8 };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const type_case *tc = &cases[ci];
        const int64_t n_elems = BLOCKS * tc->block_elems;
        unsigned char *w = malloc(tc->block_bytes * BLOCKS * ROWS);
        float *x = malloc(sizeof(float) * (size_t)n_elems);
        act_set a = {malloc(sizeof(block_q8_0) * (size_t)(n_elems / QK8_0)),
                     malloc(2 * (size_t)(n_elems / QK8_0)),
                     malloc(sizeof(block_q8_k) * (size_t)(n_elems / QK_K + 1)),
                     {0}};
        float y[ROWS];
        random_weights(tc, w, tc->block_bytes * BLOCKS, ROWS, BLOCKS);
        random_floats(x, n_elems);
        quantize_acts(ref, tc, x, 1, n_elems, &a);
        const void *act = tc->act == GGML_TYPE_Q8_K   ? (const void *)a.k
                          : tc->act == GGML_TYPE_Q8_1 ? (const void *)&a.q8_1
                                                      : (const void *)a.q;
        ref->mat[tc->type].matvec(BLOCKS, w, tc->block_bytes * BLOCKS, 0, ROWS, act, y);
        int bad = 0;
        for (int r = 0; r < ROWS; r++) {
            const double e = exact_dot(tc, w + (size_t)r * tc->block_bytes * BLOCKS, &a, BLOCKS);
            /* float32 products and sums of terms up to ~1e4 in magnitude: a few ulps of the terms
             */
            if (fabs((double)y[r] - e) > 1e-5 * (1.0 + fabs(e)) * BLOCKS * 8) {
                printf("  %s row %d: %.9g against float64 %.9g\n", tc->name, r, (double)y[r], e);
                bad++;
            }
        }
        if (bad)
            FAIL("scalar %s: %d rows off float64", tc->name, bad);
        else
            (*n_passed)++;
        free(w);
        free(x);
        free(a.q);
        free(a.s);
        free(a.k);
    }

    /* Q8_K: d * q within d / 2 of x, the first largest |x| coded -127 (sign carried by d), codes in
     * [-127, 127], bsums the sums of 16 codes; an all-zero block all zero. */
    float x[2 * QK_K];
    random_floats(x, 2 * QK_K);
    for (int i = 0; i < QK_K; i++)
        x[QK_K + i] = 0.0f;
    x[5] = -4.0f;
    x[77] = 4.0f; /* same |x| later: the first (negative) one sets the sign */
    for (int i = 0; i < QK_K; i++)
        if (i != 5 && i != 77) x[i] = fmaxf(fminf(x[i], 3.9f), -3.9f);
    block_q8_k q[2];
    ref->quantize_row_q8_k(x, q, 2 * QK_K);
    int bad = 0;
    if (!(q[0].qs[5] == -127 && q[0].d > 0.0f && q[0].qs[77] == 127)) bad++;
    for (int i = 0; i < QK_K; i++) {
        if (fabsf(q[0].d * (float)q[0].qs[i] - x[i]) > fabsf(q[0].d) * 0.5001f) bad++;
        if (q[0].qs[i] < -127) bad++;
        if (q[1].qs[i] != 0) bad++;
    }
    for (int j = 0; j < QK_K / 16; j++) {
        int sum = 0;
        for (int i = 0; i < 16; i++)
            sum += q[0].qs[16 * j + i];
        if (sum != q[0].bsums[j] || q[1].bsums[j] != 0) bad++;
    }
    if (q[1].d != 0.0f) bad++;
    if (bad)
        FAIL("scalar quantize_row_q8_k: %d violations of its rule", bad);
    else
        (*n_passed)++;
    return n_failed;
}
