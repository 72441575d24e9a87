/* test_tool_grammar.c: forced tool-call grammars (src/chat/tool_grammar.c). Random sentences of
 * each syntax's grammar are read back by syn_chat_output_parse as calls of the offered tools whose
 * arguments fit the schemas; a constrained engine request writes such calls; bad tools are
 * refused by name. */
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
#include "chat/chat_output.h"
#include "chat/tool_grammar.h"
#include "grammar/grammar.h"
#include "synapse.h"

static const char *const TOOLS =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"d\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"location\": {\"type\": "
    "\"string\"}, \"unit\": {\"enum\": [\"c\", \"f\"]}}, \"required\": [\"location\"]}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"add\", \"parameters\": {\"type\": "
    "\"object\", \"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {\"type\": \"integer\","
    " \"minimum\": 0, \"maximum\": 99}}, \"required\": [\"a\", \"b\"],"
    " \"additionalProperties\": false}}}]";

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A random sentence of g into out (NUL-terminated); false when none ended within cap bytes. After
 * 120 bytes a closing byte is drawn where one fits, so that strings, objects and values end. */
static bool random_sentence(const syn_grammar *g, uint64_t *rng, char *out, size_t cap) {
    syn_grammar_matcher *m;
    assert_int_equal(syn_grammar_matcher_new(g, &m), SYN_OK);
    static const char prefer[] = "\"}]<\n/>";
    size_t n = 0;
    bool ended = false;
    while (n + 1 < cap) {
        if (syn_grammar_matcher_can_end(m) && (n > 120 || rng_next(rng) % 8 == 0)) {
            ended = true;
            break;
        }
        uint8_t ok_bytes[256];
        size_t k = 0;
        for (int b = 1; b < 256; b++) {
            const uint8_t byte = (uint8_t)b;
            bool ok;
            assert_int_equal(syn_grammar_matcher_accepts(m, &byte, 1, &ok), SYN_OK);
            if (ok) ok_bytes[k++] = byte;
        }
        if (!k) {
            ended = syn_grammar_matcher_can_end(m);
            break;
        }
        uint8_t pick = ok_bytes[rng_next(rng) % k];
        uint8_t closing[sizeof prefer];
        size_t n_closing = 0;
        for (const char *p = prefer; n > 120 && *p; p++)
            if (memchr(ok_bytes, *p, k)) closing[n_closing++] = (uint8_t)*p;
        if (n_closing) pick = closing[rng_next(rng) % n_closing];
        bool ok;
        assert_int_equal(syn_grammar_matcher_feed(m, &pick, 1, &ok), SYN_OK);
        assert_true(ok);
        out[n++] = (char)pick;
    }
    out[n] = 0;
    syn_grammar_matcher_free(m);
    return ended;
}

/* The calls text holds, checked against the tools' schemas (names, required keys, types). */
static size_t check_calls(syn_tool_syntax syntax, const json_t *tools, const char *only,
                          const char *text) {
    syn_chat_output out;
    assert_int_equal(
        syn_chat_output_parse(text, strlen(text), syntax, false, false, tools, 7, &out), SYN_OK);
    if (!out.tool_calls) fail_msg("%s: no call read from '%s'", syn_tool_syntax_name(syntax), text);
    if (out.content[0]) fail_msg("content '%s' beside the calls in '%s'", out.content, text);
    size_t i;
    json_t *call;
    json_array_foreach(out.tool_calls, i, call) {
        const char *name =
            json_string_value(json_object_get(json_object_get(call, "function"), "name"));
        json_t *args = json_loads(
            json_string_value(json_object_get(json_object_get(call, "function"), "arguments")), 0,
            NULL);
        assert_non_null(name);
        if (only) assert_string_equal(name, only);
        assert_true(json_is_object(args));
        if (!strcmp(name, "add")) {
            json_t *b = json_object_get(args, "b");
            assert_true(json_is_integer(json_object_get(args, "a")));
            assert_true(json_is_integer(b) && json_integer_value(b) >= 0 &&
                        json_integer_value(b) <= 99);
            assert_int_equal(json_object_size(args), 2);
        } else {
            assert_string_equal(name, "get_weather");
            assert_true(json_is_string(json_object_get(args, "location")));
            json_t *unit = json_object_get(args, "unit");
            assert_true(!unit || !strcmp(json_string_value(unit), "c") ||
                        !strcmp(json_string_value(unit), "f"));
        }
        json_decref(args);
    }
    const size_t n = json_array_size(out.tool_calls);
    syn_chat_output_free(&out);
    return n;
}

static void sentences_read_back(syn_tool_syntax syntax, const char *tmpl, const char *only,
                                bool parallel, bool lazy) {
    json_t *tools = json_loads(TOOLS, 0, NULL);
    assert_non_null(tools);
    char *text = NULL;
    if (syn_tool_call_grammar(syntax, tmpl, tools, only, parallel, lazy, &text) != SYN_OK)
        fail_msg("%s: %s", syn_tool_syntax_name(syntax), syn_last_error());
    syn_grammar *g;
    if (syn_grammar_parse_checked(text, &g) != SYN_OK) fail_msg("%s\n%s", syn_last_error(), text);
    uint64_t rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)syntax;
    int ended = 0, multi = 0;
    for (int i = 0; i < 60; i++) {
        char s[4096];
        /* a lazy harmony call: the model wrote the channel before the trigger */
        const char *before = lazy && syntax == SYN_TOOLS_HARMONY ? "<|channel|>commentary " : "";
        const size_t skip = strlen(before);
        memcpy(s, before, skip);
        if (!random_sentence(g, &rng, s + skip, sizeof s - skip)) continue;
        const char *trigger = syn_tool_call_trigger(syntax);
        if (lazy && strncmp(s + skip, trigger, strlen(trigger)) != 0)
            fail_msg("'%s' does not begin with the trigger '%s'", s + skip, trigger);
        ended++;
        multi += check_calls(syntax, tools, only, s) > 1;
    }
    if (ended < 40)
        fail_msg("%s: only %d of 60 random sentences ended", syn_tool_syntax_name(syntax), ended);
    if (parallel && syntax != SYN_TOOLS_LLAMA3 && syntax != SYN_TOOLS_HARMONY)
        assert_true(multi > 0);
    if (!parallel) assert_int_equal(multi, 0);
    syn_grammar_free(g);
    free(text);
    json_decref(tools);
}

static void test_hermes(void **state) {
    (void)state;
    sentences_read_back(SYN_TOOLS_HERMES, NULL, NULL, true, false);
    sentences_read_back(SYN_TOOLS_HERMES, NULL, "add", false, false);
}

static void test_qwen3_coder(void **state) {
    (void)state;
    sentences_read_back(SYN_TOOLS_QWEN3_CODER, NULL, NULL, true, false);
    sentences_read_back(SYN_TOOLS_QWEN3_CODER, NULL, "get_weather", false, false);
}

static void test_llama3(void **state) {
    (void)state;
    sentences_read_back(SYN_TOOLS_LLAMA3, NULL, NULL, true, false);
}

static void test_mistral(void **state) {
    (void)state;
    sentences_read_back(SYN_TOOLS_MISTRAL, "[TOOL_CALLS][", NULL, true, false);
    sentences_read_back(SYN_TOOLS_MISTRAL, "[TOOL_CALLS]' + name + '[ARGS]", NULL, true, false);
    sentences_read_back(SYN_TOOLS_MISTRAL, "[TOOL_CALLS]' + name + '[ARGS]", "add", false, false);
}

static void test_harmony(void **state) {
    (void)state;
    sentences_read_back(SYN_TOOLS_HARMONY, NULL, NULL, true, false);
    sentences_read_back(SYN_TOOLS_HARMONY, NULL, NULL, true, true);
    sentences_read_back(SYN_TOOLS_HERMES, NULL, NULL, true, true);
}

static void expect_error(const char *tools_json, const char *only, syn_status want,
                         const char *needle) {
    json_t *tools = json_loads(tools_json, 0, NULL);
    char *text = NULL;
    assert_int_equal(
        syn_tool_call_grammar(SYN_TOOLS_QWEN3_CODER, NULL, tools, only, true, false, &text), want);
    assert_null(text);
    if (!strstr(syn_last_error(), needle)) fail_msg("'%s' lacks '%s'", syn_last_error(), needle);
    json_decref(tools);
}

static void test_errors(void **state) {
    (void)state;
    expect_error(TOOLS, "nope", SYN_ERR_INVALID_ARGUMENT, "no tool named 'nope'");
    expect_error("[]", NULL, SYN_ERR_INVALID_ARGUMENT, "no tools");
    expect_error("[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]", NULL,
                 SYN_ERR_INVALID_ARGUMENT, "'parameters'");
    expect_error("[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": "
                 "{\"properties\": {\"p\": {\"type\": \"string\", \"pattern\": \"x\"}}}}}]",
                 NULL, SYN_ERR_UNSUPPORTED, "'pattern'");
    expect_error("[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": "
                 "{\"properties\": {\"p\": {\"type\": \"integer\", \"multipleOf\": 2}}}}}]",
                 NULL, SYN_ERR_UNSUPPORTED, "'multipleOf'");
    char *text = NULL;
    json_t *tools = json_loads(TOOLS, 0, NULL);
    assert_int_equal(syn_tool_call_grammar(SYN_TOOLS_NONE, NULL, tools, NULL, true, false, &text),
                     SYN_ERR_INVALID_ARGUMENT);
    json_decref(tools);
}

/* A sampled engine request under the Hermes call grammar writes calls that parse, 3 seeds. */
static void test_engine_forced_call(void **state) {
    (void)state;
    syn_model *model;
    assert_int_equal(syn_model_load(test_data_path("qwen2-tiny-synth-q8_0.gguf"), NULL, &model),
                     SYN_OK);
    syn_engine_params ep = syn_engine_default_params();
    ep.n_parallel = 2;
    ep.n_threads = 2;
    syn_engine *e;
    assert_int_equal(syn_engine_new(model, &ep, &e), SYN_OK);
    json_t *tools = json_loads(TOOLS, 0, NULL);
    char *grammar = NULL;
    assert_int_equal(
        syn_tool_call_grammar(SYN_TOOLS_HERMES, NULL, tools, "add", false, false, &grammar),
        SYN_OK);
    syn_request_params p = syn_request_default_params();
    p.prompt_text = "Add two numbers:";
    p.max_tokens = 120;
    p.sampling.temperature = 0.8f;
    p.grammar = grammar;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        p.sampling.seed = seed;
        syn_request *r;
        assert_int_equal(syn_engine_submit(e, &p, &r), SYN_OK);
        syn_request_result res;
        assert_int_equal(syn_request_wait(r, &res), SYN_OK);
        assert_int_equal(res.status, SYN_OK);
        char text[4096];
        size_t len;
        assert_int_equal(syn_detokenize(syn_model_tokenizer(model), res.tokens, res.n_tokens, text,
                                        sizeof text - 1, &len),
                         SYN_OK);
        text[len] = 0;
        if (res.finish == SYN_FINISH_EOG)
            assert_int_equal(check_calls(SYN_TOOLS_HERMES, tools, "add", text), 1);
        else
            assert_int_equal(strncmp(text, "<tool_call>\n{\"name\": \"add\"", 27), 0);
        syn_request_free(r);
    }
    free(grammar);
    json_decref(tools);
    syn_engine_free(e);
    syn_model_free(model);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hermes),
        cmocka_unit_test(test_qwen3_coder),
        cmocka_unit_test(test_llama3),
        cmocka_unit_test(test_mistral),
        cmocka_unit_test(test_harmony),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_engine_forced_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
