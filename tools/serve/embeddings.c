/* embeddings.c: POST /v1/embeddings in OpenAI's shape. The body's inputs (a string, strings, a
 * token array or token arrays) become one engine embedding request each, submitted together so
 * that they share the engine's steps; the vectors come back as JSON floats or base64 (the
 * float32 bytes, little-endian), optionally cut to `dimensions` and scaled to unit length again. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server.h"

enum {
    EMBED_MAX_INPUTS = 2048, /* as OpenAI's limit of inputs per request */
    EMBED_POLL_MS = 1,       /* how often the connection's thread looks at its requests ... */
    EMBED_CLIENT_CHECK = 20, /* ... and every this many looks at its client */
};

/* The parsed body: the inputs (texts point into the JSON, token arrays are owned). */
typedef struct embed_body {
    const char **texts; /* [n] each a text, or NULL where tokens[i] is used */
    int32_t **tokens;   /* [n] */
    size_t *n_tokens;   /* [n] */
    size_t n;
    bool base64;
    int32_t dimensions; /* 0: all */
} embed_body;

static void body_free(embed_body *b) {
    for (size_t i = 0; b->tokens && i < b->n; i++)
        free(b->tokens[i]);
    free(b->texts);
    free(b->tokens);
    free(b->n_tokens);
}

/* A JSON array of token ids into a malloc'd array; false when it is not one (nothing sent). */
static bool token_array(json_t *arr, int32_t **out, size_t *n) {
    const size_t len = json_array_size(arr);
    *out = malloc(sizeof **out * (len ? len : 1));
    if (!*out) return false;
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
            free(*out);
            *out = NULL;
            return false;
        }
        (*out)[i] = (int32_t)json_integer_value(v);
    }
    *n = len;
    return true;
}

/* Reads input, encoding_format and dimensions (n_embd bounds it); 0, or -1 with a 400 sent. */
static int parse_body(http_request *hr, json_t *body, int32_t n_embd, embed_body *b) {
    json_t *input = json_object_get(body, "input");
    json_t *format = json_object_get(body, "encoding_format");
    json_t *dims = json_object_get(body, "dimensions");
    if (format && !json_is_null(format)) {
        const char *f = json_string_value(format);
        if (!f || (strcmp(f, "float") != 0 && strcmp(f, "base64") != 0)) {
            http_send_error(hr, 400, "invalid_request_error", "encoding_format", NULL,
                            "'encoding_format' must be \"float\" or \"base64\"");
            return -1;
        }
        b->base64 = strcmp(f, "base64") == 0;
    }
    if (dims && !json_is_null(dims)) {
        if (!json_is_integer(dims) || json_integer_value(dims) < 1 ||
            json_integer_value(dims) > n_embd) {
            http_send_error(hr, 400, "invalid_request_error", "dimensions", NULL,
                            "'dimensions' must be an integer in 1..%d (the model's width)", n_embd);
            return -1;
        }
        b->dimensions = (int32_t)json_integer_value(dims);
    }
    /* one string, or one token array: a single input */
    const bool single = json_is_string(input) ||
                        (json_array_size(input) > 0 && json_is_integer(json_array_get(input, 0)));
    if (!single && !json_is_array(input)) {
        http_send_error(hr, 400, "invalid_request_error", "input", NULL,
                        "'input' must be a string, an array of strings, an array of token ids "
                        "or an array of such arrays");
        return -1;
    }
    b->n = single ? 1 : json_array_size(input);
    if (b->n == 0 || b->n > EMBED_MAX_INPUTS) {
        http_send_error(hr, 400, "invalid_request_error", "input", NULL,
                        "'input' holds %zu inputs: give 1..%d", b->n, EMBED_MAX_INPUTS);
        return -1;
    }
    b->texts = calloc(b->n, sizeof *b->texts);
    b->tokens = calloc(b->n, sizeof *b->tokens);
    b->n_tokens = calloc(b->n, sizeof *b->n_tokens);
    if (!b->texts || !b->tokens || !b->n_tokens) {
        http_send_error(hr, 500, "server_error", NULL, NULL, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < b->n; i++) {
        json_t *item = single ? input : json_array_get(input, i);
        if (json_is_string(item)) {
            b->texts[i] = json_string_value(item);
        } else if (!json_is_array(item) || !token_array(item, &b->tokens[i], &b->n_tokens[i])) {
            http_send_error(hr, 400, "invalid_request_error", "input", NULL,
                            "'input[%zu]' is neither a string nor an array of token ids", i);
            return -1;
        }
        /* the model would see only its BOS: OpenAI refuses empty inputs too */
        if ((b->texts[i] && !*b->texts[i]) || (!b->texts[i] && b->n_tokens[i] == 0)) {
            http_send_error(hr, 400, "invalid_request_error", "input", NULL,
                            "'input[%zu]' is empty", i);
            return -1;
        }
    }
    return 0;
}

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
static int submit_all(http_request *hr, const served_model *m, const embed_body *b,
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
static enum MHD_Result respond(http_request *hr, const served_model *m, const embed_body *b,
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
    if (!atomic_load(&srv->ready) || atomic_load(&srv->stopping))
        return http_send_error(hr, 503, "server_error", NULL, "unavailable",
                               atomic_load(&srv->stopping) ? "the server is shutting down"
                                                           : "the model is loading");
    json_t *body = serve_json_body(hr);
    if (!body) return MHD_YES;
    served_model *m = serve_body_model(hr, body);
    if (!m) {
        json_decref(body);
        return MHD_YES;
    }
    syn_model_info info;
    syn_model_get_info(m->model, &info);
    embed_body b = {0};
    enum MHD_Result r = MHD_YES;
    syn_engine_stats stats;
    syn_engine_get_stats(m->engine, &stats);
    syn_request **handles = NULL;
    if (parse_body(hr, body, info.n_embd, &b) != 0) {
        /* the 400 is sent */
    } else if (stats.n_active + stats.n_queued >= (uint32_t)m->n_parallel + srv->opts.max_queue) {
        r = http_send_error(hr, 503, "server_error", NULL, "queue_full",
                            "%u requests are already waiting (--max-queue); retry later",
                            stats.n_queued);
    } else if (!(handles = calloc(b.n, sizeof *handles))) {
        r = http_send_error(hr, 500, "server_error", NULL, NULL, "out of memory");
    } else if (submit_all(hr, m, &b, handles) == 0) {
        atomic_fetch_add(&srv->active_completions, 1); /* the stop waits for it */
        MHD_set_connection_option(hr->conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
        if (wait_all(hr, handles, b.n))
            r = respond(hr, m, &b, handles);
        else
            r = MHD_NO; /* closes the connection */
        drop_requests(handles, b.n);
        atomic_fetch_sub(&srv->active_completions, 1);
    }
    free(handles);
    body_free(&b);
    models_release(srv, m);
    json_decref(body);
    return r;
}
