/*
 * chat.c: renders a conversation in the model's chat format. Two formats are known:
 *   ChatML (Qwen2, Qwen2.5, Qwen3): "<|im_start|>{role}\n{content}<|im_end|>\n" per message, then
 *       "<|im_start|>assistant\n";
 *   Llama 3: "<|start_header_id|>{role}<|end_header_id|>\n\n{content, trimmed}<|eot_id|>" per
 *       message, then "<|start_header_id|>assistant<|end_header_id|>\n\n" (the beginning-of-text
 *       token is the tokenizer's BOS, added by the caller as for any prompt).
 * Rather than run Jinja, the GGUF's tokenizer.chat_template is recognised by its markers, with the
 * default system message the Qwen templates add when the conversation does not start with one.
 * template_name "chatml" forces plain ChatML, which adds no system message of its own, and
 * "llama3" the Llama 3 format (for a GGUF whose template is not recognised). With no
 * messages the output is the open assistant turn alone (no default system message either).
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "synapse_internal.h"
#include "tokenizer/tokenizer_internal.h"

static const char qwen25_default_system[] =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
static const char qwen2_default_system[] = "You are a helpful assistant.";

syn_status chat_template_recognise(const char *template_text, chat_style *out) {
    if (!template_text)
        return syn_fail(
            SYN_ERR_UNSUPPORTED,
            "the model has no tokenizer.chat_template (template_name \"chatml\" forces ChatML)");
    if (strstr(template_text, "<|start_header_id|>") && strstr(template_text, "<|eot_id|>")) {
        *out = (chat_style){CHAT_LLAMA3, NULL};
        return SYN_OK;
    }
    if (!strstr(template_text, "<|im_start|>"))
        return syn_fail(SYN_ERR_UNSUPPORTED,
                        "tokenizer.chat_template is not a recognised chat format (known: ChatML, "
                        "Llama 3; template_name \"chatml\" forces ChatML)");
    out->format = CHAT_CHATML;
    /* Qwen2's text is a substring of Qwen2.5's: test the longer one first. */
    out->default_system = strstr(template_text, qwen25_default_system)  ? qwen25_default_system
                          : strstr(template_text, qwen2_default_system) ? qwen2_default_system
                                                                        : NULL;
    return SYN_OK;
}

/* Output that counts what it cannot store, so one pass gives the full length. */
typedef struct text_out {
    char *buf;
    size_t cap;
    size_t n;
} text_out;

static void put_n(text_out *o, const char *s, size_t len) {
    if (o->n < o->cap) memcpy(o->buf + o->n, s, len < o->cap - o->n ? len : o->cap - o->n);
    o->n += len;
}

static void put(text_out *o, const char *s) { put_n(o, s, strlen(s)); }

static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static void put_turn(text_out *o, chat_format format, const char *role, const char *content) {
    if (format == CHAT_CHATML) {
        put(o, "<|im_start|>");
        put(o, role);
        put(o, "\n");
        put(o, content);
        put(o, "<|im_end|>\n");
        return;
    }
    /* Llama 3's template trims each message's content. */
    size_t len = strlen(content);
    while (len > 0 && is_space(content[len - 1]))
        len--;
    while (len > 0 && is_space(*content))
        content++, len--;
    put(o, "<|start_header_id|>");
    put(o, role);
    put(o, "<|end_header_id|>\n\n");
    put_n(o, content, len);
    put(o, "<|eot_id|>");
}

/* The formats template_name may force, by name (SYN_CHAT_FORMAT_NAMES lists them). */
static const struct {
    const char *name;
    chat_format format;
} format_names[] = {{"chatml", CHAT_CHATML}, {"llama3", CHAT_LLAMA3}};

static bool chat_format_by_name(const char *name, chat_format *out) {
    for (size_t i = 0; i < sizeof format_names / sizeof format_names[0]; i++) {
        if (strcmp(name, format_names[i].name) == 0) {
            *out = format_names[i].format;
            return true;
        }
    }
    return false;
}

bool syn_chat_format_known(const char *name) {
    chat_format format;
    return name && chat_format_by_name(name, &format);
}

static bool known_role(const char *role) {
    return strcmp(role, "system") == 0 || strcmp(role, "user") == 0 ||
           strcmp(role, "assistant") == 0;
}

syn_status syn_chat_format(const syn_model *model, const char *template_name,
                           const syn_chat_message *messages, size_t n_messages,
                           bool add_assistant_prompt, char *buf, size_t cap, size_t *n_bytes) {
    if (!model || !n_bytes || (!messages && n_messages > 0) || (!buf && cap > 0))
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_chat_format: %s is NULL",
                        !model                        ? "model"
                        : !n_bytes                    ? "n_bytes"
                        : !messages && n_messages > 0 ? "messages"
                                                      : "buf");
    chat_style style = {CHAT_CHATML, NULL};
    if (!template_name) {
        syn_status st = chat_template_recognise(syn_model_tokenizer(model)->chat_template, &style);
        if (st != SYN_OK) return st;
    } else if (!chat_format_by_name(template_name, &style.format)) {
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "syn_chat_format: unknown template_name '%s' (known: " SYN_CHAT_FORMAT_NAMES
                        ")",
                        template_name);
    }
    for (size_t i = 0; i < n_messages; i++) {
        if (!messages[i].role || !known_role(messages[i].role))
            return syn_fail(
                SYN_ERR_INVALID_ARGUMENT,
                "syn_chat_format: messages[%zu].role '%s' is not system, user or assistant", i,
                messages[i].role ? messages[i].role : "(null)");
        if (!messages[i].content)
            return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                            "syn_chat_format: messages[%zu].content is NULL", i);
    }

    text_out o = {buf, cap, 0};
    if (n_messages > 0 && style.default_system && strcmp(messages[0].role, "system") != 0)
        put_turn(&o, style.format, "system", style.default_system);
    for (size_t i = 0; i < n_messages; i++)
        put_turn(&o, style.format, messages[i].role, messages[i].content);
    if (add_assistant_prompt)
        put(&o, style.format == CHAT_CHATML ? "<|im_start|>assistant\n"
                                            : "<|start_header_id|>assistant<|end_header_id|>\n\n");

    *n_bytes = o.n;
    if (o.n >= cap) {
        if (cap > 0) buf[cap - 1] = '\0';
        return syn_fail(SYN_ERR_BUFFER_TOO_SMALL,
                        "syn_chat_format: the text needs %zu bytes and a NUL, cap is %zu", o.n,
                        cap);
    }
    buf[o.n] = '\0';
    return SYN_OK;
}

syn_status syn_chat_format_new(const syn_model *model, const char *template_name,
                               const syn_chat_message *messages, size_t n_messages,
                               bool add_assistant_prompt, char **text, size_t *n_bytes) {
    if (!text || !n_bytes)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_chat_format_new: %s is NULL",
                        !text ? "text" : "n_bytes");
    *text = NULL;
    size_t len = 0;
    syn_status st = syn_chat_format(model, template_name, messages, n_messages,
                                    add_assistant_prompt, NULL, 0, &len);
    if (st != SYN_OK && st != SYN_ERR_BUFFER_TOO_SMALL) return st;
    char *buf = malloc(len + 1);
    if (!buf) return syn_fail(SYN_ERR_NO_MEMORY, "chat text of %zu bytes: out of memory", len);
    st = syn_chat_format(model, template_name, messages, n_messages, add_assistant_prompt, buf,
                         len + 1, n_bytes);
    if (st != SYN_OK) {
        free(buf);
        return st;
    }
    *text = buf;
    return SYN_OK;
}
