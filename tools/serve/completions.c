/* completions.c: POST /v1/chat/completions and /v1/completions. One engine request per HTTP
 * request; the engine's token callback (scheduler thread) appends to the completion under its
 * mutex, and the connection's thread sends what is there: server-sent events as tokens come when
 * streaming, one JSON object at the end otherwise. A client that goes away cancels its request. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "chat/tool_grammar.h"
#include "common/output.h"
#include "common/text.h"
#include "openai_request.h"
#include "server.h"
#include "synapse_internal.h"

/* How often a waiting connection thread looks at its client when no token comes. */
enum { CLIENT_CHECK_MS = 20 };

typedef struct completion {
    server *srv;
    struct completion *prev, *next; /* srv->completions, once submitted */
    served_model *model;            /* held until the completion is freed */
    http_request *hr;
    oa_request req;
    syn_request *handle;
    char id[48];
    long long created;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    text_buf text;    /* generated text not yet sent (streaming), or all of it */
    json_t *logprobs; /* entries not yet sent (streaming), or all of them; NULL: not asked */
    bool finished;    /* the engine's final event has been seen */
    uint64_t n_generated;

    /* Streaming only. */
    bool role_sent;   /* chat: the first chunk carries the role */
    text_buf sse;     /* event bytes built but not yet sent */
    size_t sse_sent;  /* of sse.len */
    bool ended;       /* the last event ("data: [DONE]") is in sse */
    bool cause_known; /* a cancel of its request needs no disconnect count: counted already, or
                       * the server's own failure */
    char *prompt; /* a chat's prompt, rendered by the chat template (NULL for completions) */
} completion;

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

/* The engine's callback (scheduler thread): keep the text and logprobs, wake the connection. */
static bool on_token(const syn_token_event *ev, void *user) {
    completion *c = user;
    json_t *lp = NULL;
    if (ev->token >= 0 && c->req.top_logprobs >= 0)
        lp = logprob_entry(c->model->tok, ev, c->req.top_logprobs);
    pthread_mutex_lock(&c->mu);
    text_append(&c->text, ev->piece, ev->piece_len);
    if (lp) json_array_append_new(c->logprobs, lp);
    if (ev->token >= 0) c->n_generated++;
    if (ev->finish != SYN_FINISH_NONE) c->finished = true;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return true;
}

static const char *finish_reason(syn_finish_reason f) {
    return f == SYN_FINISH_LENGTH ? "length" : "stop";
}

static json_t *usage_json(const syn_request_result *res) {
    return json_pack("{s:I, s:I, s:I, s:{s:I}}", "prompt_tokens", (json_int_t)res->n_prompt_tokens,
                     "completion_tokens", (json_int_t)res->n_tokens, "total_tokens",
                     (json_int_t)(res->n_prompt_tokens + res->n_tokens), "prompt_tokens_details",
                     "cached_tokens", (json_int_t)res->n_cached_tokens);
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

/* c->prompt: the request's messages, tools and chat_template_kwargs through the chat template. */
static syn_status render_prompt(completion *c) {
    syn_chat_params chat = syn_chat_default_params();
    chat.template_source = c->srv->opts.chat_template;
    char *messages = json_dumps(c->req.template_messages, JSON_COMPACT);
    char *tools = c->req.tools ? json_dumps(c->req.tools, JSON_COMPACT) : NULL;
    char *variables = c->req.chat_template_kwargs
                          ? json_dumps(c->req.chat_template_kwargs, JSON_COMPACT)
                          : NULL;
    syn_status st;
    if (!messages || (c->req.tools && !tools) || (c->req.chat_template_kwargs && !variables)) {
        st = syn_fail(SYN_ERR_NO_MEMORY, "chat prompt: out of memory");
    } else {
        chat.messages_json = messages;
        chat.tools_json = tools;
        chat.variables_json = variables;
        size_t n;
        st = syn_chat_render(c->model->model, &chat, &c->prompt, &n);
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
    if (syn_chat_output_parse(text, len, syntax, syn_template_thinks(tmpl), c->req.tools, seed,
                              &out) != SYN_OK)
        return json_pack("{s:s, s:o}", "role", "assistant", "content", json_utf8(text, len));
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
static json_t *choice_json(const completion *c, bool stream, const char *text, size_t len,
                           json_t *logprobs, const char *finish) {
    json_t *choice = json_pack("{s:i, s:o, s:o}", "index", 0, "logprobs", logprobs, "finish_reason",
                               finish ? json_string(finish) : json_null());
    if (!choice) return NULL;
    if (c->req.kind == OA_COMPLETION) {
        json_object_set_new(choice, "text", json_utf8(text, len));
    } else if (!stream) {
        json_object_set_new(choice, "message", chat_message(c, text, len, choice));
    } else {
        json_t *delta = json_object();
        if (!c->role_sent) json_object_set_new(delta, "role", json_string("assistant"));
        if (len > 0 || !c->role_sent) json_object_set_new(delta, "content", json_utf8(text, len));
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

/* A chunk of streamed text (and its logprobs); finish: NULL, or the last chunk's reason. */
static void sse_chunk(completion *c, const char *text, size_t len, json_t *logprobs,
                      const char *finish) {
    json_t *chunk =
        response_head(c, c->req.kind == OA_CHAT ? "chat.completion.chunk" : "text_completion");
    json_t *choice = choice_json(c, true, text, len, logprobs, finish);
    if (chunk && choice)
        json_object_set_new(chunk, "choices", json_pack("[o]", choice));
    else
        json_decref(choice);
    if (chunk && c->req.include_usage) json_object_set_new(chunk, "usage", json_null());
    c->role_sent = true;
    sse_event(c, chunk);
}

/* Turns what the engine produced since the last call into events (c->mu held); at the end, the
 * last chunk with its finish reason, the usage chunk when asked, and [DONE]. */
static void stream_pending(completion *c) {
    const bool have_logprobs = c->logprobs && json_array_size(c->logprobs) > 0;
    if (c->text.len > 0 || have_logprobs || (!c->role_sent && c->req.kind == OA_CHAT)) {
        json_t *lp = NULL;
        if (c->logprobs) {
            lp = choice_logprobs(c, c->logprobs, 0);
            c->logprobs = json_array();
        }
        sse_chunk(c, c->text.data, c->text.len, lp ? lp : json_null(), NULL);
        c->text.len = 0;
    }
    if (!c->finished || c->ended) return;
    syn_request_result res;
    pthread_mutex_unlock(&c->mu); /* the engine marks the request finished right after the event */
    syn_request_wait(c->handle, &res);
    pthread_mutex_lock(&c->mu);
    c->hr->completion_tokens = res.n_tokens;
    c->hr->prompt_tokens = res.n_prompt_tokens;
    if (res.finish == SYN_FINISH_ERROR || res.finish == SYN_FINISH_CANCELLED) {
        oa_error err;
        if (res.finish == SYN_FINISH_ERROR)
            oa_error_set(&err, 500, "server_error", NULL, NULL, "generation failed: %s", res.error);
        else /* only the stop cancels a request whose client is still there */
            oa_error_set(&err, 503, "server_error", NULL, "unavailable",
                         "cancelled: the server is shutting down");
        sse_event(c, oa_error_body(&err));
    } else {
        sse_chunk(c, "", 0, json_null(), finish_reason(res.finish));
        if (c->req.include_usage) {
            json_t *u = response_head(c, c->req.kind == OA_CHAT ? "chat.completion.chunk"
                                                                : "text_completion");
            if (u) {
                json_object_set_new(u, "choices", json_array());
                json_object_set_new(u, "usage", usage_json(&res));
            }
            sse_event(c, u);
        }
    }
    text_append(&c->sse, "data: [DONE]\n\n", 14);
    c->ended = true;
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

void completions_cancel_all(server *srv) {
    pthread_mutex_lock(&srv->completions_lock);
    for (completion *c = srv->completions; c; c = c->next)
        if (!syn_request_is_done(c->handle)) syn_request_cancel(c->handle);
    pthread_mutex_unlock(&srv->completions_lock);
}

static void completion_free(completion *c) {
    if (!c) return;
    unlist_completion(c);
    if (c->handle) { /* the engine may call on_token(c) until the request has finished */
        syn_request_result res;
        if (!syn_request_is_done(c->handle)) {
            /* libmicrohttpd gave up on the response (its client went away while the request ran)
             * before stream_read saw it: a disconnect too, unless the stop ended the stream */
            if (!c->cause_known && !c->ended && !atomic_load(&c->srv->stopping))
                atomic_fetch_add(&c->srv->counters.cancelled, 1);
            syn_request_cancel(c->handle);
        }
        syn_request_wait(c->handle, &res);
        syn_request_free(c->handle);
    }
    oa_request_free(&c->req);
    free(c->prompt);
    json_decref(c->logprobs);
    free(c->text.data);
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
    if (!c->finished && syn_request_is_done(c->handle)) c->finished = true;
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
        if (!http_client_alive(c->hr)) { /* gone: free the slot before the next step */
            syn_request_cancel(c->handle);
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

/* The Responses API's object for a finished chat reply (chat, the chat.completion object):
 * output items for the reasoning, the text and each call; status incomplete when max_output_tokens
 * cut it. */
static json_t *responses_body(const completion *c, const json_t *chat,
                              const syn_request_result *res) {
    const json_t *choice = json_array_get(json_object_get(chat, "choices"), 0);
    const json_t *msg = json_object_get(choice, "message");
    json_t *output = json_array();
    const char *reasoning = json_string_value(json_object_get(msg, "reasoning_content"));
    if (reasoning)
        json_array_append_new(output, json_pack("{s:s, s:s, s:[], s:[{s:s, s:s}]}", "type",
                                                "reasoning", "id", "rs_0", "summary", "content",
                                                "type", "reasoning_text", "text", reasoning));
    const char *text = json_string_value(json_object_get(msg, "content"));
    if (text && *text)
        json_array_append_new(
            output, json_pack("{s:s, s:s+, s:s, s:s, s:[{s:s, s:s, s:[]}]}", "type", "message",
                              "id", "msg_", c->id + 9, "status", "completed", "role", "assistant",
                              "content", "type", "output_text", "text", text, "annotations"));
    size_t i;
    json_t *call;
    json_array_foreach(json_object_get(msg, "tool_calls"), i, call) {
        const json_t *fn = json_object_get(call, "function");
        json_array_append_new(output,
                              json_pack("{s:s, s:s+, s:O, s:O, s:O, s:s}", "type", "function_call",
                                        "id", "fc_", json_string_value(json_object_get(call, "id")),
                                        "call_id", json_object_get(call, "id"), "name",
                                        json_object_get(fn, "name"), "arguments",
                                        json_object_get(fn, "arguments"), "status", "completed"));
    }
    const bool cut = res->finish == SYN_FINISH_LENGTH;
    return json_pack("{s:s+, s:s, s:I, s:s, s:s, s:o, s:o, s:{s:I, s:I, s:I}}", "id", "resp_",
                     c->id + 9, "object", "response", "created_at", (json_int_t)c->created, "model",
                     c->model->alias, "status", cut ? "incomplete" : "completed",
                     "incomplete_details",
                     cut ? json_pack("{s:s}", "reason", "max_output_tokens") : json_null(),
                     "output", output, "usage", "input_tokens", (json_int_t)res->n_prompt_tokens,
                     "output_tokens", (json_int_t)res->n_tokens, "total_tokens",
                     (json_int_t)(res->n_prompt_tokens + res->n_tokens));
}

/* Non-streaming: waits for the end on the connection's thread, then sends the whole response. */
static enum MHD_Result respond_whole(completion *c) {
    pthread_mutex_lock(&c->mu);
    while (!c->finished) {
        if (!http_client_alive(c->hr)) {
            syn_request_cancel(c->handle);
            atomic_fetch_add(&c->srv->counters.cancelled, 1);
            c->cause_known = true;
            pthread_mutex_unlock(&c->mu);
            completion_free(c);
            return MHD_NO; /* closes the connection */
        }
        wait_for_engine(c);
    }
    pthread_mutex_unlock(&c->mu);
    syn_request_result res;
    syn_request_wait(c->handle, &res);
    c->hr->completion_tokens = res.n_tokens;
    c->hr->prompt_tokens = res.n_prompt_tokens;
    enum MHD_Result r;
    if (res.finish == SYN_FINISH_ERROR) {
        r = http_send_error(c->hr, 500, "server_error", NULL, NULL, "generation failed: %s",
                            res.error);
    } else if (res.finish ==
               SYN_FINISH_CANCELLED) { /* only the stop cancels it while its client waits */
        r = http_send_error(c->hr, 503, "server_error", NULL, "unavailable",
                            "cancelled: the server is shutting down");
    } else {
        json_t *body =
            response_head(c, c->req.kind == OA_CHAT ? "chat.completion" : "text_completion");
        json_t *lp = c->logprobs ? choice_logprobs(c, c->logprobs, 0) : json_null();
        c->logprobs = NULL;
        json_t *choice =
            choice_json(c, false, c->text.data, c->text.len, lp, finish_reason(res.finish));
        if (body && choice) {
            json_object_set_new(body, "choices", json_pack("[o]", choice));
            json_object_set_new(body, "usage", usage_json(&res));
        } else {
            json_decref(choice);
        }
        if (c->req.responses) {
            json_t *resp = responses_body(c, body, &res);
            json_decref(body);
            body = resp;
        }
        r = http_send_json(c->hr, 200, body);
    }
    completion_free(c);
    return r;
}

/* A random id: "chatcmpl-" or "cmpl-" and 24 letters and digits. */
static void make_id(char *out, size_t cap, oa_kind kind) {
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    unsigned char rnd[24] = {0};
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) { /* never fails for 24 bytes */
        for (size_t i = 0; i < sizeof rnd; i++)
            rnd[i] = (unsigned char)(syn_now_ms() * (i + 1));
    }
    int n = snprintf(out, cap, "%s", kind == OA_CHAT ? "chatcmpl-" : "cmpl-");
    for (size_t i = 0; i < sizeof rnd && (size_t)n + 1 < cap; i++)
        out[n++] = alphabet[rnd[i] % 62];
    out[n] = '\0';
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
 * or under tool_choice "required" or a named function the calls of the template's syntax. */
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
        const char *tmpl = syn_tokenizer_chat_template(c->model->tok);
        syn_status st =
            syn_tool_call_grammar(syn_tool_syntax_detect(tmpl), tmpl, req->tools,
                                  req->tool_choice == OA_TOOLS_NAMED ? req->tool_choice_name : NULL,
                                  req->parallel_tool_calls, owned);
        if (st != SYN_OK) return st;
        p->grammar = *owned;
    }
    return SYN_OK;
}

enum MHD_Result handle_completions(http_request *hr, oa_kind kind) {
    server *srv = hr->srv;
    if (!atomic_load(&srv->ready) || atomic_load(&srv->stopping))
        return http_send_error(hr, 503, "server_error", NULL, "unavailable",
                               atomic_load(&srv->stopping) ? "the server is shutting down"
                                                           : "the model is loading");
    oa_error err;
    oa_request req;
    if (oa_request_parse(kind, http_body(hr), hr->body.len, &req, &err) != 0)
        return http_send_error(hr, (unsigned)err.http_status, err.type, err.param, err.code, "%s",
                               err.message);
    if (req.responses && req.stream) {
        oa_request_free(&req);
        return http_send_error(hr, 400, "invalid_request_error", "stream", NULL,
                               "streaming /v1/responses is not supported yet (issue 24); send "
                               "\"stream\": false");
    }
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
    syn_engine_stats stats;
    syn_engine_get_stats(m->engine, &stats);
    if (stats.n_active + stats.n_queued >= (uint32_t)m->n_parallel + srv->opts.max_queue) {
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
    make_id(c->id, sizeof c->id, req.kind);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    if (req.top_logprobs >= 0) c->logprobs = json_array();

    syn_request_params p = syn_request_default_params();
    if (req.template_messages) {
        /* Rendered here, not by the engine, so that the stream reader sees the prompt's end. */
        syn_status st = render_prompt(c);
        if (st != SYN_OK) {
            enum MHD_Result r = submit_error(hr, &c->req, st);
            completion_free(c);
            return r;
        }
    }
    p.prompt_text = req.template_messages ? c->prompt : req.prompt_text;
    p.prompt_tokens = req.prompt_tokens;
    p.n_prompt_tokens = req.n_prompt_tokens;
    p.sampling = req.sampling;
    if (!req.has_seed) { /* OpenAI: without a seed, every request samples differently */
        if (getrandom(&p.sampling.seed, sizeof p.sampling.seed, 0) !=
            (ssize_t)sizeof p.sampling.seed)
            p.sampling.seed = (uint64_t)(syn_now_ms() * 1000);
    }
    p.max_tokens = req.max_tokens > 0 ? req.max_tokens : 0; /* 0: to the end of the context */
    p.stop_strings = req.stop;
    p.n_stop_strings = req.n_stop;
    p.on_token = on_token;
    p.user_data = c;
    p.logit_bias = req.logit_bias;
    p.n_logit_bias = req.n_logit_bias;
    char *constraint = NULL; /* a grammar or schema text built here, freed once submitted */
    syn_status st = output_constraint(c, &p, &constraint);
    if (st != SYN_OK) {
        enum MHD_Result r =
            http_send_error(hr, 400, "invalid_request_error",
                            req.format != OA_FORMAT_TEXT ? "response_format" : "tools", NULL, "%s",
                            syn_last_error());
        completion_free(c);
        return r;
    }
    st = syn_engine_submit(m->engine, &p, &c->handle);
    free(constraint);
    if (st != SYN_OK) {
        enum MHD_Result r = submit_error(hr, &c->req, st);
        completion_free(c);
        return r;
    }
    if (!list_completion(c)) syn_request_cancel(c->handle); /* the stop began meanwhile */
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
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
    enum MHD_Result r = MHD_queue_response(hr->conn, 200, resp);
    MHD_destroy_response(resp);
    hr->status = 200;
    hr->responded = true;
    return r;
}
