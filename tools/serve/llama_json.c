/* llama_json.c: llama-server's JSON shapes that more than one route answers with: a request's
 * sampling parameters (/props, /slots, /completion) and the answer of POST /completion, whole or
 * streamed (completions.c sends it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/output.h"
#include "openai_request.h"
#include "server.h"

/* A float parameter as it was written (0.95, not 0.949999988). */
static json_t *param_number(float x) {
    char text[32];
    snprintf(text, sizeof text, "%.6g", (double)x);
    return json_real(strtod(text, NULL));
}

json_t *llama_params_json(const oa_request *req) {
    const syn_sampler_params s = req ? req->sampling : syn_sampler_default_params();
    json_t *stop = json_array();
    for (size_t i = 0; req && stop && i < req->n_stop; i++)
        json_array_append_new(stop, json_string(req->stop[i]));
    return json_pack(
        "{s:I, s:o, s:i, s:o, s:o, s:o, s:i, s:o, s:o, s:I, s:o, s:b, s:s}", "n_predict",
        req && req->max_tokens > 0 ? (json_int_t)req->max_tokens : (json_int_t)-1, "temperature",
        param_number(s.temperature), "top_k", s.top_k, "top_p", param_number(s.top_p), "min_p",
        param_number(s.min_p), "repeat_penalty", param_number(s.repeat_penalty), "repeat_last_n",
        s.repeat_last_n, "frequency_penalty", param_number(s.frequency_penalty), "presence_penalty",
        param_number(s.presence_penalty), "seed",
        req && req->has_seed ? (json_int_t)s.seed : (json_int_t)-1, "stop", stop, "stream",
        req && req->stream, "grammar", req && req->grammar ? req->grammar : "");
}

json_t *llama_stream_chunk(const char *content, size_t len) {
    return json_pack("{s:o, s:b}", "content", json_utf8(len ? content : "", len), "stop", false);
}

/* The stop string the generation ended on: the earliest one in the text of its tokens (which
 * include the token that completed it); NULL when none is there. */
const char *llama_stopping_word(const served_model *m, const oa_request *req,
                                const syn_request_result *res) {
    size_t n = 0;
    if (req->n_stop == 0 ||
        syn_detokenize(m->tok, res->tokens, res->n_tokens, NULL, 0, &n) == SYN_ERR_INVALID_ARGUMENT)
        return NULL;
    char *text = malloc(n + 1);
    if (!text || syn_detokenize(m->tok, res->tokens, res->n_tokens, text, n, &n) != SYN_OK) {
        free(text);
        return NULL;
    }
    text[n] = '\0';
    const char *word = NULL, *first = NULL;
    for (size_t i = 0; i < req->n_stop; i++) {
        const char *at = strstr(text, req->stop[i]);
        if (at && (!first || at < first)) first = at, word = req->stop[i];
    }
    free(text);
    return word;
}

/* llama-server's timings: the prompt from a slot to the first token, then the generated ones. */
static json_t *timings_json(const syn_request_result *res) {
    const double prompt_ms = res->ttft_ms > res->queue_ms ? res->ttft_ms - res->queue_ms : 0;
    const double predicted_ms = res->ttft_ms > 0 ? res->total_ms - res->ttft_ms : 0;
    const double prompt_n = (double)(res->n_prompt_tokens - res->n_cached_tokens);
    const double predicted_n = (double)res->n_tokens;
    return json_pack(
        "{s:I, s:f, s:f, s:f, s:I, s:f, s:f, s:f}", "prompt_n", (json_int_t)prompt_n, "prompt_ms",
        prompt_ms, "prompt_per_token_ms", prompt_n > 0 ? prompt_ms / prompt_n : 0.0,
        "prompt_per_second", prompt_ms > 0 ? 1e3 * prompt_n / prompt_ms : 0.0, "predicted_n",
        (json_int_t)predicted_n, "predicted_ms", predicted_ms, "predicted_per_token_ms",
        predicted_n > 0 ? predicted_ms / predicted_n : 0.0, "predicted_per_second",
        predicted_ms > 0 ? 1e3 * predicted_n / predicted_ms : 0.0);
}

json_t *llama_completion_json(const served_model *m, const oa_request *req, const char *content,
                              size_t len, const syn_request_result *res) {
    const char *word = res->finish == SYN_FINISH_STOP ? llama_stopping_word(m, req, res) : NULL;
    const char *stop_type = res->finish == SYN_FINISH_LENGTH ? "limit"
                            : word                           ? "word"
                            : res->finish == SYN_FINISH_EOG || res->finish == SYN_FINISH_STOP
                                ? "eos"
                                : "none";
    json_t *tokens = json_array(); /* the generated ids only when asked, as llama-server */
    if (json_is_true(json_object_get(req->root, "return_tokens")))
        for (size_t i = 0; tokens && i < res->n_tokens; i++)
            json_array_append_new(tokens, json_integer(res->tokens[i]));
    json_t *body = json_pack(
        "{s:o, s:o, s:b, s:s, s:I, s:I, s:I, s:o, s:b, s:b, s:s, s:s, s:o}", "content",
        json_utf8(len ? content : "", len), "tokens", tokens, "stop", true, "model", m->alias,
        "tokens_predicted", (json_int_t)res->n_tokens, "tokens_evaluated",
        (json_int_t)res->n_prompt_tokens, "tokens_cached", (json_int_t)res->n_cached_tokens,
        "generation_settings", llama_params_json(req), "has_new_line",
        len > 0 && memchr(content, '\n', len) != NULL, "truncated", false, "stop_type", stop_type,
        "stopping_word", word ? word : "", "timings", timings_json(res));
    if (body && req->prompt_text)
        json_object_set_new(body, "prompt", json_string(req->prompt_text));
    return body;
}
