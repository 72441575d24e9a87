/* anthropic_json.c: Anthropic's Messages API shapes: the message object of a whole reply, the
 * streamed events and the error body. The request itself becomes a chat request in
 * anthropic_request.c; completions.c runs it and answers through these. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/output.h"
#include "server.h"
#include "synapse_internal.h"

/* Anthropic's error type for an HTTP status. */
static const char *error_type(unsigned status) {
    switch (status) {
    case 400:
    case 405: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return "api_error";
    }
}

json_t *anthropic_error_body(unsigned status, const char *message) {
    return json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "type", error_type(status),
                     "message", message);
}

/* Anthropic's id for a call: "toolu_" and the call id's letters. */
static void tool_use_id(const char *call_id, char *out, size_t cap) {
    if (strncmp(call_id, "call_", 5) == 0) call_id += 5;
    snprintf(out, cap, "toolu_%s", call_id);
}

const char *anthropic_stop_reason(syn_finish_reason finish, bool calls, const char *stop_word) {
    if (finish == SYN_FINISH_LENGTH) return "max_tokens";
    if (calls) return "tool_use";
    return stop_word ? "stop_sequence" : "end_turn";
}

/* A tool_use block; arguments: the call's JSON object as text (an empty input if it is not). */
static json_t *tool_use_block(const char *call_id, const char *name, const char *arguments) {
    char id[64];
    tool_use_id(call_id, id, sizeof id);
    json_t *input = arguments ? json_loads(arguments, 0, NULL) : NULL;
    if (!json_is_object(input)) {
        json_decref(input);
        input = json_object();
    }
    return json_pack("{s:s, s:s, s:s, s:o}", "type", "tool_use", "id", id, "name", name, "input",
                     input);
}

static json_t *usage(uint64_t input_tokens, uint64_t output_tokens) {
    return json_pack("{s:I, s:I}", "input_tokens", (json_int_t)input_tokens, "output_tokens",
                     (json_int_t)output_tokens);
}

json_t *anthropic_message_json(const char *id, const char *model, const json_t *msg,
                               const char *stop_reason, const char *stop_sequence,
                               uint64_t input_tokens, uint64_t output_tokens) {
    json_t *content = json_array();
    const char *reasoning = json_string_value(json_object_get(msg, "reasoning_content"));
    const char *text = json_string_value(json_object_get(msg, "content"));
    /* the signature is Anthropic's proof of its own thinking; there is none to give here */
    if (reasoning)
        json_array_append_new(content, json_pack("{s:s, s:s, s:s}", "type", "thinking", "thinking",
                                                 reasoning, "signature", ""));
    if (text && *text)
        json_array_append_new(content, json_pack("{s:s, s:s}", "type", "text", "text", text));
    size_t i;
    json_t *call;
    json_array_foreach(json_object_get(msg, "tool_calls"), i, call) {
        const json_t *fn = json_object_get(call, "function");
        json_array_append_new(content,
                              tool_use_block(json_string_value(json_object_get(call, "id")),
                                             json_string_value(json_object_get(fn, "name")),
                                             json_string_value(json_object_get(fn, "arguments"))));
    }
    return json_pack("{s:s, s:s, s:s, s:s, s:o, s:s, s:s?, s:o}", "id", id, "type", "message",
                     "role", "assistant", "model", model, "content", content, "stop_reason",
                     stop_reason, "stop_sequence", stop_sequence, "usage",
                     usage(input_tokens, output_tokens));
}

/* ---- Streaming ---- */

/* Appends "event: TYPE\ndata: {"type": TYPE, fields...}\n\n" (steals fields). */
static void event(text_buf *sse, const char *type, json_t *fields) {
    json_t *ev = json_pack("{s:s}", "type", type);
    if (ev && fields) json_object_update(ev, fields);
    json_decref(fields);
    char *s = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
    json_decref(ev);
    if (!s) return;
    text_append(sse, "event: ", 7);
    text_append(sse, type, strlen(type));
    text_append(sse, "\ndata: ", 7);
    text_append(sse, s, strlen(s));
    text_append(sse, "\n\n", 2);
    free(s);
}

void anthropic_stream_start(anthropic_stream *s, text_buf *sse, const char *id, const char *model,
                            uint64_t input_tokens) {
    s->block = -1;
    s->n_blocks = 0;
    event(sse, "message_start",
          json_pack("{s:{s:s, s:s, s:s, s:s, s:[], s:n, s:n, s:o}}", "message", "id", id, "type",
                    "message", "role", "assistant", "model", model, "content", "stop_reason",
                    "stop_sequence", "usage", usage(input_tokens, 0)));
    event(sse, "ping", NULL);
}

static void close_block(anthropic_stream *s, text_buf *sse) {
    if (s->block < 0) return;
    event(sse, "content_block_stop", json_pack("{s:I}", "index", (json_int_t)s->n_blocks - 1));
    s->block = -1;
}

/* Opens block (stolen) as the next content block, of kind (a syn_chat_event_kind). */
static void open_block(anthropic_stream *s, text_buf *sse, int kind, json_t *block) {
    close_block(s, sse);
    event(sse, "content_block_start",
          json_pack("{s:I, s:o}", "index", (json_int_t)s->n_blocks, "content_block", block));
    s->n_blocks++;
    s->block = kind;
}

static void delta(anthropic_stream *s, text_buf *sse, json_t *d) {
    event(sse, "content_block_delta",
          json_pack("{s:I, s:o}", "index", (json_int_t)s->n_blocks - 1, "delta", d));
}

void anthropic_stream_event(anthropic_stream *s, text_buf *sse, const syn_chat_event *ev) {
    switch (ev->kind) {
    case SYN_CHAT_CONTENT:
    case SYN_CHAT_REASONING: {
        if (ev->len == 0) return;
        const bool thinking = ev->kind == SYN_CHAT_REASONING;
        if (s->block != (int)ev->kind)
            open_block(s, sse, (int)ev->kind,
                       thinking ? json_pack("{s:s, s:s, s:s}", "type", "thinking", "thinking", "",
                                            "signature", "")
                                : json_pack("{s:s, s:s}", "type", "text", "text", ""));
        delta(s, sse,
              json_pack("{s:s, s:o}", "type", thinking ? "thinking_delta" : "text_delta",
                        thinking ? "thinking" : "text", json_utf8(ev->text, ev->len)));
        return;
    }
    case SYN_CHAT_CALL_BEGIN: {
        char id[64];
        tool_use_id(ev->id, id, sizeof id);
        open_block(s, sse, (int)ev->kind,
                   json_pack("{s:s, s:s, s:s, s:{}}", "type", "tool_use", "id", id, "name",
                             ev->name, "input"));
        return;
    }
    case SYN_CHAT_CALL_ARGUMENTS:
        delta(s, sse,
              json_pack("{s:s, s:o}", "type", "input_json_delta", "partial_json",
                        json_utf8(ev->text, ev->len)));
        return;
    case SYN_CHAT_CALL_END: close_block(s, sse); return;
    }
}

void anthropic_stream_end(anthropic_stream *s, text_buf *sse, const char *stop_reason,
                          const char *stop_sequence, uint64_t input_tokens,
                          uint64_t output_tokens) {
    close_block(s, sse);
    event(sse, "message_delta",
          json_pack("{s:{s:s, s:s?}, s:o}", "delta", "stop_reason", stop_reason, "stop_sequence",
                    stop_sequence, "usage", usage(input_tokens, output_tokens)));
    event(sse, "message_stop", NULL);
}

void anthropic_stream_error(text_buf *sse, unsigned status, const char *message) {
    json_t *body = anthropic_error_body(status, message);
    if (body) json_object_del(body, "type"); /* event() puts it first */
    event(sse, "error", body);
}
