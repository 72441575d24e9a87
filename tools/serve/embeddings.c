/* embeddings.c: POST /v1/embeddings in OpenAI's shape. The body's inputs (a string, strings, a
 * token array or token arrays) become one engine embedding request each, submitted together so
 * that they share the engine's steps; the vectors come back as JSON floats or base64 (the
 * float32 bytes, little-endian), optionally cut to `dimensions` and scaled to unit length again.
 * The body is parsed and checked by openai_request.c (oa_embed_request_parse). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server.h"

enum {
    EMBED_POLL_MS = 1,       /* how often the connection's thread looks at its requests ... */
    EMBED_CLIENT_CHECK = 20, /* ... and every this many looks at its client */
};

/* v[n] as base64 of its float32 bytes, little-endian (OpenAI's encoding_format "base64"). */
static json_t *base64_floats(const float *v, size_t n) {
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const size_t len = 4 * n;
    unsigned char *bytes = malloc(len);
    char *text = malloc((len + 2) / 3 * 4 + 1);
    json_t *out = NULL;
    if (bytes && text) {
        for (size_t i = 0; i < n; i++) { /* little-endian whatever the host's order */
            uint32_t u;
            memcpy(&u, &v[i], sizeof u);
            for (int k = 0; k < 4; k++)
                bytes[4 * i + (size_t)k] = (unsigned char)(u >> (8 * k));
        }
        size_t o = 0;
        for (size_t i = 0; i < len; i += 3) {
            const size_t left = len - i;
            const uint32_t w = (uint32_t)bytes[i] << 16 |
                               (left > 1 ? (uint32_t)bytes[i + 1] << 8 : 0) |
                               (left > 2 ? bytes[i + 2] : 0);
            text[o++] = abc[w >> 18 & 63];
            text[o++] = abc[w >> 12 & 63];
            text[o++] = left > 1 ? abc[w >> 6 & 63] : '=';
            text[o++] = left > 2 ? abc[w & 63] : '=';
        }
        text[o] = '\0';
        out = json_string(text);
    }
    free(bytes);
    free(text);
    return out;
}

static json_t *float_array(const float *v, size_t n) {
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++)
        if (json_array_append_new(arr, json_real(v[i])) != 0) {
            json_decref(arr);
            return NULL;
        }
    return arr;
}

/* Cancels and frees handles[n] (NULL entries skipped). */
static void drop_requests(syn_request **handles, size_t n) {
    for (size_t i = 0; i < n; i++)
        syn_request_free(handles[i]);
}

/* Submits every input; on a refusal sends the 4xx/5xx and returns -1 (nothing left running). */
static int submit_all(http_request *hr, const served_model *m, const oa_embed_request *b,
                      syn_request **handles) {
    for (size_t i = 0; i < b->n; i++) {
        syn_request_params p = syn_request_default_params();
        p.embed = true;
        p.pooling = hr->srv->opts.pooling;
        p.prompt_text = b->texts[i];
        p.prompt_tokens = b->tokens[i];
        p.n_prompt_tokens = b->n_tokens[i];
        const syn_status st = syn_engine_submit(m->engine, &p, &handles[i]);
        if (st == SYN_OK) continue;
        char msg[512];
        snprintf(msg, sizeof msg, "%s", syn_last_error());
        drop_requests(handles, i);
        if (st == SYN_ERR_CONTEXT_FULL)
            http_send_error(hr, 400, "invalid_request_error", "input", "context_length_exceeded",
                            "input %zu: %s", i, msg);
        else if (st == SYN_ERR_INVALID_ARGUMENT || st == SYN_ERR_UNSUPPORTED)
            http_send_error(hr, 400, "invalid_request_error", "input", NULL, "input %zu: %s", i,
                            msg);
        else if (st == SYN_ERR_STATE)
            http_send_error(hr, 503, "server_error", NULL, "unavailable", "%s", msg);
        else
            http_send_error(hr, 500, "server_error", NULL, NULL, "%s", msg);
        return -1;
    }
    return 0;
}

/* Waits for every request while the client stays; false when it went away (all cancelled). */
static bool wait_all(http_request *hr, syn_request **handles, size_t n) {
    const struct timespec pause = {0, EMBED_POLL_MS * 1000000L};
    unsigned looks = 0;
    for (size_t i = 0; i < n; i++) {
        while (!syn_request_is_done(handles[i])) {
            if (++looks % EMBED_CLIENT_CHECK == 0 && !http_client_alive(hr)) {
                atomic_fetch_add(&hr->srv->counters.cancelled, 1);
                return false;
            }
            nanosleep(&pause, NULL);
        }
    }
    return true;
}

/* The response of finished handles[n], or a 500 naming the failed input. */
static enum MHD_Result respond(http_request *hr, const served_model *m, const oa_embed_request *b,
                               syn_request **handles) {
    json_t *data = json_array();
    float *cut = NULL;
    uint64_t n_tokens = 0;
    for (size_t i = 0; data && i < b->n; i++) {
        syn_request_result res;
        syn_request_wait(handles[i], &res);
        if (!res.embedding) {
            json_decref(data);
            free(cut);
            if (res.finish == SYN_FINISH_CANCELLED) /* only the stop cancels it while we wait */
                return http_send_error(hr, 503, "server_error", NULL, "unavailable",
                                       "cancelled: the server is shutting down");
            return http_send_error(hr, 500, "server_error", NULL, NULL,
                                   "input %zu: the embedding failed: %s", i, res.error);
        }
        n_tokens += res.n_prompt_tokens;
        const float *v = res.embedding;
        size_t d = (size_t)res.n_embd;
        if (b->dimensions) { /* the first values, at unit length again */
            d = (size_t)b->dimensions;
            if (!cut) cut = malloc(sizeof *cut * d);
            if (!cut) break;
            memcpy(cut, v, sizeof *cut * d);
            syn_embed_normalize(cut, d);
            v = cut;
        }
        json_t *vec = b->base64 ? base64_floats(v, d) : float_array(v, d);
        if (!vec ||
            json_array_append_new(data, json_pack("{s:s, s:I, s:o}", "object", "embedding", "index",
                                                  (json_int_t)i, "embedding", vec)) != 0) {
            json_decref(data);
            data = NULL;
        }
    }
    free(cut);
    if (!data || json_array_size(data) != b->n) {
        json_decref(data);
        return http_send_error(hr, 500, "server_error", NULL, NULL, "out of memory");
    }
    hr->prompt_tokens = n_tokens;
    return http_send_json(hr, 200,
                          json_pack("{s:s, s:o, s:s, s:{s:I, s:I}}", "object", "list", "data", data,
                                    "model", m->alias, "usage", "prompt_tokens",
                                    (json_int_t)n_tokens, "total_tokens", (json_int_t)n_tokens));
}

enum MHD_Result handle_embeddings(http_request *hr) {
    server *srv = hr->srv;
    if (!serve_accepting(srv)) return serve_send_unavailable(hr);
    oa_error err;
    oa_embed_request req;
    if (oa_embed_request_parse(http_body(hr), hr->body.len, &req, &err) != 0)
        return http_send_error(hr, (unsigned)err.http_status, err.type, err.param, err.code, "%s",
                               err.message);
    served_model *m = serve_body_model(hr, req.root);
    if (!m) {
        oa_embed_request_free(&req);
        return MHD_YES;
    }
    syn_model_info info;
    syn_model_get_info(m->model, &info);
    enum MHD_Result r = MHD_YES;
    syn_engine_stats stats;
    syn_engine_get_stats(m->engine, &stats);
    syn_request **handles = NULL;
    if (req.dimensions > info.n_embd) {
        r = http_send_error(hr, 400, "invalid_request_error", "dimensions", NULL,
                            "'dimensions' must be in 1..%d (the model's width)", info.n_embd);
    } else if (stats.n_active + stats.n_queued >= (uint32_t)m->n_parallel + srv->opts.max_queue) {
        r = http_send_error(hr, 503, "server_error", NULL, "queue_full",
                            "%u requests are already waiting (--max-queue); retry later",
                            stats.n_queued);
    } else if (!(handles = calloc(req.n, sizeof *handles))) {
        r = http_send_error(hr, 500, "server_error", NULL, NULL, "out of memory");
    } else if (submit_all(hr, m, &req, handles) == 0) {
        atomic_fetch_add(&srv->active_completions, 1); /* the stop waits for it */
        MHD_set_connection_option(hr->conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
        if (wait_all(hr, handles, req.n))
            r = respond(hr, m, &req, handles);
        else
            r = MHD_NO; /* closes the connection */
        drop_requests(handles, req.n);
        atomic_fetch_sub(&srv->active_completions, 1);
    }
    free(handles);
    models_release(srv, m);
    oa_embed_request_free(&req);
    return r;
}
