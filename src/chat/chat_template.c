/*
 * chat_template.c: a conversation rendered with the model's chat template (or one given): the
 * variables Hugging Face's apply_chat_template sets up are built as JSON (messages, tools,
 * add_generation_prompt, bos_token, eos_token, and the caller's extra variables), then the
 * Jinja engine of src/template/ renders them.
 */
#include <stdlib.h>
#include <string.h>

#include "synapse_internal.h"
#include "template/template.h"

#define NO_MEMORY() syn_fail(SYN_ERR_NO_MEMORY, "chat template: out of memory")

syn_chat_params syn_chat_default_params(void) {
    return (syn_chat_params){.add_generation_prompt = true, .now_unix = -1};
}

/* The text of token id ("" when id is -1). */
static json_t *token_text(const syn_tokenizer *tok, int32_t id) {
    char buf[256];
    size_t n = 0;
    if (id < 0 || syn_tokenizer_token_bytes(tok, id, buf, sizeof buf, &n) != SYN_OK) n = 0;
    return json_stringn(buf, n);
}

static syn_status parse_json(const char *text, const char *what, json_type type, json_t **out) {
    json_error_t err;
    *out = json_loads(text, JSON_DECODE_ANY, &err);
    if (!*out)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "chat template: %s is not JSON: %s (column %d)",
                        what, err.text, err.column);
    if (json_typeof(*out) != type) {
        json_decref(*out);
        *out = NULL;
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "chat template: %s must be a JSON %s", what,
                        type == JSON_ARRAY ? "array" : "object");
    }
    return SYN_OK;
}

/* The template's variables; messages is taken over (its reference). */
static syn_status build_variables(const syn_model *model, json_t *messages,
                                  const syn_chat_params *p, json_t **out) {
    const syn_tokenizer *tok = syn_model_tokenizer(model);
    json_t *vars = NULL;
    syn_status st = SYN_OK;
    if (p->variables_json)
        st = parse_json(p->variables_json, "the extra variables", JSON_OBJECT, &vars);
    else if (!(vars = json_object()))
        st = NO_MEMORY();
    if (st != SYN_OK) {
        json_decref(messages);
        return st;
    }
    json_t *tools = NULL;
    if (p->tools_json && (st = parse_json(p->tools_json, "tools", JSON_ARRAY, &tools)) != SYN_OK) {
        json_decref(messages);
        json_decref(vars);
        return st;
    }
    if (json_object_set_new(vars, "messages", messages) != 0 ||
        json_object_set_new(vars, "add_generation_prompt",
                            json_boolean(p->add_generation_prompt)) != 0 ||
        json_object_set_new(vars, "bos_token", token_text(tok, syn_tokenizer_bos(tok))) != 0 ||
        json_object_set_new(vars, "eos_token", token_text(tok, syn_tokenizer_eos(tok))) != 0 ||
        (tools && json_object_set_new(vars, "tools", tools) != 0)) {
        json_decref(vars);
        return NO_MEMORY();
    }
    *out = vars;
    return SYN_OK;
}

static syn_status render(const syn_model *model, const syn_chat_params *p, json_t *messages,
                         char **text, size_t *n_bytes) {
    const char *source = p->template_source;
    if (!source) source = syn_tokenizer_chat_template(syn_model_tokenizer(model));
    if (!source) {
        json_decref(messages);
        return syn_fail(SYN_ERR_UNSUPPORTED, "the model has no tokenizer.chat_template (give a "
                                             "template: --chat-template-file)");
    }
    json_t *vars = NULL;
    syn_status st = build_variables(model, messages, p, &vars);
    if (st != SYN_OK) return st;
    syn_template *t;
    st = syn_template_parse(source, strlen(source), &t);
    if (st == SYN_OK) {
        st = syn_template_render(t, vars, p->now_unix, text, n_bytes);
        syn_template_free(t);
    }
    json_decref(vars);
    return st;
}

syn_status syn_chat_render(const syn_model *model, const syn_chat_params *params, char **text,
                           size_t *n_bytes) {
    if (!model || !params || !text || !n_bytes || !params->messages_json)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_chat_render: %s is NULL",
                        !model     ? "model"
                        : !params  ? "params"
                        : !text    ? "text"
                        : !n_bytes ? "n_bytes"
                                   : "params->messages_json");
    *text = NULL;
    *n_bytes = 0;
    json_t *messages;
    syn_status st = parse_json(params->messages_json, "messages", JSON_ARRAY, &messages);
    if (st != SYN_OK) return st;
    return render(model, params, messages, text, n_bytes);
}

/* messages as the JSON array a template reads. */
static syn_status messages_to_json(const syn_chat_message *messages, size_t n, json_t **out) {
    json_t *arr = json_array();
    if (!arr) return NO_MEMORY();
    for (size_t i = 0; i < n; i++) {
        if (!messages[i].role || !messages[i].content) {
            json_decref(arr);
            return syn_fail(SYN_ERR_INVALID_ARGUMENT, "messages[%zu].%s is NULL", i,
                            !messages[i].role ? "role" : "content");
        }
        json_t *m =
            json_pack("{s:s,s:s}", "role", messages[i].role, "content", messages[i].content);
        if (!m) {
            json_decref(arr);
            return syn_fail(SYN_ERR_INVALID_ARGUMENT, "messages[%zu] is not UTF-8", i);
        }
        json_array_append_new(arr, m);
    }
    *out = arr;
    return SYN_OK;
}

syn_status syn_chat_format_new(const syn_model *model, const char *template_source,
                               const syn_chat_message *messages, size_t n_messages,
                               bool add_assistant_prompt, char **text, size_t *n_bytes) {
    if (!model || !text || !n_bytes || (!messages && n_messages > 0))
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_chat_format: %s is NULL",
                        !model     ? "model"
                        : !text    ? "text"
                        : !n_bytes ? "n_bytes"
                                   : "messages");
    *text = NULL;
    json_t *arr = NULL;
    syn_status st = messages_to_json(messages, n_messages, &arr);
    if (st != SYN_OK) return st;
    syn_chat_params p = syn_chat_default_params();
    p.template_source = template_source;
    p.add_generation_prompt = add_assistant_prompt;
    return render(model, &p, arr, text, n_bytes);
}

syn_status syn_chat_format(const syn_model *model, const char *template_source,
                           const syn_chat_message *messages, size_t n_messages,
                           bool add_assistant_prompt, char *buf, size_t cap, size_t *n_bytes) {
    if (!n_bytes || (!buf && cap > 0))
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_chat_format: %s is NULL",
                        !n_bytes ? "n_bytes" : "buf");
    char *text;
    size_t n;
    syn_status st = syn_chat_format_new(model, template_source, messages, n_messages,
                                        add_assistant_prompt, &text, &n);
    if (st != SYN_OK) return st;
    *n_bytes = n;
    if (n >= cap) {
        if (cap > 0) {
            memcpy(buf, text, cap - 1);
            buf[cap - 1] = '\0';
        }
        free(text);
        return syn_fail(SYN_ERR_BUFFER_TOO_SMALL,
                        "syn_chat_format: the text needs %zu bytes and a NUL, cap is %zu", n, cap);
    }
    memcpy(buf, text, n + 1);
    free(text);
    return SYN_OK;
}

syn_status syn_template_render_json(const char *source, size_t n, const char *variables_json,
                                    int64_t now_unix, char **text, size_t *n_bytes) {
    if (!source || !text || !n_bytes)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_template_render_json: %s is NULL",
                        !source ? "source"
                        : !text ? "text"
                                : "n_bytes");
    *text = NULL;
    *n_bytes = 0;
    json_t *vars = NULL;
    if (variables_json) {
        syn_status st = parse_json(variables_json, "the variables", JSON_OBJECT, &vars);
        if (st != SYN_OK) return st;
    }
    syn_template *t;
    syn_status st = syn_template_parse(source, n, &t);
    if (st == SYN_OK) {
        st = syn_template_render(t, vars, now_unix, text, n_bytes);
        syn_template_free(t);
    }
    json_decref(vars);
    return st;
}
