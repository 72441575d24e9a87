/* test_chat_output.c: a model's text read back into reasoning, content and tool calls, in each
 * call syntax, with the syntax recognised from the real templates of tests/data/templates/.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../support/test_util.h"
#include "chat/chat_output.h"

/* Parses text and checks content, reasoning (NULL: none) and the calls' names and arguments
 * (n_calls pairs; arguments compared as JSON values). */
static void expect_output(const char *text, syn_tool_syntax syntax, bool thinks,
                          const json_t *tools, const char *content, const char *reasoning,
                          size_t n_calls, const char *const *names, const char *const *args) {
    syn_chat_output out;
    assert_int_equal(
        syn_chat_output_parse(text, strlen(text), syntax, thinks, false, tools, 7, &out), SYN_OK);
    assert_string_equal(out.content, content);
    if (reasoning)
        assert_string_equal(out.reasoning, reasoning);
    else
        assert_null(out.reasoning);
    if (n_calls == 0) {
        assert_null(out.tool_calls);
    } else {
        assert_int_equal(json_array_size(out.tool_calls), n_calls);
        for (size_t i = 0; i < n_calls; i++) {
            const json_t *call = json_array_get(out.tool_calls, i);
            assert_string_equal(json_string_value(json_object_get(call, "type")), "function");
            const char *id = json_string_value(json_object_get(call, "id"));
            assert_non_null(id);
            const json_t *fn = json_object_get(call, "function");
            assert_string_equal(json_string_value(json_object_get(fn, "name")), names[i]);
            json_t *got = json_loads(json_string_value(json_object_get(fn, "arguments")), 0, NULL);
            json_t *want = json_loads(args[i], 0, NULL);
            assert_non_null(got);
            assert_non_null(want);
            assert_true(json_equal(got, want));
            json_decref(got);
            json_decref(want);
        }
    }
    syn_chat_output_free(&out);
}

static char *read_template(const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "templates/%s", name);
    FILE *f = fopen(test_data_path(rel), "rb");
    assert_non_null(f);
    static char buf[1 << 17];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static void test_detect_from_real_templates(void **state) {
    (void)state;
    static const struct {
        const char *file;
        syn_tool_syntax syntax;
        bool thinks;
    } cases[] = {
        {"Qwen-Qwen2.5-7B-Instruct.jinja", SYN_TOOLS_HERMES, false},
        {"Qwen-Qwen3-0.6B.jinja", SYN_TOOLS_HERMES, true},
        {"Qwen-QwQ-32B.jinja", SYN_TOOLS_HERMES, true},
        {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", SYN_TOOLS_HERMES, false},
        {"Qwen3-Coder.jinja", SYN_TOOLS_QWEN3_CODER, false},
        {"Qwen3.5-4B.jinja", SYN_TOOLS_QWEN3_CODER, true},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", SYN_TOOLS_LLAMA3, false},
        {"meta-llama-Llama-3.2-3B-Instruct.jinja", SYN_TOOLS_LLAMA3, false},
        {"meta-llama-Llama-3.3-70B-Instruct.jinja", SYN_TOOLS_LLAMA3, false},
        {"mistralai-Mistral-Nemo-Instruct-2407.jinja", SYN_TOOLS_MISTRAL, false},
        {"Mistral-Small-3.2-24B-Instruct-2506.jinja", SYN_TOOLS_MISTRAL, false},
        {"unsloth-mistral-Devstral-Small-2507.jinja", SYN_TOOLS_MISTRAL, false},
        {"openai-gpt-oss-120b.jinja", SYN_TOOLS_HARMONY, false},
        {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", SYN_TOOLS_NONE, true},
        {"google-gemma-2-2b-it.jinja", SYN_TOOLS_NONE, false},
        {"microsoft-Phi-3.5-mini-instruct.jinja", SYN_TOOLS_NONE, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *src = read_template(cases[i].file);
        if (syn_tool_syntax_detect(src) != cases[i].syntax ||
            syn_template_thinks(src) != cases[i].thinks)
            fail_msg("%s: %s thinks=%d", cases[i].file,
                     syn_tool_syntax_name(syn_tool_syntax_detect(src)), syn_template_thinks(src));
    }
    assert_int_equal(syn_tool_syntax_detect(NULL), SYN_TOOLS_NONE);
    assert_string_equal(syn_tool_syntax_name(SYN_TOOLS_COUNT), "?");
}

static void test_hermes(void **state) {
    (void)state;
    const char *names[] = {"get_weather", "get_time"};
    const char *args[] = {"{\"city\": \"Paris\"}", "{\"tz\": \"UTC\"}"};
    expect_output("Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                  "{\"city\": \"Paris\"}}\n</tool_call>",
                  SYN_TOOLS_HERMES, false, NULL, "Let me check.", NULL, 1, names, args);
    expect_output("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                  "\"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
                  "\"arguments\": \"{\\\"tz\\\": \\\"UTC\\\"}\"}\n</tool_call>\n",
                  SYN_TOOLS_HERMES, false, NULL, "", NULL, 2, names, args);
    /* Qwen3 thinks first. */
    expect_output("<think>\nThe user wants weather.\n</think>\n\n<tool_call>\n{\"name\": "
                  "\"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
                  SYN_TOOLS_HERMES, true, NULL, "", "The user wants weather.", 1, names, args);
    /* Malformed calls come back as the text itself. */
    const char *broken[] = {
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \n</tool_call>",
        "<tool_call>\n{\"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>",
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}",
        "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call> and more text",
    };
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++)
        expect_output(broken[i], SYN_TOOLS_HERMES, false, NULL, broken[i], NULL, 0, NULL, NULL);
    expect_output("Just text.", SYN_TOOLS_HERMES, false, NULL, "Just text.", NULL, 0, NULL, NULL);
}

/* One tool, search(q: string, n: integer): the parameter types Qwen3-Coder's values are read with.
 */
static json_t *search_tool(void) {
    json_t *tools = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"search\", "
                               "\"parameters\": {\"type\": \"object\", \"properties\": {\"q\": "
                               "{\"type\": \"string\"}, \"n\": {\"type\": \"integer\"}}}}}]",
                               0, NULL);
    assert_non_null(tools);
    return tools;
}

static void test_qwen3_coder(void **state) {
    (void)state;
    json_t *tools = search_tool();
    const char *names[] = {"search"};
    const char *typed[] = {"{\"q\": \"42\", \"n\": 3}"};
    const char *text = "I will search.\n<tool_call>\n<function=search>\n<parameter=q>\n42\n"
                       "</parameter>\n<parameter=n>\n3\n</parameter>\n</function>\n</tool_call>";
    expect_output(text, SYN_TOOLS_QWEN3_CODER, false, tools, "I will search.", NULL, 1, names,
                  typed);
    /* Without the schema a value that spells JSON is read as JSON. */
    const char *untyped[] = {"{\"q\": 42, \"n\": 3}"};
    expect_output(text, SYN_TOOLS_QWEN3_CODER, false, NULL, "I will search.", NULL, 1, names,
                  untyped);
    const char *broken = "<tool_call>\n<function=search>\n<parameter=q>\nx\n</parameter>\n";
    expect_output(broken, SYN_TOOLS_QWEN3_CODER, false, tools, broken, NULL, 0, NULL, NULL);
    json_decref(tools);
}

static void test_llama3(void **state) {
    (void)state;
    const char *names[] = {"get_weather", "get_time"};
    const char *args[] = {"{\"city\": \"Paris\"}", "{}"};
    expect_output("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
                  SYN_TOOLS_LLAMA3, false, NULL, "", NULL, 1, names, args);
    expect_output("<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": "
                  "\"Paris\"}}; {\"name\": \"get_time\", \"parameters\": {}}",
                  SYN_TOOLS_LLAMA3, false, NULL, "", NULL, 2, names, args);
    /* JSON that is not a call is an answer. */
    expect_output("{\"answer\": 4}", SYN_TOOLS_LLAMA3, false, NULL, "{\"answer\": 4}", NULL, 0,
                  NULL, NULL);
    expect_output("The weather is fine.", SYN_TOOLS_LLAMA3, false, NULL, "The weather is fine.",
                  NULL, 0, NULL, NULL);
}

static void test_mistral(void **state) {
    (void)state;
    const char *names[] = {"get_weather", "get_time"};
    const char *args[] = {"{\"city\": \"Paris\"}", "{}"};
    syn_chat_output out;
    const char *nemo = "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                       "\"Paris\"}, \"id\": \"abcDEF123\"}, {\"name\": \"get_time\", "
                       "\"arguments\": {}}]";
    expect_output(nemo, SYN_TOOLS_MISTRAL, false, NULL, "", NULL, 2, names, args);
    assert_int_equal(
        syn_chat_output_parse(nemo, strlen(nemo), SYN_TOOLS_MISTRAL, false, false, NULL, 1, &out),
        SYN_OK);
    /* The id the model wrote is kept; the one it did not is 9 alphanumerics, as the templates
     * that read it back demand. */
    assert_string_equal(json_string_value(json_object_get(json_array_get(out.tool_calls, 0), "id")),
                        "abcDEF123");
    const char *id = json_string_value(json_object_get(json_array_get(out.tool_calls, 1), "id"));
    assert_int_equal(strlen(id), 9);
    for (const char *c = id; *c; c++)
        assert_true((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                    (*c >= '0' && *c <= '9'));
    syn_chat_output_free(&out);
    expect_output("Sure.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time"
                  "[ARGS]{}",
                  SYN_TOOLS_MISTRAL, false, NULL, "Sure.", NULL, 2, names, args);
    const char *broken = "[TOOL_CALLS]get_weather{\"city\": \"Paris\"}";
    expect_output(broken, SYN_TOOLS_MISTRAL, false, NULL, broken, NULL, 0, NULL, NULL);
}

static void test_harmony(void **state) {
    (void)state;
    const char *names[] = {"get_weather"};
    const char *args[] = {"{\"city\": \"Paris\"}"};
    expect_output("<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant"
                  "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
                  "{\"city\": \"Paris\"}<|call|>",
                  SYN_TOOLS_HARMONY, false, NULL, "", "Need weather.", 1, names, args);
    expect_output("<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final"
                  "<|message|>Four.<|return|>",
                  SYN_TOOLS_HARMONY, false, NULL, "Four.", "Easy.", 0, NULL, NULL);
    expect_output("Plain words.", SYN_TOOLS_HARMONY, false, NULL, "Plain words.", NULL, 0, NULL,
                  NULL);
    const char *broken = "<|channel|>commentary to=functions.get_weather<|message|>{\"city\":";
    expect_output(broken, SYN_TOOLS_HARMONY, false, NULL, broken, NULL, 0, NULL, NULL);
}

static void test_reasoning(void **state) {
    (void)state;
    expect_output("<think>\nHmm.\n</think>\n\nParis.", SYN_TOOLS_NONE, true, NULL, "Paris.", "Hmm.",
                  0, NULL, NULL);
    /* The template opened <think> in the prompt: the text starts inside it. */
    expect_output("Hmm.\n</think>\n\nParis.", SYN_TOOLS_NONE, true, NULL, "Paris.", "Hmm.", 0, NULL,
                  NULL);
    /* Cut off while thinking: all reasoning, no answer. */
    expect_output("<think>\nStill going", SYN_TOOLS_NONE, true, NULL, "", "Still going", 0, NULL,
                  NULL);
    expect_output("No thoughts.", SYN_TOOLS_NONE, true, NULL, "No thoughts.", NULL, 0, NULL, NULL);
    /* A model that does not think keeps the tags as text. */
    expect_output("<think>x</think>y", SYN_TOOLS_NONE, false, NULL, "<think>x</think>y", NULL, 0,
                  NULL, NULL);
    /* The prompt opened <think> and the reply was cut before </think>: all of it is reasoning,
     * where without in_think the same text is the answer. */
    syn_chat_output out;
    assert_int_equal(
        syn_chat_output_parse("Still going", 11, SYN_TOOLS_HERMES, true, true, NULL, 7, &out),
        SYN_OK);
    assert_string_equal(out.reasoning, "Still going");
    assert_string_equal(out.content, "");
    assert_null(out.tool_calls);
    syn_chat_output_free(&out);
}

/* ---- Streaming ---- */

/* What a stream reader passed on, joined: content, reasoning, the calls as an OpenAI array, and
 * the order of the event kinds ('c', 'r', 't' for a call; a run of text of one kind is one letter).
 * It checks the events' promises on the way: a call's arguments come between its begin and its
 * end, and its end repeats them whole. */
typedef struct collected {
    char content[4096], reasoning[4096], order[64];
    size_t n_content, n_reasoning, n_order, n_events, n_arg_pieces;
    bool call_open;
    json_t *calls;
} collected;

static void collect(const syn_chat_event *ev, void *user) {
    collected *c = user;
    c->n_events++;
    json_t *last = json_array_get(c->calls, json_array_size(c->calls) - 1);
    json_t *fn = json_object_get(last, "function");
    switch (ev->kind) {
    case SYN_CHAT_CALL_BEGIN: /* a call opens only when none is open, with the next index */
        assert_false(c->call_open);
        assert_int_equal(ev->index, json_array_size(c->calls));
        json_array_append_new(c->calls,
                              json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", ev->id, "type",
                                        "function", "function", "name", ev->name, "arguments", ""));
        c->call_open = true;
        c->order[c->n_order++] = 't';
        return;
    case SYN_CHAT_CALL_ARGUMENTS: {
        assert_true(c->call_open && ev->len > 0);
        assert_int_equal(ev->index, json_array_size(c->calls) - 1);
        char joined[4096];
        const char *had = json_string_value(json_object_get(fn, "arguments"));
        assert_true(strlen(had) + ev->len < sizeof joined);
        snprintf(joined, sizeof joined, "%s%.*s", had, (int)ev->len, ev->text);
        json_object_set_new(fn, "arguments", json_string(joined));
        c->n_arg_pieces++;
        return;
    }
    case SYN_CHAT_CALL_END: /* the whole arguments: what the pieces said */
        assert_true(c->call_open);
        assert_int_equal(ev->index, json_array_size(c->calls) - 1);
        assert_string_equal(ev->id, json_string_value(json_object_get(last, "id")));
        assert_string_equal(ev->name, json_string_value(json_object_get(fn, "name")));
        assert_string_equal(ev->arguments, json_string_value(json_object_get(fn, "arguments")));
        c->call_open = false;
        return;
    default: break;
    }
    assert_false(c->call_open);
    assert_true(ev->len > 0); /* no empty pieces */
    const char kind = ev->kind == SYN_CHAT_CONTENT ? 'c' : 'r';
    if (c->n_order == 0 || c->order[c->n_order - 1] != kind) c->order[c->n_order++] = kind;
    char *dst = ev->kind == SYN_CHAT_CONTENT ? c->content : c->reasoning;
    size_t *n = ev->kind == SYN_CHAT_CONTENT ? &c->n_content : &c->n_reasoning;
    assert_true(*n + ev->len < sizeof c->content);
    memcpy(dst + *n, ev->text, ev->len);
    *n += ev->len;
    dst[*n] = '\0';
}

/* Streams text in pieces of piece bytes (the last may be shorter) into *c. */
static void stream_pieces(const char *text, size_t piece, syn_tool_syntax syntax, bool thinks,
                          bool think_open, const json_t *tools, collected *c) {
    memset(c, 0, sizeof *c);
    c->calls = json_array();
    syn_chat_stream *st;
    assert_int_equal(
        syn_chat_stream_create(syntax, thinks, think_open, false, tools, 7, collect, c, &st),
        SYN_OK);
    const size_t len = strlen(text);
    for (size_t at = 0; at < len; at += piece)
        assert_int_equal(syn_chat_stream_feed(st, text + at, len - at < piece ? len - at : piece),
                         SYN_OK);
    assert_int_equal(syn_chat_stream_finish(st), SYN_OK);
    assert_int_equal(syn_chat_stream_n_calls(st), json_array_size(c->calls));
    syn_chat_stream_free(st);
}

/* Streamed in every piece size from 1 byte to the whole text, the text gives what the whole parse
 * gives: the same content, reasoning, call names, arguments and ids. */
static void expect_stream_as_whole(const char *text, syn_tool_syntax syntax, bool thinks,
                                   const json_t *tools) {
    syn_chat_output whole;
    assert_int_equal(
        syn_chat_output_parse(text, strlen(text), syntax, thinks, false, tools, 7, &whole), SYN_OK);
    for (size_t piece = 1; piece <= strlen(text); piece++) {
        collected c;
        stream_pieces(text, piece, syntax, thinks, false, tools, &c);
        assert_string_equal(c.content, whole.content);
        assert_string_equal(c.reasoning, whole.reasoning ? whole.reasoning : "");
        if (whole.tool_calls)
            assert_true(json_equal(c.calls, whole.tool_calls));
        else
            assert_int_equal(json_array_size(c.calls), 0);
        json_decref(c.calls);
    }
    syn_chat_output_free(&whole);
}

static void test_stream_matches_whole_parse(void **state) {
    (void)state;
    json_t *tools = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"search\", "
                               "\"parameters\": {\"type\": \"object\", \"properties\": {\"q\": "
                               "{\"type\": \"string\"}}}}}]",
                               0, NULL);
    static const struct {
        syn_tool_syntax syntax;
        bool thinks;
        const char *text;
    } cases[] = {
        {SYN_TOOLS_HERMES, false, "Just text, with a < sign and <tool_ inside.\n"},
        {SYN_TOOLS_HERMES, false,
         "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
         "\"Paris\"}}\n</tool_call>"},
        {SYN_TOOLS_HERMES, false,
         "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": "
         "\"b\", \"arguments\": \"{\\\"x\\\": \\\"</tool_call>\\\"}\"}\n</tool_call>\n"},
        {SYN_TOOLS_HERMES, false, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}"},
        {SYN_TOOLS_HERMES, true,
         "<think>\nThe user wants weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", "
         "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},
        {SYN_TOOLS_NONE, true, "<think>\nHmm.\n</think>\n\nParis."},
        {SYN_TOOLS_NONE, true, "<think>\nStill going"},
        {SYN_TOOLS_NONE, true, "  No thoughts.  "},
        {SYN_TOOLS_NONE, false, "<think>x</think>y"},
        {SYN_TOOLS_QWEN3_CODER, false,
         "I will search.\n<tool_call>\n<function=search>\n<parameter=q>\n42\n</parameter>\n"
         "</function>\n</tool_call>"},
        {SYN_TOOLS_LLAMA3, false,
         "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}; "
         "{\"name\": \"get_time\", \"parameters\": {}}"},
        {SYN_TOOLS_LLAMA3, false, "{\"answer\": 4}"},
        {SYN_TOOLS_LLAMA3, false, "The weather is fine."},
        {SYN_TOOLS_MISTRAL, false,
         "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"]\"}, \"id\": "
         "\"abcDEF123\"}, {\"name\": \"get_time\", \"arguments\": {}}]"},
        {SYN_TOOLS_MISTRAL, false,
         "Sure.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[ARGS]{}"},
        {SYN_TOOLS_HARMONY, false,
         "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>"
         "commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": "
         "\"Paris\"}<|call|>"},
        {SYN_TOOLS_HARMONY, false,
         "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final"
         "<|message|>Four.<|return|>"},
        {SYN_TOOLS_HARMONY, false, "Plain words."},
        {SYN_TOOLS_HARMONY, false,
         "<|channel|>commentary to=functions.get_weather<|message|>{\"city\":"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_stream_as_whole(cases[i].text, cases[i].syntax, cases[i].thinks, tools);
    json_decref(tools);
}

static syn_status feed(syn_chat_stream *st, const char *text) {
    return syn_chat_stream_feed(st, text, strlen(text));
}

/* Text is passed on as soon as it cannot be a marker; a marker's first bytes wait. */
static void test_stream_holds_back_only_markers(void **state) {
    (void)state;
    collected c = {.calls = json_array()};
    syn_chat_stream *st;
    assert_int_equal(
        syn_chat_stream_create(SYN_TOOLS_HERMES, true, false, false, NULL, 1, collect, &c, &st),
        SYN_OK);
    assert_int_equal(feed(st, "<thi"), SYN_OK);
    assert_int_equal(c.n_events, 0);
    assert_int_equal(feed(st, "nk>\nI should call. </th"), SYN_OK);
    assert_string_equal(c.reasoning, "I should call."); /* the space and "</th" wait */
    assert_int_equal(feed(st, "ink>\n\nOK then <tool_"), SYN_OK);
    assert_string_equal(c.reasoning, "I should call.");
    assert_string_equal(c.content, "OK then");
    assert_int_equal(feed(st, "call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}"), SYN_OK);
    assert_int_equal(json_array_size(c.calls), 0); /* not closed yet */
    assert_int_equal(feed(st, "</tool_call>"), SYN_OK);
    assert_int_equal(json_array_size(c.calls), 1);
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_array_get(c.calls, 0), "function"), "arguments")),
                        "{\"a\":1}");
    /* A call that does not parse is content, as written, and the next one is still read. */
    const char *bad = "<tool_call>{\"name\": \"f\"}</tool_call>";
    assert_int_equal(feed(st, bad), SYN_OK);
    assert_string_equal(c.content, "OK then<tool_call>{\"name\": \"f\"}</tool_call>");
    const char *good = "<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>";
    assert_int_equal(feed(st, good), SYN_OK);
    assert_int_equal(syn_chat_stream_finish(st), SYN_OK);
    assert_int_equal(syn_chat_stream_n_calls(st), 2);
    assert_string_equal(c.order, "rctct");
    const char *id0 = json_string_value(json_object_get(json_array_get(c.calls, 0), "id"));
    const char *id1 = json_string_value(json_object_get(json_array_get(c.calls, 1), "id"));
    assert_true(strncmp(id0, "call_", 5) == 0 && strlen(id0) == 14);
    assert_string_not_equal(id0, id1);
    syn_chat_stream_free(st);
    json_decref(c.calls);
}

/* An opener that no call follows is text at once: the stream does not stall until the end. */
static void test_stream_false_openers(void **state) {
    (void)state;
    static const struct {
        syn_tool_syntax syntax;
        const char *head, *tail, *sent; /* after head, sent is out; tail completes a real call */
    } cases[] = {
        {SYN_TOOLS_HERMES, "a <tool_call> is a tag, ",
         "<tool_call>{\"name\": \"f\", "
         "\"arguments\": {}}</tool_call>",
         "a <tool_call> is a tag,"},
        {SYN_TOOLS_QWEN3_CODER, "<tool_call>\nplain words ",
         "<tool_call>\n<function=f>\n</function>\n</tool_call>", "<tool_call>\nplain words"},
        {SYN_TOOLS_MISTRAL, "[TOOL_CALLS]f[ARGS]nope ", "[TOOL_CALLS]f[ARGS]{}",
         "[TOOL_CALLS]f[ARGS]nope"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        collected c = {.calls = json_array()};
        syn_chat_stream *st;
        assert_int_equal(
            syn_chat_stream_create(cases[i].syntax, false, false, false, NULL, 1, collect, &c, &st),
            SYN_OK);
        assert_int_equal(feed(st, cases[i].head), SYN_OK);
        assert_string_equal(c.content, cases[i].sent);
        assert_int_equal(feed(st, cases[i].tail), SYN_OK);
        assert_int_equal(syn_chat_stream_finish(st), SYN_OK);
        assert_int_equal(json_array_size(c.calls), 1);
        assert_string_equal(c.order, "ct");
        syn_chat_stream_free(st);
        json_decref(c.calls);
    }
}

/* stream_arguments: a Hermes call is announced once its name is written and its arguments pass
 * on as they come, as the model spelled them. */
static void test_stream_arguments(void **state) {
    (void)state;
    collected c = {.calls = json_array()};
    syn_chat_stream *st;
    assert_int_equal(
        syn_chat_stream_create(SYN_TOOLS_HERMES, false, false, true, NULL, 5, collect, &c, &st),
        SYN_OK);
    assert_int_equal(feed(st, "Checking.\n<tool_call>\n{\"name\": \"get_wea"), SYN_OK);
    assert_int_equal(json_array_size(c.calls), 0);
    assert_int_equal(feed(st, "ther\", \"arguments\": {\"city\": \"Pa"), SYN_OK);
    assert_int_equal(json_array_size(c.calls), 1); /* announced, arguments under way */
    assert_true(c.call_open);
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_array_get(c.calls, 0), "function"), "name")),
                        "get_weather");
    assert_int_equal(feed(st, "ris}\", \"n\": [1, {}]}"), SYN_OK); /* a brace in a string */
    assert_true(c.call_open); /* the call's own "}" and </tool_call> are still to come */
    assert_int_equal(feed(st, "}\n</tool_call>\nDone."), SYN_OK);
    assert_false(c.call_open);
    assert_int_equal(syn_chat_stream_finish(st), SYN_OK);
    const json_t *fn = json_object_get(json_array_get(c.calls, 0), "function");
    assert_string_equal(json_string_value(json_object_get(fn, "arguments")),
                        "{\"city\": \"Paris}\", \"n\": [1, {}]}");
    assert_int_equal(c.n_arg_pieces, 2);
    assert_string_equal(c.content, "Checking.Done.");
    assert_string_equal(c.order, "ctc");
    /* The id is the one the whole parse would give the reply's first call. */
    syn_chat_output whole;
    const char *text = "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
    assert_int_equal(
        syn_chat_output_parse(text, strlen(text), SYN_TOOLS_HERMES, false, false, NULL, 5, &whole),
        SYN_OK);
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(c.calls, 0), "id")),
        json_string_value(json_object_get(json_array_get(whole.tool_calls, 0), "id")));
    syn_chat_output_free(&whole);
    syn_chat_stream_free(st);
    json_decref(c.calls);

    /* Cut off inside the arguments: the call ends with what was written; inside its closing tag:
     * the tag's start goes with it. Arguments given as a JSON string, or before the name, are not
     * that shape: the call is read whole. */
    static const struct {
        const char *text, *arguments;
        size_t n_calls;
    } cases[] = {
        {"<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [1, 2", "{\"a\": [1, 2", 1},
        {"<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool", "{\"a\": 1}", 1},
        {"<tool_call>{\"name\": \"f\", \"arguments\": \"{}\"}</tool_call>", "{}", 1},
        {"<tool_call>{\"arguments\": {}, \"name\": \"f\"}</tool_call>", "{}", 1},
        {"<tool_call>{\"name\": \"f\", \"argu", NULL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (size_t piece = 1; piece <= strlen(cases[i].text); piece++) {
            collected d = {.calls = json_array()};
            assert_int_equal(syn_chat_stream_create(SYN_TOOLS_HERMES, false, false, true, NULL, 5,
                                                    collect, &d, &st),
                             SYN_OK);
            for (size_t at = 0; at < strlen(cases[i].text); at += piece) {
                const size_t left = strlen(cases[i].text) - at;
                assert_int_equal(
                    syn_chat_stream_feed(st, cases[i].text + at, left < piece ? left : piece),
                    SYN_OK);
            }
            assert_int_equal(syn_chat_stream_finish(st), SYN_OK);
            assert_false(d.call_open);
            assert_int_equal(json_array_size(d.calls), cases[i].n_calls);
            assert_int_equal(syn_chat_stream_cut_call(st), i == 0);
            assert_string_equal(d.content, cases[i].n_calls ? "" : cases[i].text);
            if (cases[i].n_calls)
                assert_string_equal(
                    json_string_value(json_object_get(
                        json_object_get(json_array_get(d.calls, 0), "function"), "arguments")),
                    cases[i].arguments);
            syn_chat_stream_free(st);
            json_decref(d.calls);
        }
    }
}

/* Forced calls in Llama 3's and Mistral's JSON forms are announced when their name is written
 * and their arguments passed on as they come, as Hermes's are; a Mistral array's calls one by
 * one, the element cut by the end of the text ending with what was written. */
static void test_stream_arguments_json_forms(void **state) {
    (void)state;
    static const struct {
        syn_tool_syntax syntax;
        const char *text;
        size_t n_calls;
        const char *names[2], *arguments[2];
        bool cut;
    } cases[] = {
        {SYN_TOOLS_LLAMA3,
         "{\"name\": \"a\", \"parameters\": {\"x\": [1, 2]}}",
         1,
         {"a"},
         {"{\"x\": [1, 2]}"},
         false},
        {SYN_TOOLS_MISTRAL,
         "[TOOL_CALLS]a[ARGS]{\"x\": \"[ARGS]\"}",
         1,
         {"a"},
         {"{\"x\": \"[ARGS]\"}"},
         false},
        {SYN_TOOLS_MISTRAL,
         "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": [1, 2]}}, {\"name\": \"b\", "
         "\"arguments\": {}}]",
         2,
         {"a", "b"},
         {"{\"x\": [1, 2]}", "{}"},
         false},
        {SYN_TOOLS_MISTRAL,
         "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": [1, 2]}}, {\"name\": \"b\", "
         "\"arguments\": {\"y\": \"",
         2,
         {"a", "b"},
         {"{\"x\": [1, 2]}", "{\"y\": \""},
         true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *text = cases[i].text;
        for (size_t piece = 1; piece <= 7; piece += 3) {
            collected c = {.calls = json_array()};
            syn_chat_stream *st;
            assert_int_equal(syn_chat_stream_create(cases[i].syntax, false, false, true, NULL, 5,
                                                    collect, &c, &st),
                             SYN_OK);
            for (size_t at = 0; text[at]; at += strnlen(text + at, piece))
                assert_int_equal(syn_chat_stream_feed(st, text + at, strnlen(text + at, piece)),
                                 SYN_OK);
            assert_int_equal(syn_chat_stream_finish(st), SYN_OK);
            assert_int_equal(json_array_size(c.calls), cases[i].n_calls);
            for (size_t k = 0; k < cases[i].n_calls; k++) {
                const json_t *fn = json_object_get(json_array_get(c.calls, k), "function");
                assert_string_equal(json_string_value(json_object_get(fn, "name")),
                                    cases[i].names[k]);
                assert_string_equal(json_string_value(json_object_get(fn, "arguments")),
                                    cases[i].arguments[k]);
            }
            if (piece == 1 && !cases[i].cut) assert_true(c.n_arg_pieces > cases[i].n_calls);
            assert_int_equal(syn_chat_stream_cut_call(st), cases[i].cut);
            assert_string_equal(c.content, "");
            syn_chat_stream_free(st);
            json_decref(c.calls);
        }
    }
    /* Unforced, a cut array stays text as written. */
    const char *cut = cases[3].text;
    collected c = {.calls = json_array()};
    syn_chat_stream *st;
    assert_int_equal(
        syn_chat_stream_create(SYN_TOOLS_MISTRAL, false, false, false, NULL, 5, collect, &c, &st),
        SYN_OK);
    assert_int_equal(syn_chat_stream_feed(st, cut, strlen(cut)), SYN_OK);
    assert_int_equal(syn_chat_stream_finish(st), SYN_OK);
    assert_int_equal(json_array_size(c.calls), 0);
    assert_string_equal(c.content, cut);
    syn_chat_stream_free(st);
    json_decref(c.calls);
}

/* A forced Qwen3-Coder call is announced at <function=NAME>; its parameters pass on as the
 * compact JSON the whole parse makes of them, a string's text as it comes (escaped), any other
 * value once closed; cut inside, the call ends with what was written. */
static void test_stream_arguments_xml(void **state) {
    (void)state;
    json_t *tools = search_tool();
    static const struct {
        const char *text, *arguments, *content;
        bool cut;
    } cases[] = {
        {"<tool_call>\n<function=search>\n<parameter=q>\nsay \"hi\"\n\tnow\n</parameter>\n"
         "<parameter=n>\n3\n</parameter>\n</function>\n</tool_call>\nDone.",
         "{\"q\":\"say \\\"hi\\\"\\n\\tnow\",\"n\":3}", "Done.", false},
        {"<tool_call>\n<function=search>\n</function>\n</tool_call>", "{}", "", false},
        {"<tool_call>\n<function=search>\n<parameter=q>\nline\n", "{\"q\":\"line", "", true},
        {"<tool_call>\n<function=search>\n<parameter=q>\na\n</parameter>\n<param", "{\"q\":\"a\"",
         "", true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *text = cases[i].text;
        for (size_t piece = 1; piece <= 9; piece += 4) {
            collected c = {.calls = json_array()};
            syn_chat_stream *st;
            assert_int_equal(syn_chat_stream_create(SYN_TOOLS_QWEN3_CODER, false, false, true,
                                                    tools, 5, collect, &c, &st),
                             SYN_OK);
            for (size_t at = 0; text[at]; at += strnlen(text + at, piece))
                assert_int_equal(syn_chat_stream_feed(st, text + at, strnlen(text + at, piece)),
                                 SYN_OK);
            assert_int_equal(syn_chat_stream_finish(st), SYN_OK);
            assert_int_equal(json_array_size(c.calls), 1);
            const json_t *fn = json_object_get(json_array_get(c.calls, 0), "function");
            assert_string_equal(json_string_value(json_object_get(fn, "name")), "search");
            assert_string_equal(json_string_value(json_object_get(fn, "arguments")),
                                cases[i].arguments);
            assert_int_equal(syn_chat_stream_cut_call(st), cases[i].cut);
            assert_string_equal(c.content, cases[i].content);
            if (piece == 1 && i == 0) assert_true(c.n_arg_pieces > 10);
            syn_chat_stream_free(st);
            json_decref(c.calls);
        }
    }
    /* Announced once its name is written, a string's text passed on before its value ends. */
    collected c = {.calls = json_array()};
    syn_chat_stream *st;
    assert_int_equal(syn_chat_stream_create(SYN_TOOLS_QWEN3_CODER, false, false, true, tools, 5,
                                            collect, &c, &st),
                     SYN_OK);
    assert_int_equal(feed(st, "<tool_call>\n<function=sea"), SYN_OK);
    assert_int_equal(json_array_size(c.calls), 0);
    assert_int_equal(feed(st, "rch>\n<parameter=q>\nsay"), SYN_OK);
    assert_true(c.call_open);
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_array_get(c.calls, 0), "function"), "arguments")),
                        "{\"q\":\"say");
    syn_chat_stream_free(st);
    json_decref(c.calls);
    /* The whole parse reads the complete call (the text before "Done.") to the same arguments. */
    syn_chat_output whole;
    assert_int_equal(syn_chat_output_parse(cases[0].text, strlen(cases[0].text) - strlen("\nDone."),
                                           SYN_TOOLS_QWEN3_CODER, false, false, tools, 5, &whole),
                     SYN_OK);
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_array_get(whole.tool_calls, 0), "function"), "arguments")),
        cases[0].arguments);
    syn_chat_output_free(&whole);
    json_decref(tools);
}

/* A prompt that left <think> open: the reply is reasoning from its first byte, streamed. */
static void test_stream_think_open(void **state) {
    (void)state;
    collected c;
    stream_pieces("Let me think.\n</think>\n\nParis.", 3, SYN_TOOLS_HERMES, true, true, NULL, &c);
    assert_string_equal(c.reasoning, "Let me think.");
    assert_string_equal(c.content, "Paris.");
    assert_string_equal(c.order, "rc");
    json_decref(c.calls);
    /* Cut off while thinking. */
    stream_pieces("Still going", 1, SYN_TOOLS_NONE, true, true, NULL, &c);
    assert_string_equal(c.reasoning, "Still going");
    assert_string_equal(c.content, "");
    json_decref(c.calls);
    /* Not thinking and no <think> open: the tags are text. */
    stream_pieces("a</think>b", 2, SYN_TOOLS_NONE, false, true, NULL, &c);
    assert_string_equal(c.content, "a</think>b");
    json_decref(c.calls);
}

/* A reply cut inside a later call: the whole calls before it are found and read back. */
static void test_whole_calls(void **state) {
    (void)state;
    const char *names[] = {"f"}, *args[] = {"{\"s\": \"x\"}"};
    const char cut[] =
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"s\": \"x\"}}\n</tool_call>\n"
        "<tool_call>\n{\"name\": \"f\", \"argu";
    expect_output(cut, SYN_TOOLS_HERMES, false, NULL, cut, NULL, 0, NULL, NULL); /* all text */
    size_t n = 0;
    char *whole = syn_chat_output_whole_calls(cut, strlen(cut), SYN_TOOLS_HERMES, &n);
    assert_non_null(whole);
    assert_int_equal(n, strlen(whole));
    expect_output(whole, SYN_TOOLS_HERMES, false, NULL, "", NULL, 1, names, args);
    free(whole);
    /* Mistral's array, cut in its second element: the first, closed */
    const char array[] =
        "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"s\": \"x, ]}\"}}, {\"name\": \"g";
    whole = syn_chat_output_whole_calls(array, strlen(array), SYN_TOOLS_MISTRAL, &n);
    assert_non_null(whole);
    assert_string_equal(whole,
                        "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"s\": \"x, ]}\"}}]");
    const char *args2[] = {"{\"s\": \"x, ]}\"}"};
    expect_output(whole, SYN_TOOLS_MISTRAL, false, NULL, "", NULL, 1, names, args2);
    free(whole);
    const char args_form[] = "[TOOL_CALLS]f[ARGS]{\"s\": \"x\"}[TOOL_CALLS]g[AR";
    whole = syn_chat_output_whole_calls(args_form, strlen(args_form), SYN_TOOLS_MISTRAL, &n);
    assert_non_null(whole);
    expect_output(whole, SYN_TOOLS_MISTRAL, false, NULL, "", NULL, 1, names, args);
    free(whole);
    /* nothing whole before the cut, or no boundary to find */
    assert_null(syn_chat_output_whole_calls("<tool_call>{\"na", 15, SYN_TOOLS_HERMES, &n));
    assert_null(syn_chat_output_whole_calls("no call", 7, SYN_TOOLS_HERMES, &n));
    assert_null(syn_chat_output_whole_calls("{\"name\"", 8, SYN_TOOLS_LLAMA3, &n));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_calls),
        cmocka_unit_test(test_detect_from_real_templates),
        cmocka_unit_test(test_hermes),
        cmocka_unit_test(test_qwen3_coder),
        cmocka_unit_test(test_llama3),
        cmocka_unit_test(test_mistral),
        cmocka_unit_test(test_harmony),
        cmocka_unit_test(test_reasoning),
        cmocka_unit_test(test_stream_matches_whole_parse),
        cmocka_unit_test(test_stream_holds_back_only_markers),
        cmocka_unit_test(test_stream_false_openers),
        cmocka_unit_test(test_stream_arguments),
        cmocka_unit_test(test_stream_think_open),
        cmocka_unit_test(test_stream_arguments_json_forms),
        cmocka_unit_test(test_stream_arguments_xml),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
