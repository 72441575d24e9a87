/* completions.c: POST /v1/chat/completions and /v1/completions. One engine request per choice
 * of an HTTP request ("n" of them); the engine's token callback (scheduler thread) appends to its
 * choice under the completion's mutex, and the connection's thread sends what is there:
 * server-sent events as tokens come when streaming (the choices' chunks interleaved), one JSON
 * object at the end otherwise. Choices after the first are submitted once the first has its first
 * token, so that they find its prompt's KV blocks in the engine's prefix cache instead of
 * computing the prompt again. A client that goes away cancels its requests. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common/output.h"
#include "common/text.h"
#include "openai_request.h"
#include "server.h"
#include "synapse_internal.h"

/* How often a waiting connection thread looks at its client when no token comes. */
enum { CLIENT_CHECK_MS = 20 };

typedef struct completion completion;

/* One choice: its engine request and what it produced. text, logprobs, finished and n_generated
 * are shared with the engine's callback under c->mu; the rest belongs to the connection's thread
 * (handle is also read by completions_cancel_all, under srv->completions_lock). */
typedef struct choice_state {
    completion *c;
    int index;
    syn_request *handle;    /* NULL until submitted (set under srv->completions_lock) */
    syn_request_result res; /* once closed */
    char error[256];        /* res.error of a choice whose submission failed */
    text_buf text;          /* generated text not yet sent (streaming), or all of it */
    json_t *logprobs;       /* entries not yet sent (streaming), or all of them; NULL: not asked */
    bool finished;          /* the engine's final event has been seen (or the submission failed) */
    bool closed;            /* res is read (streaming: its last chunk is in sse) */
    uint64_t n_generated;

    /* Streaming only. */
    syn_chat_stream *reader; /* chat with tools or thinking, and /v1/responses: the reply read
                              * into content, reasoning and calls as it comes */
    bool role_sent; /* chat: the first chunk carries the role; responses: the first events */
} choice_state;

struct completion {
    server *srv;
    struct completion *prev, *next; /* srv->completions, once submitted */
    served_model *model;            /* held until the completion is freed */
    http_request *hr;
    oa_request req;
    char id[48];
    long long created;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    choice_state ch[OA_MAX_N]; /* [req.n] */
    int n_submitted; /* ch[0 .. n_submitted) have been submitted (srv->completions_lock) */
    syn_request_params params; /* what every choice is submitted with (its seed + index) */
    char *constraint;          /* a grammar or schema text built for params */

    /* Streaming only. */
    text_buf sse;     /* event bytes built but not yet sent */
    size_t sse_sent;  /* of sse.len */
    bool ended;       /* the last event ("data: [DONE]") is in sse */
    bool cause_known; /* a cancel of its request needs no disconnect count: counted already, or
                       * the server's own failure */

    /* Streamed /v1/responses. */
    json_int_t seq;     /* the next event's sequence_number */
    int item;           /* the open message or reasoning item: its syn_chat_event_kind, or -1 */
    char call_id[40];   /* the call being streamed */
    text_buf item_text; /* that item's text so far */
    json_t *output;     /* the finished output items */

    /* Streamed /v1/messages. */
    anthropic_stream msg_stream;
    uint64_t n_input_tokens; /* the prompt's, for message_start (the engine counts them later) */

    char *prompt; /* a chat's prompt, rendered by the chat template (NULL for completions) */
};

/* {"token", "logprob", "bytes"} of one token; NULL: no memory. */
static json_t *token_logprob(const syn_tokenizer *tok, int32_t id, double logprob) {
    char bytes[256];
    size_t len = 0;
    if (syn_tokenizer_token_bytes(tok, id, bytes, sizeof bytes, &len) != SYN_OK) len = 0;
    json_t *b = json_array();
    for (size_t i = 0; b && i < len; i++)
        json_array_append_new(b, json_integer((unsigned char)bytes[i]));
    return json_pack("{s:o, s:f, s:o}", "token", json_utf8(bytes, len), "logprob", logprob, "bytes",
                     b);
}

/* The logprob entry of the token just sampled: the log-softmax of the raw logits (before
 * temperature and truncation), with the top_n most likely tokens as alternatives. */
static json_t *logprob_entry(const syn_tokenizer *tok, const syn_token_event *ev, int32_t top_n) {
    const float *l = ev->logits;
    float max = l[0];
    for (int32_t i = 1; i < ev->n_vocab; i++)
        max = l[i] > max ? l[i] : max;
    double sum = 0;
    for (int32_t i = 0; i < ev->n_vocab; i++)
        sum += exp((double)l[i] - max);
    const double log_z = max + log(sum);

    int32_t top[OA_MAX_TOP_LOGPROBS], n_top = 0; /* ids by falling logit */
    for (int32_t i = 0; i < ev->n_vocab && top_n > 0; i++) {
        if (n_top == top_n && l[i] <= l[top[n_top - 1]]) continue;
        int32_t j = n_top < top_n ? n_top++ : n_top - 1;
        for (; j > 0 && l[top[j - 1]] < l[i]; j--)
            top[j] = top[j - 1];
        top[j] = i;
    }
    json_t *entry = token_logprob(tok, ev->token, l[ev->token] - log_z), *alts = json_array();
    for (int32_t k = 0; alts && k < n_top; k++)
        json_array_append_new(alts, token_logprob(tok, top[k], l[top[k]] - log_z));
    if (!entry || !alts || json_object_set_new(entry, "top_logprobs", alts) != 0) {
        json_decref(entry);
        return NULL;
    }
    return entry;
}

/* The engine's callback (scheduler thread): keep the choice's text and logprobs, wake the
 * connection. */
static bool on_token(const syn_token_event *ev, void *user) {
    choice_state *ch = user;
    completion *c = ch->c;
    json_t *lp = NULL;
    if (ev->token >= 0 && c->req.top_logprobs >= 0)
        lp = logprob_entry(c->model->tok, ev, c->req.top_logprobs);
    pthread_mutex_lock(&c->mu);
    text_append(&ch->text, ev->piece, ev->piece_len);
    if (lp) json_array_append_new(ch->logprobs, lp);
    if (ev->token >= 0) ch->n_generated++;
    if (ev->finish != SYN_FINISH_NONE) ch->finished = true;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return true;
}

static const char *finish_reason(syn_finish_reason f) {
    return f == SYN_FINISH_LENGTH ? "length" : "stop";
}

/* Tokens generated over the choices (every one closed). */
static size_t completion_tokens(const completion *c) {
    size_t n = 0;
    for (int i = 0; i < c->req.n; i++)
        n += c->ch[i].res.n_tokens;
    return n;
}

/* As OpenAI counts: the prompt once, the generated tokens of every choice; cached_tokens: what
 * the prefix cache saved the first choice (the later ones reuse its blocks, see the top). */
static json_t *usage_json(const completion *c) {
    const syn_request_result *first = &c->ch[0].res;
    const size_t generated = completion_tokens(c);
    return json_pack("{s:I, s:I, s:I, s:{s:I}}", "prompt_tokens",
                     (json_int_t)first->n_prompt_tokens, "completion_tokens", (json_int_t)generated,
                     "total_tokens", (json_int_t)(first->n_prompt_tokens + generated),
                     "prompt_tokens_details", "cached_tokens", (json_int_t)first->n_cached_tokens);
}

/* The logprobs object of a choice from entries (stolen): chat's {"content": [...]}, or the legacy
 * completions shape {"tokens", "token_logprobs", "top_logprobs", "text_offset"}. */
static json_t *choice_logprobs(const completion *c, json_t *entries, size_t text_offset) {
    if (!entries) return json_null();
    if (c->req.kind == OA_CHAT) return json_pack("{s:o}", "content", entries);
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(),
           *offsets = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e) {
        json_t *token = json_object_get(e, "token");
        json_array_append(tokens, token);
        json_array_append(lps, json_object_get(e, "logprob"));
        json_t *top = json_object(), *alt;
        size_t k;
        json_array_foreach(json_object_get(e, "top_logprobs"), k, alt) json_object_set(
            top, json_string_value(json_object_get(alt, "token")), json_object_get(alt, "logprob"));
        json_array_append_new(tops, top);
        json_array_append_new(offsets, json_integer((json_int_t)text_offset));
        text_offset += json_string_length(token);
    }
    json_decref(entries);
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", tokens, "token_logprobs", lps,
                     "top_logprobs", tops, "text_offset", offsets);
}

/* The chat template the server renders with: --chat-template-file's, else the model's own. */
static const char *chat_template_of(const completion *c) {
    return c->srv->opts.chat_template ? c->srv->opts.chat_template
                                      : syn_tokenizer_chat_template(c->model->tok);
}

syn_status completions_render_chat(const server *srv, const served_model *m, const oa_request *req,
                                   char **prompt) {
    syn_chat_params chat = syn_chat_default_params();
    chat.template_source = srv->opts.chat_template;
    char *messages = json_dumps(req->template_messages, JSON_COMPACT);
    char *tools = req->tools ? json_dumps(req->tools, JSON_COMPACT) : NULL;
    char *variables =
        req->chat_template_kwargs ? json_dumps(req->chat_template_kwargs, JSON_COMPACT) : NULL;
    syn_status st;
    if (!messages || (req->tools && !tools) || (req->chat_template_kwargs && !variables)) {
        st = syn_fail(SYN_ERR_NO_MEMORY, "chat prompt: out of memory");
    } else {
        chat.messages_json = messages;
        chat.tools_json = tools;
        chat.variables_json = variables;
        size_t n;
        st = syn_chat_render(m->model, &chat, prompt, &n);
    }
    free(messages);
    free(tools);
    free(variables);
    return st;
}

/* A response object's common head: id, object, created, model. */
static json_t *response_head(const completion *c, const char *object) {
    return json_pack("{s:s, s:s, s:I, s:s}", "id", c->id, "object", object, "created",
                     (json_int_t)c->created, "model", c->model->alias);
}

/* Whether the prompt the engine renders for c's messages ends inside an open <think> (QwQ's and
 * DeepSeek R1's generation prompts): then the reply starts as reasoning. */
static bool prompt_opens_think(const completion *c) {
    size_t n = c->prompt ? strlen(c->prompt) : 0;
    while (n > 0 && (c->prompt[n - 1] == '\n' || c->prompt[n - 1] == ' '))
        n--;
    return n >= 7 && memcmp(c->prompt + n - 7, "<think>", 7) == 0;
}

/* The assistant message of a whole chat reply: the model's text read back in its template's
 * syntax, reasoning apart and, when the request offered tools, the calls it wrote (then the
 * choice's finish_reason becomes "tool_calls"). Falls back to the plain text without memory. */
static json_t *chat_message(const completion *c, const char *text, size_t len, json_t *choice) {
    const char *tmpl = chat_template_of(c);
    const syn_tool_syntax syntax =
        c->req.tool_choice != OA_TOOLS_NONE ? syn_tool_syntax_detect(tmpl) : SYN_TOOLS_NONE;
    syn_chat_output out;
    uint64_t seed;
    if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed) seed = (uint64_t)syn_now_ms();
    const bool thinks = syn_template_thinks(tmpl);
    if (syn_chat_output_parse(text, len, syntax, thinks, thinks && prompt_opens_think(c),
                              c->req.tools, seed, &out) != SYN_OK)
        return json_pack("{s:s, s:o}", "role", "assistant", "content", json_utf8(text, len));
    /* A forced call is well-formed by construction, but max_tokens may cut a later one: the
     * calls before it are whole (the stream has sent them already), the cut tail is dropped. */
    const bool forced =
        c->req.tool_choice == OA_TOOLS_REQUIRED || c->req.tool_choice == OA_TOOLS_NAMED;
    const json_t *finish = json_object_get(choice, "finish_reason");
    if (!out.tool_calls && forced && json_is_string(finish) &&
        strcmp(json_string_value(finish), "length") == 0) {
        size_t n = 0;
        char *calls = syn_chat_output_whole_calls(text, len, syntax, &n);
        syn_chat_output whole;
        if (calls && syn_chat_output_parse(calls, n, syntax, thinks, false, c->req.tools, seed,
                                           &whole) == SYN_OK) {
            if (whole.tool_calls) {
                syn_chat_output_free(&out);
                out = whole;
            } else {
                syn_chat_output_free(&whole);
            }
        }
        free(calls);
    }
    json_t *msg = json_pack("{s:s}", "role", "assistant");
    if (msg) {
        json_object_set_new(msg, "content",
                            out.tool_calls && !out.content[0]
                                ? json_null()
                                : json_utf8(out.content, strlen(out.content)));
        if (out.reasoning)
            json_object_set_new(msg, "reasoning_content",
                                json_utf8(out.reasoning, strlen(out.reasoning)));
        if (out.tool_calls) {
            json_object_set(msg, "tool_calls", out.tool_calls);
            json_object_set_new(choice, "finish_reason", json_string("tool_calls"));
        }
    }
    syn_chat_output_free(&out);
    return msg;
}

/* A choice: chat carries the text in message (whole) or delta (stream); completions in text. */
static json_t *choice_json(const choice_state *ch, bool stream, const char *text, size_t len,
                           json_t *logprobs, const char *finish) {
    const completion *c = ch->c;
    json_t *choice = json_pack("{s:i, s:o, s:o}", "index", ch->index, "logprobs", logprobs,
                               "finish_reason", finish ? json_string(finish) : json_null());
    if (!choice) return NULL;
    if (c->req.kind == OA_COMPLETION) {
        json_object_set_new(choice, "text", json_utf8(text, len));
    } else if (!stream) {
        json_object_set_new(choice, "message", chat_message(c, text, len, choice));
    } else {
        json_t *delta = json_object();
        if (!ch->role_sent) json_object_set_new(delta, "role", json_string("assistant"));
        if (len > 0 || !ch->role_sent) json_object_set_new(delta, "content", json_utf8(text, len));
        json_object_set_new(choice, "delta", delta);
    }
    return choice;
}

/* Appends "data: JSON\n\n" (steals obj). */
static void sse_event(completion *c, json_t *obj) {
    char *s = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    json_decref(obj);
    if (!s) return;
    text_append(&c->sse, "data: ", 6);
    text_append(&c->sse, s, strlen(s));
    text_append(&c->sse, "\n\n", 2);
    free(s);
}

/* A chunk of a choice's streamed text (and its logprobs); finish: NULL, or the last chunk's
 * reason. */
static void sse_chunk(choice_state *ch, const char *text, size_t len, json_t *logprobs,
                      const char *finish) {
    completion *c = ch->c;
    if (c->req.native) { /* llama-server's /completion: {"content", "stop": false} */
        json_decref(logprobs);
        sse_event(c, llama_stream_chunk(text, len));
        return;
    }
    json_t *chunk =
        response_head(c, c->req.kind == OA_CHAT ? "chat.completion.chunk" : "text_completion");
    json_t *choice = choice_json(ch, true, text, len, logprobs, finish);
    if (chunk && choice)
        json_object_set_new(chunk, "choices", json_pack("[o]", choice));
    else
        json_decref(choice);
    if (chunk && c->req.include_usage) json_object_set_new(chunk, "usage", json_null());
    ch->role_sent = true;
    sse_event(c, chunk);
}

/* ---- The Responses API's objects ---- */

/* An output item's id: its kind's prefix, the response's letters and its place in the output. */
static void item_id(const completion *c, const char *prefix, size_t index, char *out, size_t cap) {
    snprintf(out, cap, "%s%s_%zu", prefix, c->id + 9, index);
}

/* A message item; text NULL: just opened, with no content part yet. */
static json_t *message_item(const char *id, const char *status, const char *text) {
    json_t *parts =
        text ? json_pack("[{s:s, s:s, s:[]}]", "type", "output_text", "text", text, "annotations")
             : json_array();
    return json_pack("{s:s, s:s, s:s, s:s, s:o}", "type", "message", "id", id, "status", status,
                     "role", "assistant", "content", parts);
}

static json_t *reasoning_item(const char *id, const char *text) {
    json_t *parts =
        text ? json_pack("[{s:s, s:s}]", "type", "reasoning_text", "text", text) : json_array();
    return json_pack("{s:s, s:s, s:[], s:o}", "type", "reasoning", "id", id, "summary", "content",
                     parts);
}

static json_t *function_call_item(const char *call_id, const char *name, const char *arguments,
                                  const char *status) {
    return json_pack("{s:s, s:s+, s:s, s:s, s:s, s:s}", "type", "function_call", "id", "fc_",
                     call_id, "call_id", call_id, "name", name, "arguments", arguments, "status",
                     status);
}

/* The response object (steals output and error): status "in_progress", "completed",
 * "incomplete" (max_output_tokens cut it) or "failed"; usage once res is known (NULL: not yet). */
static json_t *response_object(const completion *c, const char *status, json_t *output,
                               const syn_request_result *res, json_t *error) {
    const bool cut = strcmp(status, "incomplete") == 0;
    json_t *r = json_pack(
        "{s:s+, s:s, s:I, s:s, s:s, s:o, s:o, s:o}", "id", "resp_", c->id + 9, "object", "response",
        "created_at", (json_int_t)c->created, "model", c->model->alias, "status", status, "error",
        error ? error : json_null(), "incomplete_details",
        cut ? json_pack("{s:s}", "reason", "max_output_tokens") : json_null(), "output", output);
    if (r)
        json_object_set_new(r, "usage",
                            res ? json_pack("{s:I, s:I, s:I}", "input_tokens",
                                            (json_int_t)res->n_prompt_tokens, "output_tokens",
                                            (json_int_t)res->n_tokens, "total_tokens",
                                            (json_int_t)(res->n_prompt_tokens + res->n_tokens))
                                : json_null());
    return r;
}

/* The Responses API's object for a finished chat reply (chat, the chat.completion object):
 * output items for the reasoning, the text and each call; status incomplete when max_output_tokens
 * cut it. */
static json_t *responses_body(const completion *c, const json_t *chat,
                              const syn_request_result *res) {
    const json_t *choice = json_array_get(json_object_get(chat, "choices"), 0);
    const json_t *msg = json_object_get(choice, "message");
    json_t *output = json_array();
    char id[96];
    const char *reasoning = json_string_value(json_object_get(msg, "reasoning_content"));
    if (reasoning) {
        item_id(c, "rs_", json_array_size(output), id, sizeof id);
        json_array_append_new(output, reasoning_item(id, reasoning));
    }
    const char *text = json_string_value(json_object_get(msg, "content"));
    if (text && *text) {
        item_id(c, "msg_", json_array_size(output), id, sizeof id);
        json_array_append_new(output, message_item(id, "completed", text));
    }
    size_t i;
    json_t *call;
    json_array_foreach(json_object_get(msg, "tool_calls"), i, call) {
        const json_t *fn = json_object_get(call, "function");
        json_array_append_new(
            output,
            function_call_item(json_string_value(json_object_get(call, "id")),
                               json_string_value(json_object_get(fn, "name")),
                               json_string_value(json_object_get(fn, "arguments")), "completed"));
    }
    return response_object(c, res->finish == SYN_FINISH_LENGTH ? "incomplete" : "completed", output,
                           res, NULL);
}

/* ---- Streamed /v1/responses: the Responses API's events ---- */

/* Appends "event: TYPE\ndata: {"type", "sequence_number", fields...}\n\n" (steals fields). */
static void sse_response_event(completion *c, const char *type, json_t *fields) {
    json_t *ev = json_pack("{s:s, s:I}", "type", type, "sequence_number", c->seq++);
    if (ev && fields) json_object_update(ev, fields);
    json_decref(fields);
    char *s = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
    json_decref(ev);
    if (!s) return;
    text_append(&c->sse, "event: ", 7);
    text_append(&c->sse, type, strlen(type));
    text_append(&c->sse, "\ndata: ", 7);
    text_append(&c->sse, s, strlen(s));
    text_append(&c->sse, "\n\n", 2);
    free(s);
}

/* The open message or reasoning item's id (it is the next in the output). */
static void open_item_id(const completion *c, char *id, size_t cap) {
    item_id(c, c->item == SYN_CHAT_REASONING ? "rs_" : "msg_", json_array_size(c->output), id, cap);
}

/* Ends the open message or reasoning item: its text's done event, its part's and its own. */
static void close_item(completion *c) {
    if (c->item < 0) return;
    const bool reasoning = c->item == SYN_CHAT_REASONING;
    char id[96];
    open_item_id(c, id, sizeof id);
    const json_int_t index = (json_int_t)json_array_size(c->output);
    json_t *text = json_utf8(c->item_text.data ? c->item_text.data : "", c->item_text.len);
    const char *t = json_string_value(text);
    if (reasoning) {
        sse_response_event(c, "response.reasoning_text.done",
                           json_pack("{s:s, s:I, s:i, s:O}", "item_id", id, "output_index", index,
                                     "content_index", 0, "text", text));
        sse_response_event(c, "response.content_part.done",
                           json_pack("{s:s, s:I, s:i, s:{s:s, s:O}}", "item_id", id, "output_index",
                                     index, "content_index", 0, "part", "type", "reasoning_text",
                                     "text", text));
    } else {
        sse_response_event(c, "response.output_text.done",
                           json_pack("{s:s, s:I, s:i, s:O, s:[]}", "item_id", id, "output_index",
                                     index, "content_index", 0, "text", text, "logprobs"));
        sse_response_event(c, "response.content_part.done",
                           json_pack("{s:s, s:I, s:i, s:{s:s, s:O, s:[]}}", "item_id", id,
                                     "output_index", index, "content_index", 0, "part", "type",
                                     "output_text", "text", text, "annotations"));
    }
    json_t *item =
        t ? (reasoning ? reasoning_item(id, t) : message_item(id, "completed", t)) : NULL;
    json_decref(text);
    sse_response_event(c, "response.output_item.done",
                       json_pack("{s:I, s:O}", "output_index", index, "item", item));
    json_array_append_new(c->output, item);
    c->item = -1;
    c->item_text.len = 0;
}

/* A call's events as the Responses API's: the function_call item added, its arguments' deltas,
 * and at its end the arguments done and the item done. */
static void call_event(completion *c, const syn_chat_event *ev) {
    const json_int_t index = (json_int_t)json_array_size(c->output);
    char item[48];
    snprintf(item, sizeof item, "fc_%s", ev->kind == SYN_CHAT_CALL_ARGUMENTS ? c->call_id : ev->id);
    if (ev->kind == SYN_CHAT_CALL_BEGIN) {
        close_item(c);
        snprintf(c->call_id, sizeof c->call_id, "%s", ev->id);
        sse_response_event(c, "response.output_item.added",
                           json_pack("{s:I, s:o}", "output_index", index, "item",
                                     function_call_item(ev->id, ev->name, "", "in_progress")));
    } else if (ev->kind == SYN_CHAT_CALL_ARGUMENTS) {
        sse_response_event(c, "response.function_call_arguments.delta",
                           json_pack("{s:s, s:I, s:o}", "item_id", item, "output_index", index,
                                     "delta", json_utf8(ev->text, ev->len)));
    } else {
        sse_response_event(c, "response.function_call_arguments.done",
                           json_pack("{s:s, s:I, s:s, s:s}", "item_id", item, "output_index", index,
                                     "name", ev->name, "arguments", ev->arguments));
        json_t *done = function_call_item(ev->id, ev->name, ev->arguments, "completed");
        sse_response_event(c, "response.output_item.done",
                           json_pack("{s:I, s:O}", "output_index", index, "item", done));
        json_array_append_new(c->output, done);
    }
}

/* One event of the reply's reader as the Responses API's events. */
static void response_chat_event(completion *c, const syn_chat_event *ev) {
    char id[96];
    if (ev->kind == SYN_CHAT_CALL_BEGIN || ev->kind == SYN_CHAT_CALL_ARGUMENTS ||
        ev->kind == SYN_CHAT_CALL_END) {
        call_event(c, ev);
        return;
    }
    const bool reasoning = ev->kind == SYN_CHAT_REASONING;
    if (c->item != (int)ev->kind) { /* a new item, and its one content part */
        close_item(c);
        c->item = (int)ev->kind;
        open_item_id(c, id, sizeof id);
        const json_int_t index = (json_int_t)json_array_size(c->output);
        sse_response_event(c, "response.output_item.added",
                           json_pack("{s:I, s:o}", "output_index", index, "item",
                                     reasoning ? reasoning_item(id, NULL)
                                               : message_item(id, "in_progress", NULL)));
        sse_response_event(c, "response.content_part.added",
                           reasoning
                               ? json_pack("{s:s, s:I, s:i, s:{s:s, s:s}}", "item_id", id,
                                           "output_index", index, "content_index", 0, "part",
                                           "type", "reasoning_text", "text", "")
                               : json_pack("{s:s, s:I, s:i, s:{s:s, s:s, s:[]}}", "item_id", id,
                                           "output_index", index, "content_index", 0, "part",
                                           "type", "output_text", "text", "", "annotations"));
    }
    open_item_id(c, id, sizeof id);
    text_append(&c->item_text, ev->text, ev->len);
    json_t *fields = json_pack("{s:s, s:I, s:i, s:o}", "item_id", id, "output_index",
                               (json_int_t)json_array_size(c->output), "content_index", 0, "delta",
                               json_utf8(ev->text, ev->len));
    if (fields && !reasoning) json_object_set_new(fields, "logprobs", json_array());
    sse_response_event(
        c, reasoning ? "response.reasoning_text.delta" : "response.output_text.delta", fields);
}

/* The first events: the response created and in progress. */
static void response_start(completion *c) {
    sse_response_event(c, "response.created",
                       json_pack("{s:o}", "response",
                                 response_object(c, "in_progress", json_array(), NULL, NULL)));
    sse_response_event(c, "response.in_progress",
                       json_pack("{s:o}", "response",
                                 response_object(c, "in_progress", json_array(), NULL, NULL)));
}

/* The last event: the response completed (or incomplete, or failed with err). */
static void response_end(completion *c, const syn_request_result *res, const oa_error *err) {
    close_item(c);
    json_t *output = c->output;
    c->output = NULL;
    if (err) {
        sse_response_event(c, "response.failed",
                           json_pack("{s:o}", "response",
                                     response_object(c, "failed", output, res,
                                                     json_pack("{s:s, s:s}", "code", "server_error",
                                                               "message", err->message))));
        return;
    }
    const bool cut = res->finish == SYN_FINISH_LENGTH;
    sse_response_event(
        c, cut ? "response.incomplete" : "response.completed",
        json_pack("{s:o}", "response",
                  response_object(c, cut ? "incomplete" : "completed", output, res, NULL)));
}

/* ---- Streamed chat with tools or reasoning ---- */

/* A chunk of a choice carrying delta (stolen), with the logprobs of the tokens since its last
 * chunk. */
static void sse_delta(choice_state *ch, json_t *delta) {
    completion *c = ch->c;
    json_t *lp = json_null();
    if (ch->logprobs && json_array_size(ch->logprobs) > 0) {
        lp = choice_logprobs(c, ch->logprobs, 0);
        ch->logprobs = json_array();
    }
    json_t *chunk = response_head(c, "chat.completion.chunk");
    json_t *choice = json_pack("{s:i, s:o, s:o, s:n}", "index", ch->index, "delta", delta,
                               "logprobs", lp, "finish_reason");
    if (chunk && choice)
        json_object_set_new(chunk, "choices", json_pack("[o]", choice));
    else
        json_decref(choice);
    if (chunk && c->req.include_usage) json_object_set_new(chunk, "usage", json_null());
    sse_event(c, chunk);
}

/* One event of the reply's reader as chat chunks. A call goes as OpenAI sends one: its index, id,
 * type and name first with empty arguments, then the arguments' pieces (one, the whole arguments,
 * unless the reader streams them). */
static void chat_event(choice_state *ch, const syn_chat_event *ev) {
    if (ev->kind == SYN_CHAT_CALL_BEGIN) {
        sse_delta(ch, json_pack("{s:[{s:I, s:s, s:s, s:{s:s, s:s}}]}", "tool_calls", "index",
                                (json_int_t)ev->index, "id", ev->id, "type", "function", "function",
                                "name", ev->name, "arguments", ""));
        return;
    }
    if (ev->kind == SYN_CHAT_CALL_ARGUMENTS) {
        sse_delta(ch,
                  json_pack("{s:[{s:I, s:{s:o}}]}", "tool_calls", "index", (json_int_t)ev->index,
                            "function", "arguments", json_utf8(ev->text, ev->len)));
        return;
    }
    if (ev->kind == SYN_CHAT_CALL_END) return; /* its pieces were all sent */
    sse_delta(ch,
              json_pack("{s:o}", ev->kind == SYN_CHAT_REASONING ? "reasoning_content" : "content",
                        json_utf8(ev->text, ev->len)));
}

static void on_chat_event(const syn_chat_event *ev, void *user) {
    choice_state *ch = user;
    if (ch->c->req.messages_api)
        anthropic_stream_event(&ch->c->msg_stream, &ch->c->sse, ev);
    else if (ch->c->req.responses)
        response_chat_event(ch->c, ev);
    else
        chat_event(ch, ev);
}

/* The result of a finished choice into ch->res (c->mu held; the engine marks the request
 * finished right after its final event, so the wait is short and made without the lock). */
static void close_choice(choice_state *ch) {
    ch->closed = true;
    if (!ch->handle) return; /* its submission failed: res says so already */
    pthread_mutex_unlock(&ch->c->mu);
    syn_request_wait(ch->handle, &ch->res);
    pthread_mutex_lock(&ch->c->mu);
}

static bool failed(const syn_request_result *res) {
    return res->finish == SYN_FINISH_ERROR || res->finish == SYN_FINISH_CANCELLED;
}

/* Turns what a choice produced since the last call into events (c->mu held); when it has
 * finished, its last chunk with its finish reason. */
static void stream_choice(choice_state *ch) {
    completion *c = ch->c;
    const bool have_logprobs = ch->logprobs && json_array_size(ch->logprobs) > 0;
    if (ch->reader) {
        if (!ch->role_sent && c->req.messages_api)
            anthropic_stream_start(&c->msg_stream, &c->sse, c->id, c->model->alias,
                                   c->n_input_tokens);
        else if (!ch->role_sent && c->req.responses)
            response_start(c);
        else if (!ch->role_sent)
            sse_chunk(ch, "", 0, json_null(), NULL);
        ch->role_sent = true;
        /* out of memory in the reader: it stops passing text on, the stream still ends */
        if (ch->text.len > 0) syn_chat_stream_feed(ch->reader, ch->text.data, ch->text.len);
        ch->text.len = 0;
    } else if (ch->text.len > 0 || have_logprobs || (!ch->role_sent && c->req.kind == OA_CHAT)) {
        json_t *lp = NULL;
        if (ch->logprobs) {
            lp = choice_logprobs(c, ch->logprobs, 0);
            ch->logprobs = json_array();
        }
        sse_chunk(ch, ch->text.data, ch->text.len, lp ? lp : json_null(), NULL);
        ch->text.len = 0;
    }
    if (!ch->finished || ch->closed) return;
    close_choice(ch);
    if (failed(&ch->res) || c->req.native) return; /* the stream's end says it all */
    if (ch->reader) syn_chat_stream_finish(ch->reader);
    if (c->req.responses || c->req.messages_api) return; /* their end event says how */
    if (ch->reader && ch->logprobs && json_array_size(ch->logprobs) > 0)
        sse_delta(ch, json_object()); /* the held-back text's logprobs */
    /* A call cut off inside its arguments ends as OpenAI's does: finish_reason "length". */
    const bool calls = ch->reader && syn_chat_stream_n_calls(ch->reader) > 0;
    sse_chunk(ch, "", 0, json_null(),
              calls && !syn_chat_stream_cut_call(ch->reader) ? "tool_calls"
                                                             : finish_reason(ch->res.finish));
}

/* Submits ch[from .. req.n) (c->mu not held); a failed submission finishes its choice with the
 * error. Under the lock that completions_cancel_all takes, so that the stop cancels every choice
 * submitted before its sweep and none is submitted after it. */
static void submit_choices(completion *c, int from) {
    server *srv = c->srv;
    pthread_mutex_lock(&srv->completions_lock);
    for (int i = from; i < c->req.n; i++) {
        choice_state *ch = &c->ch[i];
        syn_request_params p = c->params;
        p.sampling.seed += (uint64_t)i; /* choice i: the request's seed + i (mod 2^64) */
        p.user_data = ch;
        syn_status st = atomic_load(&srv->stopping)
                            ? syn_fail(SYN_ERR_STATE, "the server is shutting down")
                            : syn_engine_submit(c->model->engine, &p, &ch->handle);
        if (st != SYN_OK) {
            snprintf(ch->error, sizeof ch->error, "%s", syn_last_error());
            ch->res = (syn_request_result){.finish = st == SYN_ERR_STATE ? SYN_FINISH_CANCELLED
                                                                         : SYN_FINISH_ERROR,
                                           .status = st,
                                           .error = ch->error};
            pthread_mutex_lock(&c->mu);
            ch->finished = true;
            pthread_mutex_unlock(&c->mu);
        }
        c->n_submitted = i + 1;
    }
    pthread_mutex_unlock(&srv->completions_lock);
}

/* The later choices are submitted once the first has its first token or has finished: its
 * prompt's full blocks are then in the prefix cache (c->mu held, released meanwhile). */
static void submit_later_choices(completion *c) {
    if (c->n_submitted == c->req.n || !(c->ch[0].n_generated > 0 || c->ch[0].finished)) return;
    pthread_mutex_unlock(&c->mu);
    submit_choices(c, c->n_submitted);
    pthread_mutex_lock(&c->mu);
}

/* Turns what the engine produced since the last call into events (c->mu held); once every choice
 * has finished, the usage chunk when asked and [DONE] (or the error of a failed choice). */
static void stream_pending(completion *c) {
    submit_later_choices(c);
    for (int i = 0; i < c->n_submitted; i++)
        stream_choice(&c->ch[i]);
    if (c->ended || c->n_submitted < c->req.n) return;
    for (int i = 0; i < c->req.n; i++)
        if (!c->ch[i].closed) return;
    const syn_request_result *res = &c->ch[0].res;
    for (int i = 0; i < c->req.n; i++)
        if (failed(&c->ch[i].res)) {
            res = &c->ch[i].res;
            break;
        }
    c->hr->completion_tokens = completion_tokens(c);
    c->hr->prompt_tokens = c->ch[0].res.n_prompt_tokens;
    c->ended = true;
    if (failed(res)) {
        oa_error err;
        if (res->finish == SYN_FINISH_ERROR)
            oa_error_set(&err, 500, "server_error", NULL, NULL, "generation failed: %s",
                         res->error);
        else /* only the stop cancels a request whose client is still there */
            oa_error_set(&err, 503, "server_error", NULL, "unavailable",
                         "cancelled: the server is shutting down");
        if (c->req.messages_api) { /* an error event, no [DONE] */
            anthropic_stream_error(&c->sse, (unsigned)err.http_status, err.message);
            return;
        }
        if (c->req.responses) { /* its stream ends with the failed response, no [DONE] */
            response_end(c, res, &err);
            return;
        }
        sse_event(c, oa_error_body(&err));
        if (c->req.native) return; /* llama-server's streams end without [DONE] */
    } else {
        if (c->req.native) { /* the last event: stop true, with the totals */
            sse_event(c, llama_completion_json(c->model, &c->req, "", 0, res));
            return;
        }
        if (c->req.messages_api) {
            const char *word =
                res->finish == SYN_FINISH_STOP ? llama_stopping_word(c->model, &c->req, res) : NULL;
            anthropic_stream_end(&c->msg_stream, &c->sse,
                                 anthropic_stop_reason(res->finish,
                                                       syn_chat_stream_n_calls(c->ch[0].reader) > 0,
                                                       word),
                                 word, res->n_prompt_tokens, res->n_tokens);
            return;
        }
        if (c->req.responses) {
            response_end(c, res, NULL);
            return;
        }
        if (c->req.include_usage) {
            json_t *u = response_head(c, c->req.kind == OA_CHAT ? "chat.completion.chunk"
                                                                : "text_completion");
            if (u) {
                json_object_set_new(u, "choices", json_array());
                json_object_set_new(u, "usage", usage_json(c));
            }
            sse_event(c, u);
        }
    }
    text_append(&c->sse, "data: [DONE]\n\n", 14);
}

/* Lists c among the server's running completions; false when the server is stopping (then c is
 * not listed). Checked under the lock that completions_cancel_all takes after setting stopping,
 * so every request either is listed before that sweep or sees the stop. */
static bool list_completion(completion *c) {
    server *srv = c->srv;
    pthread_mutex_lock(&srv->completions_lock);
    const bool stopping = atomic_load(&srv->stopping);
    if (!stopping) {
        c->next = srv->completions;
        if (c->next) c->next->prev = c;
        srv->completions = c;
    }
    pthread_mutex_unlock(&srv->completions_lock);
    return !stopping;
}

static void unlist_completion(completion *c) {
    server *srv = c->srv;
    pthread_mutex_lock(&srv->completions_lock);
    if (c->prev)
        c->prev->next = c->next;
    else if (srv->completions == c)
        srv->completions = c->next;
    if (c->next) c->next->prev = c->prev;
    c->prev = c->next = NULL;
    pthread_mutex_unlock(&srv->completions_lock);
}

/* Cancels c's submitted choices that have not finished: on the connection's thread, the one that
 * submits them, or under srv->completions_lock. */
static void cancel_choices(completion *c) {
    for (int i = 0; i < c->n_submitted; i++)
        if (c->ch[i].handle && !syn_request_is_done(c->ch[i].handle))
            syn_request_cancel(c->ch[i].handle);
}

void completions_cancel_all(server *srv) {
    pthread_mutex_lock(&srv->completions_lock);
    for (completion *c = srv->completions; c; c = c->next)
        cancel_choices(c);
    pthread_mutex_unlock(&srv->completions_lock);
}

/* A running request's prompt as /slots shows it: the text, or the ids it was given as. */
static json_t *prompt_json(const completion *c) {
    const char *text = c->prompt ? c->prompt : c->req.prompt_text;
    if (text) return json_string(text);
    json_t *ids = json_array();
    for (size_t i = 0; ids && i < c->req.n_prompt_tokens; i++)
        json_array_append_new(ids, json_integer(c->req.prompt_tokens[i]));
    return ids;
}

json_t *completions_running(server *srv, const served_model *m, bool with_prompts) {
    json_t *list = json_array();
    pthread_mutex_lock(&srv->completions_lock);
    completion *oldest = srv->completions;
    while (oldest && oldest->next)
        oldest = oldest->next;
    for (completion *c = oldest; list && c; c = c->prev) { /* in submission order */
        if (c->model != m) continue;
        for (int i = 0; i < c->n_submitted; i++) { /* each choice is a request of its own */
            pthread_mutex_lock(&c->mu);
            const bool finished = c->ch[i].finished;
            const json_int_t n_decoded = (json_int_t)c->ch[i].n_generated;
            pthread_mutex_unlock(&c->mu);
            if (finished) continue;
            json_t *e = json_pack("{s:s, s:o, s:{s:b, s:I, s:I}}", "id_task", c->id, "params",
                                  llama_params_json(&c->req), "next_token", "has_next_token", true,
                                  "n_decoded", n_decoded, "n_remain",
                                  c->req.max_tokens > 0 ? (json_int_t)c->req.max_tokens - n_decoded
                                                        : (json_int_t)-1);
            if (e && with_prompts) json_object_set_new(e, "prompt", prompt_json(c));
            json_array_append_new(list, e);
        }
    }
    pthread_mutex_unlock(&srv->completions_lock);
    return list;
}

static void completion_free(completion *c) {
    if (!c) return;
    unlist_completion(c);
    bool counted = c->cause_known || c->ended || atomic_load(&c->srv->stopping);
    for (int i = 0; i < c->req.n; i++) {
        choice_state *ch = &c->ch[i];
        if (ch->handle) { /* the engine may call on_token(ch) until the request has finished */
            syn_request_result res;
            if (!syn_request_is_done(ch->handle)) {
                /* libmicrohttpd gave up on the response (its client went away while the request
                 * ran) before stream_read saw it: a disconnect too, unless the stop ended it */
                if (!counted) atomic_fetch_add(&c->srv->counters.cancelled, 1);
                counted = true;
                syn_request_cancel(ch->handle);
            }
            syn_request_wait(ch->handle, &res);
            syn_request_free(ch->handle);
        }
        syn_chat_stream_free(ch->reader);
        json_decref(ch->logprobs);
        free(ch->text.data);
    }
    free(c->constraint);
    json_decref(c->output);
    free(c->item_text.data);
    oa_request_free(&c->req);
    free(c->prompt);
    free(c->sse.data);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    models_release(c->srv, c->model);
    atomic_fetch_sub(&c->srv->active_completions, 1);
    free(c);
}

/* Waits (c->mu held) until the engine produced something or CLIENT_CHECK_MS passed. */
static void wait_for_engine(completion *c) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += CLIENT_CHECK_MS * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&c->cv, &c->mu, &until);
    /* A request that finished without a final event (cancelled while it was still queued). */
    for (int i = 0; i < c->n_submitted; i++)
        if (!c->ch[i].finished && c->ch[i].handle && syn_request_is_done(c->ch[i].handle))
            c->ch[i].finished = true;
    submit_later_choices(c);
}

/* libmicrohttpd's content reader for a streamed response (the connection's thread). */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    completion *c = cls;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        stream_pending(c);
        if (c->sse_sent < c->sse.len) break;
        if (c->ended) {
            pthread_mutex_unlock(&c->mu);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        if (!http_client_alive(c->hr)) { /* gone: free the slots before the next step */
            cancel_choices(c);
            atomic_fetch_add(&c->srv->counters.cancelled, 1);
            c->cause_known = true;
            pthread_mutex_unlock(&c->mu);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        wait_for_engine(c);
    }
    size_t n = c->sse.len - c->sse_sent;
    if (n > max) n = max;
    memcpy(buf, c->sse.data + c->sse_sent, n);
    c->sse_sent += n;
    if (c->sse_sent == c->sse.len) c->sse.len = c->sse_sent = 0;
    pthread_mutex_unlock(&c->mu);
    return (ssize_t)n;
}

static void stream_free(void *cls) { completion_free(cls); }

/* Whether every choice has finished (c->mu held). */
static bool all_finished(const completion *c) {
    if (c->n_submitted < c->req.n) return false;
    for (int i = 0; i < c->req.n; i++)
        if (!c->ch[i].finished) return false;
    return true;
}

/* Non-streaming: waits for the end on the connection's thread, then sends the whole response. */
static enum MHD_Result respond_whole(completion *c) {
    pthread_mutex_lock(&c->mu);
    while (!all_finished(c)) {
        if (!http_client_alive(c->hr)) {
            cancel_choices(c);
            atomic_fetch_add(&c->srv->counters.cancelled, 1);
            c->cause_known = true;
            pthread_mutex_unlock(&c->mu);
            completion_free(c);
            return MHD_NO; /* closes the connection */
        }
        wait_for_engine(c);
    }
    const syn_request_result *res = NULL; /* a failed choice's, if any */
    for (int i = 0; i < c->req.n; i++) {
        close_choice(&c->ch[i]);
        if (!res && failed(&c->ch[i].res)) res = &c->ch[i].res;
    }
    pthread_mutex_unlock(&c->mu);
    c->hr->completion_tokens = completion_tokens(c);
    c->hr->prompt_tokens = c->ch[0].res.n_prompt_tokens;
    choice_state *first = &c->ch[0];
    enum MHD_Result r;
    if (res && res->finish == SYN_FINISH_ERROR) {
        r = http_send_error(c->hr, 500, "server_error", NULL, NULL, "generation failed: %s",
                            res->error);
    } else if (res) { /* only the stop cancels it while its client waits */
        r = http_send_error(c->hr, 503, "server_error", NULL, "unavailable",
                            "cancelled: the server is shutting down");
    } else if (c->req.native) {
        r = http_send_json(c->hr, 200,
                           llama_completion_json(c->model, &c->req, first->text.data,
                                                 first->text.len, &first->res));
    } else {
        json_t *body =
            response_head(c, c->req.kind == OA_CHAT ? "chat.completion" : "text_completion");
        json_t *choices = json_array();
        for (int i = 0; choices && i < c->req.n; i++) {
            choice_state *ch = &c->ch[i];
            json_t *lp = ch->logprobs ? choice_logprobs(c, ch->logprobs, 0) : json_null();
            ch->logprobs = NULL;
            json_array_append_new(choices, choice_json(ch, false, ch->text.data, ch->text.len, lp,
                                                       finish_reason(ch->res.finish)));
        }
        if (body && choices) {
            json_object_set_new(body, "choices", choices);
            json_object_set_new(body, "usage", usage_json(c));
        } else {
            json_decref(choices);
        }
        if (c->req.responses) {
            json_t *resp = responses_body(c, body, &first->res);
            json_decref(body);
            body = resp;
        } else if (c->req.messages_api) {
            const json_t *msg =
                json_object_get(json_array_get(json_object_get(body, "choices"), 0), "message");
            const syn_request_result *res1 = &first->res;
            const char *word = res1->finish == SYN_FINISH_STOP
                                   ? llama_stopping_word(c->model, &c->req, res1)
                                   : NULL;
            json_t *resp = anthropic_message_json(
                c->id, c->model->alias, msg,
                anthropic_stop_reason(res1->finish, json_object_get(msg, "tool_calls") != NULL,
                                      word),
                word, res1->n_prompt_tokens, res1->n_tokens);
            json_decref(body);
            body = resp;
        }
        r = http_send_json(c->hr, 200, body);
    }
    completion_free(c);
    return r;
}

/* A random id: "chatcmpl-", "cmpl-" or (Anthropic's) "msg_" and 24 letters and digits. */
static void make_id(char *out, size_t cap, const oa_request *req) {
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    unsigned char rnd[24] = {0};
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) { /* never fails for 24 bytes */
        for (size_t i = 0; i < sizeof rnd; i++)
            rnd[i] = (unsigned char)(syn_now_ms() * (i + 1));
    }
    int n = snprintf(out, cap, "%s",
                     req->messages_api      ? "msg_"
                     : req->kind == OA_CHAT ? "chatcmpl-"
                                            : "cmpl-");
    for (size_t i = 0; i < sizeof rnd && (size_t)n + 1 < cap; i++)
        out[n++] = alphabet[rnd[i] % 62];
    out[n] = '\0';
}

/* A streamed chat reply that may hold tool calls or reasoning, and every streamed /v1/responses
 * reply, is read as it comes (syn_chat_stream); other streams pass the text on as it is. */
static syn_status start_reader(choice_state *ch) {
    completion *c = ch->c;
    const char *tmpl = chat_template_of(c);
    const syn_tool_syntax syntax =
        c->req.tool_choice != OA_TOOLS_NONE ? syn_tool_syntax_detect(tmpl) : SYN_TOOLS_NONE;
    const bool thinks = syn_template_thinks(tmpl);
    if (!c->req.responses && !c->req.messages_api && syntax == SYN_TOOLS_NONE && !thinks)
        return SYN_OK;
    if (c->req.responses && !(c->output = json_array())) return SYN_ERR_NO_MEMORY;
    uint64_t seed;
    if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed) seed = (uint64_t)syn_now_ms();
    /* a forced call is well-formed (constrained decoding): its arguments can stream as written */
    const bool forced =
        c->req.tool_choice == OA_TOOLS_REQUIRED || c->req.tool_choice == OA_TOOLS_NAMED;
    return syn_chat_stream_create(syntax, thinks, thinks && prompt_opens_think(c), forced,
                                  c->req.tools, seed, on_chat_event, ch, &ch->reader);
}

/* A fill-in-the-middle request's prompt: its tokens (syn_tokenize_infill) as the prompt ids,
 * and their text, special tokens written out, as the prompt /slots and /infill's answer show.
 * The context it must fit is the engine's: --ctx-size, else the model's training context. */
static syn_status infill_prompt(completion *c) {
    const syn_tokenizer *tok = c->model->tok;
    /* as llama-server, the extra files give way so that the prompt and max_tokens fit */
    syn_model_info info;
    syn_model_get_info(c->model->model, &info);
    const uint32_t n_ctx = c->srv->opts.n_ctx ? c->srv->opts.n_ctx : (uint32_t)info.n_ctx_train;
    const uint32_t reserved = c->req.max_tokens > 0 ? (uint32_t)c->req.max_tokens : 1;
    c->req.fim.max_tokens = n_ctx > reserved ? n_ctx - reserved : 1;
    size_t n = 0, len = 0;
    syn_status st = syn_tokenize_infill(tok, &c->req.fim, NULL, 0, &n);
    if (st != SYN_ERR_BUFFER_TOO_SMALL) return st; /* never empty: FIM_MID ends it */
    int32_t *ids = malloc(n * sizeof *ids);
    if (!ids) return syn_fail(SYN_ERR_NO_MEMORY, "out of memory");
    c->req.prompt_tokens = ids; /* freed with the request */
    st = syn_tokenize_infill(tok, &c->req.fim, ids, n, &c->req.n_prompt_tokens);
    if (st != SYN_OK) return st;
    st = syn_detokenize(tok, ids, n, NULL, 0, &len);
    if (st != SYN_OK && st != SYN_ERR_BUFFER_TOO_SMALL) return st;
    if (!(c->prompt = malloc(len + 1))) return syn_fail(SYN_ERR_NO_MEMORY, "out of memory");
    st = syn_detokenize(tok, ids, n, c->prompt, len, &len);
    c->prompt[st == SYN_OK ? len : 0] = '\0';
    c->req.prompt_text = c->prompt;
    return st;
}

/* The HTTP status and error of a failed syn_engine_submit. */
static enum MHD_Result submit_error(http_request *hr, const oa_request *req, syn_status st) {
    /* the field a refused grammar, schema or bias came from */
    const char *msg = syn_last_error(), *param = NULL;
    if (!strncmp(msg, "logit_bias", 10))
        param = "logit_bias";
    else if (!strncmp(msg, "json_schema", 11) || !strncmp(msg, "grammar", 7))
        param = req->grammar                    ? "grammar"
                : req->format != OA_FORMAT_TEXT ? "response_format"
                                                : "tools";
    switch (st) {
    case SYN_ERR_CONTEXT_FULL:
        return http_send_error(hr, 400, "invalid_request_error", "max_tokens",
                               "context_length_exceeded", "%s", syn_last_error());
    case SYN_ERR_INVALID_ARGUMENT:
    case SYN_ERR_UNSUPPORTED:
        return http_send_error(hr, 400, "invalid_request_error", param, NULL, "%s",
                               syn_last_error());
    default: return http_send_error(hr, 500, "server_error", NULL, NULL, "%s", syn_last_error());
    }
}

/* What the output must follow: llama-server's grammar, response_format's schema or any object,
 * under tool_choice "required" or a named function the calls of the template's syntax, and
 * under "auto" those calls from the moment the model opens one (a tool whose schema cannot be
 * enforced then leaves the output free, as before). */
static syn_status output_constraint(const completion *c, syn_request_params *p, char **owned) {
    const oa_request *req = &c->req;
    const bool forced = req->tool_choice == OA_TOOLS_REQUIRED || req->tool_choice == OA_TOOLS_NAMED;
    if (forced && (req->grammar || req->format != OA_FORMAT_TEXT))
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "a forced tool_choice cannot be combined with 'grammar' or "
                        "'response_format': the reply is a tool call");
    if (req->grammar) {
        p->grammar = req->grammar;
    } else if (req->format == OA_FORMAT_JSON_OBJECT) {
        p->json_schema = "{\"type\": \"object\"}";
    } else if (req->format == OA_FORMAT_JSON_SCHEMA) {
        *owned = json_dumps(req->json_schema, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!*owned) return syn_fail(SYN_ERR_NO_MEMORY, "response_format: out of memory");
        p->json_schema = *owned;
    } else if (forced) {
        const char *tmpl = chat_template_of(c);
        syn_status st =
            syn_tool_call_grammar(syn_tool_syntax_detect(tmpl), tmpl, req->tools,
                                  req->tool_choice == OA_TOOLS_NAMED ? req->tool_choice_name : NULL,
                                  req->parallel_tool_calls, false, owned);
        if (st != SYN_OK) return st;
        p->grammar = *owned;
    } else if (req->tool_choice == OA_TOOLS_AUTO) {
        /* lazily: free text until the model opens a call, then a valid call */
        const char *tmpl = chat_template_of(c);
        const syn_tool_syntax syntax = syn_tool_syntax_detect(tmpl);
        const char *trigger = syn_tool_call_trigger(syntax);
        if (trigger && syn_tool_call_grammar(syntax, tmpl, req->tools, NULL,
                                             req->parallel_tool_calls, true, owned) == SYN_OK) {
            p->grammar = *owned;
            p->grammar_trigger = trigger;
        }
    }
    return SYN_OK;
}

enum MHD_Result handle_completions(http_request *hr, oa_kind kind) {
    server *srv = hr->srv;
    if (!serve_accepting(srv)) return serve_send_unavailable(hr);
    oa_error err;
    oa_request req;
    if (oa_request_parse(kind, http_body(hr), hr->body.len, &req, &err) != 0)
        return http_send_error(hr, (unsigned)err.http_status, err.type, err.param, err.code, "%s",
                               err.message);
    served_model *m = models_acquire(srv, req.model);
    if (!m) {
        char names[1024];
        const size_t n = models_names(srv, names, sizeof names);
        enum MHD_Result r =
            req.model
                ? http_send_error(hr, 404, "invalid_request_error", "model", "model_not_found",
                                  "the model '%s' is not served here (this node has %s)", req.model,
                                  names)
                : http_send_error(hr, 400, "invalid_request_error", "model", NULL,
                                  "'model' is required: this node serves %zu models (%s)", n,
                                  names);
        oa_request_free(&req);
        return r;
    }
    const int64_t most = (int64_t)m->n_parallel + srv->opts.max_queue; /* each choice a request */
    if (req.n > most) {
        const int32_t n = req.n;
        models_release(srv, m);
        oa_request_free(&req);
        return http_send_error(hr, 400, "invalid_request_error", "n", NULL,
                               "'n' is %d; this model takes at most %lld requests at once "
                               "(--parallel + --max-queue)",
                               n, (long long)most);
    }
    syn_engine_stats stats;
    syn_engine_get_stats(m->engine, &stats);
    if (stats.n_active + stats.n_queued + (uint32_t)req.n >
        (uint32_t)m->n_parallel + srv->opts.max_queue) {
        models_release(srv, m);
        oa_request_free(&req);
        return http_send_error(hr, 503, "server_error", NULL, "queue_full",
                               "%u requests are already waiting (--max-queue); retry later",
                               stats.n_queued);
    }

    completion *c = calloc(1, sizeof *c);
    if (!c) {
        models_release(srv, m);
        oa_request_free(&req);
        return http_send_error(hr, 500, "server_error", NULL, NULL, "out of memory");
    }
    atomic_fetch_add(&srv->active_completions, 1);
    /* --timeout bounds an idle client, not a generation: a request waiting for a slot or its
     * tokens sends nothing for a while. on_completed restores it for the next request. */
    MHD_set_connection_option(hr->conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    c->srv = srv;
    c->model = m;
    c->hr = hr;
    c->req = req;
    c->created = (long long)time(NULL);
    make_id(c->id, sizeof c->id, &req);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    for (int i = 0; i < req.n; i++) {
        c->ch[i].c = c;
        c->ch[i].index = i;
        if (req.top_logprobs >= 0) c->ch[i].logprobs = json_array();
    }
    c->item = -1;
    if (req.template_messages) {
        /* Rendered here, not by the engine, so that the stream reader sees the prompt's end. */
        syn_status st = completions_render_chat(srv, m, &c->req, &c->prompt);
        if (st != SYN_OK) {
            enum MHD_Result r = submit_error(hr, &c->req, st);
            completion_free(c);
            return r;
        }
    }
    if (req.infill) {
        syn_status st = infill_prompt(c);
        if (st != SYN_OK) {
            enum MHD_Result r =
                st == SYN_ERR_NO_MEMORY
                    ? http_send_error(hr, 500, "server_error", NULL, NULL, "out of memory")
                    : http_send_error(hr, 400, "invalid_request_error", NULL, NULL, "%s",
                                      syn_last_error());
            completion_free(c);
            return r;
        }
    }
    if (req.stream && req.messages_api) { /* message_start tells the prompt's size */
        int32_t *ids = NULL;
        size_t n = 0;
        if (syn_tokenize_new(m->tok, c->prompt, strlen(c->prompt), true, true, &ids, &n) == SYN_OK)
            c->n_input_tokens = n;
        free(ids);
    }
    for (int i = 0; req.stream && req.kind == OA_CHAT && i < req.n; i++) {
        if (start_reader(&c->ch[i]) != SYN_OK) {
            completion_free(c);
            return http_send_error(hr, 500, "server_error", NULL, NULL, "out of memory");
        }
    }

    syn_request_params p = syn_request_default_params();
    p.prompt_text = req.template_messages  ? c->prompt
                    : c->req.prompt_tokens ? NULL
                                           : req.prompt_text;
    p.prompt_tokens = c->req.prompt_tokens;
    p.n_prompt_tokens = c->req.n_prompt_tokens;
    p.sampling = req.sampling;
    if (!req.has_seed) { /* OpenAI: without a seed, every request samples differently */
        if (getrandom(&p.sampling.seed, sizeof p.sampling.seed, 0) !=
            (ssize_t)sizeof p.sampling.seed)
            p.sampling.seed = (uint64_t)(syn_now_ms() * 1000);
    }
    p.max_tokens = req.max_tokens > 0 ? req.max_tokens : 0; /* 0: to the end of the context */
    p.stop_strings = c->req.stop; /* in c: later choices are submitted after this returns */
    p.n_stop_strings = req.n_stop;
    p.on_token = on_token;
    p.logit_bias = req.logit_bias;
    p.n_logit_bias = req.n_logit_bias;
    syn_status st = output_constraint(c, &p, &c->constraint);
    if (st != SYN_OK) {
        enum MHD_Result r =
            http_send_error(hr, 400, "invalid_request_error",
                            req.format != OA_FORMAT_TEXT ? "response_format" : "tools", NULL, "%s",
                            syn_last_error());
        completion_free(c);
        return r;
    }
    c->params = p;
    p.user_data = &c->ch[0];
    st = syn_engine_submit(m->engine, &p, &c->ch[0].handle);
    if (st != SYN_OK) {
        enum MHD_Result r = submit_error(hr, &c->req, st);
        completion_free(c);
        return r;
    }
    c->n_submitted = 1;
    if (!list_completion(c)) syn_request_cancel(c->ch[0].handle); /* the stop began meanwhile */
    if (!req.stream) return respond_whole(c);

    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, c, stream_free);
    if (!resp) {
        c->cause_known = true;
        completion_free(c);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    cors_add_headers(hr, resp);
    enum MHD_Result r = MHD_queue_response(hr->conn, 200, resp);
    MHD_destroy_response(resp);
    hr->status = 200;
    hr->responded = true;
    return r;
}
