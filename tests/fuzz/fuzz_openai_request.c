/* fuzz_openai_request.c: libFuzzer target: any bytes as the body of a chat completion, a
 * completion, a /v1/responses, a llama-server /completion and /infill, an Anthropic /v1/messages,
 * /v1/messages/count_tokens and a /v1/embeddings request (tools/serve/openai_request.c,
 * anthropic_request.c). A body is either refused with a complete error or accepted with every
 * field in range; both are checked here. Built by `make fuzz`. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "serve/openai_request.h"

/* Traps (a crash libFuzzer reports) when a promise of oa_request_parse is broken. */
#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) __builtin_trap();                                                             \
    } while (0)

static void check_accepted(const oa_request *r) {
    REQUIRE(!r->messages_api || r->kind == OA_CHAT); /* Anthropic's body became a chat */
    if (r->kind == OA_CHAT) {
        /* what the template reads: a non-empty array of objects, each with a role */
        REQUIRE(json_is_array(r->template_messages) && json_array_size(r->template_messages) > 0);
        size_t i;
        const json_t *m;
        json_array_foreach(r->template_messages, i, m) {
            REQUIRE(json_is_object(m));
            const char *role = json_string_value(json_object_get(m, "role"));
            REQUIRE(role && strlen(role) > 0);
            const json_t *content = json_object_get(m, "content");
            REQUIRE(json_is_string(content) || json_is_null(content));
        }
    } else if (r->infill) {
        /* the server tokenizes it: prefix and suffix are there, each extra file has its text */
        REQUIRE(r->fim.prefix && r->fim.suffix && !r->prompt_tokens);
        REQUIRE(r->fim.n_extra == 0 || r->fim.extra == r->fim_extra);
        for (size_t i = 0; i < r->fim.n_extra; i++)
            REQUIRE(r->fim.extra[i].text != NULL);
    } else {
        REQUIRE((r->prompt_text != NULL) != (r->prompt_tokens != NULL));
        for (size_t i = 0; i < r->n_prompt_tokens; i++)
            REQUIRE(r->prompt_tokens[i] >= 0);
    }
    REQUIRE(r->max_tokens == -1 || r->max_tokens >= 1);
    REQUIRE(r->n_stop <= OA_MAX_STOP);
    for (size_t i = 0; i < r->n_stop; i++)
        REQUIRE(strlen(r->stop[i]) >= 1 && strlen(r->stop[i]) <= OA_MAX_STOP_BYTES);
    REQUIRE(r->top_logprobs >= -1 && r->top_logprobs <= OA_MAX_TOP_LOGPROBS);
    REQUIRE(r->sampling.temperature >= 0 && r->sampling.temperature <= 2);
    REQUIRE(r->sampling.top_p > 0 && r->sampling.top_p <= 1);
    REQUIRE(!r->include_usage || r->stream);
    REQUIRE(r->n >= 1 && r->n <= OA_MAX_N &&
            (r->n == 1 || !(r->responses || r->native || r->messages_api)));
    REQUIRE(r->sampling.frequency_penalty >= -2 && r->sampling.frequency_penalty <= 2);
    REQUIRE(r->sampling.presence_penalty >= -2 && r->sampling.presence_penalty <= 2);
}

/* An accepted embeddings body: 1..OA_MAX_EMBED_INPUTS inputs, each exactly one non-empty text or
 * token array of ids >= 0. */
static void check_embed_accepted(const oa_embed_request *r) {
    REQUIRE(r->n >= 1 && r->n <= OA_MAX_EMBED_INPUTS);
    for (size_t i = 0; i < r->n; i++) {
        REQUIRE((r->texts[i] != NULL) != (r->tokens[i] != NULL));
        if (r->texts[i]) REQUIRE(strlen(r->texts[i]) > 0);
        if (r->tokens[i]) REQUIRE(r->n_tokens[i] > 0);
        for (size_t k = 0; r->tokens[i] && k < r->n_tokens[i]; k++)
            REQUIRE(r->tokens[i][k] >= 0);
    }
    REQUIRE(r->dimensions >= 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    oa_embed_request e;
    oa_error err;
    if (oa_embed_request_parse((const char *)data, size, &e, &err) == 0) {
        check_embed_accepted(&e);
        oa_embed_request_free(&e);
    } else {
        REQUIRE(err.http_status >= 400 && err.http_status < 600 && err.type && err.message[0]);
    }
    for (int kind = OA_CHAT; kind <= OA_MESSAGES_COUNT; kind++) {
        oa_request r;
        if (oa_request_parse((oa_kind)kind, (const char *)data, size, &r, &err) == 0) {
            check_accepted(&r);
            oa_request_free(&r);
        } else {
            REQUIRE(err.http_status >= 400 && err.http_status < 600 && err.type && err.message[0]);
        }
    }
    return 0;
}
