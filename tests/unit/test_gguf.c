/* test_gguf.c: the GGUF reader and writer: round trips of every value type, getters, lookups,
 * alignment, version 2, and the known contents of the tiny Qwen2 test model. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../support/test_util.h"
#include "gguf/gguf.h"

typedef struct fixture {
    char *dir;
    char path[4096];
} fixture;

static int setup(void **state) {
    fixture *fx = calloc(1, sizeof *fx);
    if (!fx || !(fx->dir = test_make_temp_dir())) return -1;
    snprintf(fx->path, sizeof fx->path, "%s/t.gguf", fx->dir);
    *state = fx;
    return 0;
}

static int teardown(void **state) {
    fixture *fx = *state;
    test_remove_dir(fx->dir);
    free(fx->dir);
    free(fx);
    return 0;
}

/* Fills a tensor with bytes i * 7 + strlen(name), so each tensor's content is recognisable. */
static syn_status fill_pattern(void *user, const char *name, void *dst, uint64_t nbytes) {
    (void)user;
    uint8_t *p = dst;
    for (uint64_t i = 0; i < nbytes; i++)
        p[i] = (uint8_t)(i * 7 + strlen(name));
    return SYN_OK;
}

static syn_status fill_fails(void *user, const char *name, void *dst, uint64_t nbytes) {
    (void)user, (void)name, (void)dst, (void)nbytes;
    return SYN_ERR_INTERNAL;
}

static void check_pattern(const gguf_tensor *t, const char *name, uint64_t nbytes) {
    assert_non_null(t);
    assert_int_equal(t->nbytes, nbytes);
    const uint8_t *p = t->data;
    for (uint64_t i = 0; i < nbytes; i++)
        assert_int_equal(p[i], (uint8_t)(i * 7 + strlen(name)));
}

/* A parsed kv of any scalar type, to feed gguf_writer_copy_kv. */
static gguf_kv scalar_kv(const char *key, uint32_t type, uint64_t bits) {
    gguf_kv kv;
    memset(&kv, 0, sizeof kv);
    kv.key.data = key;
    kv.key.len = strlen(key);
    kv.type = type;
    kv.value.u64 = bits;
    return kv;
}

static void test_round_trip_every_type(void **state) {
    fixture *fx = *state;
    gguf_writer *w = gguf_writer_new();
    assert_non_null(w);
    assert_int_equal(gguf_writer_set_u32(w, "t.u32", 4000000000u), SYN_OK);
    assert_int_equal(gguf_writer_set_f32(w, "t.f32", 0.15625f), SYN_OK);
    assert_int_equal(gguf_writer_set_str(w, "t.str", "héllo"), SYN_OK);
    assert_int_equal(gguf_writer_set_str(w, "t.empty", ""), SYN_OK);
    gguf_kv kv = scalar_kv("t.i32", GGUF_TYPE_INT32, (uint64_t)(int64_t)-123456);
    assert_int_equal(gguf_writer_copy_kv(w, &kv), SYN_OK);
    kv = scalar_kv("t.bool", GGUF_TYPE_BOOL, 1);
    assert_int_equal(gguf_writer_copy_kv(w, &kv), SYN_OK);
    kv = scalar_kv("t.u8", GGUF_TYPE_UINT8, 200);
    assert_int_equal(gguf_writer_copy_kv(w, &kv), SYN_OK);
    kv = scalar_kv("t.i8", GGUF_TYPE_INT8, (uint64_t)(int64_t)-100);
    assert_int_equal(gguf_writer_copy_kv(w, &kv), SYN_OK);
    kv = scalar_kv("t.u16", GGUF_TYPE_UINT16, 60000);
    assert_int_equal(gguf_writer_copy_kv(w, &kv), SYN_OK);
    kv = scalar_kv("t.i16", GGUF_TYPE_INT16, (uint64_t)(int64_t)-30000);
    assert_int_equal(gguf_writer_copy_kv(w, &kv), SYN_OK);
    kv = scalar_kv("t.u64", GGUF_TYPE_UINT64, 0xfedcba9876543210u);
    assert_int_equal(gguf_writer_copy_kv(w, &kv), SYN_OK);
    kv = scalar_kv("t.i64", GGUF_TYPE_INT64, (uint64_t)INT64_MIN);
    assert_int_equal(gguf_writer_copy_kv(w, &kv), SYN_OK);
    kv = scalar_kv("t.f64", GGUF_TYPE_FLOAT64, 0);
    kv.value.f64 = -2.5e300;
    assert_int_equal(gguf_writer_copy_kv(w, &kv), SYN_OK);

    const int8_t i8s[] = {-128, 0, 127};
    const uint16_t u16s[] = {0, 65535};
    const int32_t i32s[] = {-1, 2, -3, 4};
    const float f32s[] = {1.5f, -0.0f};
    const uint64_t u64s[] = {UINT64_MAX};
    const double f64s[] = {3.25, -1e-300};
    const uint8_t bools[] = {1, 0, 1};
    const char *const strs[] = {"a", "", "three"};
    assert_int_equal(gguf_writer_set_array(w, "a.i8", GGUF_TYPE_INT8, i8s, 3), SYN_OK);
    assert_int_equal(gguf_writer_set_array(w, "a.u16", GGUF_TYPE_UINT16, u16s, 2), SYN_OK);
    assert_int_equal(gguf_writer_set_array(w, "a.i32", GGUF_TYPE_INT32, i32s, 4), SYN_OK);
    assert_int_equal(gguf_writer_set_array(w, "a.f32", GGUF_TYPE_FLOAT32, f32s, 2), SYN_OK);
    assert_int_equal(gguf_writer_set_array(w, "a.u64", GGUF_TYPE_UINT64, u64s, 1), SYN_OK);
    assert_int_equal(gguf_writer_set_array(w, "a.f64", GGUF_TYPE_FLOAT64, f64s, 2), SYN_OK);
    assert_int_equal(gguf_writer_set_array(w, "a.bool", GGUF_TYPE_BOOL, bools, 3), SYN_OK);
    assert_int_equal(gguf_writer_set_array(w, "a.none", GGUF_TYPE_INT32, NULL, 0), SYN_OK);
    assert_int_equal(gguf_writer_set_str_array(w, "a.str", strs, 3), SYN_OK);

    const uint64_t ne_vec[] = {5}, ne_mat[] = {64, 3}, ne_3d[] = {2, 3, 4};
    assert_int_equal(gguf_writer_add_tensor(w, "vec", GGML_TYPE_F32, 1, ne_vec, fill_pattern, NULL),
                     SYN_OK);
    assert_int_equal(
        gguf_writer_add_tensor(w, "mat", GGML_TYPE_Q8_0, 2, ne_mat, fill_pattern, NULL), SYN_OK);
    assert_int_equal(gguf_writer_add_tensor(w, "cube", GGML_TYPE_F16, 3, ne_3d, fill_pattern, NULL),
                     SYN_OK);
    assert_int_equal(gguf_writer_write(w, fx->path), SYN_OK);
    gguf_writer_free(w);

    gguf_file *f = NULL;
    assert_int_equal(gguf_open(fx->path, &f), SYN_OK);
    assert_int_equal(f->version, 3);
    assert_int_equal(f->n_kv, 22);
    assert_int_equal(f->n_tensors, 3);
    assert_int_equal(f->alignment, 32);

    const gguf_kv *k;
    assert_non_null(k = gguf_find_kv(f, "t.u32"));
    assert_int_equal(k->type, GGUF_TYPE_UINT32);
    assert_int_equal(k->value.u64, 4000000000u);
    assert_non_null(k = gguf_find_kv(f, "t.i32"));
    assert_int_equal(k->type, GGUF_TYPE_INT32);
    assert_int_equal(k->value.i64, -123456);
    assert_non_null(k = gguf_find_kv(f, "t.f32"));
    assert_true(k->value.f64 == 0.15625);
    assert_non_null(k = gguf_find_kv(f, "t.bool"));
    assert_int_equal(k->type, GGUF_TYPE_BOOL);
    assert_int_equal(k->value.u64, 1);
    assert_non_null(k = gguf_find_kv(f, "t.str"));
    assert_true(gguf_str_eq(k->value.str, "héllo"));
    assert_non_null(k = gguf_find_kv(f, "t.empty"));
    assert_int_equal(k->value.str.len, 0);
    assert_int_equal(gguf_find_kv(f, "t.u8")->value.u64, 200);
    assert_int_equal(gguf_find_kv(f, "t.i8")->value.i64, -100);
    assert_int_equal(gguf_find_kv(f, "t.u16")->value.u64, 60000);
    assert_int_equal(gguf_find_kv(f, "t.i16")->value.i64, -30000);
    assert_true(gguf_find_kv(f, "t.u64")->value.u64 == 0xfedcba9876543210u);
    assert_true(gguf_find_kv(f, "t.i64")->value.i64 == INT64_MIN);
    assert_true(gguf_find_kv(f, "t.f64")->value.f64 == -2.5e300);
    assert_int_equal(gguf_find_kv(f, "t.f64")->type, GGUF_TYPE_FLOAT64);

    gguf_array a;
    assert_int_equal(gguf_get_array(f, "a.i8", GGUF_TYPE_INT8, &a), SYN_OK);
    assert_int_equal(a.count, 3);
    assert_int_equal(gguf_array_get_int(&a, 0), -128);
    assert_int_equal(gguf_array_get_int(&a, 2), 127);
    assert_int_equal(gguf_get_array(f, "a.u16", GGUF_TYPE_UINT16, &a), SYN_OK);
    assert_int_equal(gguf_array_get_int(&a, 1), 65535);
    assert_int_equal(gguf_get_array(f, "a.i32", GGUF_TYPE_INT32, &a), SYN_OK);
    assert_int_equal(a.nbytes, 16);
    for (int i = 0; i < 4; i++)
        assert_int_equal(gguf_array_get_int(&a, (uint64_t)i), i32s[i]);
    assert_int_equal(gguf_get_array(f, "a.f32", GGUF_TYPE_FLOAT32, &a), SYN_OK);
    assert_memory_equal(a.data, f32s, sizeof f32s);
    assert_int_equal(gguf_get_array(f, "a.u64", GGUF_TYPE_UINT64, &a), SYN_OK);
    assert_memory_equal(a.data, u64s, sizeof u64s);
    assert_int_equal(gguf_get_array(f, "a.f64", GGUF_TYPE_FLOAT64, &a), SYN_OK);
    assert_memory_equal(a.data, f64s, sizeof f64s);
    assert_int_equal(gguf_get_array(f, "a.bool", GGUF_TYPE_BOOL, &a), SYN_OK);
    assert_int_equal(gguf_array_get_int(&a, 0), 1);
    assert_int_equal(gguf_array_get_int(&a, 1), 0);
    assert_int_equal(gguf_get_array(f, "a.none", GGUF_TYPE_INT32, &a), SYN_OK);
    assert_int_equal(a.count, 0);
    assert_int_equal(gguf_get_array(f, "a.str", GGUF_TYPE_STRING, &a), SYN_OK);
    assert_int_equal(a.count, 3);
    const uint8_t *cur = a.data;
    for (int i = 0; i < 3; i++)
        assert_true(gguf_str_eq(gguf_array_next_str(&cur), strs[i]));
    assert_ptr_equal(cur, a.data + a.nbytes);

    const gguf_tensor *t = gguf_find_tensor(f, "vec");
    check_pattern(t, "vec", 20);
    assert_int_equal(t->n_dims, 1);
    assert_int_equal(t->ne[1], 1);
    t = gguf_find_tensor(f, "mat");
    check_pattern(t, "mat", 2 * 34 * 3);
    assert_int_equal(t->type, GGML_TYPE_Q8_0);
    assert_int_equal(t->n_elements, 192);
    t = gguf_find_tensor(f, "cube");
    check_pattern(t, "cube", 2 * 24);
    assert_int_equal(t->ne[2], 4);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        assert_int_equal(f->tensors[i].offset % 32, 0);
        assert_int_equal(((const uint8_t *)f->tensors[i].data - f->base) % 32, 0);
    }
    assert_null(gguf_find_tensor(f, "absent"));
    assert_null(gguf_find_kv(f, "absent"));
    gguf_close(f);
}

/* Copying every kv of the real model and reading the copy back gives the same values. */
static void test_copy_kv_round_trip(void **state) {
    fixture *fx = *state;
    gguf_file *src = NULL, *f = NULL;
    assert_int_equal(gguf_open(test_data_path("qwen2-tiny-synth-q8_0.gguf"), &src), SYN_OK);
    gguf_writer *w = gguf_writer_new();
    for (uint64_t i = 0; i < src->n_kv; i++)
        assert_int_equal(gguf_writer_copy_kv(w, &src->kvs[i]), SYN_OK);
    assert_int_equal(gguf_writer_write(w, fx->path), SYN_OK);
    gguf_writer_free(w);
    assert_int_equal(gguf_open(fx->path, &f), SYN_OK);
    assert_int_equal(f->n_kv, src->n_kv);
    for (uint64_t i = 0; i < src->n_kv; i++) {
        const gguf_kv *a = &src->kvs[i], *b = &f->kvs[i];
        assert_int_equal(a->type, b->type);
        assert_int_equal(a->key.len, b->key.len);
        assert_memory_equal(a->key.data, b->key.data, a->key.len);
        if (a->type == GGUF_TYPE_STRING) {
            assert_int_equal(a->value.str.len, b->value.str.len);
            assert_memory_equal(a->value.str.data, b->value.str.data, a->value.str.len);
        } else if (a->type == GGUF_TYPE_ARRAY) {
            assert_int_equal(a->value.arr.count, b->value.arr.count);
            assert_int_equal(a->value.arr.nbytes, b->value.arr.nbytes);
            assert_memory_equal(a->value.arr.data, b->value.arr.data, a->value.arr.nbytes);
        } else {
            assert_memory_equal(&a->value, &b->value, sizeof a->value);
        }
    }
    gguf_close(f);
    gguf_close(src);
}

static void test_typed_getters(void **state) {
    fixture *fx = *state;
    gguf_writer *w = gguf_writer_new();
    gguf_writer_set_str(w, "s", "text");
    gguf_kv neg = scalar_kv("neg", GGUF_TYPE_INT32, (uint64_t)(int64_t)-1);
    gguf_writer_copy_kv(w, &neg);
    gguf_kv pos = scalar_kv("pos", GGUF_TYPE_INT32, 7);
    gguf_writer_copy_kv(w, &pos);
    gguf_writer_set_u32(w, "u", 9);
    gguf_writer_set_f32(w, "f", 2.5f);
    const uint32_t ids[] = {1, 2};
    gguf_writer_set_array(w, "arr", GGUF_TYPE_UINT32, ids, 2);
    gguf_kv big = scalar_kv("big", GGUF_TYPE_UINT64, 1ull << 40);
    gguf_writer_copy_kv(w, &big);
    gguf_kv huge = scalar_kv("huge", GGUF_TYPE_FLOAT64, 0);
    huge.value.f64 = 1e300;
    gguf_writer_copy_kv(w, &huge);
    assert_int_equal(gguf_writer_write(w, fx->path), SYN_OK);
    gguf_writer_free(w);
    gguf_file *f = NULL;
    assert_int_equal(gguf_open(fx->path, &f), SYN_OK);

    uint32_t u = 42;
    assert_int_equal(gguf_get_u32(f, "s", &u), SYN_ERR_FORMAT);
    assert_non_null(strstr(syn_last_error(), "key 's'"));
    assert_non_null(strstr(syn_last_error(), "type string"));
    assert_int_equal(u, 42);
    assert_int_equal(gguf_get_u32(f, "neg", &u), SYN_ERR_FORMAT);
    assert_non_null(strstr(syn_last_error(), "value -1 is out of range for uint32"));
    assert_int_equal(gguf_get_u32(f, "big", &u), SYN_ERR_FORMAT);
    assert_non_null(strstr(syn_last_error(), "1099511627776"));
    assert_int_equal(gguf_get_u32(f, "pos", &u), SYN_OK); /* any integer type that fits */
    assert_int_equal(u, 7);
    assert_int_equal(gguf_get_u32(f, "absent", &u), SYN_ERR_FORMAT);
    assert_string_equal(syn_last_error(), "gguf: missing key 'absent'");
    u = 5;
    assert_int_equal(gguf_get_u32_opt(f, "absent", &u), SYN_OK);
    assert_int_equal(u, 5);

    float x = 0;
    assert_int_equal(gguf_get_f32(f, "f", &x), SYN_OK);
    assert_true(x == 2.5f);
    assert_int_equal(gguf_get_f32(f, "u", &x), SYN_ERR_FORMAT);
    assert_non_null(strstr(syn_last_error(), "key 'u'"));
    assert_non_null(strstr(syn_last_error(), "expected float32"));
    assert_int_equal(gguf_get_f32(f, "huge", &x), SYN_ERR_FORMAT);
    assert_non_null(strstr(syn_last_error(), "out of range for float32"));

    gguf_str s = {0, NULL};
    assert_int_equal(gguf_get_str(f, "s", &s), SYN_OK);
    assert_true(gguf_str_eq(s, "text"));
    assert_false(gguf_str_eq(s, "tex"));
    assert_int_equal(gguf_get_str(f, "u", &s), SYN_ERR_FORMAT);
    assert_int_equal(gguf_get_str_opt(f, "absent", &s), SYN_OK);
    assert_true(gguf_str_eq(s, "text"));

    gguf_array a;
    assert_int_equal(gguf_get_array(f, "arr", GGUF_TYPE_UINT32, &a), SYN_OK);
    assert_int_equal(gguf_array_get_int(&a, 1), 2);
    assert_int_equal(gguf_get_array(f, "arr", GGUF_TYPE_STRING, &a), SYN_ERR_FORMAT);
    assert_non_null(strstr(syn_last_error(), "is an array of uint32, expected an array of string"));
    assert_int_equal(gguf_get_array(f, "s", GGUF_TYPE_STRING, &a), SYN_ERR_FORMAT);
    assert_int_equal(gguf_get_array(f, "absent", GGUF_TYPE_STRING, &a), SYN_ERR_FORMAT);
    gguf_close(f);
}

static void test_alignment_and_version_2(void **state) {
    fixture *fx = *state;
    gguf_writer *w = gguf_writer_new();
    assert_int_equal(gguf_writer_set_u32(w, "general.alignment", 64), SYN_OK);
    const uint64_t ne[] = {3};
    gguf_writer_add_tensor(w, "a", GGML_TYPE_F32, 1, ne, fill_pattern, NULL);
    gguf_writer_add_tensor(w, "b", GGML_TYPE_F32, 1, ne, fill_pattern, NULL);
    assert_int_equal(gguf_writer_write(w, fx->path), SYN_OK);
    gguf_writer_free(w);

    size_t size = 0;
    uint8_t *bytes = test_read_file(fx->path, &size);
    assert_non_null(bytes);
    /* Version 2 has the same layout as 3 (64-bit counts): patch the version field. */
    const uint32_t v2 = 2;
    memcpy(bytes + 4, &v2, 4);
    gguf_file *f = NULL;
    assert_int_equal(gguf_open_memory(bytes, size, &f), SYN_OK);
    assert_int_equal(f->version, 2);
    assert_int_equal(f->alignment, 64);
    assert_int_equal(f->data_offset % 64, 0);
    assert_int_equal(gguf_find_tensor(f, "b")->offset, 64);
    check_pattern(gguf_find_tensor(f, "b"), "b", 12);
    gguf_close(f);

    const uint32_t v1 = 1;
    memcpy(bytes + 4, &v1, 4);
    assert_int_equal(gguf_open_memory(bytes, size, &f), SYN_ERR_UNSUPPORTED);
    assert_null(f);
    assert_non_null(strstr(syn_last_error(), "version 1"));
    free(bytes);
}

static void test_writer_errors(void **state) {
    fixture *fx = *state;
    gguf_writer *w = gguf_writer_new();
    assert_int_equal(gguf_writer_set_u32(w, "k", 1), SYN_OK);
    assert_int_equal(gguf_writer_set_str(w, "k", "again"), SYN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(syn_last_error(), "'k'"));
    const uint64_t ne_bad[] = {33}, ne_ok[] = {32};
    assert_int_equal(gguf_writer_add_tensor(w, "t", GGML_TYPE_Q8_0, 1, ne_bad, fill_pattern, NULL),
                     SYN_ERR_INVALID_ARGUMENT);
    assert_int_equal(gguf_writer_add_tensor(w, "t", GGML_TYPE_Q8_0, 1, ne_ok, fill_fails, NULL),
                     SYN_OK);
    assert_int_equal(gguf_writer_add_tensor(w, "t", GGML_TYPE_F32, 1, ne_ok, fill_pattern, NULL),
                     SYN_ERR_INVALID_ARGUMENT);
    /* A failing fill callback fails the write and leaves no file behind. */
    assert_int_equal(gguf_writer_write(w, fx->path), SYN_ERR_INTERNAL);
    assert_non_null(strstr(syn_last_error(), "tensor 't'"));
    assert_int_not_equal(access(fx->path, F_OK), 0);
    char bad_path[4200];
    snprintf(bad_path, sizeof bad_path, "%s/no/such/dir/x.gguf", fx->dir);
    assert_int_equal(gguf_writer_write(w, bad_path), SYN_ERR_IO);
    assert_non_null(strstr(syn_last_error(), bad_path));
    gguf_writer_free(w);
    gguf_writer_free(NULL);
}

/* Facts from tests/data's README and the file's own header (independently dumped). */
static void test_real_model_contents(void **state) {
    (void)state;
    gguf_file *f = NULL;
    assert_int_equal(gguf_open(test_data_path("qwen2-tiny-synth-q8_0.gguf"), &f), SYN_OK);
    assert_int_equal(f->version, 3);
    assert_int_equal(f->n_tensors, 26);
    assert_int_equal(f->n_kv, 24);
    uint32_t u = 0;
    assert_int_equal(gguf_get_u32(f, "qwen2.embedding_length", &u), SYN_OK);
    assert_int_equal(u, 64);
    assert_int_equal(gguf_get_u32(f, "qwen2.block_count", &u), SYN_OK);
    assert_int_equal(u, 2);
    assert_int_equal(gguf_get_u32(f, "qwen2.context_length", &u), SYN_OK);
    assert_int_equal(u, 32768);
    float base = 0;
    assert_int_equal(gguf_get_f32(f, "qwen2.rope.freq_base", &base), SYN_OK);
    assert_true(base == 1e6f);
    gguf_str s;
    assert_int_equal(gguf_get_str(f, "general.architecture", &s), SYN_OK);
    assert_true(gguf_str_eq(s, "qwen2"));
    assert_int_equal(gguf_get_str(f, "tokenizer.ggml.model", &s), SYN_OK);
    assert_true(gguf_str_eq(s, "gpt2"));
    gguf_array a;
    assert_int_equal(gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &a), SYN_OK);
    assert_int_equal(a.count, 151936);
    const uint8_t *cur = a.data;
    assert_true(gguf_str_eq(gguf_array_next_str(&cur), "!")); /* the byte-level alphabet first */
    assert_int_equal(gguf_get_array(f, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &a), SYN_OK);
    assert_int_equal(a.count, 151387);

    const gguf_tensor *t = gguf_find_tensor(f, "token_embd.weight");
    assert_non_null(t);
    assert_int_equal(t->type, GGML_TYPE_Q8_0);
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->ne[0], 64);
    assert_int_equal(t->ne[1], 151936);
    assert_int_equal(t->nbytes, 151936ull * 68);
    t = gguf_find_tensor(f, "blk.1.ffn_down.weight");
    assert_non_null(t);
    assert_int_equal(t->ne[0], 128);
    assert_int_equal(t->ne[1], 64);
    t = gguf_find_tensor(f, "output_norm.weight");
    assert_int_equal(t->type, GGML_TYPE_F32);
    assert_int_equal(t->offset, 0);
    assert_null(gguf_find_tensor(f, "output.weight")); /* tied embeddings */
    assert_int_equal(f->data_offset % 32, 0);
    gguf_close(f);
}

static void test_type_tables(void **state) {
    (void)state;
    assert_int_equal(ggml_row_size(GGML_TYPE_Q8_0, 64), 68);
    assert_int_equal(ggml_row_size(GGML_TYPE_Q8_0, 33), 0);
    assert_int_equal(ggml_row_size(GGML_TYPE_F16, 3), 6);
    assert_int_equal(ggml_row_size(GGML_TYPE_Q4_K, 256), 144);
    assert_int_equal(ggml_row_size(99, 32), 0);
    assert_int_equal(ggml_block_size(GGML_TYPE_Q6_K), 256);
    assert_int_equal(ggml_block_size(GGML_TYPE_BF16), 1);
    assert_int_equal(ggml_block_size(31), 0);
    assert_string_equal(ggml_type_name(GGML_TYPE_Q4_K), "q4_k");
    assert_string_equal(ggml_type_name(GGML_TYPE_BF16), "bf16");
    assert_string_equal(ggml_type_name(99), "unknown");
    assert_string_equal(gguf_type_name(GGUF_TYPE_FLOAT64), "float64");
    assert_string_equal(gguf_type_name(13), "invalid");
    assert_int_equal(gguf_type_size(GGUF_TYPE_UINT16), 2);
    assert_int_equal(gguf_type_size(GGUF_TYPE_STRING), 0);
}

static void test_open_errors(void **state) {
    fixture *fx = *state;
    gguf_file *f = (gguf_file *)1;
    assert_int_equal(gguf_open("/nonexistent/x.gguf", &f), SYN_ERR_IO);
    assert_null(f);
    assert_non_null(strstr(syn_last_error(), "/nonexistent/x.gguf"));
    assert_int_equal(gguf_open(fx->dir, &f), SYN_ERR_IO); /* a directory */
    assert_int_equal(gguf_open_memory("GGUF", 4, &f), SYN_ERR_FORMAT);
    assert_non_null(strstr(syn_last_error(), "truncated"));
    assert_int_equal(gguf_open_memory(NULL, 0, &f), SYN_ERR_FORMAT);
    gguf_close(NULL);

    /* The smallest valid file: a header with no keys and no tensors. */
    uint8_t empty[24] = {'G', 'G', 'U', 'F', 3};
    assert_int_equal(gguf_open_memory(empty, sizeof empty, &f), SYN_OK);
    assert_int_equal(f->n_kv, 0);
    assert_null(gguf_find_kv(f, "x"));
    gguf_close(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip_every_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_copy_kv_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_typed_getters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alignment_and_version_2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_errors, setup, teardown),
        cmocka_unit_test(test_real_model_contents),
        cmocka_unit_test(test_type_tables),
        cmocka_unit_test_setup_teardown(test_open_errors, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
