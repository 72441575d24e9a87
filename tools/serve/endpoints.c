/* endpoints.c: the small endpoints of `synapse serve`: /v1/models, /health, /metrics (Prometheus
 * text), /tokenize, /detokenize, the chat page at / and Anthropic's /v1/messages/count_tokens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/args.h"
#include "common/output.h"
#include "common/setup.h"
#include "common/text.h"
#include "openai_request.h"
#include "server.h"
#include "synapse_internal.h"

/* The chat page (tools/serve/chat.html), built into the binary. */
__asm__(".pushsection .rodata\n"
        ".balign 16\n"
        "synapse_chat_page:\n"
        ".incbin \"tools/serve/chat.html\"\n"
        "synapse_chat_page_end:\n"
        ".popsection\n");
extern const char synapse_chat_page[], synapse_chat_page_end[];

enum MHD_Result handle_chat_page(http_request *hr) {
    return http_send_text(hr, 200, "text/html; charset=utf-8", synapse_chat_page,
                          (size_t)(synapse_chat_page_end - synapse_chat_page));
}

/* One entry of /v1/models (models_lock held). */
static json_t *model_entry(const served_model *m) {
    syn_model_info info;
    syn_model_get_info(m->model, &info);
    return json_pack("{s:s, s:s, s:I, s:s, s:{s:s, s:I, s:I, s:I, s:i}}", "id", m->alias, "object",
                     "model", "created", (json_int_t)m->created, "owned_by", "synapse", "meta",
                     "architecture", info.architecture, "n_params", (json_int_t)info.n_params,
                     "size", (json_int_t)info.weight_bytes, "n_ctx_train",
                     (json_int_t)info.n_ctx_train, "n_parallel", m->n_parallel);
}

enum MHD_Result handle_models(http_request *hr) {
    server *srv = hr->srv;
    json_t *data = json_array();
    pthread_mutex_lock(&srv->models_lock);
    for (const served_model *m = srv->models; data && m; m = m->next)
        if (!m->draining) json_array_append_new(data, model_entry(m));
    pthread_mutex_unlock(&srv->models_lock);
    return http_send_json(hr, 200, json_pack("{s:s, s:o}", "object", "list", "data", data));
}

enum MHD_Result handle_health(http_request *hr) {
    server *srv = hr->srv;
    if (!atomic_load(&srv->ready))
        return http_send_json(hr, 503, json_pack("{s:s}", "status", "loading"));
    json_t *models = json_object();
    int idle = 0, busy = 0, queued = 0;
    pthread_mutex_lock(&srv->models_lock);
    for (const served_model *m = srv->models; models && m; m = m->next) {
        if (m->draining) continue;
        syn_engine_stats st;
        syn_engine_get_stats(m->engine, &st);
        json_object_set_new(models, m->alias,
                            json_pack("{s:i, s:i, s:i}", "slots_idle",
                                      m->n_parallel - (int)st.n_active, "slots_processing",
                                      (int)st.n_active, "queued", (int)st.n_queued));
        idle += m->n_parallel - (int)st.n_active;
        busy += (int)st.n_active;
        queued += (int)st.n_queued;
    }
    pthread_mutex_unlock(&srv->models_lock);
    return http_send_json(hr, 200,
                          json_pack("{s:s, s:i, s:i, s:i, s:o}", "status", "ok", "slots_idle", idle,
                                    "slots_processing", busy, "queued", queued, "models", models));
}

/* The HELP and TYPE lines of a metric. */
static void metric_head(text_buf *b, const char *name, const char *type, const char *help) {
    char line[512];
    int n = snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    if (n > 0) text_append(b, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

/* One sample: NAME{LABELS} VALUE. */
static void metric_sample(text_buf *b, const char *name, const char *labels, double value) {
    char line[512];
    int n = snprintf(line, sizeof line, "%s{%s} %.17g\n", name, labels, value);
    if (n > 0) text_append(b, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

/* The per-model metrics: each one's samples for every model (models_lock held). */
static void model_metrics(text_buf *b, server *srv) {
    enum { N_MODELS_MAX = 64 };
    syn_engine_stats st[N_MODELS_MAX];
    const served_model *ms[N_MODELS_MAX];
    size_t n = 0;
    for (const served_model *m = srv->models; m && n < N_MODELS_MAX; m = m->next) {
        if (m->draining) continue;
        syn_engine_get_stats(m->engine, &st[n]);
        ms[n++] = m;
    }
    static const struct {
        const char *name, *type, *help;
    } metrics[] = {
        {"synapse_requests_running", "gauge", "Requests decoding in a slot."},
        {"synapse_requests_queued", "gauge", "Requests waiting for a slot."},
        {"synapse_slots_total", "gauge", "Slots (requests decoding at once)."},
        {"synapse_slots_free", "gauge", "Slots not in use."},
        {"synapse_prompt_tokens_total", "counter", "Prompt tokens computed."},
        {"synapse_prefix_cache_hit_tokens_total", "counter",
         "Prompt tokens reused from the prefix cache instead of computed."},
        {"synapse_generated_tokens_total", "counter", "Tokens generated."},
        {"synapse_decode_tokens_per_second", "gauge",
         "Tokens per second over the decode-only steps so far."},
        {"synapse_kv_blocks_used", "gauge",
         "KV-cache blocks held by requests or the prefix cache."},
        {"synapse_kv_blocks_free", "gauge", "KV-cache blocks free."},
        {"synapse_kv_blocks_cached", "gauge", "KV-cache blocks held by the prefix cache."},
        {"synapse_preemptions_total", "counter",
         "Times a request gave up its KV blocks to older ones."},
        {"synapse_prefix_snapshots", "gauge",
         "Snapshots of per-sequence memory (recurrent state, sliding-window ring) the prefix "
         "cache holds."},
    };
    for (size_t k = 0; k < sizeof metrics / sizeof metrics[0]; k++) {
        metric_head(b, metrics[k].name, metrics[k].type, metrics[k].help);
        for (size_t i = 0; i < n; i++) {
            const syn_engine_stats *e = &st[i];
            const double values[] = {
                e->n_active,
                e->n_queued,
                ms[i]->n_parallel,
                ms[i]->n_parallel - (double)e->n_active,
                (double)e->n_prompt_tokens,
                (double)e->n_cached_tokens,
                (double)e->n_generated,
                e->decode_steps_ms > 0 ? e->decode_steps_tokens / e->decode_steps_ms * 1e3 : 0,
                e->kv_blocks_used,
                (double)e->kv_blocks_total - e->kv_blocks_used,
                e->kv_blocks_cached,
                (double)e->n_preempted,
                e->kv_snapshots,
            };
            char labels[96];
            snprintf(labels, sizeof labels, "model=\"%s\"",
                     ms[i]->alias); /* aliases need no escaping */
            metric_sample(b, metrics[k].name, labels, values[k]);
        }
    }
}

enum MHD_Result handle_metrics(http_request *hr) {
    server *srv = hr->srv;
    text_buf b = {0};
    metric_head(&b, "synapse_requests_total", "counter", "HTTP responses by status code.");
    for (unsigned code = 100; code < 600; code++) {
        const uint64_t n = atomic_load(&srv->counters.by_status[code]);
        char labels[32];
        snprintf(labels, sizeof labels, "status=\"%u\"", code);
        if (n > 0) metric_sample(&b, "synapse_requests_total", labels, (double)n);
    }
    metric_head(&b, "synapse_client_disconnects_total", "counter",
                "Requests cancelled because their client went away.");
    metric_sample(&b, "synapse_client_disconnects_total", "",
                  (double)atomic_load(&srv->counters.cancelled));
    if (atomic_load(&srv->ready)) {
        pthread_mutex_lock(&srv->models_lock);
        model_metrics(&b, srv);
        pthread_mutex_unlock(&srv->models_lock);
    }
    enum MHD_Result r =
        http_send_text(hr, 200, "text/plain; version=0.0.4", b.data ? b.data : "", b.len);
    free(b.data);
    return r;
}

json_t *serve_json_body(http_request *hr) {
    json_error_t jerr;
    json_t *body = json_loadb(http_body(hr), hr->body.len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(body)) {
        json_decref(body);
        http_send_error(hr, 400, "invalid_request_error", NULL, NULL,
                        "the body must be a JSON object%s%s", body ? "" : ": ",
                        body ? "" : jerr.text);
        return NULL;
    }
    return body;
}

served_model *serve_body_model(http_request *hr, json_t *body) {
    json_t *name = json_object_get(body, "model");
    if (name && !json_is_string(name)) {
        http_send_error(hr, 400, "invalid_request_error", "model", NULL,
                        "'model' must be a string");
        return NULL;
    }
    served_model *m = models_acquire(hr->srv, json_string_value(name));
    if (!m) {
        char names[1024];
        models_names(hr->srv, names, sizeof names);
        if (name)
            http_send_error(hr, 404, "invalid_request_error", "model", "model_not_found",
                            "the model '%s' is not served here (this node has %s)",
                            json_string_value(name), names);
        else
            http_send_error(hr, 400, "invalid_request_error", "model", NULL,
                            "'model' is required: this node serves %s", names);
    }
    return m;
}

/* POST /tokenize {"content": TEXT, "parse_special": true, "model"} -> {"tokens": [ids]}
 * (llama-server's shape; special tokens are parsed unless "parse_special" is false). */
enum MHD_Result handle_tokenize(http_request *hr) {
    json_t *body = serve_json_body(hr);
    if (!body) return MHD_YES;
    served_model *m = serve_body_model(hr, body);
    if (!m) {
        json_decref(body);
        return MHD_YES;
    }
    json_t *content = json_object_get(body, "content"),
           *special = json_object_get(body, "parse_special");
    json_t *add = json_object_get(body, "add_special");
    enum MHD_Result r;
    if (!json_is_string(content)) {
        r = http_send_error(hr, 400, "invalid_request_error", "content", NULL,
                            "'content' must be a string");
    } else if (special && !json_is_boolean(special)) {
        r = http_send_error(hr, 400, "invalid_request_error", "parse_special", NULL,
                            "'parse_special' must be a boolean");
    } else if (add && !json_is_boolean(add)) {
        r = http_send_error(hr, 400, "invalid_request_error", "add_special", NULL,
                            "'add_special' must be a boolean");
    } else {
        int32_t *ids = NULL;
        size_t n = 0;
        /* As llama-server's /tokenize: the text's own tokens unless add_special asks for the
         * prompt policy (BOS). */
        if (tokenize_text(m->tok, json_string_value(content), json_string_length(content),
                          json_is_true(add), !json_is_false(special), &ids, &n) != EXIT_OK)
            r = http_send_error(hr, 400, "invalid_request_error", "content", NULL,
                                "cannot tokenize: %s", syn_last_error());
        else
            r = http_send_json(hr, 200, json_pack("{s:o}", "tokens", json_ids(ids, n)));
        free(ids);
    }
    models_release(hr->srv, m);
    json_decref(body);
    return r;
}

/* The text of tokens (a JSON array of ids), invalid UTF-8 as U+FFFD. */
static enum MHD_Result detokenize_ids(http_request *hr, const syn_tokenizer *tok, json_t *tokens) {
    if (!json_is_array(tokens))
        return http_send_error(hr, 400, "invalid_request_error", "tokens", NULL,
                               "'tokens' must be an array of token ids");
    const int32_t n_vocab = syn_tokenizer_n_vocab(tok);
    const size_t n = json_array_size(tokens);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) return http_send_error(hr, 500, "server_error", NULL, NULL, "out of memory");
    size_t i;
    json_t *id;
    json_array_foreach(tokens, i, id) {
        if (!json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) >= n_vocab) {
            free(ids);
            return http_send_error(hr, 400, "invalid_request_error", "tokens", NULL,
                                   "'tokens[%zu]' is not a token id of this model (0..%d)", i,
                                   n_vocab - 1);
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
        st = syn_detokenize(tok, ids, n, text, cap, &len);
    }
    enum MHD_Result r =
        st == SYN_OK ? http_send_json(hr, 200, json_pack("{s:o}", "content", json_utf8(text, len)))
                     : http_send_error(hr, 500, "server_error", NULL, NULL, "cannot detokenize: %s",
                                       syn_last_error());
    free(text);
    free(ids);
    return r;
}

/* POST /detokenize {"tokens": [ids], "model"} -> {"content": TEXT}. */
enum MHD_Result handle_detokenize(http_request *hr) {
    json_t *body = serve_json_body(hr);
    if (!body) return MHD_YES;
    served_model *m = serve_body_model(hr, body);
    enum MHD_Result r = m ? detokenize_ids(hr, m->tok, json_object_get(body, "tokens")) : MHD_YES;
    models_release(hr->srv, m);
    json_decref(body);
    return r;
}

/* Anthropic's POST /v1/messages/count_tokens: {"input_tokens"}, the size of the prompt the same
 * body would be rendered to (max_tokens not needed). */

enum MHD_Result handle_messages_count_tokens(http_request *hr) {
    server *srv = hr->srv;
    if (!serve_accepting(srv)) return serve_send_unavailable(hr);
    oa_error err;
    oa_request req;
    if (oa_request_parse(OA_MESSAGES_COUNT, http_body(hr), hr->body.len, &req, &err) != 0)
        return http_send_error(hr, (unsigned)err.http_status, err.type, err.param, err.code, "%s",
                               err.message);
    served_model *m = models_acquire(srv, req.model);
    enum MHD_Result r;
    char *prompt = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    if (!m && req.model) {
        r = http_send_error(hr, 404, "invalid_request_error", "model", "model_not_found",
                            "the model '%s' is not served here", req.model);
    } else if (!m) {
        r = http_send_error(hr, 400, "invalid_request_error", "model", NULL,
                            "'model' is required: this node serves several models");
    } else if (completions_render_chat(srv, m, &req, &prompt) != SYN_OK ||
               syn_tokenize_new(m->tok, prompt, strlen(prompt), true, true, &ids, &n) != SYN_OK) {
        r = http_send_error(hr, 400, "invalid_request_error", NULL, NULL, "%s", syn_last_error());
    } else {
        hr->prompt_tokens = n;
        r = http_send_json(hr, 200, json_pack("{s:I}", "input_tokens", (json_int_t)n));
    }
    free(ids);
    free(prompt);
    if (m) models_release(srv, m);
    oa_request_free(&req);
    return r;
}
