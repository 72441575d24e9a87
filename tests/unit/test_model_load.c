/* test_model_load.c: loading the tiny Qwen2 models: hyperparameters against the test data's
 * README, tensor binding, dequantization against raw bytes and against the F32 twin, fp16/bf16
 * conversions on hand-worked values, metadata text; paths that are not model files (a FIFO, a
 * directory, a device, a name too long). */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../support/test_util.h"
#include "kernels/blocks.h"
#include "kernels/fp16.h"
#include "model/model.h"
#include "model/wtype.h"
#include "synapse.h"

/* The tiny models per tests/data/README: 2 blocks, width 64, 4 heads, 2 KV heads (head dim 16),
 * FFN 128, context 32768, rope base 1e6, RMS eps 1e-6, tied embeddings, vocab 151936. */
enum { V = 151936, E = 64, L = 2, KV = 32, F = 128 };

static syn_model *load(const char *name, bool prefetch) {
    syn_model_params p = syn_model_default_params();
    p.prefetch = prefetch;
    syn_model *m = NULL;
    syn_status st = syn_model_load(test_data_path(name), &p, &m);
    if (st != SYN_OK) fprintf(stderr, "loading %s: %s\n", name, syn_last_error());
    assert_int_equal(st, SYN_OK);
    assert_non_null(m);
    return m;
}

static void check_readme_hparams(const syn_model *m) {
    syn_model_info info;
    syn_model_get_info(m, &info);
    assert_string_equal(info.architecture, "qwen2");
    assert_string_equal(info.name, "Qwen2.5 0.5B Instruct shape synthetic random (tiny, seed 4)");
    assert_int_equal(info.n_vocab, V);
    assert_int_equal(info.n_ctx_train, 32768);
    assert_int_equal(info.n_embd, E);
    assert_int_equal(info.n_layer, L);
    assert_int_equal(info.n_head, 4);
    assert_int_equal(info.n_head_kv, 2);
    assert_int_equal(info.n_ff, F);
    assert_true(info.rope_freq_base == 1e6f);
    assert_true(info.rms_norm_eps == 1e-6f);
    assert_true(info.tied_output);
    assert_int_equal(m->hp.head_dim, 16);
    /* Every weight counted once: the embedding, the final norm and 2 blocks. */
    const uint64_t per_layer = E + E * E + E + E * KV + KV + E * KV + KV + E * E + E + 3 * E * F;
    assert_int_equal(info.n_params, (uint64_t)E * V + E + L * per_layer);
    assert_ptr_equal(m->output.data, m->tok_embd.data);
    assert_non_null(syn_tokenizer_chat_template(syn_model_tokenizer(m)));
    assert_non_null(strstr(syn_tokenizer_chat_template(syn_model_tokenizer(m)), "<|im_start|>"));
    assert_non_null(syn_model_tokenizer(m));
}

static void test_q8_0_model_loads(void **state) {
    (void)state;
    syn_model *m = load("qwen2-tiny-synth-q8_0.gguf", true);
    check_readme_hparams(m);
    syn_model_info info;
    syn_model_get_info(m, &info);
    /* Q8_0 matrices: 34 bytes per 32 weights; F32 norms and biases: 4 bytes each. */
    const uint64_t q8 = ((uint64_t)E * V + L * (2 * E * E + 2 * E * KV + 3 * E * F)) / 32 * 34;
    const uint64_t f32 = 4 * ((uint64_t)E + L * (3 * E + 2 * KV));
    assert_int_equal(info.weight_bytes, q8 + f32);
    assert_int_equal(m->layers[1].w_down.type, GGML_TYPE_Q8_0);
    assert_int_equal(m->layers[1].w_down.ne[0], F);
    assert_int_equal(m->layers[1].w_down.ne[1], E);
    assert_int_equal(m->layers[1].w_down.row_bytes, F / 32 * 34);
    assert_string_equal(m->layers[1].w_down.name, "blk.1.ffn_down.weight");
    assert_int_equal(m->layers[0].bk.ne[0], KV);
    assert_int_equal(m->layers[0].bk.ne[1], 1);
    assert_int_equal(m->output_norm.type, GGML_TYPE_F32);
    assert_int_equal(syn_tokenizer_eos(syn_model_tokenizer(m)), 151645); /* Qwen2.5's <|im_end|> */
    syn_model_free(m);
}

static void test_f32_model_loads(void **state) {
    (void)state;
    syn_model *m = load("qwen2-tiny-synth-f32.gguf", false);
    check_readme_hparams(m);
    syn_model_info info;
    syn_model_get_info(m, &info);
    assert_int_equal(info.weight_bytes, 4 * info.n_params);
    assert_int_equal(m->tok_embd.type, GGML_TYPE_F32);
    syn_model_free(m);
}

/* fp16 decoded by the textbook formula (independent of the bit-twiddling under test). */
static float fp16_by_formula(uint16_t h) {
    int exp = (h >> 10) & 31, mant = h & 1023;
    float v = exp == 0 ? ldexpf((float)mant, -24) : ldexpf((float)(1024 + mant), exp - 25);
    return (h & 0x8000) ? -v : v;
}

/* Q8_0 rows equal d * q computed from the raw blocks, and lie within about half a quantization
 * step of the F32 model they were quantized from by llama.cpp. */
static void test_q8_0_rows(void **state) {
    (void)state;
    syn_model *q = load("qwen2-tiny-synth-q8_0.gguf", false);
    syn_model *f = load("qwen2-tiny-synth-f32.gguf", false);
    const syn_tensor *pairs[][2] = {
        {&q->layers[0].wq, &f->layers[0].wq},
        {&q->layers[1].w_down, &f->layers[1].w_down},
        {&q->tok_embd, &f->tok_embd},
    };
    const int64_t rows[] = {0, 7, 63, 151645};
    float got[F], want[F];
    for (size_t p = 0; p < 3; p++) {
        const syn_tensor *tq = pairs[p][0], *tf = pairs[p][1];
        for (size_t r = 0; r < 4; r++) {
            int64_t row = rows[r];
            if (row >= tq->ne[1]) continue;
            int64_t n = tq->ne[0];
            syn_tensor_row(tq, row, got);
            syn_tensor_row(tf, row, want);
            const uint8_t *raw = (const uint8_t *)tq->data + (uint64_t)row * tq->row_bytes;
            for (int64_t b = 0; b < n / 32; b++) {
                const uint8_t *blk = raw + b * 34;
                float d = fp16_by_formula((uint16_t)(blk[0] | blk[1] << 8));
                for (int j = 0; j < 32; j++) {
                    float x = got[b * 32 + j];
                    assert_true(x == d * (float)(int8_t)blk[2 + j]);
                    assert_true(fabsf(x - want[b * 32 + j]) <= 0.6f * d + 1e-7f);
                }
            }
        }
    }
    /* F32 rows are the file's floats verbatim. */
    syn_tensor_row(&f->layers[0].bq, 0, got);
    assert_memory_equal(got, f->layers[0].bq.data, E * sizeof(float));
    syn_model_free(q);
    syn_model_free(f);
}

static float bits_to_f32(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* Row data of a type of the weight-type table, dequantized as syn_tensor_row does. */
static void dequantize_row(uint32_t type, const void *src, float *dst, int64_t n) {
    const syn_wtype *wt = syn_wtype_get(type);
    assert_non_null(wt);
    wt->dequantize_row(src, dst, n);
}

static void test_fp16_conversions(void **state) {
    (void)state;
    /* Hand-worked binary16 values. */
    assert_true(syn_k_fp16_to_f32(0x3c00) == 1.0f);
    assert_true(syn_k_fp16_to_f32(0xc000) == -2.0f);
    assert_true(syn_k_fp16_to_f32(0x3555) == 0.333251953125f); /* 1365/4096 */
    assert_true(syn_k_fp16_to_f32(0x7bff) == 65504.0f);
    assert_true(syn_k_fp16_to_f32(0x0400) == 0x1p-14f);
    assert_true(syn_k_fp16_to_f32(0x0001) == 0x1p-24f);
    assert_true(syn_k_fp16_to_f32(0x03ff) == 1023 * 0x1p-24f);
    assert_true(syn_k_fp16_to_f32(0x8001) == -0x1p-24f);
    assert_true(syn_k_fp16_to_f32(0x7c00) == INFINITY);
    assert_true(syn_k_fp16_to_f32(0xfc00) == -INFINITY);
    assert_true(isnan(syn_k_fp16_to_f32(0x7e00)));
    assert_true(isnan(syn_k_fp16_to_f32(0x7c01)));
    float negzero = syn_k_fp16_to_f32(0x8000);
    assert_true(negzero == 0.0f && signbit(negzero));

    assert_int_equal(syn_k_f32_to_fp16(1.0f), 0x3c00);
    assert_int_equal(syn_k_f32_to_fp16(-2.0f), 0xc000);
    assert_int_equal(syn_k_f32_to_fp16(65504.0f), 0x7bff);
    assert_int_equal(syn_k_f32_to_fp16(65519.0f), 0x7bff); /* below the halfway point 65520 */
    assert_int_equal(syn_k_f32_to_fp16(65520.0f), 0x7c00); /* halfway, odd mantissa: up to inf */
    assert_int_equal(syn_k_f32_to_fp16(1e9f), 0x7c00);
    assert_int_equal(syn_k_f32_to_fp16(-INFINITY), 0xfc00);
    assert_int_equal(syn_k_f32_to_fp16(1.0f + 0x1p-11f), 0x3c00);     /* tie: to even (down) */
    assert_int_equal(syn_k_f32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02); /* tie: to even (up) */
    assert_int_equal(syn_k_f32_to_fp16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01); /* above the tie */
    assert_int_equal(syn_k_f32_to_fp16(0x1p-24f), 0x0001);
    assert_int_equal(syn_k_f32_to_fp16(0x1p-25f), 0x0000);        /* tie between 0 and 2^-24 */
    assert_int_equal(syn_k_f32_to_fp16(1.5f * 0x1p-24f), 0x0002); /* tie: to even (up) */
    assert_int_equal(syn_k_f32_to_fp16(1e-8f), 0x0000);
    assert_int_equal(syn_k_f32_to_fp16(-0.0f), 0x8000);
    assert_int_equal(syn_k_f32_to_fp16(1023.5f * 0x1p-24f), 0x0400); /* carries into the normals */
    uint16_t nan = syn_k_f32_to_fp16(NAN);
    assert_int_equal(nan & 0x7c00, 0x7c00);
    assert_int_not_equal(nan & 0x03ff, 0);

    /* Every non-NaN binary16 survives the round trip and agrees with the formula. */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;
        float x = syn_k_fp16_to_f32((uint16_t)h);
        assert_int_equal(syn_k_f32_to_fp16(x), h);
        if ((h & 0x7c00) != 0x7c00) assert_true(x == fp16_by_formula((uint16_t)h));
    }

    /* bfloat16 is the top half of a binary32: converted by the BF16 row dequantizer. */
    const uint16_t bf[] = {0x3f80, 0xc040, 0x0001};
    float x[3];
    dequantize_row(GGML_TYPE_BF16, bf, x, 3);
    assert_true(x[0] == 1.0f);
    assert_true(x[1] == -3.0f);
    assert_true(x[2] == bits_to_f32(0x00010000));
}

static void test_dequantize_rows_by_hand(void **state) {
    (void)state;
    block_q8_0 blocks[2];
    blocks[0].d = 0x3800; /* 0.5 */
    blocks[1].d = 0xb400; /* -0.25 */
    for (int j = 0; j < QK8_0; j++) {
        blocks[0].qs[j] = (int8_t)(j - 16);
        blocks[1].qs[j] = (int8_t)(j % 2 ? 127 : -128);
    }
    float out[64];
    dequantize_row(GGML_TYPE_Q8_0, blocks, out, 64);
    assert_true(out[0] == -8.0f);
    assert_true(out[16] == 0.0f);
    assert_true(out[31] == 7.5f);
    assert_true(out[32] == 32.0f);
    assert_true(out[33] == -31.75f);

    const uint16_t halfs[] = {0x3c00, 0xc200, 0x0001, 0x7bff};
    dequantize_row(GGML_TYPE_F16, halfs, out, 4);
    assert_true(out[0] == 1.0f && out[1] == -3.0f && out[2] == 0x1p-24f && out[3] == 65504.0f);
    const uint16_t bf[] = {0x4049, 0xbf80};
    dequantize_row(GGML_TYPE_BF16, bf, out, 2);
    assert_true(out[0] == 3.140625f && out[1] == -1.0f);
    const float f[] = {1.25f, -7.0f};
    dequantize_row(GGML_TYPE_F32, f, out, 2);
    assert_true(out[0] == 1.25f && out[1] == -7.0f);

    /* A tensor row at an offset: row 1 of a 2-row Q8_0 tensor is the second block. */
    syn_tensor t = {
        .name = "t", .type = GGML_TYPE_Q8_0, .ne = {32, 2}, .row_bytes = 34, .data = blocks};
    syn_tensor_row(&t, 1, out);
    assert_true(out[0] == 32.0f && out[31] == -31.75f);
}

static void test_meta_str(void **state) {
    (void)state;
    syn_model *m = load("qwen2-tiny-synth-q8_0.gguf", false);
    char buf[64];
    size_t n = 0;
    assert_int_equal(syn_model_meta_str(m, "qwen2.embedding_length", buf, sizeof buf, &n), SYN_OK);
    assert_int_equal(n, 2);
    assert_string_equal(buf, "64");
    assert_int_equal(
        syn_model_meta_str(m, "qwen2.attention.layer_norm_rms_epsilon", buf, sizeof buf, &n),
        SYN_OK);
    assert_int_equal(n, 5);
    assert_string_equal(buf, "1e-06");
    assert_int_equal(syn_model_meta_str(m, "qwen2.rope.freq_base", buf, sizeof buf, &n), SYN_OK);
    assert_true(strtod(buf, NULL) == 1e6);
    assert_int_equal(syn_model_meta_str(m, "tokenizer.ggml.add_bos_token", buf, sizeof buf, &n),
                     SYN_OK);
    assert_string_equal(buf, "false");
    assert_int_equal(syn_model_meta_str(m, "tokenizer.ggml.tokens", buf, sizeof buf, &n), SYN_OK);
    assert_string_equal(buf, "[string x 151936]");
    assert_int_equal(syn_model_meta_str(m, "tokenizer.ggml.token_type", buf, sizeof buf, &n),
                     SYN_OK);
    assert_string_equal(buf, "[int32 x 151936]");
    assert_int_equal(syn_model_meta_str(m, "general.architecture", buf, sizeof buf, &n), SYN_OK);
    assert_int_equal(n, 5);
    assert_string_equal(buf, "qwen2");
    /* Cut to the buffer, the full length still returned. */
    assert_int_equal(syn_model_meta_str(m, "general.architecture", buf, 3, &n),
                     SYN_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(n, 5);
    assert_string_equal(buf, "qw");
    assert_int_equal(syn_model_meta_str(m, "general.architecture", NULL, 0, &n),
                     SYN_ERR_BUFFER_TOO_SMALL); /* measures */
    assert_int_equal(n, 5);
    assert_int_equal(syn_model_meta_str(m, "general.architecture", NULL, sizeof buf, &n),
                     SYN_ERR_INVALID_ARGUMENT);
    assert_int_equal(syn_model_meta_str(NULL, "general.architecture", buf, sizeof buf, &n),
                     SYN_ERR_INVALID_ARGUMENT);
    assert_int_equal(syn_model_meta_str(m, NULL, buf, sizeof buf, &n), SYN_ERR_INVALID_ARGUMENT);
    assert_int_equal(syn_model_meta_str(m, "general.architecture", buf, sizeof buf, NULL),
                     SYN_ERR_INVALID_ARGUMENT);
    assert_int_equal(syn_model_meta_str(m, "no.such.key", buf, sizeof buf, &n), SYN_ERR_NOT_FOUND);
    assert_string_equal(buf, "");
    assert_non_null(strstr(syn_last_error(), "no.such.key"));
    syn_model_free(m);
}

/* The seed file exercises F16, BF16, F32 and Q8_0 tensors through the loader. */
static void test_seed_model_mixed_types(void **state) {
    (void)state;
    syn_model *m = load("fuzz-seed.gguf", true);
    assert_int_equal(m->hp.n_embd, 32);
    assert_int_equal(m->hp.n_vocab, 262);
    assert_int_equal(m->output_norm.type, GGML_TYPE_F16);
    assert_int_equal(m->layers[0].bq.type, GGML_TYPE_BF16);
    float row[32];
    syn_tensor_row(&m->output_norm, 0, row);
    for (int i = 0; i < 32; i++)
        assert_true(row[i] == 1.0f);
    syn_tensor_row(&m->layers[0].bq, 0, row);
    for (int i = 0; i < 32; i++)
        assert_true(row[i] == 1.0f);
    syn_model_free(m);
}

/* Freeing right after loading stops the prefetch thread; repeated to catch races under TSan/ASan.
 */
static void test_prefetch_then_free(void **state) {
    (void)state;
    for (int i = 0; i < 5; i++)
        syn_model_free(load("qwen2-tiny-synth-f32.gguf", true));
    syn_model *m = NULL;
    assert_int_equal(syn_model_load(test_data_path("qwen2-tiny-synth-q8_0.gguf"), NULL, &m),
                     SYN_OK);
    syn_model_free(m);
    syn_model_free(NULL);
}

static void test_load_argument_errors(void **state) {
    (void)state;
    syn_model *m = (syn_model *)1;
    assert_int_equal(syn_model_load("/nonexistent/model.gguf", NULL, &m), SYN_ERR_IO);
    assert_null(m);
    assert_non_null(strstr(syn_last_error(), "/nonexistent/model.gguf"));
    assert_int_equal(syn_model_load(NULL, NULL, &m), SYN_ERR_INVALID_ARGUMENT);
    assert_int_equal(syn_model_load(test_data_path("fuzz-seed.gguf"), NULL, NULL),
                     SYN_ERR_INVALID_ARGUMENT);
    assert_true(syn_model_default_params().prefetch);
}

/* In a child (an open() that blocks would hang the suite): loading a FIFO fails at once with
 * SYN_ERR_IO, naming the path and what it is. Returns 0 when it does. */
static int load_fifo(void *path) {
    alarm(10);
    syn_model *m = NULL;
    const syn_status st = syn_model_load(path, NULL, &m);
    const char *msg = syn_last_error();
    if (st == SYN_ERR_IO && !m && strstr(msg, path) && strstr(msg, "FIFO")) return 0;
    fprintf(stderr, "loading a FIFO: status %d, message '%s'\n", st, msg);
    syn_model_free(m);
    return 1;
}

static void expect_not_regular(const char *path, const char *kind) {
    syn_model *m = (syn_model *)1;
    assert_int_equal(syn_model_load(path, NULL, &m), SYN_ERR_IO);
    assert_null(m);
    if (!strstr(syn_last_error(), path) || !strstr(syn_last_error(), kind))
        fail_msg("loading %s: '%s' does not name the path and '%s'", path, syn_last_error(), kind);
}

/* Only regular files are model files; anything else is refused without blocking or reading. */
static void test_load_refuses_non_regular_files(void **state) {
    (void)state;
    char *dir = test_make_temp_dir();
    assert_non_null(dir);
    char fifo[4200];
    snprintf(fifo, sizeof fifo, "%s/model.gguf", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    long peak_kib;
    assert_int_equal(test_run_in_child(load_fifo, fifo, &peak_kib), 0);
    expect_not_regular(dir, "directory");
    expect_not_regular("/dev/null", "character device");
    test_remove_dir(dir);
    free(dir);
}

/* A path too long for the system: the message keeps its cause and still names the file by its
 * start and its end, however much of the middle has to go. */
static void test_load_long_path_keeps_cause(void **state) {
    (void)state;
    enum { PATH_CHARS = 5000 };
    static const char tail[] = "/tail-model.gguf";
    char path[PATH_CHARS + 1];
    const size_t head = PATH_CHARS - strlen(tail);
    for (size_t i = 0; i < head; i++)
        path[i] = "/long-dir-"[i % 10];
    memcpy(path + head, tail, sizeof tail);
    syn_model *m = NULL;
    assert_int_equal(syn_model_load(path, NULL, &m), SYN_ERR_IO);
    const char *msg = syn_last_error();
    if (!strstr(msg, strerror(ENAMETOOLONG)) || !strstr(msg, "cannot open '/long-dir-/long-dir-") ||
        !strstr(msg, "/tail-model.gguf'"))
        fail_msg("the message lacks the cause or the file: '%s'", msg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q8_0_model_loads),
        cmocka_unit_test(test_f32_model_loads),
        cmocka_unit_test(test_q8_0_rows),
        cmocka_unit_test(test_fp16_conversions),
        cmocka_unit_test(test_dequantize_rows_by_hand),
        cmocka_unit_test(test_meta_str),
        cmocka_unit_test(test_seed_model_mixed_types),
        cmocka_unit_test(test_prefetch_then_free),
        cmocka_unit_test(test_load_argument_errors),
        cmocka_unit_test(test_load_refuses_non_regular_files),
        cmocka_unit_test(test_load_long_path_keeps_cause),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
