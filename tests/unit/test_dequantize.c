/* test_dequantize.c: the weight-type table's dequantizers on blocks built by hand, each expected
 * value worked out from ggml's block formula in the comment beside it (kernels/blocks.h), and read
 * from an odd byte offset as a file may place them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gguf/gguf.h"
#include "kernels/blocks.h"
#include "model/wtype.h"

enum {
    FP16_QUARTER = 0x3400,
    FP16_HALF = 0x3800,
    FP16_ONE = 0x3c00,
    FP16_TWO = 0x4000,
    FP16_MINUS_ONE = 0xbc00
};

/* Dequantizes one block of `type` from an odd address into out[n]. */
static void dequantize(uint32_t type, const void *block, size_t size, float *out, int64_t n) {
    unsigned char buf[512];
    memcpy(buf + 1, block, size);
    const syn_wtype *wt = syn_wtype_get(type);
    assert_non_null(wt);
    wt->dequantize_row(buf + 1, out, n);
}

static void test_q4_0(void **state) {
    (void)state;
    block_q4_0 b = {.d = FP16_HALF};
    memset(b.qs, 0x88, sizeof b.qs); /* every code 8: value 0 */
    b.qs[0] = 0x1F;
    b.qs[3] = 0x80;
    float y[32];
    dequantize(GGML_TYPE_Q4_0, &b, sizeof b, y, 32);
    assert_true(y[0] == 3.5f);   /* (15 - 8) * 0.5 */
    assert_true(y[16] == -3.5f); /* (1 - 8) * 0.5 */
    assert_true(y[3] == -4.0f);  /* (0 - 8) * 0.5 */
    assert_true(y[19] == 0.0f);  /* (8 - 8) * 0.5 */
    assert_true(y[31] == 0.0f);
}

static void test_q4_1(void **state) {
    (void)state;
    block_q4_1 b = {.d = FP16_HALF, .m = FP16_MINUS_ONE};
    b.qs[0] = 0x1F;
    float y[32];
    dequantize(GGML_TYPE_Q4_1, &b, sizeof b, y, 32);
    assert_true(y[0] == 6.5f);   /* 15 * 0.5 - 1 */
    assert_true(y[16] == -0.5f); /* 1 * 0.5 - 1 */
    assert_true(y[1] == -1.0f);  /* 0 * 0.5 - 1 */
}

static void test_q5_0(void **state) {
    (void)state;
    block_q5_0 b = {.d = FP16_TWO};
    const uint32_t qh = (1u << 0) | (1u << 18); /* fifth bits of elements 0 and 18 */
    memcpy(b.qh, &qh, sizeof qh);
    b.qs[0] = 0x0F;
    b.qs[2] = 0x30;
    float y[32];
    dequantize(GGML_TYPE_Q5_0, &b, sizeof b, y, 32);
    assert_true(y[0] == 30.0f);   /* ((15 | 16) - 16) * 2 */
    assert_true(y[16] == -32.0f); /* (0 - 16) * 2 */
    assert_true(y[2] == -32.0f);  /* (0 - 16) * 2 */
    assert_true(y[18] == 6.0f);   /* ((3 | 16) - 16) * 2 */
}

static void test_q5_1(void **state) {
    (void)state;
    block_q5_1 b = {.d = FP16_QUARTER, .m = FP16_ONE};
    const uint32_t qh = 1u << 1; /* element 1's fifth bit */
    memcpy(b.qh, &qh, sizeof qh);
    b.qs[1] = 0x21;
    float y[32];
    dequantize(GGML_TYPE_Q5_1, &b, sizeof b, y, 32);
    assert_true(y[1] == 5.25f); /* (1 | 16) * 0.25 + 1 */
    assert_true(y[17] == 1.5f); /* 2 * 0.25 + 1 */
    assert_true(y[0] == 1.0f);  /* 0 * 0.25 + 1 */
}

/* The Q4_K / Q5_K scales: sub-blocks 0 and 1 keep 6-bit scale and min in bytes 0..1 and 4..5;
 * sub-block 4 takes the low nibble of byte 8 and the top two bits of byte 0 (scale), the high
 * nibble of byte 8 and the top two bits of byte 4 (min). */
static void k_scales(uint8_t scales[12]) {
    memset(scales, 0, 12);
    scales[0] = 3 | (1 << 6); /* scale 0 = 3; bit 4 of scale 4 */
    scales[1] = 5;            /* scale 1 */
    scales[4] = 2 | (2 << 6); /* min 0 = 2; bit 5 of min 4 */
    scales[5] = 4;            /* min 1 */
    scales[8] = 0x21;         /* scale 4 = 1 | 16 = 17, min 4 = 2 | 32 = 34 */
}

static void test_q4_k(void **state) {
    (void)state;
    block_q4_k b = {.d = FP16_ONE, .dmin = FP16_HALF};
    k_scales(b.scales);
    b.qs[0] = 0x7A;  /* element 0 (group 0, low nibble) 10; element 32 (high nibble) 7 */
    b.qs[64] = 0x09; /* element 128 (group 2, low nibble) 9 */
    float y[256];
    dequantize(GGML_TYPE_Q4_K, &b, sizeof b, y, 256);
    assert_true(y[0] == 29.0f);    /* 1*3 * 10 - 0.5*2 */
    assert_true(y[1] == -1.0f);    /* 1*3 * 0 - 0.5*2 */
    assert_true(y[32] == 33.0f);   /* 1*5 * 7 - 0.5*4 */
    assert_true(y[33] == -2.0f);   /* 1*5 * 0 - 0.5*4 */
    assert_true(y[64] == 0.0f);    /* sub-block 2: scale and min 0 */
    assert_true(y[128] == 136.0f); /* 1*17 * 9 - 0.5*34 */
    assert_true(y[129] == -17.0f); /* 1*17 * 0 - 0.5*34 */
}

static void test_q5_k(void **state) {
    (void)state;
    block_q5_k b = {.d = FP16_ONE, .dmin = FP16_HALF};
    k_scales(b.scales);
    b.qs[0] = 0x7A;
    b.qs[64] = 0x09;
    b.qh[0] = 0x13; /* fifth bits of element 0 (bit 0), 32 (bit 1) and 128 (bit 4) */
    float y[256];
    dequantize(GGML_TYPE_Q5_K, &b, sizeof b, y, 256);
    assert_true(y[0] == 77.0f);    /* 3 * (10 + 16) - 1 */
    assert_true(y[32] == 113.0f);  /* 5 * (7 + 16) - 2 */
    assert_true(y[1] == -1.0f);    /* 3 * 0 - 1 */
    assert_true(y[128] == 408.0f); /* 17 * (9 + 16) - 17 */
    assert_true(y[160] == 0.0f);   /* sub-block 5: scale and min 0 */
}

static void test_q6_k(void **state) {
    (void)state;
    block_q6_k b = {.d = FP16_HALF};
    b.scales[0] = 2;  /* elements 0..15 */
    b.scales[2] = -3; /* elements 32..47 */
    b.scales[4] = 4;  /* elements 64..79 */
    b.scales[6] = 1;  /* elements 96..111 */
    b.ql[0] = 0x53;   /* low nibbles of elements 0 (3) and 64 (5) */
    b.ql[32] = 0x0F;  /* of elements 32 (15) and 96 (0) */
    b.qh[0] = 0xE4;   /* high bits: element 0 -> 0, 32 -> 1, 64 -> 2, 96 -> 3 */
    float y[256];
    dequantize(GGML_TYPE_Q6_K, &b, sizeof b, y, 256);
    assert_true(y[0] == -29.0f); /* 0.5 * 2 * ((3 | 0 << 4) - 32) */
    assert_true(y[32] == 1.5f);  /* 0.5 * -3 * ((15 | 1 << 4) - 32) */
    assert_true(y[64] == 10.0f); /* 0.5 * 4 * ((5 | 2 << 4) - 32) */
    assert_true(y[96] == 8.0f);  /* 0.5 * 1 * ((0 | 3 << 4) - 32) */
    assert_true(y[16] == 0.0f);  /* scale 1 is 0 */
    assert_true(y[128] == 0.0f); /* second half: scales 8.. are 0 */
}

/* Every type of the table has a dequantizer and an activation format; others have no entry. */
static void test_table(void **state) {
    (void)state;
    const uint32_t types[] = {GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_BF16, GGML_TYPE_Q8_0,
                              GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1,
                              GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const syn_wtype *wt = syn_wtype_get(types[i]);
        assert_non_null(wt);
        assert_non_null(wt->dequantize_row);
        assert_non_null(strstr(syn_wtype_names(), ggml_type_name(types[i])));
    }
    assert_int_equal(syn_wtype_get(GGML_TYPE_Q4_K)->act_type, GGML_TYPE_Q8_K);
    assert_int_equal(syn_wtype_get(GGML_TYPE_Q4_1)->act_type, GGML_TYPE_Q8_1);
    assert_int_equal(syn_wtype_get(GGML_TYPE_Q5_0)->act_type, GGML_TYPE_Q8_0);
    assert_int_equal(syn_wtype_get(GGML_TYPE_BF16)->act_type, GGML_TYPE_F32);
    assert_null(syn_wtype_get(GGML_TYPE_Q2_K));
    assert_null(syn_wtype_get(GGML_TYPE_Q8_K));
    assert_null(syn_wtype_get(20)); /* iq4_nl */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q4_0), cmocka_unit_test(test_q4_1),  cmocka_unit_test(test_q5_0),
        cmocka_unit_test(test_q5_1), cmocka_unit_test(test_q4_k),  cmocka_unit_test(test_q5_k),
        cmocka_unit_test(test_q6_k), cmocka_unit_test(test_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
