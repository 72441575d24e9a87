/* test_chat.c: conversations rendered through the model's own chat template (Qwen2.5's in the
 * tiny model, Llama 3.1's written into the llama test file) or one given in its place, the JSON
 * form with tools and tool turns, and the argument checks of syn_chat_format / syn_chat_render.
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
#include "model/model.h"
#include "synapse.h"
#include "tokenizer/tokenizer_internal.h"

static const char chatml_template[] =
    "{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + "
    "'<|im_end|>\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' "
    "}}{% endif %}";

static syn_model *model; /* the tiny model, whose GGUF carries Qwen2.5's chat template */

static int group_setup(void **state) {
    (void)state;
    return syn_model_load(test_data_path("qwen2-tiny-synth-q8_0.gguf"), NULL, &model) == SYN_OK
               ? 0
               : -1;
}

static int group_teardown(void **state) {
    (void)state;
    syn_model_free(model);
    return 0;
}

/* Renders and checks the text against want, including the size-query protocol. */
static void expect_chat(const syn_model *m, const char *template_name, const syn_chat_message *msgs,
                        size_t n, bool add_prompt, const char *want) {
    size_t need = 0;
    assert_int_equal(syn_chat_format(m, template_name, msgs, n, add_prompt, NULL, 0, &need),
                     SYN_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(need, strlen(want));
    char *buf = malloc(need + 1);
    assert_non_null(buf);
    size_t len;
    /* the NUL needs a byte too */
    assert_int_equal(syn_chat_format(m, template_name, msgs, n, add_prompt, buf, need, &len),
                     SYN_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(syn_chat_format(m, template_name, msgs, n, add_prompt, buf, need + 1, &len),
                     SYN_OK);
    assert_int_equal(len, need);
    assert_string_equal(buf, want);
    free(buf);
}

static const syn_chat_message system_user[] = {
    {"system", "You are terse."},
    {"user", "Hi!"},
};

static void test_system_and_user(void **state) {
    (void)state;
    expect_chat(model, NULL, system_user, 2, true,
                "<|im_start|>system\nYou are terse.<|im_end|>\n"
                "<|im_start|>user\nHi!<|im_end|>\n"
                "<|im_start|>assistant\n");
    expect_chat(model, NULL, system_user, 2, false,
                "<|im_start|>system\nYou are terse.<|im_end|>\n"
                "<|im_start|>user\nHi!<|im_end|>\n");
}

/* Qwen2.5's template adds its default system message before a conversation without one. */
static void test_default_system_prompt(void **state) {
    (void)state;
    const syn_chat_message msgs[] = {
        {"user", "What is 2+2?"},
        {"assistant", "4"},
        {"user", "Thanks."},
    };
    expect_chat(model, NULL, msgs, 3, true,
                "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
                "assistant.<|im_end|>\n"
                "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
                "<|im_start|>assistant\n4<|im_end|>\n"
                "<|im_start|>user\nThanks.<|im_end|>\n"
                "<|im_start|>assistant\n");
    /* a template given in the model's place: plain ChatML, no implicit system message */
    expect_chat(model, chatml_template, msgs, 1, true,
                "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n");
}

/* The rendered conversation tokenizes into the ChatML control tokens. */
static void test_tokenizes_to_control_tokens(void **state) {
    (void)state;
    char buf[512];
    size_t len;
    assert_int_equal(syn_chat_format(model, NULL, system_user, 2, true, buf, sizeof buf, &len),
                     SYN_OK);
    int32_t ids[64];
    size_t n;
    assert_int_equal(syn_tokenize(syn_model_tokenizer(model), buf, len, false, true, ids, 64, &n),
                     SYN_OK);
    assert_true(n > 6);
    assert_int_equal(ids[0], 151644);     /* <|im_start|> */
    assert_int_equal(ids[n - 3], 151644); /* <|im_start|> assistant \n */
    size_t im_end = 0;
    for (size_t i = 0; i < n; i++)
        im_end += ids[i] == 151645;
    assert_int_equal(im_end, 2);
}

/* A model whose file has no template: refused unless one is given. */
static void test_model_without_template(void **state) {
    (void)state;
    struct syn_model other = *model;
    struct syn_tokenizer other_tok = *model->tokenizer;
    other.tokenizer = &other_tok;
    other_tok.chat_template = NULL;
    const syn_chat_message user[] = {{"user", "hi"}};
    char buf[256];
    size_t len;
    assert_int_equal(syn_chat_format(&other, NULL, user, 1, true, buf, sizeof buf, &len),
                     SYN_ERR_UNSUPPORTED);
    assert_non_null(strstr(syn_last_error(), "tokenizer.chat_template"));
    expect_chat(&other, chatml_template, user, 1, true,
                "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    /* Gemma's turn markers: any template renders, not only known formats */
    expect_chat(&other,
                "{% for m in messages %}<start_of_turn>{{ m.role }}\n{{ m.content }}"
                "<end_of_turn>\n{% endfor %}",
                user, 1, true, "<start_of_turn>user\nhi<end_of_turn>\n");
}

/* The JSON form: tools offered, an assistant turn that called one (arguments as an object)
 * and the tool's result, all in Qwen2.5's own words. */
static void test_tools_and_tool_turns(void **state) {
    (void)state;
    syn_chat_params p = syn_chat_default_params();
    p.messages_json =
        "[{\"role\": \"user\", \"content\": \"Weather in Paris?\"},"
        " {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"c1\","
        " \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\":"
        " {\"city\": \"Paris\"}}}]},"
        " {\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": \"18 C\"}]";
    p.tools_json = "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\","
                   " \"parameters\": {\"type\": \"object\"}}}]";
    char *text;
    size_t n;
    assert_int_equal(syn_chat_render(model, &p, &text, &n), SYN_OK);
    assert_int_equal(strlen(text), n);
    assert_non_null(strstr(text, "# Tools\n\nYou may call one or more functions"));
    assert_non_null(strstr(text, "<tools>\n{\"type\": \"function\", \"function\": {\"name\": "
                                 "\"get_weather\", \"parameters\": {\"type\": \"object\"}}}\n"
                                 "</tools>"));
    assert_non_null(strstr(text, "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", "
                                 "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>"));
    assert_non_null(strstr(text, "<|im_start|>user\n<tool_response>\n18 C\n</tool_response>"
                                 "<|im_end|>\n<|im_start|>assistant\n"));
    free(text);
    /* the template's own refusal reaches the caller with its message */
    p.template_source = "{{ raise_exception('Conversation roles must alternate') }}";
    assert_int_equal(syn_chat_render(model, &p, &text, &n), SYN_ERR_INVALID_ARGUMENT);
    assert_string_equal(syn_last_error(), "template: Conversation roles must alternate");
    assert_null(text);
    /* extra variables reach the template, without replacing its own */
    p.template_source = "{{ enable_thinking }} {{ messages|length }}";
    p.variables_json = "{\"enable_thinking\": false, \"messages\": []}";
    assert_int_equal(syn_chat_render(model, &p, &text, &n), SYN_OK);
    assert_string_equal(text, "False 3");
    free(text);
    p.messages_json = "{\"role\": \"user\"}";
    assert_int_equal(syn_chat_render(model, &p, &text, &n), SYN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(syn_last_error(), "messages must be a JSON array"));
    p.messages_json = "[";
    assert_int_equal(syn_chat_render(model, &p, &text, &n), SYN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(syn_last_error(), "messages is not JSON"));
}

static void test_bad_arguments(void **state) {
    (void)state;
    const syn_chat_message user[] = {{"user", "hi"}};
    char buf[256];
    size_t len;
    /* a conversation the template cannot read: Qwen2.5's reads messages[0]['role'] */
    assert_int_equal(syn_chat_format(model, NULL, NULL, 0, true, buf, sizeof buf, &len),
                     SYN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(syn_last_error(), "undefined"));
    assert_int_equal(syn_chat_format(model, "{% if %}", user, 1, true, buf, sizeof buf, &len),
                     SYN_ERR_FORMAT);
    assert_non_null(strstr(syn_last_error(), "line 1"));
    const syn_chat_message no_content[] = {{"user", NULL}};
    assert_int_equal(syn_chat_format(model, NULL, no_content, 1, true, buf, sizeof buf, &len),
                     SYN_ERR_INVALID_ARGUMENT);
    assert_int_equal(syn_chat_format(NULL, NULL, user, 1, true, buf, sizeof buf, &len),
                     SYN_ERR_INVALID_ARGUMENT);
    assert_int_equal(syn_chat_format(model, NULL, NULL, 1, true, buf, sizeof buf, &len),
                     SYN_ERR_INVALID_ARGUMENT);
}

/* Llama 3.1's template, shortened to the part that renders messages. */
static const char llama3_template[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% "
    "endif %}";

static syn_status copy_tensor(void *user, const char *name, void *dst, uint64_t nbytes) {
    const gguf_tensor *t = gguf_find_tensor(user, name);
    if (!t || t->nbytes != nbytes) return SYN_ERR_INTERNAL;
    memcpy(dst, t->data, nbytes);
    return SYN_OK;
}

/* The llama test file with Llama 3's chat template, written with the project's GGUF writer. */
static syn_model *load_llama3_chat_model(char **dir_out) {
    gguf_file *src = NULL;
    assert_int_equal(gguf_open(test_data_path("arch/llama-s5-q8_0.gguf"), &src), SYN_OK);
    gguf_writer *w = gguf_writer_new();
    assert_non_null(w);
    for (uint64_t i = 0; i < src->n_kv; i++) {
        const gguf_kv *kv = &src->kvs[i];
        if (gguf_str_eq(kv->key, "tokenizer.chat_template")) continue;
        assert_int_equal(gguf_writer_copy_kv(w, kv), SYN_OK);
    }
    assert_int_equal(gguf_writer_set_str(w, "tokenizer.chat_template", llama3_template), SYN_OK);
    for (uint64_t i = 0; i < src->n_tensors; i++) {
        const gguf_tensor *t = &src->tensors[i];
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.data);
        assert_int_equal(
            gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, copy_tensor, src), SYN_OK);
    }
    char *dir = test_make_temp_dir();
    assert_non_null(dir);
    char path[4096];
    snprintf(path, sizeof path, "%s/llama3-chat.gguf", dir);
    assert_int_equal(gguf_writer_write(w, path), SYN_OK);
    gguf_writer_free(w);
    gguf_close(src);
    syn_model *m = NULL;
    assert_int_equal(syn_model_load(path, NULL, &m), SYN_OK);
    *dir_out = dir;
    return m;
}

/* Llama 3's template: each turn's content trimmed and ended by <|eot_id|>, the BOS text first
 * (this file's BOS is Qwen's <|endoftext|>; the tokenizer does not double it), then the open
 * assistant header. */
static void test_llama3_template(void **state) {
    (void)state;
    char *dir = NULL;
    syn_model *m = load_llama3_chat_model(&dir);
    const syn_chat_message turns[] = {
        {"system", "You are terse."},
        {"user", "  Hi!\n"},
        {"assistant", "Hello."},
        {"user", "Name a river."},
    };
    expect_chat(
        m, NULL, turns, 4, true,
        "<|endoftext|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nName a river.<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect_chat(m, NULL, turns + 1, 1, false,
                "<|endoftext|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>");
    /* the same template in place of the tiny Qwen2 file's */
    expect_chat(model, llama3_template, turns + 3, 1, true,
                "<|endoftext|><|start_header_id|>user<|end_header_id|>\n\nName a river.<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n");
    /* and ChatML in place of the llama file's */
    expect_chat(m, chatml_template, turns + 3, 1, true,
                "<|im_start|>user\nName a river.<|im_end|>\n<|im_start|>assistant\n");
    char text[512];
    size_t len;
    assert_int_equal(syn_chat_format(m, NULL, turns, 1, true, text, sizeof text, &len), SYN_OK);
    int32_t ids[256];
    size_t n_ids;
    assert_int_equal(syn_tokenize(syn_model_tokenizer(m), text, len, true, true, ids, 256, &n_ids),
                     SYN_OK);
    assert_int_equal(ids[0], syn_tokenizer_bos(syn_model_tokenizer(m)));
    assert_true(ids[1] != ids[0]); /* one BOS */
    syn_model_free(m);
    test_remove_dir(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_system_and_user),
        cmocka_unit_test(test_default_system_prompt),
        cmocka_unit_test(test_tokenizes_to_control_tokens),
        cmocka_unit_test(test_model_without_template),
        cmocka_unit_test(test_tools_and_tool_turns),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_llama3_template),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
