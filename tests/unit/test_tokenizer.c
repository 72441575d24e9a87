/* test_tokenizer.c: the byte-level BPE tokenizer against llama.cpp/Hugging Face vectors,
 * hand-worked BPE on a tiny vocabulary, round trips, the streaming decoder and load-time refusals.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <jansson.h>
#include <utf8proc.h>

#include "../support/test_util.h"
#include "gguf/gguf.h"
#include "synapse.h"
#include "synapse_internal.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_internal.h" /* pretok_* */

enum {
    QWEN_N_VOCAB = 151936,
    QWEN_ENDOFTEXT = 151643, /* Qwen2.5 vocabulary facts */
    QWEN_IM_START = 151644,
    QWEN_IM_END = 151645,
    QWEN_TOOL_CALL = 151657,
};

static const syn_tokenizer *qwen; /* from the group setup's model */
static syn_model *qwen_model;

static int group_setup(void **state) {
    (void)state;
    syn_status st = syn_model_load(test_data_path("qwen2-tiny-synth-q8_0.gguf"), NULL, &qwen_model);
    if (st != SYN_OK) {
        fprintf(stderr, "loading the tiny model: %s\n", syn_last_error());
        return -1;
    }
    qwen = syn_model_tokenizer(qwen_model);
    return qwen ? 0 : -1;
}

static int group_teardown(void **state) {
    (void)state;
    syn_model_free(qwen_model);
    return 0;
}

/* ---- helpers ---- */

/* Tokenizes with a buffer of exactly the needed size (size query first); caller frees. */
static int32_t *tokenize(const syn_tokenizer *tok, const char *text, size_t len, bool special,
                         size_t *n) {
    size_t need = 0;
    syn_status st = syn_tokenize(tok, text, len, false, special, NULL, 0, &need);
    assert_true(st == SYN_OK || st == SYN_ERR_BUFFER_TOO_SMALL);
    int32_t *ids = malloc((need ? need : 1) * sizeof *ids);
    assert_non_null(ids);
    assert_int_equal(syn_tokenize(tok, text, len, false, special, ids, need, n), SYN_OK);
    assert_int_equal(*n, need);
    return ids;
}

static char *detokenize(const syn_tokenizer *tok, const int32_t *ids, size_t n, size_t *len) {
    size_t need = 0;
    syn_status st = syn_detokenize(tok, ids, n, NULL, 0, &need);
    assert_true(st == SYN_OK || st == SYN_ERR_BUFFER_TOO_SMALL);
    char *buf = malloc(need + 1);
    assert_non_null(buf);
    assert_int_equal(syn_detokenize(tok, ids, n, buf, need, len), SYN_OK);
    assert_int_equal(*len, need);
    return buf;
}

static bool valid_utf8(const char *s, size_t len) {
    for (size_t i = 0; i < len;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k =
            utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(len - i), &cp);
        if (k <= 0) return false;
        i += (size_t)k;
    }
    return true;
}

static void assert_ids(const int32_t *got, size_t n_got, const int32_t *want, size_t n_want,
                       const char *what) {
    if (n_got != n_want || (n_want > 0 && memcmp(got, want, n_want * sizeof *want) != 0)) {
        print_error("%s: got %zu ids:", what, n_got);
        for (size_t i = 0; i < n_got; i++)
            print_error(" %d", got[i]);
        print_error("\nexpected %zu:", n_want);
        for (size_t i = 0; i < n_want; i++)
            print_error(" %d", want[i]);
        print_error("\n");
        fail();
    }
}

/* ---- the Qwen2.5 vocabulary ---- */

static void test_vocab_facts(void **state) {
    (void)state;
    assert_int_equal(syn_tokenizer_n_vocab(qwen), QWEN_N_VOCAB);
    assert_int_equal(syn_tokenizer_bos(qwen), QWEN_ENDOFTEXT); /* the GGUF's bos/eos ids */
    assert_int_equal(syn_tokenizer_eos(qwen), QWEN_IM_END);
    assert_true(syn_tokenizer_is_eog(qwen, QWEN_IM_END));
    assert_true(syn_tokenizer_is_eog(qwen, QWEN_ENDOFTEXT));
    assert_false(syn_tokenizer_is_eog(qwen, QWEN_IM_START));
    assert_false(syn_tokenizer_is_eog(qwen, 9707));
    assert_false(syn_tokenizer_is_eog(qwen, -1));
    assert_false(syn_tokenizer_is_eog(qwen, QWEN_N_VOCAB));
    assert_int_equal(syn_tokenizer_eos(NULL), -1);
    /* the list of them: exactly the ids syn_tokenizer_is_eog accepts, ascending */
    const int32_t *eog = NULL;
    const int32_t n_eog = syn_tokenizer_eog_ids(qwen, &eog);
    int32_t k = 0;
    for (int32_t id = 0; id < QWEN_N_VOCAB; id++) {
        if (!syn_tokenizer_is_eog(qwen, id)) continue;
        assert_true(k < n_eog);
        assert_int_equal(eog[k++], id);
    }
    assert_int_equal(k, n_eog);
    assert_true(n_eog >= 2);
    assert_int_equal(syn_tokenizer_eog_ids(NULL, &eog), 0);
    assert_null(eog);
}

/* Every case of tests/data/qwen2-tokenizer-cases.json (llama-tokenize / Hugging Face output). */
static void test_reference_cases(void **state) {
    (void)state;
    json_error_t err;
    json_t *root = json_load_file(test_data_path("qwen2-tokenizer-cases.json"), 0, &err);
    if (!root) fail_msg("qwen2-tokenizer-cases.json line %d: %s", err.line, err.text);
    json_t *cases = json_object_get(root, "cases");
    assert_true(json_is_array(cases));
    assert_int_equal(json_array_size(cases), 22);
    size_t checked = 0;
    for (size_t c = 0; c < json_array_size(cases); c++) {
        json_t *tc = json_array_get(cases, c);
        const char *name = json_string_value(json_object_get(tc, "name"));
        json_t *text = json_object_get(tc, "text");
        assert_non_null(name);
        assert_true(json_is_string(text));
        static const struct {
            const char *key;
            bool special;
        } modes[] = {{"ids", true}, {"ids_no_parse_special", false}};
        for (size_t m = 0; m < 2; m++) {
            json_t *want = json_object_get(tc, modes[m].key);
            if (!want) continue; /* the published_* cases give only the plain-text ids */
            size_t n_want = json_array_size(want);
            int32_t *want_ids = malloc((n_want ? n_want : 1) * sizeof *want_ids);
            assert_non_null(want_ids);
            for (size_t i = 0; i < n_want; i++)
                want_ids[i] = (int32_t)json_integer_value(json_array_get(want, i));
            size_t n;
            int32_t *ids = tokenize(qwen, json_string_value(text), json_string_length(text),
                                    modes[m].special, &n);
            char what[128];
            snprintf(what, sizeof what, "case %s, %s", name, modes[m].key);
            assert_ids(ids, n, want_ids, n_want, what);
            free(ids);
            free(want_ids);
            checked++;
        }
    }
    assert_int_equal(checked, 10 * 2 + 11 + 1 * 2); /* 10 full cases, 11 published, 1 chatml */
    json_decref(root);
}

static void test_special_tokens(void **state) {
    (void)state;
    static const struct {
        const char *text;
        int32_t id;
    } cases[] = {{"<|im_start|>", QWEN_IM_START},
                 {"<|im_end|>", QWEN_IM_END},
                 {"<|endoftext|>", QWEN_ENDOFTEXT}};
    for (size_t i = 0; i < 3; i++) {
        size_t n;
        int32_t *ids = tokenize(qwen, cases[i].text, strlen(cases[i].text), true, &n);
        assert_int_equal(n, 1);
        assert_int_equal(ids[0], cases[i].id);
        free(ids);
        /* as plain text the control token's characters are ordinary BPE input */
        ids = tokenize(qwen, cases[i].text, strlen(cases[i].text), false, &n);
        assert_true(n > 1);
        for (size_t k = 0; k < n; k++)
            assert_true(ids[k] < QWEN_ENDOFTEXT);
        free(ids);
    }
    /* adjacent specials and text glued to them */
    const char *glued = "<|im_end|><|im_start|>x<|endoftext|>";
    size_t n;
    int32_t *ids = tokenize(qwen, glued, strlen(glued), true, &n);
    assert_int_equal(n, 4);
    assert_int_equal(ids[0], QWEN_IM_END);
    assert_int_equal(ids[1], QWEN_IM_START);
    assert_int_equal(ids[2], 'x' - '!'); /* the vocabulary starts with '!'..'~' */
    assert_int_equal(ids[3], QWEN_ENDOFTEXT);
    free(ids);
    /* user-defined tokens (type 4) match in both modes, as the reference vectors show */
    ids = tokenize(qwen, "<tool_call>", 11, false, &n);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], QWEN_TOOL_CALL);
    free(ids);
}

/* detokenize(tokenize(text)) == NFC(text), in both modes, streamed or not. */
static void test_round_trip(void **state) {
    (void)state;
    static const char *const corpus[] = {
        "",
        "Hello, world!",
        "   multiple   spaces\t\ttabs\n\n\nnewlines  \r\n \r\r\n",
        "trailing spaces   ",
        "中文测试，日本語のテキスト、한국어 텍스트",
        "emoji 🚀🦙👍🏽🇫🇷 family 👨‍👩‍👧‍👦 😶‍🌫️",
        "Z\xcc\xa4\xcd\x94\xcd\xa7\xcc\x91\xcc\x93"
        "a\xcc\x88\xcd\x96\xcc\xad l\xcd\xae\xcc\x92 "
        "cafe\xcc\x81 A\xcc\x8a\xe1\x84\x80\xe1\x85\xa1", /* combining marks, decomposed Hangul */
        "1234567890 3.14159 1e-10 0x7FFF 2^64=18446744073709551616",
        "I'm you're he'll we'd they've it's CAN'T 'S 'll",
        "int main(void) {\n\treturn 0; // done\n}\n",
        "مرحبا بالعالم हिन्दी ภาษาไทย Ελληνικά",
        "\xc2\xa0nbsp\xe3\x80\x80ideographic\xe2\x80\xa8line\xc2\x85nel\xe1\xa0\x8emvs",
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
        "<|im_start<|im_end|><|im_end|",
    };
    for (size_t c = 0; c < sizeof corpus / sizeof corpus[0]; c++) {
        /* The exact bytes back: byte-level BPE normalises nothing (llama.cpp). */
        const char *want = corpus[c];
        size_t len = strlen(want), want_len = len;
        for (int special = 0; special < 2; special++) {
            size_t n, got_len;
            int32_t *ids = tokenize(qwen, corpus[c], len, special, &n);
            char *got = detokenize(qwen, ids, n, &got_len);
            if (got_len != want_len || memcmp(got, want, want_len) != 0)
                fail_msg("round trip of corpus[%zu] (special %d): got '%.*s'", c, special,
                         (int)got_len, got);

            syn_detok_stream *s;
            assert_int_equal(syn_detok_stream_new(qwen, &s), SYN_OK);
            char *streamed = malloc(want_len + 1);
            size_t at = 0;
            char chunk[1024];
            size_t k;
            for (size_t i = 0; i < n; i++) {
                assert_int_equal(syn_detok_stream_push(s, ids[i], chunk, sizeof chunk, &k), SYN_OK);
                assert_true(at + k <= want_len);
                memcpy(streamed + at, chunk, k);
                at += k;
            }
            assert_int_equal(syn_detok_stream_flush(s, chunk, sizeof chunk, &k), SYN_OK);
            assert_int_equal(k, 0); /* well-formed text leaves nothing held back */
            assert_int_equal(at, want_len);
            assert_memory_equal(streamed, want, want_len);
            syn_detok_stream_free(s);
            free(streamed);
            free(got);
            free(ids);
        }
    }
}

/* No NFC, as llama.cpp: a decomposed é (e + U+0301) stays two characters, so its ids differ
 * from the precomposed U+00E9's and decode to the decomposed bytes. */
static void test_no_normalisation(void **state) {
    (void)state;
    static const char decomposed[] = "cafe\xcc\x81", composed[] = "caf\xc3\xa9";
    size_t n1, n2, len;
    int32_t *ids1 = tokenize(qwen, decomposed, strlen(decomposed), false, &n1);
    int32_t *ids2 = tokenize(qwen, composed, strlen(composed), false, &n2);
    assert_false(n1 == n2 && memcmp(ids1, ids2, n1 * sizeof *ids1) == 0);
    char *back = detokenize(qwen, ids1, n1, &len);
    assert_int_equal(len, strlen(decomposed));
    assert_memory_equal(back, decomposed, len);
    free(back);
    free(ids1);
    free(ids2);
}

static void test_invalid_utf8(void **state) {
    (void)state;
    static const struct {
        const char *text;
        size_t len;
        size_t offset;
    } cases[] = {
        {"abc\xff"
         "def",
         7, 3},                     /* never a UTF-8 byte */
        {"ab\xc3", 3, 2},           /* truncated at the end */
        {"\xc0\xaf", 2, 0},         /* overlong '/' */
        {"x\xed\xa0\x80", 4, 1},    /* UTF-16 surrogate */
        {"\xf4\x90\x80\x80", 4, 0}, /* above U+10FFFF */
        {"ok \x80", 4, 3},          /* stray continuation byte */
        {"\xe2\x82"
         "A",
         3, 0}, /* lead byte then ASCII */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int32_t ids[16];
        size_t n = 99;
        assert_int_equal(syn_tokenize(qwen, cases[i].text, cases[i].len, false, false, ids, 16, &n),
                         SYN_ERR_INVALID_ARGUMENT);
        char want[64];
        snprintf(want, sizeof want, "byte offset %zu", cases[i].offset);
        if (!strstr(syn_last_error(), want))
            fail_msg("case %zu: '%s' lacks '%s'", i, syn_last_error(), want);
    }
}

static void test_buffer_protocol(void **state) {
    (void)state;
    const char *text = "Hello world! How are you doing today?";
    static const int32_t want[] = {9707, 1879, 0, 2585, 525, 498, 3730, 3351, 30};
    size_t n = 0;
    assert_int_equal(syn_tokenize(qwen, text, strlen(text), false, true, NULL, 0, &n),
                     SYN_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(n, 9);
    int32_t ids[9];
    assert_int_equal(syn_tokenize(qwen, text, strlen(text), false, true, ids, 8, &n),
                     SYN_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(n, 9);
    assert_memory_equal(ids, want, 8 * sizeof *ids); /* what fits is written */
    assert_int_equal(syn_tokenize(qwen, text, strlen(text), false, true, ids, 9, &n), SYN_OK);
    assert_ids(ids, n, want, 9, "exact cap");
    assert_int_equal(syn_tokenize(qwen, "", 0, false, true, NULL, 0, &n), SYN_OK);
    assert_int_equal(n, 0);
    assert_int_equal(syn_tokenize(qwen, NULL, 3, false, true, ids, 9, &n),
                     SYN_ERR_INVALID_ARGUMENT);
    assert_int_equal(syn_tokenize(qwen, text, 3, false, true, NULL, 9, &n),
                     SYN_ERR_INVALID_ARGUMENT);

    char buf[8];
    size_t k;
    assert_int_equal(syn_detokenize(qwen, want, 2, buf, 5, &k), SYN_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(k, 11); /* "Hello world" */
    int32_t bad = QWEN_N_VOCAB;
    assert_int_equal(syn_detokenize(qwen, &bad, 1, buf, 8, &k), SYN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(syn_last_error(), "151936"));
}

static void test_token_to_bytes(void **state) {
    (void)state;
    char buf[64];
    size_t n;
    assert_int_equal(syn_tokenizer_token_bytes(qwen, 220, buf, sizeof buf, &n), SYN_OK); /* "Ġ" */
    assert_int_equal(n, 1);
    assert_int_equal(buf[0], ' ');
    assert_int_equal(syn_tokenizer_token_bytes(qwen, 198, buf, sizeof buf, &n), SYN_OK); /* "Ċ" */
    assert_int_equal(n, 1);
    assert_int_equal(buf[0], '\n');
    assert_int_equal(syn_tokenizer_token_bytes(qwen, 9707, buf, sizeof buf, &n), SYN_OK);
    assert_int_equal(n, 5);
    assert_memory_equal(buf, "Hello", 5);
    assert_int_equal(syn_tokenizer_token_bytes(qwen, QWEN_IM_START, buf, sizeof buf, &n), SYN_OK);
    assert_int_equal(n, 12);
    assert_memory_equal(buf, "<|im_start|>", 12);
    assert_int_equal(syn_tokenizer_token_bytes(qwen, QWEN_IM_START, buf, 3, &n),
                     SYN_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(n, 12);
    assert_int_equal(syn_tokenizer_token_bytes(qwen, -1, buf, sizeof buf, &n),
                     SYN_ERR_INVALID_ARGUMENT);
    assert_int_equal(syn_tokenizer_token_bytes(qwen, QWEN_N_VOCAB, buf, sizeof buf, &n),
                     SYN_ERR_INVALID_ARGUMENT);
}

/* A character split across tokens comes out whole, once its last byte arrives. */
static void test_stream_split_character(void **state) {
    (void)state;
    const char *text = "🦙🦙 👍🏽 😶‍🌫️ ✅";
    size_t n;
    int32_t *ids = tokenize(qwen, text, strlen(text), false, &n);
    size_t partial_tokens = 0;
    syn_detok_stream *s;
    assert_int_equal(syn_detok_stream_new(qwen, &s), SYN_OK);
    char out[256];
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        char bytes[64], chunk[1024];
        size_t nb, k;
        assert_int_equal(syn_tokenizer_token_bytes(qwen, ids[i], bytes, sizeof bytes, &nb), SYN_OK);
        if (!valid_utf8(bytes, nb)) partial_tokens++;
        assert_int_equal(syn_detok_stream_push(s, ids[i], chunk, sizeof chunk, &k), SYN_OK);
        assert_int_equal(strlen(chunk), k); /* NUL-terminated */
        assert_true(valid_utf8(chunk, k));  /* never a partial character */
        assert_true(at + k < sizeof out);
        memcpy(out + at, chunk, k);
        at += k;
    }
    assert_true(partial_tokens >= 2); /* the test means something only if characters were split */
    char chunk[16];
    size_t k;
    assert_int_equal(syn_detok_stream_flush(s, chunk, sizeof chunk, &k), SYN_OK);
    assert_int_equal(k, 0);
    assert_int_equal(at, strlen(text));
    assert_memory_equal(out, text, at);
    syn_detok_stream_free(s);
    free(ids);
}

static void test_stream_invalid_bytes(void **state) {
    (void)state;
    /* the tokens that decode to the lone bytes E2 and 82, found by decoding the first ids */
    int32_t e2 = -1, b82 = -1;
    for (int32_t id = 0; id < 1000 && (e2 < 0 || b82 < 0); id++) {
        char b[8];
        size_t n;
        assert_int_equal(syn_tokenizer_token_bytes(qwen, id, b, sizeof b, &n), SYN_OK);
        if (n == 1 && (uint8_t)b[0] == 0xE2) e2 = id;
        if (n == 1 && (uint8_t)b[0] == 0x82) b82 = id;
    }
    assert_true(e2 >= 0 && b82 >= 0);
    int32_t letter_a;
    size_t n;
    assert_int_equal(syn_tokenize(qwen, "A", 1, false, false, &letter_a, 1, &n), SYN_OK);

    syn_detok_stream *s;
    assert_int_equal(syn_detok_stream_new(qwen, &s), SYN_OK);
    char chunk[64];
    size_t k;
    assert_int_equal(syn_detok_stream_push(s, e2, chunk, sizeof chunk, &k), SYN_OK);
    assert_int_equal(k, 0); /* held: E2 starts a 3-byte character */
    assert_int_equal(syn_detok_stream_push(s, b82, chunk, sizeof chunk, &k), SYN_OK);
    assert_int_equal(k, 0); /* E2 82 still incomplete */
    assert_int_equal(syn_detok_stream_push(s, letter_a, chunk, sizeof chunk, &k), SYN_OK);
    assert_string_equal(chunk, "\xef\xbf\xbd"
                               "A"); /* E2 82 is one ill-formed subpart */
    assert_int_equal(syn_detok_stream_push(s, e2, chunk, sizeof chunk, &k), SYN_OK);
    assert_int_equal(k, 0);
    /* too small a buffer consumes nothing: the retry gets the same text */
    assert_int_equal(syn_detok_stream_flush(s, chunk, 3, &k), SYN_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(k, 3);
    assert_int_equal(syn_detok_stream_flush(s, chunk, sizeof chunk, &k), SYN_OK);
    assert_string_equal(chunk, "\xef\xbf\xbd");
    assert_int_equal(syn_detok_stream_flush(s, chunk, sizeof chunk, &k), SYN_OK);
    assert_int_equal(k, 0);
    assert_int_equal(syn_detok_stream_push(s, QWEN_N_VOCAB, chunk, sizeof chunk, &k),
                     SYN_ERR_INVALID_ARGUMENT);
    syn_detok_stream_free(s);
    syn_detok_stream_free(NULL);
}

static double seconds_since(const struct timespec *t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0->tv_nsec);
}

/* 100 KB runs of one character: one huge BPE word (letters) or long regex runs (spaces, digits,
 * punctuation) must stay near-linear and round-trip. */
static void test_long_runs(void **state) {
    (void)state;
    enum { LEN = 100000 };
    static const char fill[] = {'a', ' ', '7', '!', '\n'};
    char *text = malloc(LEN + 1);
    assert_non_null(text);
    for (size_t f = 0; f < sizeof fill; f++) {
        memset(text, fill[f], LEN);
        text[LEN - 1] = 'x'; /* a different last character exercises the lookahead */
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        size_t n, len;
        int32_t *ids = tokenize(qwen, text, LEN, false, &n);
        double secs = seconds_since(&t0);
        print_message("100 KB of '%c': %zu ids in %.1f ms\n", fill[f] == '\n' ? 'n' : fill[f], n,
                      secs * 1e3);
        assert_true(secs < 5.0); /* quadratic would be minutes */
        char *back = detokenize(qwen, ids, n, &len);
        assert_int_equal(len, LEN);
        assert_memory_equal(back, text, LEN);
        free(back);
        free(ids);
    }
    free(text);
}

/* ---- a tiny hand-made vocabulary, written with the GGUF writer ---- */

/* GPT-2's bytes_to_unicode, written out from its definition: printable Latin-1 bytes map to
 * themselves, the other 68 in order to U+0100 upwards. Returns the UTF-8 of byte b's character. */
static void byte_char(unsigned b, char out[3]) {
    unsigned cp = b, extra = 0;
    bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    if (!printable) {
        for (unsigned x = 0; x < b; x++)
            if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174))) extra++;
        cp = 256 + extra;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = 0;
    }
}

typedef struct tiny_spec {
    const char *model; /* NULL: key omitted */
    const char *pre;
    const char *const *merges;
    size_t n_merges;
    int64_t eos;          /* < 0: omitted */
    bool drop_byte_zero;  /* leave out the token of byte 0x00 */
    bool short_types;     /* one token type fewer than tokens */
    int64_t bos;          /* < 0: omitted */
    int add_bos, add_eos; /* tokenizer.ggml.add_{bos,eos}_token: < 0 omitted, else the bool */
    bool add_bos_as_u32;  /* write add_bos_token as a uint32 (a wrong type) */
    int64_t fim[3];       /* tokenizer.ggml.fim_{pre,suf,mid}_token_id; < 0 omitted */
} tiny_spec;

/* ids 0..255: the bytes in order; then these. */
static const char *const tiny_extra[] = {"ab", "bc", "abc", "<|im_end|>", "<tool>", "Ġab"};
static const int32_t tiny_extra_type[] = {1, 1, 1, 3, 4, 1};
enum { TINY_AB = 256, TINY_BC, TINY_ABC, TINY_IM_END, TINY_TOOL, TINY_SPACE_AB, TINY_COUNT };
static const char *const tiny_merges[] = {"b c", "a b", "ab c", "Ġ ab"};

/* Writes w to a file of a fresh temporary folder (freeing w), opens it into *f and removes the
 * folder (the open file stays readable). */
static void write_and_open(gguf_writer *w, gguf_file **f) {
    char *dir = test_make_temp_dir();
    assert_non_null(dir);
    char path[4200];
    snprintf(path, sizeof path, "%s/vocab.gguf", dir);
    assert_int_equal(gguf_writer_write(w, path), SYN_OK);
    gguf_writer_free(w);
    assert_int_equal(gguf_open(path, f), SYN_OK);
    test_remove_dir(dir);
    free(dir);
}

static syn_status load_tiny(const tiny_spec *spec, int32_t n_vocab_model, gguf_file **f,
                            syn_tokenizer **tok) {
    char chars[256][3];
    const char *tokens[TINY_COUNT];
    int32_t types[TINY_COUNT];
    size_t n = 0;
    for (unsigned b = 0; b < 256; b++) {
        byte_char(b, chars[b]);
        if (b == 0 && spec->drop_byte_zero) continue;
        types[n] = 1;
        tokens[n++] = chars[b];
    }
    for (size_t i = 0; i < sizeof tiny_extra / sizeof tiny_extra[0]; i++) {
        types[n] = tiny_extra_type[i];
        tokens[n++] = tiny_extra[i];
    }
    gguf_writer *w = gguf_writer_new();
    assert_non_null(w);
    assert_int_equal(gguf_writer_set_str(w, "general.architecture", "qwen2"), SYN_OK);
    if (spec->model)
        assert_int_equal(gguf_writer_set_str(w, "tokenizer.ggml.model", spec->model), SYN_OK);
    if (spec->pre)
        assert_int_equal(gguf_writer_set_str(w, "tokenizer.ggml.pre", spec->pre), SYN_OK);
    assert_int_equal(gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", tokens, n), SYN_OK);
    assert_int_equal(gguf_writer_set_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types,
                                           spec->short_types ? n - 1 : n),
                     SYN_OK);
    assert_int_equal(gguf_writer_set_str_array(w, "tokenizer.ggml.merges",
                                               (const char *const *)spec->merges, spec->n_merges),
                     SYN_OK);
    if (spec->eos >= 0)
        assert_int_equal(gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)spec->eos),
                         SYN_OK);
    if (spec->bos >= 0)
        assert_int_equal(gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)spec->bos),
                         SYN_OK);
    if (spec->add_bos >= 0 && spec->add_bos_as_u32)
        assert_int_equal(gguf_writer_set_u32(w, "tokenizer.ggml.add_bos_token", 1), SYN_OK);
    else if (spec->add_bos >= 0)
        assert_int_equal(gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", spec->add_bos),
                         SYN_OK);
    if (spec->add_eos >= 0)
        assert_int_equal(gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", spec->add_eos),
                         SYN_OK);
    static const char *const fim_keys[3] = {"tokenizer.ggml.fim_pre_token_id",
                                            "tokenizer.ggml.fim_suf_token_id",
                                            "tokenizer.ggml.fim_mid_token_id"};
    for (int i = 0; i < 3; i++)
        if (spec->fim[i] >= 0)
            assert_int_equal(gguf_writer_set_u32(w, fim_keys[i], (uint32_t)spec->fim[i]), SYN_OK);
    write_and_open(w, f);
    return tokenizer_load(*f, n_vocab_model, tok);
}

static tiny_spec tiny_default(void) {
    return (tiny_spec){.model = "gpt2",
                       .pre = "qwen2",
                       .merges = tiny_merges,
                       .n_merges = sizeof tiny_merges / sizeof tiny_merges[0],
                       .eos = -1,
                       .bos = -1,
                       .add_bos = -1,
                       .add_eos = -1,
                       .fim = {-1, -1, -1}};
}

static void expect_ids(const syn_tokenizer *tok, const char *text, bool special,
                       const int32_t *want, size_t n_want) {
    size_t n;
    int32_t *ids = tokenize(tok, text, strlen(text), special, &n);
    assert_ids(ids, n, want, n_want, text);
    free(ids);
}

/* Hand-worked merges: "b c" has rank 0, "a b" rank 1, "ab c" rank 2, "Ġ ab" rank 3. */
static void test_tiny_bpe(void **state) {
    (void)state;
    tiny_spec spec = tiny_default();
    gguf_file *f;
    syn_tokenizer *tok;
    assert_int_equal(load_tiny(&spec, TINY_COUNT + 10, &f, &tok), SYN_OK);
    /* b-c outranks a-b, and a + bc has no merge, so "abc" never reaches the token "abc" */
    expect_ids(tok, "abc", false, (const int32_t[]){'a', TINY_BC}, 2);
    /* equal ranks merge leftmost first */
    expect_ids(tok, "abab", false, (const int32_t[]){TINY_AB, TINY_AB}, 2);
    expect_ids(tok, "aab", false, (const int32_t[]){'a', TINY_AB}, 2);
    /* the pre-tokenizer splits " ab" off as its own word; then Ġ + ab merges */
    expect_ids(tok, "ab ab", false, (const int32_t[]){TINY_AB, TINY_SPACE_AB}, 2);
    /* control tokens only with parse_special; user-defined ones always */
    expect_ids(tok, "x<|im_end|>y", true, (const int32_t[]){'x', TINY_IM_END, 'y'}, 3);
    const char *plain = "<|im_end|>";
    int32_t bytes[10];
    for (int i = 0; i < 10; i++)
        bytes[i] = (uint8_t)plain[i];
    expect_ids(tok, plain, false, bytes, 10);
    expect_ids(tok, "a<tool>b", false, (const int32_t[]){'a', TINY_TOOL, 'b'}, 3);

    assert_int_equal(syn_tokenizer_eos(tok), -1);
    assert_int_equal(syn_tokenizer_bos(tok), -1);
    assert_true(syn_tokenizer_is_eog(tok, TINY_IM_END)); /* by its name */
    assert_int_equal(syn_tokenizer_n_vocab(tok), TINY_COUNT + 10);
    /* embedding rows past the token list decode to nothing */
    char buf[8];
    size_t n = 99;
    assert_int_equal(syn_tokenizer_token_bytes(tok, TINY_COUNT + 3, buf, sizeof buf, &n), SYN_OK);
    assert_int_equal(n, 0);
    tokenizer_free(tok);
    gguf_close(f);

    /* A byte the vocabulary has no token for is dropped, as llama.cpp drops it (Falcon's
     * vocabulary lacks the control bytes); without byte 0x00, byte b is id b - 1. */
    spec.drop_byte_zero = true;
    assert_int_equal(load_tiny(&spec, TINY_COUNT + 10, &f, &tok), SYN_OK);
    size_t n_ids;
    int32_t *ids = tokenize(tok, "a\0b\0", 4, false, &n_ids);
    assert_ids(ids, n_ids, (const int32_t[]){'a' - 1, 'b' - 1}, 2, "a NUL b NUL");
    free(ids);
    tokenizer_free(tok);
    gguf_close(f);
}

/* ---- pre-tokenizers without a suite: splits worked out by hand from llama.cpp's expressions ----
 */

typedef struct words {
    char text[256]; /* the words joined by '|' */
    size_t len;
} words;

static syn_status collect_word(void *user, const char *word, size_t len) {
    words *w = user;
    assert_true(w->len + len + 2 < sizeof w->text);
    if (w->len) w->text[w->len++] = '|';
    memcpy(w->text + w->len, word, len);
    w->len += len;
    w->text[w->len] = '\0';
    return SYN_OK;
}

static void expect_split(const char *pre, const char *text, const char *want) {
    const pretok_kind *kind = pretok_find(pre, strlen(pre));
    if (!kind) fail_msg("pre-tokenizer %s is not in the table", pre);
    pretok_codes codes;
    assert_int_equal(pretok_compile(kind, &codes), SYN_OK);
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    assert_non_null(md);
    words w = {.len = 0};
    assert_int_equal(pretok_split(&codes, md, text, strlen(text), collect_word, &w), SYN_OK);
    if (strcmp(w.text, want) != 0)
        fail_msg("%s: '%s' split as '%s', want '%s'", pre, text, w.text, want);
    pcre2_match_data_free(md);
    pretok_free(&codes);
}

/* Each expression splits the pieces the one before left (matches and the gaps between them). */
static void test_pretokenizers(void **state) {
    (void)state;
    /* starcoder, refact, smollm: digits alone first, then GPT-2's words */
    expect_split("starcoder", "abc123 def", "abc|1|2|3| def");
    expect_split("refact", "x 42", "x| |4|2");
    expect_split("smollm", "I'm 7", "I|'m| |7");
    /* GPT-2's contractions are lower-case only; Llama 3's take both cases, as pairs: U+017F is
     * no s, so 'ſa is one word */
    expect_split("gpt-2", "I'M", "I|'|M");
    expect_split("llama-bpe",
                 "I'M x'\xC5\xBF"
                 "a",
                 "I|'M| x|'\xC5\xBF"
                 "a");
    /* deepseek-coder: line breaks, then letters with one space, punctuation, CJK, digits */
    expect_split("deepseek-coder", "def f(x):\n  return 12", "def| f|(|x|):|\n| | return| |1|2");
    /* deepseek-v3: up to three digits, kana and kanji runs, then words; ~ is no symbol in
     * llama.cpp's table, so it starts a word of non-ASCII letters */
    expect_split("deepseek-v3",
                 "abc12345\xE6\x97\xA5\xE6\x9C\xAC"
                 "Hello, world!",
                 "abc|123|45|\xE6\x97\xA5\xE6\x9C\xAC|Hello|,| world|!");
    expect_split("deepseek-v3", "~\xC3\xA9", "~\xC3\xA9");
    /* gpt-4o: a word is upper-case letters then lower-case ones (or the reverse), with its
     * contraction; digits in threes */
    expect_split("gpt-4o", "HelloWorld DON'T 12345", "Hello|World| DON'T| |123|45");
    /* tekken: the same letters, single digits, no contractions */
    expect_split("tekken", "Hello 42", "Hello| |4|2");
    /* falcon: punctuation and symbols first, then GPT-2's words, then digits in threes */
    expect_split("falcon", "a+b=1234", "a|+|b|=|123|4");
    /* bloom: runs of anything but whitespace and .,!? (with an optional space first) */
    expect_split("bloom", "Hi, there.", "Hi|,| there|.");
}

/* syn_tokenize with add_special (ids malloc'd, *n their count). */
static int32_t *prompt_ids(const syn_tokenizer *tok, const char *text, bool parse_special,
                           size_t *n) {
    int32_t *ids = NULL;
    assert_int_equal(syn_tokenize_new(tok, text, strlen(text), true, parse_special, &ids, n),
                     SYN_OK);
    return ids;
}

static void expect_prompt(const syn_tokenizer *tok, const char *text, bool parse_special,
                          const int32_t *want, size_t n_want) {
    size_t n;
    int32_t *ids = prompt_ids(tok, text, parse_special, &n);
    assert_ids(ids, n, want, n_want, text);
    free(ids);
}

/* The prompt policy: tokenizer.ggml.add_bos_token / add_eos_token, the pre-tokenizer's default,
 * one BOS even when the text writes its own, the counts with a short buffer. */
static void test_prompt_policy(void **state) {
    (void)state;
    enum { BOS = TINY_IM_END, EOS = TINY_TOOL };
    tiny_spec spec = tiny_default();
    spec.bos = BOS;
    spec.eos = EOS;
    spec.add_bos = 1;
    gguf_file *f;
    syn_tokenizer *tok;
    assert_int_equal(load_tiny(&spec, TINY_COUNT, &f, &tok), SYN_OK);
    assert_true(syn_tokenizer_adds_bos(tok));
    assert_false(syn_tokenizer_adds_eos(tok));
    expect_ids(tok, "abab", true, (const int32_t[]){TINY_AB, TINY_AB}, 2); /* without add_special */
    expect_prompt(tok, "abab", true, (const int32_t[]){BOS, TINY_AB, TINY_AB}, 3);
    expect_prompt(tok, "", true, (const int32_t[]){BOS}, 1);
    /* The text's own BOS is kept and not doubled; read as plain text it is no BOS. */
    expect_prompt(tok, "<|im_end|>ab", true, (const int32_t[]){BOS, TINY_AB}, 2);
    expect_prompt(tok, "<|im_end|><|im_end|>ab", true, (const int32_t[]){BOS, BOS, TINY_AB}, 3);
    expect_prompt(tok, "<|im_end|>", false,
                  (const int32_t[]){BOS, '<', '|', 'i', 'm', '_', 'e', 'n', 'd', '|', '>'}, 11);
    /* The full count whatever the buffer, the BOS first in what fits. */
    int32_t one[1] = {-7};
    size_t n = 0;
    assert_int_equal(syn_tokenize(tok, "abab", 4, true, true, NULL, 0, &n),
                     SYN_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(n, 3);
    assert_int_equal(syn_tokenize(tok, "abab", 4, true, true, one, 1, &n),
                     SYN_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(n, 3);
    assert_int_equal(one[0], BOS);
    tokenizer_free(tok);
    gguf_close(f);

    /* EOS last, once: a text that ends with it keeps its own. */
    spec.add_eos = 1;
    assert_int_equal(load_tiny(&spec, TINY_COUNT, &f, &tok), SYN_OK);
    assert_true(syn_tokenizer_adds_eos(tok));
    expect_prompt(tok, "ab", true, (const int32_t[]){BOS, TINY_AB, EOS}, 3);
    expect_prompt(tok, "ab<tool>", true, (const int32_t[]){BOS, TINY_AB, EOS}, 3);
    tokenizer_free(tok);
    gguf_close(f);

    /* Where add_bos_token is absent: llama-bpe asks for a BOS (when the file names one), qwen2
     * does not. */
    spec = tiny_default();
    spec.bos = BOS;
    assert_int_equal(load_tiny(&spec, TINY_COUNT, &f, &tok), SYN_OK);
    assert_false(syn_tokenizer_adds_bos(tok));
    expect_prompt(tok, "ab", true, (const int32_t[]){TINY_AB}, 1);
    tokenizer_free(tok);
    gguf_close(f);
    spec.pre = "llama-bpe";
    assert_int_equal(load_tiny(&spec, TINY_COUNT, &f, &tok), SYN_OK);
    assert_true(syn_tokenizer_adds_bos(tok));
    expect_prompt(tok, "ab", true, (const int32_t[]){BOS, TINY_AB}, 2);
    tokenizer_free(tok);
    gguf_close(f);
    spec.bos = -1; /* llama-bpe's default needs a BOS id: without one, none */
    assert_int_equal(load_tiny(&spec, TINY_COUNT, &f, &tok), SYN_OK);
    assert_false(syn_tokenizer_adds_bos(tok));
    tokenizer_free(tok);
    gguf_close(f);
    spec.add_bos = 0; /* the key wins over the default */
    spec.bos = BOS;
    assert_int_equal(load_tiny(&spec, TINY_COUNT, &f, &tok), SYN_OK);
    assert_false(syn_tokenizer_adds_bos(tok));
    tokenizer_free(tok);
    gguf_close(f);
}

/* ---- a tiny SentencePiece vocabulary ---- */

/* ids 0..2: <unk> <s> </s>; 3..258: <0x00>..<0xFF>; then these pieces with their scores. */
#define SPACE "\xE2\x96\x81" /* U+2581 */
static const char *const spm_pieces[] = {SPACE, "a",       "b",        "c",      "ab",
                                         "bc",  SPACE "a", SPACE "ab", "<|end|>"};
static const float spm_scores[] = {-1, -2, -2, -2, -5, -3, -4, -6, 0};
static const int32_t spm_types[] = {1, 1, 1, 1, 1, 1, 1, 1, 3};
enum {
    SPM_UNK,
    SPM_BOS,
    SPM_EOS,
    SPM_BYTE0,
    SPM_SPACE = SPM_BYTE0 + 256,
    SPM_A,
    SPM_B,
    SPM_C,
    SPM_AB,
    SPM_BC,
    SPM_SPACE_A,
    SPM_SPACE_AB,
    SPM_END,
    SPM_COUNT
};

/* Tokens after the tiny SentencePiece vocabulary's, ids SPM_COUNT on. */
typedef struct extra_tokens {
    const char *text[4];
    int32_t type[4];
    size_t n;
} extra_tokens;

/* add_space_prefix: < 0 omitted, else the bool; name: general.name or NULL; extra: NULL or more
 * tokens. */
static syn_status load_tiny_spm_with(int add_space_prefix, const char *name, bool short_scores,
                                     const extra_tokens *extra, gguf_file **f,
                                     syn_tokenizer **tok) {
    enum { MAX = SPM_COUNT + 4 };
    char bytes[256][7];
    const char *tokens[MAX] = {"<unk>", "<s>", "</s>"};
    int32_t types[MAX] = {2, 3, 3};
    float scores[MAX] = {0};
    size_t count = SPM_COUNT;
    for (size_t i = 0; extra && i < extra->n; i++, count++) {
        tokens[count] = extra->text[i];
        types[count] = extra->type[i];
    }
    for (unsigned b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        tokens[SPM_BYTE0 + b] = bytes[b];
        types[SPM_BYTE0 + b] = 6;
    }
    for (size_t i = 0; i < sizeof spm_pieces / sizeof spm_pieces[0]; i++) {
        tokens[SPM_SPACE + i] = spm_pieces[i];
        scores[SPM_SPACE + i] = spm_scores[i];
        types[SPM_SPACE + i] = spm_types[i];
    }
    gguf_writer *w = gguf_writer_new();
    assert_non_null(w);
    assert_int_equal(gguf_writer_set_str(w, "general.architecture", "none"), SYN_OK);
    if (name) assert_int_equal(gguf_writer_set_str(w, "general.name", name), SYN_OK);
    assert_int_equal(gguf_writer_set_str(w, "tokenizer.ggml.model", "llama"), SYN_OK);
    assert_int_equal(gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", tokens, count), SYN_OK);
    assert_int_equal(
        gguf_writer_set_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, count),
        SYN_OK);
    assert_int_equal(gguf_writer_set_array(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores,
                                           short_scores ? count - 1 : count),
                     SYN_OK);
    if (add_space_prefix >= 0)
        assert_int_equal(
            gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", add_space_prefix), SYN_OK);
    write_and_open(w, f);
    return tokenizer_load(*f, (int32_t)count, tok);
}

static syn_status load_tiny_spm(int add_space_prefix, const char *name, bool short_scores,
                                gguf_file **f, syn_tokenizer **tok) {
    return load_tiny_spm_with(add_space_prefix, name, short_scores, NULL, f, tok);
}

static void expect_text(const syn_tokenizer *tok, const int32_t *ids, size_t n, const char *want) {
    size_t len;
    char *text = detokenize(tok, ids, n, &len);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(text, want, len);
    free(text);
}

/* Hand-worked SentencePiece: the highest-scoring join merges first (leftmost among equals),
 * spaces are U+2581 with one more in front of the text and after a special token, characters
 * without a piece become their bytes. */
static void test_tiny_spm(void **state) {
    (void)state;
    gguf_file *f;
    syn_tokenizer *tok;
    assert_int_equal(load_tiny_spm(0, NULL, false, &f, &tok), SYN_OK);
    /* bc (-3) beats ab (-5), and a + bc joins to no piece */
    expect_ids(tok, "abc", false, (const int32_t[]){SPM_A, SPM_BC}, 2);
    expect_ids(tok, "abab", false, (const int32_t[]){SPM_AB, SPM_AB}, 2);
    /* ▁a (-4) beats ab (-5), then ▁a + b joins to ▁ab */
    expect_ids(tok, " ab", false, (const int32_t[]){SPM_SPACE_AB}, 1);
    expect_ids(tok, " abc", false, (const int32_t[]){SPM_SPACE_A, SPM_BC}, 2);
    /* no piece for d or é: their bytes */
    expect_ids(tok, "d\xC3\xA9", false,
               (const int32_t[]){SPM_BYTE0 + 'd', SPM_BYTE0 + 0xC3, SPM_BYTE0 + 0xA9}, 3);
    expect_ids(tok, "a<s>a", true, (const int32_t[]){SPM_A, SPM_BOS, SPM_A}, 3);
    /* decoding: U+2581 is a space, byte tokens their bytes, specials their text */
    expect_text(tok, (const int32_t[]){SPM_SPACE_AB, SPM_BYTE0 + 0xC3, SPM_BYTE0 + 0xA9, SPM_END},
                4, " ab\xC3\xA9<|end|>");
    /* SentencePiece's defaults: <s> = 1 and </s> = 2, and a BOS in front of a prompt */
    assert_int_equal(syn_tokenizer_bos(tok), SPM_BOS);
    assert_int_equal(syn_tokenizer_eos(tok), SPM_EOS);
    assert_true(syn_tokenizer_adds_bos(tok));
    assert_true(syn_tokenizer_is_eog(tok, SPM_END));
    expect_prompt(tok, "a", true, (const int32_t[]){SPM_BOS, SPM_A}, 2);
    tokenizer_free(tok);
    gguf_close(f);

    /* add_space_prefix absent means true: a space before the text and after each special
     * token (but not before text after plain text), and decoding drops the first one. */
    assert_int_equal(load_tiny_spm(-1, NULL, false, &f, &tok), SYN_OK);
    expect_ids(tok, "ab", false, (const int32_t[]){SPM_SPACE_AB}, 1);
    expect_ids(tok, "a<|end|>a", true, (const int32_t[]){SPM_SPACE_A, SPM_END, SPM_SPACE_A}, 3);
    expect_ids(tok, "<|end|><|end|>", true, (const int32_t[]){SPM_END, SPM_END}, 2);
    expect_ids(tok, "", true, NULL, 0);
    /* as plain text the control token's characters are pieces and bytes */
    expect_ids(tok, "<s>", false,
               (const int32_t[]){SPM_SPACE, SPM_BYTE0 + '<', SPM_BYTE0 + 's', SPM_BYTE0 + '>'}, 4);
    expect_text(tok, (const int32_t[]){SPM_SPACE_A, SPM_SPACE_A}, 2, "a a");
    expect_text(tok, (const int32_t[]){SPM_BOS, SPM_SPACE_A}, 2, "<s> a");
    /* no Phi-3 name: whitespace after a special token stays */
    expect_ids(tok, "<|end|> a", true, (const int32_t[]){SPM_END, SPM_SPACE, SPM_SPACE_A}, 3);
    tokenizer_free(tok);
    gguf_close(f);

    /* llama.cpp's Phi-3 rule: whitespace after a special token but <s> is dropped */
    assert_int_equal(load_tiny_spm(-1, "Phi-3 mini", false, &f, &tok), SYN_OK);
    expect_ids(tok, "<|end|> \n\ta", true, (const int32_t[]){SPM_END, SPM_SPACE_A}, 2);
    expect_ids(tok, "<|end|> \n", true, (const int32_t[]){SPM_END}, 1);
    expect_ids(tok, "<s> a", true, (const int32_t[]){SPM_BOS, SPM_SPACE, SPM_SPACE_A}, 3);
    tokenizer_free(tok);
    gguf_close(f);

    syn_tokenizer *none = (syn_tokenizer *)1;
    assert_int_equal(load_tiny_spm(-1, NULL, true, &f, &none), SYN_ERR_FORMAT);
    assert_null(none);
    assert_non_null(strstr(syn_last_error(), "tokenizer.ggml.scores has 267 entries"));
    gguf_close(f);
    /* a text two tokens share is the later one's, as in llama.cpp's text -> id map */
    extra_tokens duplicate = {{"ab"}, {1}, 1};
    assert_int_equal(load_tiny_spm_with(0, NULL, false, &duplicate, &f, &tok), SYN_OK);
    expect_ids(tok, "ab", false, (const int32_t[]){SPM_COUNT}, 1);
    tokenizer_free(tok);
    gguf_close(f);
    /* a byte token must be <0xXX>: decoding reads its two hex digits */
    extra_tokens bad_byte = {{"<0xZZ>"}, {6}, 1};
    none = (syn_tokenizer *)1;
    assert_int_equal(load_tiny_spm_with(-1, NULL, false, &bad_byte, &f, &none), SYN_ERR_FORMAT);
    assert_null(none);
    assert_non_null(strstr(syn_last_error(), "'<0xZZ>' is a byte token but not <0xXX>"));
    gguf_close(f);
}

/* llama.cpp's rules by token text: an end-of-turn text is a control token whatever the file
 * says (so </s> as user-defined is read as text without parse_special), gpt-oss's channel markup
 * is user-defined (matched always), and with <|return|> and <|call|> ending turns <|end|> does
 * not (o200k_harmony). */
/* The fill-in-the-middle roles of the Qwen2.5 vocabulary, found by their texts (the file has no
 * fim_* keys), and the end of turn by the first text of its list (<|im_end|> before
 * <|endoftext|>). */
static void test_fim_roles(void **state) {
    (void)state;
    static const struct {
        syn_token_role role;
        int32_t id;
        const char *name;
    } want[] = {
        {SYN_TOKEN_BOS, QWEN_ENDOFTEXT, "bos"}, {SYN_TOKEN_EOS, QWEN_IM_END, "eos"},
        {SYN_TOKEN_EOT, QWEN_IM_END, "eot"},    {SYN_TOKEN_EOM, -1, "eom"},
        {SYN_TOKEN_FIM_PRE, 151659, "fim_pre"}, {SYN_TOKEN_FIM_SUF, 151661, "fim_suf"},
        {SYN_TOKEN_FIM_MID, 151660, "fim_mid"}, {SYN_TOKEN_FIM_PAD, 151662, "fim_pad"},
        {SYN_TOKEN_FIM_REP, 151663, "fim_rep"}, {SYN_TOKEN_FIM_SEP, 151664, "fim_sep"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_int_equal(syn_tokenizer_role(qwen, want[i].role), want[i].id);
        assert_string_equal(syn_token_role_name(want[i].role), want[i].name);
    }
    assert_int_equal(syn_tokenizer_role(qwen, SYN_TOKEN_ROLE_COUNT), -1);
    assert_null(syn_token_role_name(SYN_TOKEN_ROLE_COUNT));
    assert_int_equal(syn_tokenizer_role(NULL, SYN_TOKEN_FIM_PRE), -1);
}

/* llama-server's /infill layout over the Qwen2.5 vocabulary, ids written out by hand from the
 * pieces' plain tokenizations: the repository line, each extra file under a file separator, the
 * edited file's separator, then prefix + prompt (special tokens parsed), suffix, middle. */
static void test_infill_layout(void **state) {
    (void)state;
    enum { PRE = 151659, SUF = 151661, MID = 151660, REP = 151663, SEP = 151664 };
    const syn_infill_chunk extra[] = {{"x.py", "c = 1"}};
    const syn_infill in = {.prefix = "def f():",
                           .suffix = "    return 1",
                           .prompt = "<|im_start|>c = 1",
                           .extra = extra,
                           .n_extra = 1};
    /* "myproject\n"; "x.py\n", "c = 1"; "filename\n"; "def f():", the prompt; "    return 1" */
    static const int32_t want[] = {REP, 2408, 4987, 198,  SEP, 87,  7197, 198, 66,   284,
                                   220, 16,   SEP,  8404, 198, PRE, 750,  282, 4555, QWEN_IM_START,
                                   66,  284,  220,  16,   SUF, 262, 470,  220, 16,   MID};
    const size_t n_want = sizeof want / sizeof want[0];
    int32_t ids[64];
    size_t n = 0;
    assert_int_equal(syn_tokenize_infill(qwen, &in, ids, 64, &n), SYN_OK);
    assert_ids(ids, n, want, n_want, "infill");

    /* no extra files, no prompt: the repository line and the edited file's separator stay */
    const syn_infill bare = {.prefix = "def f():", .suffix = "    return 1"};
    static const int32_t want_bare[] = {REP, 2408, 4987, 198, SEP, 8404, 198, PRE, 750,
                                        282, 4555, SUF,  262, 470, 220,  16,  MID};
    assert_int_equal(syn_tokenize_infill(qwen, &bare, ids, 64, &n), SYN_OK);
    assert_ids(ids, n, want_bare, sizeof want_bare / sizeof want_bare[0], "bare infill");

    /* a bound drops the extra context's first tokens, never the rest */
    syn_infill bounded = in;
    bounded.max_tokens = n_want - 3;
    assert_int_equal(syn_tokenize_infill(qwen, &bounded, ids, 64, &n), SYN_OK);
    assert_ids(ids, n, want + 3, n_want - 3, "infill without the repository line");
    bounded.max_tokens = 5;
    assert_int_equal(syn_tokenize_infill(qwen, &bounded, ids, 64, &n), SYN_OK);
    assert_ids(ids, n, want + 15, n_want - 15, "infill without extra context");
    assert_int_equal(want[15], PRE);

    /* the size protocol of syn_tokenize */
    n = 0;
    assert_int_equal(syn_tokenize_infill(qwen, &in, ids, 3, &n), SYN_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(n, n_want);
    assert_int_equal(syn_tokenize_infill(qwen, &in, NULL, 0, &n), SYN_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(n, n_want);
    assert_int_equal(syn_tokenize_infill(qwen, NULL, ids, 64, &n), SYN_ERR_INVALID_ARGUMENT);
}

/* The fim_* keys name the roles (here plain tokens, which no text rule would pick); without a
 * file separator an extra file follows llama-server's snippet line; BOS, when the tokenizer adds
 * one, goes after the extra context; a key past the vocabulary is refused; a vocabulary without
 * the three FIM tokens cannot build the prompt. */
static void test_infill_keys(void **state) {
    (void)state;
    tiny_spec spec = tiny_default();
    spec.fim[0] = TINY_AB;
    spec.fim[1] = TINY_BC;
    spec.fim[2] = TINY_ABC;
    spec.bos = 'Q';
    spec.add_bos = 1;
    gguf_file *f;
    syn_tokenizer *tok;
    assert_int_equal(load_tiny(&spec, TINY_COUNT, &f, &tok), SYN_OK);
    assert_int_equal(syn_tokenizer_role(tok, SYN_TOKEN_FIM_PRE), TINY_AB);
    assert_int_equal(syn_tokenizer_role(tok, SYN_TOKEN_FIM_SUF), TINY_BC);
    assert_int_equal(syn_tokenizer_role(tok, SYN_TOKEN_FIM_MID), TINY_ABC);
    assert_int_equal(syn_tokenizer_role(tok, SYN_TOKEN_FIM_SEP), -1);
    const syn_infill_chunk extra[] = {{NULL, "z"}};
    const syn_infill in = {.prefix = "x", .suffix = "y", .extra = extra, .n_extra = 1};
    static const char snippet[] = "\n\n--- snippet ---\n\n";
    int32_t want[64];
    size_t n_want = 0;
    for (size_t i = 0; i < sizeof snippet - 1; i++) /* ids 0..255 are the bytes */
        want[n_want++] = (uint8_t)snippet[i];
    const int32_t tail[] = {'z', 'Q', TINY_AB, 'x', TINY_BC, 'y', TINY_ABC};
    for (size_t i = 0; i < sizeof tail / sizeof tail[0]; i++)
        want[n_want++] = tail[i];
    int32_t ids[64];
    size_t n = 0;
    assert_int_equal(syn_tokenize_infill(tok, &in, ids, 64, &n), SYN_OK);
    assert_ids(ids, n, want, n_want, "infill by keys");
    tokenizer_free(tok);
    gguf_close(f);

    spec.fim[1] = TINY_COUNT; /* one past the last token */
    assert_int_equal(load_tiny(&spec, TINY_COUNT, &f, &tok), SYN_ERR_FORMAT);
    assert_non_null(strstr(syn_last_error(), "tokenizer.ggml.fim_suf_token_id"));
    gguf_close(f);

    spec = tiny_default();
    assert_int_equal(load_tiny(&spec, TINY_COUNT, &f, &tok), SYN_OK);
    assert_int_equal(syn_tokenizer_role(tok, SYN_TOKEN_FIM_PRE), -1);
    assert_int_equal(syn_tokenize_infill(tok, &in, ids, 64, &n), SYN_ERR_UNSUPPORTED);
    assert_non_null(strstr(syn_last_error(), "no fill-in-the-middle tokens"));
    tokenizer_free(tok);
    gguf_close(f);
}

static void test_special_token_rules(void **state) {
    (void)state;
    enum { CHANNEL = SPM_COUNT, RETURN, CALL, END_OF_TURN = SPM_COUNT };
    gguf_file *f;
    syn_tokenizer *tok;
    static const char turn_end[] = "<end_of_turn>";
    extra_tokens user_defined = {{turn_end}, {4}, 1};
    assert_int_equal(load_tiny_spm_with(0, NULL, false, &user_defined, &f, &tok), SYN_OK);
    expect_ids(tok, turn_end, true, (const int32_t[]){END_OF_TURN}, 1);
    int32_t as_bytes[sizeof turn_end - 1]; /* no piece holds these characters */
    for (size_t i = 0; i < sizeof turn_end - 1; i++)
        as_bytes[i] = SPM_BYTE0 + (uint8_t)turn_end[i];
    expect_ids(tok, turn_end, false, as_bytes, sizeof turn_end - 1);
    assert_true(syn_tokenizer_is_eog(tok, END_OF_TURN));
    tokenizer_free(tok);
    gguf_close(f);

    /* the longer of two overlapping special tokens wins wherever it stands (llama.cpp cuts the
     * longest out first): "xyzw" is x, then yzw, though xy starts earlier; and a token whose
     * text is a lone continuation byte never cuts a character apart */
    enum { XY = SPM_COUNT, YZW };
    extra_tokens overlapping = {{"xy", "yzw", "\xA9"}, {4, 4, 4}, 3};
    assert_int_equal(load_tiny_spm_with(0, NULL, false, &overlapping, &f, &tok), SYN_OK);
    expect_ids(tok, "xyzw", false, (const int32_t[]){SPM_BYTE0 + 'x', YZW}, 2);
    expect_ids(tok, "xyxy", false, (const int32_t[]){XY, XY}, 2);
    expect_ids(tok, "\xC3\xA9", false, (const int32_t[]){SPM_BYTE0 + 0xC3, SPM_BYTE0 + 0xA9}, 2);
    tokenizer_free(tok);
    gguf_close(f);

    extra_tokens extra = {{"<|channel|>", "<|return|>", "<|call|>"}, {3, 3, 3}, 3};
    assert_int_equal(load_tiny_spm_with(0, NULL, false, &extra, &f, &tok), SYN_OK);
    expect_ids(tok, "a<|channel|>a", false, (const int32_t[]){SPM_A, CHANNEL, SPM_A}, 3);
    /* <|end|> is user-defined now: a unit even without parse_special */
    expect_ids(tok, "<|end|>", false, (const int32_t[]){SPM_END}, 1);
    assert_false(syn_tokenizer_is_eog(tok, SPM_END));
    assert_true(syn_tokenizer_is_eog(tok, RETURN));
    assert_true(syn_tokenizer_is_eog(tok, CALL));
    tokenizer_free(tok);
    gguf_close(f);
}

static void expect_refusal(const tiny_spec *spec, int32_t n_vocab_model, syn_status status,
                           const char *needle) {
    gguf_file *f;
    syn_tokenizer *tok = (syn_tokenizer *)1;
    assert_int_equal(load_tiny(spec, n_vocab_model, &f, &tok), status);
    assert_null(tok);
    if (!strstr(syn_last_error(), needle))
        fail_msg("message '%s' lacks '%s'", syn_last_error(), needle);
    gguf_close(f);
}

static void test_load_refusals(void **state) {
    (void)state;
    tiny_spec s = tiny_default();
    s.model = "bert";
    expect_refusal(&s, 1000, SYN_ERR_UNSUPPORTED, "tokenizer.ggml.model 'bert' is not supported");
    s = tiny_default(); /* SentencePiece without its <0xXX> tokens would lose text */
    s.model = "llama";
    expect_refusal(&s, 1000, SYN_ERR_FORMAT, "no byte token <0x00>");
    s = tiny_default();
    s.model = NULL;
    expect_refusal(&s, 1000, SYN_ERR_FORMAT, "tokenizer.ggml.model");
    s = tiny_default();
    s.pre = "chameleon"; /* llama.cpp's, with image-token expressions this table lacks */
    expect_refusal(&s, 1000, SYN_ERR_UNSUPPORTED, "tokenizer.ggml.pre 'chameleon'");
    s = tiny_default();
    s.pre = NULL;
    expect_refusal(&s, 1000, SYN_ERR_UNSUPPORTED, "tokenizer.ggml.pre");
    s = tiny_default();
    expect_refusal(&s, TINY_COUNT - 1, SYN_ERR_FORMAT, "tokenizer.ggml.tokens");
    s = tiny_default();
    s.eos = TINY_COUNT;
    expect_refusal(&s, 1000, SYN_ERR_FORMAT, "tokenizer.ggml.eos_token_id");
    s = tiny_default();
    s.short_types = true;
    expect_refusal(&s, 1000, SYN_ERR_FORMAT, "tokenizer.ggml.token_type");

    static const struct {
        const char *merge;
        const char *needle;
    } bad[] = {
        {"ab", "tokenizer.ggml.merges[1]"},   /* no space */
        {"a  b", "tokenizer.ggml.merges[1]"}, /* two spaces */
        {" ab", "tokenizer.ggml.merges[1]"},  /* empty left part */
        {"a ", "tokenizer.ggml.merges[1]"},   /* empty right part */
        {"ab zz", "the right part"},          /* not a token */
        {"c a", "the merged token"},          /* "ca" is not a token */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *merges[] = {"a b", bad[i].merge};
        s = tiny_default();
        s.merges = merges;
        s.n_merges = 2;
        expect_refusal(&s, 1000, SYN_ERR_FORMAT, bad[i].needle);
        assert_non_null(strstr(syn_last_error(), "tokenizer.ggml.merges[1]"));
    }
    /* The policy keys: a BOS asked for without an id, a key of the wrong type. */
    s = tiny_default();
    s.add_bos = 1;
    expect_refusal(&s, 1000, SYN_ERR_FORMAT, "tokenizer.ggml.add_bos_token asks for a BOS");
    s = tiny_default();
    s.add_eos = 1;
    expect_refusal(&s, 1000, SYN_ERR_FORMAT, "tokenizer.ggml.add_eos_token asks for an EOS");
    s = tiny_default();
    s.bos = TINY_IM_END;
    s.add_bos = 1;
    s.add_bos_as_u32 = true;
    expect_refusal(&s, 1000, SYN_ERR_FORMAT, "tokenizer.ggml.add_bos_token");
}

/* Load time of the full Qwen2.5 vocabulary (151,936 tokens, 151,387 merges). */
static void test_load_time(void **state) {
    (void)state;
    gguf_file *f;
    assert_int_equal(gguf_open(test_data_path("qwen2-tiny-synth-q8_0.gguf"), &f), SYN_OK);
    double best = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        syn_tokenizer *tok;
        assert_int_equal(tokenizer_load(f, QWEN_N_VOCAB, &tok), SYN_OK);
        double secs = seconds_since(&t0);
        if (secs < best) best = secs;
        tokenizer_free(tok);
    }
    print_message("tokenizer_load: %.1f ms (best of 3)\n", best * 1e3);
    assert_true(best < 2.0); /* the target is < 100 ms optimised; sanitizer builds are slower */
    gguf_close(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vocab_facts),
        cmocka_unit_test(test_reference_cases),
        cmocka_unit_test(test_special_tokens),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_no_normalisation),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_buffer_protocol),
        cmocka_unit_test(test_token_to_bytes),
        cmocka_unit_test(test_stream_split_character),
        cmocka_unit_test(test_stream_invalid_bytes),
        cmocka_unit_test(test_long_runs),
        cmocka_unit_test(test_tiny_bpe),
        cmocka_unit_test(test_tiny_spm),
        cmocka_unit_test(test_pretokenizers),
        cmocka_unit_test(test_special_token_rules),
        cmocka_unit_test(test_fim_roles),
        cmocka_unit_test(test_infill_layout),
        cmocka_unit_test(test_infill_keys),
        cmocka_unit_test(test_prompt_policy),
        cmocka_unit_test(test_load_refusals),
        cmocka_unit_test(test_load_time),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
