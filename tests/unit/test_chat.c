/* test_chat.c: ChatML rendering, template recognition and the argument checks of syn_chat_format.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../support/test_util.h"
#include "model/model.h"
#include "synapse.h"
#include "tokenizer/tokenizer_internal.h"

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
    /* forced plain ChatML has no implicit system message */
    expect_chat(model, "chatml", msgs, 1, true,
                "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n");
    /* no messages: only the open assistant turn */
    expect_chat(model, NULL, NULL, 0, true, "<|im_start|>assistant\n");
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
    assert_int_equal(syn_tokenize(syn_model_tokenizer(model), buf, len, true, ids, 64, &n), SYN_OK);
    assert_true(n > 6);
    assert_int_equal(ids[0], 151644);     /* <|im_start|> */
    assert_int_equal(ids[n - 3], 151644); /* <|im_start|> assistant \n */
    size_t im_end = 0;
    for (size_t i = 0; i < n; i++)
        im_end += ids[i] == 151645;
    assert_int_equal(im_end, 2);
}

static void test_recognise(void **state) {
    (void)state;
    chat_style style;
    /* the tiny model's own template (Qwen2.5) */
    assert_non_null(model->chat_template);
    assert_int_equal(chat_template_recognise(model->chat_template, &style), SYN_OK);
    assert_string_equal(style.default_system,
                        "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
    /* Qwen2's template (abridged, as published with Qwen2-Instruct) */
    const char *qwen2 =
        "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
        "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
        "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
    assert_int_equal(chat_template_recognise(qwen2, &style), SYN_OK);
    assert_string_equal(style.default_system, "You are a helpful assistant.");
    /* generic ChatML: no default system message */
    const char *chatml =
        "{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + "
        "'<|im_end|>\\n'}}{% endfor %}";
    assert_int_equal(chat_template_recognise(chatml, &style), SYN_OK);
    assert_null(style.default_system);
    /* Llama-2 style and absent templates are refused */
    const char *llama2 = "{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}";
    assert_int_equal(chat_template_recognise(llama2, &style), SYN_ERR_UNSUPPORTED);
    assert_non_null(strstr(syn_last_error(), "tokenizer.chat_template"));
    assert_int_equal(chat_template_recognise(NULL, &style), SYN_ERR_UNSUPPORTED);
    assert_non_null(strstr(syn_last_error(), "tokenizer.chat_template"));
}

/* A model whose template is not ChatML: refused unless "chatml" is forced. */
static void test_unrecognised_model_template(void **state) {
    (void)state;
    struct syn_model other = *model;
    other.chat_template = "{% for m in messages %}<start_of_turn>{{ m['role'] }}{% endfor %}";
    const syn_chat_message user[] = {{"user", "hi"}};
    char buf[256];
    size_t len;
    assert_int_equal(syn_chat_format(&other, NULL, user, 1, true, buf, sizeof buf, &len),
                     SYN_ERR_UNSUPPORTED);
    expect_chat(&other, "chatml", user, 1, true,
                "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    other.chat_template = NULL;
    assert_int_equal(syn_chat_format(&other, NULL, user, 1, true, buf, sizeof buf, &len),
                     SYN_ERR_UNSUPPORTED);
}

static void test_bad_arguments(void **state) {
    (void)state;
    const syn_chat_message user[] = {{"user", "hi"}};
    char buf[256];
    size_t len;
    assert_int_equal(syn_chat_format(model, "llama2", user, 1, true, buf, sizeof buf, &len),
                     SYN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(syn_last_error(), "'llama2'"));
    const syn_chat_message tool[] = {{"user", "hi"}, {"tool", "42"}};
    assert_int_equal(syn_chat_format(model, NULL, tool, 2, true, buf, sizeof buf, &len),
                     SYN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(syn_last_error(), "messages[1].role 'tool'"));
    const syn_chat_message no_content[] = {{"user", NULL}};
    assert_int_equal(syn_chat_format(model, NULL, no_content, 1, true, buf, sizeof buf, &len),
                     SYN_ERR_INVALID_ARGUMENT);
    assert_int_equal(syn_chat_format(NULL, NULL, user, 1, true, buf, sizeof buf, &len),
                     SYN_ERR_INVALID_ARGUMENT);
    assert_int_equal(syn_chat_format(model, NULL, NULL, 1, true, buf, sizeof buf, &len),
                     SYN_ERR_INVALID_ARGUMENT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_system_and_user),
        cmocka_unit_test(test_default_system_prompt),
        cmocka_unit_test(test_tokenizes_to_control_tokens),
        cmocka_unit_test(test_recognise),
        cmocka_unit_test(test_unrecognised_model_template),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
