/* endpoints.c: the small endpoints of `synapse serve`: /v1/models, /health, /metrics (Prometheus
 * text), /tokenize, /detokenize and the chat page at /. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common.h"
#include "openai_request.h"
#include "server.h"

/* The chat page (tools/synapse/serve/chat.html), built into the binary. */
__asm__(".pushsection .rodata\n"
        ".balign 16\n"
        "synapse_chat_page:\n"
        ".incbin \"tools/synapse/serve/chat.html\"\n"
        "synapse_chat_page_end:\n"
        ".popsection\n");
extern const char synapse_chat_page[], synapse_chat_page_end[];

enum MHD_Result handle_chat_page(http_request *hr) {
    return http_send_text(hr, 200, "text/html; charset=utf-8", synapse_chat_page,
                          (size_t)(synapse_chat_page_end - synapse_chat_page));
}

enum MHD_Result handle_models(http_request *hr) {
    const server *srv = hr->srv;
    syn_model_info info;
    syn_model_get_info(srv->model, &info);
    json_t *model = json_pack("{s:s, s:s, s:I, s:s, s:{s:s, s:I, s:I, s:I, s:i}}", "id", srv->alias, "object",
                              "model", "created", (json_int_t)srv->created, "owned_by", "synapse", "meta",
                              "architecture", info.architecture, "n_params", (json_int_t)info.n_params,
                              "size", (json_int_t)info.weight_bytes, "n_ctx_train", (json_int_t)info.n_ctx_train,
                              "n_parallel", srv->opts.n_parallel);
    return http_send_json(hr, 200, json_pack("{s:s, s:[o]}", "object", "list", "data", model));
}

enum MHD_Result handle_health(http_request *hr) {
    server *srv = hr->srv;
    if (!atomic_load(&srv->ready))
        return http_send_json(hr, 503, json_pack("{s:s}", "status", "loading"));
    syn_engine_stats st;
    syn_engine_get_stats(srv->engine, &st);
    return http_send_json(hr, 200, json_pack("{s:s, s:i, s:i, s:i}", "status", "ok", "slots_idle",
                                             srv->opts.n_parallel - (int)st.n_active, "slots_processing",
                                             (int)st.n_active, "queued", (int)st.n_queued));
}

/* Appends one Prometheus metric (HELP, TYPE and the sample) to b. */
static void metric(text_buf *b, const char *name, const char *type, const char *help, const char *labels,
                   double value) {
    char line[512];
    int n = snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n%s{%s} %.17g\n", name, help, name, type,
                     name, labels, value);
    if (n > 0) text_append(b, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

enum MHD_Result handle_metrics(http_request *hr) {
    server *srv = hr->srv;
    text_buf b = {0};
    char model[160];
    snprintf(model, sizeof model, "model=\"%s\"", srv->alias);
    text_append(&b, "# HELP synapse_requests_total HTTP responses by status code.\n"
                    "# TYPE synapse_requests_total counter\n", 97);
    for (unsigned s = 100; s < 600; s++) {
        const uint64_t n = atomic_load(&srv->counters.by_status[s]);
        if (n == 0) continue;
        char line[96];
        int len = snprintf(line, sizeof line, "synapse_requests_total{status=\"%u\"} %llu\n", s, (unsigned long long)n);
        text_append(&b, line, (size_t)len);
    }
    metric(&b, "synapse_client_disconnects_total", "counter",
           "Requests cancelled because their client went away.", "", (double)atomic_load(&srv->counters.cancelled));
    if (atomic_load(&srv->ready)) {
        syn_engine_stats st;
        syn_engine_get_stats(srv->engine, &st);
        const double tok_s = st.decode_steps_ms > 0 ? st.decode_steps_tokens / st.decode_steps_ms * 1e3 : 0;
        metric(&b, "synapse_requests_running", "gauge", "Requests decoding in a slot.", model, st.n_active);
        metric(&b, "synapse_requests_queued", "gauge", "Requests waiting for a slot.", model, st.n_queued);
        metric(&b, "synapse_slots_total", "gauge", "Slots (requests decoding at once).", model, srv->opts.n_parallel);
        metric(&b, "synapse_slots_free", "gauge", "Slots not in use.", model,
               srv->opts.n_parallel - (double)st.n_active);
        metric(&b, "synapse_prompt_tokens_total", "counter", "Prompt tokens computed.", model, (double)st.n_prompt_tokens);
        metric(&b, "synapse_prefix_cache_hit_tokens_total", "counter",
               "Prompt tokens reused from the prefix cache instead of computed.", model, (double)st.n_cached_tokens);
        metric(&b, "synapse_generated_tokens_total", "counter", "Tokens generated.", model, (double)st.n_generated);
        metric(&b, "synapse_decode_tokens_per_second", "gauge",
               "Tokens per second over the decode-only steps so far.", model, tok_s);
        metric(&b, "synapse_kv_blocks_used", "gauge", "KV-cache blocks held by requests or the prefix cache.",
               model, st.kv_blocks_used);
        metric(&b, "synapse_kv_blocks_free", "gauge", "KV-cache blocks free.", model,
               (double)st.kv_blocks_total - st.kv_blocks_used);
        metric(&b, "synapse_kv_blocks_cached", "gauge", "KV-cache blocks held by the prefix cache.", model,
               st.kv_blocks_cached);
    }
    enum MHD_Result r = http_send_text(hr, 200, "text/plain; version=0.0.4", b.data ? b.data : "", b.len);
    free(b.data);
    return r;
}

/* The body as a JSON object, or a 400 sent (NULL returned). */
static json_t *json_body(http_request *hr) {
    json_error_t jerr;
    json_t *body = json_loadb(hr->body ? hr->body : "", hr->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(body)) {
        json_decref(body);
        http_send_error(hr, 400, "invalid_request_error", NULL, NULL, "the body must be a JSON object%s%s",
                        body ? "" : ": ", body ? "" : jerr.text);
        return NULL;
    }
    return body;
}

/* POST /tokenize {"content": TEXT, "parse_special": true} -> {"tokens": [ids]} (llama-server's
 * shape; special tokens are parsed unless "parse_special" is false). */
enum MHD_Result handle_tokenize(http_request *hr) {
    json_t *body = json_body(hr);
    if (!body) return MHD_YES;
    json_t *content = json_object_get(body, "content"), *special = json_object_get(body, "parse_special");
    enum MHD_Result r;
    if (!json_is_string(content)) {
        r = http_send_error(hr, 400, "invalid_request_error", "content", NULL, "'content' must be a string");
    } else if (special && !json_is_boolean(special)) {
        r = http_send_error(hr, 400, "invalid_request_error", "parse_special", NULL, "'parse_special' must be a boolean");
    } else {
        int32_t *ids = NULL;
        size_t n = 0;
        if (tokenize_text(hr->srv->tok, json_string_value(content), json_string_length(content),
                          !json_is_false(special), &ids, &n) != EXIT_OK)
            r = http_send_error(hr, 400, "invalid_request_error", "content", NULL, "cannot tokenize: %s", syn_last_error());
        else
            r = http_send_json(hr, 200, json_pack("{s:o}", "tokens", json_ids(ids, n)));
        free(ids);
    }
    json_decref(body);
    return r;
}

/* The text of tokens (a JSON array of ids), invalid UTF-8 as U+FFFD. */
static enum MHD_Result detokenize_ids(http_request *hr, json_t *tokens) {
    if (!json_is_array(tokens))
        return http_send_error(hr, 400, "invalid_request_error", "tokens", NULL, "'tokens' must be an array of token ids");
    const int32_t n_vocab = syn_tokenizer_n_vocab(hr->srv->tok);
    const size_t n = json_array_size(tokens);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) return http_send_error(hr, 500, "server_error", NULL, NULL, "out of memory");
    size_t i;
    json_t *id;
    json_array_foreach(tokens, i, id) {
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= n_vocab) {
            free(ids);
            return http_send_error(hr, 400, "invalid_request_error", "tokens", NULL,
                                   "'tokens[%zu]' is not a token id of this model (0..%d)", i, n_vocab - 1);
        }
        ids[i] = (int32_t)json_integer_value(id);
    }
    size_t len = 16 * n + 16;
    char *text = NULL;
    syn_status st = SYN_ERR_BUFFER_TOO_SMALL;
    for (size_t cap = len; st == SYN_ERR_BUFFER_TOO_SMALL; cap = len) {
        char *grown = realloc(text, cap);
        if (!grown) {
            st = SYN_ERR_NO_MEMORY;
            break;
        }
        text = grown;
        st = syn_detokenize(hr->srv->tok, ids, n, text, cap, &len);
    }
    enum MHD_Result r = st == SYN_OK
                            ? http_send_json(hr, 200, json_pack("{s:o}", "content", json_utf8(text, len)))
                            : http_send_error(hr, 500, "server_error", NULL, NULL, "cannot detokenize: %s",
                                              syn_last_error());
    free(text);
    free(ids);
    return r;
}

/* POST /detokenize {"tokens": [ids]} -> {"content": TEXT}. */
enum MHD_Result handle_detokenize(http_request *hr) {
    json_t *body = json_body(hr);
    if (!body) return MHD_YES;
    enum MHD_Result r = detokenize_ids(hr, json_object_get(body, "tokens"));
    json_decref(body);
    return r;
}
