/* test_api_arguments.c: every function of synapse.h given a NULL handle or a NULL output pointer
 * returns SYN_ERR_INVALID_ARGUMENT (functions returning a status), a neutral value (getters) or
 * does nothing (void functions): never a crash. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../support/test_util.h"
#include "synapse.h"

typedef struct handles {
    syn_model *model;
    const syn_tokenizer *tok;
    syn_context *ctx;
    syn_sampler *sampler;
    syn_detok_stream *stream;
    syn_engine *engine;
} handles;

static int setup(void **state) {
    handles *h = calloc(1, sizeof *h);
    if (!h || !(h->model = test_load_model("qwen2-tiny-synth-q8_0.gguf"))) return -1;
    h->tok = syn_model_tokenizer(h->model);
    syn_context_params cp = syn_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 1;
    syn_sampler_params sp = syn_sampler_default_params();
    syn_engine_params ep = syn_engine_default_params();
    ep.n_threads = 1;
    ep.kv_budget_mib = 16;
    if (syn_context_new(h->model, &cp, &h->ctx) != SYN_OK ||
        syn_sampler_new(&sp, &h->sampler) != SYN_OK ||
        syn_detok_stream_new(h->tok, &h->stream) != SYN_OK ||
        syn_engine_new(h->model, &ep, &h->engine) != SYN_OK)
        return -1;
    *state = h;
    return 0;
}

static int teardown(void **state) {
    handles *h = *state;
    syn_engine_free(h->engine);
    syn_detok_stream_free(h->stream);
    syn_sampler_free(h->sampler);
    syn_context_free(h->ctx);
    syn_model_free(h->model);
    free(h);
    return 0;
}

#define assert_invalid(call) assert_int_equal((call), SYN_ERR_INVALID_ARGUMENT)

static void test_model_and_tokenizer(void **state) {
    const handles *h = *state;
    syn_model *m = NULL;
    assert_invalid(syn_model_load(NULL, NULL, &m));
    assert_invalid(syn_model_load("x.gguf", NULL, NULL));
    syn_model_free(NULL);
    assert_int_equal(syn_model_huge_page_bytes(NULL), 0);
    syn_model_info info = {.n_vocab = 7};
    syn_model_get_info(NULL, &info);
    assert_int_equal(info.n_vocab, 7);
    syn_model_get_info(h->model, NULL);
    char buf[64];
    size_t len = 0;
    assert_invalid(syn_model_meta_str(NULL, "general.architecture", buf, sizeof buf, &len));
    assert_invalid(syn_model_meta_str(h->model, NULL, buf, sizeof buf, &len));
    assert_invalid(syn_model_meta_str(h->model, "general.architecture", NULL, sizeof buf, &len));
    assert_invalid(syn_model_meta_str(h->model, "general.architecture", buf, sizeof buf, NULL));
    assert_null(syn_model_tokenizer(NULL));

    assert_int_equal(syn_tokenizer_eos(NULL), -1);
    assert_int_equal(syn_tokenizer_bos(NULL), -1);
    assert_false(syn_tokenizer_is_eog(NULL, 0));
    assert_int_equal(syn_tokenizer_n_vocab(NULL), 0);
    int32_t ids[8];
    size_t n;
    assert_invalid(syn_tokenize(NULL, "a", 1, false, true, ids, 8, &n));
    assert_invalid(syn_tokenize(h->tok, NULL, 1, false, true, ids, 8, &n));
    assert_invalid(syn_tokenize(h->tok, "a", 1, false, true, NULL, 8, &n));
    assert_invalid(syn_tokenize(h->tok, "a", 1, false, true, ids, 8, NULL));
    assert_invalid(syn_tokenizer_token_bytes(NULL, 0, buf, sizeof buf, &n));
    assert_invalid(syn_tokenizer_token_bytes(h->tok, 0, NULL, sizeof buf, &n));
    assert_invalid(syn_tokenizer_token_bytes(h->tok, 0, buf, sizeof buf, NULL));
    assert_invalid(syn_detokenize(NULL, ids, 0, buf, sizeof buf, &n));
    assert_invalid(syn_detokenize(h->tok, NULL, 1, buf, sizeof buf, &n));
    assert_invalid(syn_detokenize(h->tok, ids, 0, NULL, sizeof buf, &n));
    assert_invalid(syn_detokenize(h->tok, ids, 0, buf, sizeof buf, NULL));
    syn_detok_stream *s = NULL;
    assert_invalid(syn_detok_stream_new(NULL, &s));
    assert_invalid(syn_detok_stream_new(h->tok, NULL));
    assert_invalid(syn_detok_stream_push(NULL, 0, buf, sizeof buf, &n));
    assert_invalid(syn_detok_stream_push(h->stream, 0, NULL, sizeof buf, &n));
    assert_invalid(syn_detok_stream_push(h->stream, 0, buf, sizeof buf, NULL));
    assert_invalid(syn_detok_stream_flush(NULL, buf, sizeof buf, &n));
    assert_invalid(syn_detok_stream_flush(h->stream, buf, sizeof buf, NULL));
    syn_detok_stream_free(NULL);

    const syn_chat_message no_role = {.role = NULL, .content = "x"},
                           no_content = {.role = "user", .content = NULL};
    assert_invalid(syn_chat_format(NULL, "chatml", &no_content, 0, true, buf, sizeof buf, &n));
    assert_invalid(syn_chat_format(h->model, "chatml", NULL, 1, true, buf, sizeof buf, &n));
    assert_invalid(syn_chat_format(h->model, "chatml", &no_role, 1, true, buf, sizeof buf, &n));
    assert_invalid(syn_chat_format(h->model, "chatml", &no_content, 1, true, buf, sizeof buf, &n));
    assert_invalid(syn_chat_format(h->model, "chatml", NULL, 0, true, NULL, sizeof buf, &n));
    assert_invalid(syn_chat_format(h->model, "chatml", NULL, 0, true, buf, sizeof buf, NULL));
}

static void test_context_and_sampler(void **state) {
    const handles *h = *state;
    syn_isa_tier tier;
    assert_invalid(syn_isa_tier_parse(NULL, &tier));
    assert_invalid(syn_isa_tier_parse("auto", NULL));
    syn_context *ctx = NULL;
    const syn_context_params cp = syn_context_default_params();
    assert_invalid(syn_context_new(NULL, &cp, &ctx));
    assert_invalid(syn_context_new(h->model, NULL, &ctx));
    assert_invalid(syn_context_new(h->model, &cp, NULL));
    syn_context_free(NULL);
    assert_invalid(syn_context_decode(NULL, NULL, 0, NULL));
    assert_invalid(syn_context_decode(h->ctx, NULL, 1, NULL));
    assert_null(syn_context_logits(NULL));
    assert_string_equal(syn_context_isa_name(NULL), "none");
    assert_int_equal(syn_context_n_past(NULL), 0);
    assert_int_equal(syn_context_n_ctx(NULL), 0);
    assert_invalid(syn_context_truncate(NULL, 0));

    syn_sampler *s = NULL;
    const syn_sampler_params sp = syn_sampler_default_params();
    assert_invalid(syn_sampler_new(NULL, &s));
    assert_invalid(syn_sampler_new(&sp, NULL));
    syn_sampler_free(NULL);
    const float logits[2] = {0.0f, 1.0f};
    int32_t token;
    assert_invalid(syn_sampler_sample(NULL, logits, 2, NULL, 0, &token));
    assert_invalid(syn_sampler_sample(h->sampler, NULL, 2, NULL, 0, &token));
    assert_invalid(syn_sampler_sample(h->sampler, logits, 2, NULL, 1, &token));
    assert_invalid(syn_sampler_sample(h->sampler, logits, 2, NULL, 0, NULL));
    assert_invalid(syn_sampler_accept(NULL, 0));
    assert_invalid(syn_sampler_accept(h->sampler, -1));
}

static void test_engine_and_requests(void **state) {
    const handles *h = *state;
    syn_engine *e = NULL;
    const syn_engine_params ep = syn_engine_default_params();
    assert_invalid(syn_engine_new(NULL, &ep, &e));
    assert_invalid(syn_engine_new(h->model, NULL, &e));
    assert_invalid(syn_engine_new(h->model, &ep, NULL));
    syn_engine_free(NULL);
    syn_request *r = NULL;
    syn_request_params rp = syn_request_default_params();
    rp.prompt_text = "hi";
    rp.max_tokens = 1;
    assert_invalid(syn_engine_submit(NULL, &rp, &r));
    assert_invalid(syn_engine_submit(h->engine, NULL, &r));
    assert_invalid(syn_engine_submit(h->engine, &rp, NULL));
    assert_invalid(syn_request_cancel(NULL));
    syn_request_result res;
    assert_invalid(syn_request_wait(NULL, &res));
    assert_false(syn_request_is_done(NULL));
    syn_request_free(NULL);
    syn_engine_stats stats;
    stats.n_steps = 99;
    syn_engine_get_stats(NULL, &stats);
    assert_int_equal(stats.n_steps, 0);
    syn_engine_get_stats(h->engine, NULL);
    syn_engine_get_stats(NULL, NULL);
    assert_invalid(syn_engine_run(NULL, &rp, 1, &r, NULL));
    assert_invalid(syn_engine_run(h->engine, NULL, 1, &r, NULL));
    assert_invalid(syn_engine_run(h->engine, &rp, 1, NULL, NULL));
    rp.sampling.frequency_penalty = NAN; /* refused at submission, by the request's sampler */
    assert_invalid(syn_engine_submit(h->engine, &rp, &r));
    assert_non_null(strstr(syn_last_error(), "frequency penalty"));
    rp.sampling.frequency_penalty = 0.0f;

    assert_int_equal(syn_engine_submit(h->engine, &rp, &r), SYN_OK);
    assert_invalid(syn_request_wait(r, NULL));
    assert_int_equal(syn_request_wait(r, &res), SYN_OK);
    syn_request_free(r);

    /* embeddings */
    const syn_embed_params pp = syn_embed_default_params();
    const syn_embed_input in = {.text = "hi"};
    float v[4096];
    syn_pooling pooling;
    assert_invalid(syn_embed(NULL, &pp, &in, 1, v, NULL));
    assert_invalid(syn_embed(h->engine, NULL, &in, 1, v, NULL));
    assert_invalid(syn_embed(h->engine, &pp, NULL, 1, v, NULL));
    assert_invalid(syn_embed(h->engine, &pp, &in, 1, NULL, NULL));
    assert_invalid(syn_pooling_resolve(NULL, SYN_POOLING_MODEL, &pooling));
    assert_invalid(syn_pooling_resolve(h->model, SYN_POOLING_MODEL, NULL));
    assert_string_equal(syn_pooling_name((syn_pooling)99), "?");
    syn_embed_normalize(NULL, 3);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_and_tokenizer),
        cmocka_unit_test(test_context_and_sampler),
        cmocka_unit_test(test_engine_and_requests),
    };
    return cmocka_run_group_tests_name("api_arguments", tests, setup, teardown);
}
