/*
 * openai_request.h: the body of an OpenAI-style POST /v1/chat/completions, /v1/completions or
 * /v1/embeddings request, parsed and checked into what the engine needs. No HTTP and no engine
 * here: the parser is a pure function of the bytes, so the fuzz target
 * (tests/fuzz/fuzz_openai_request.c) drives it directly.
 *
 * Follows the OpenAI API: unknown fields are ignored; every known field has its type and range
 * checked, and the first violation becomes a 400 naming the field in `param`.
 */
#ifndef SYNAPSE_SERVE_OPENAI_REQUEST_H
#define SYNAPSE_SERVE_OPENAI_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "synapse.h"

enum {
    OA_MAX_STOP = 4,          /* OpenAI's limit on stop strings */
    OA_MAX_TOP_LOGPROBS = 20, /* alternatives per token */
    OA_MAX_STOP_BYTES = 256,  /* one stop string's length */
    OA_MAX_N = 8              /* choices per request ("n") */
};

/* OA_RESPONSES (POST /v1/responses) is parsed into the chat fields: kind becomes OA_CHAT with
 * responses set. OA_LLAMA_COMPLETION (llama-server's POST /completion: n_predict, seed -1 for a
 * random one, logit_bias as [[id, bias]], json_schema) into the completion fields: kind becomes
 * OA_COMPLETION with native set. OA_INFILL (llama-server's POST /infill) likewise, with infill set
 * and the fill-in-the-middle fields read instead of the prompt. OA_MESSAGES and OA_MESSAGES_COUNT
 * (Anthropic's POST /v1/messages and /v1/messages/count_tokens, anthropic_request.c) into the chat
 * fields: kind becomes OA_CHAT with messages_api set. */
typedef enum oa_kind {
    OA_CHAT,
    OA_COMPLETION,
    OA_RESPONSES,
    OA_LLAMA_COMPLETION,
    OA_INFILL,
    OA_MESSAGES,
    OA_MESSAGES_COUNT
} oa_kind;

/* tool_choice: auto is the default when tools are given, none when not. */
typedef enum oa_tool_choice {
    OA_TOOLS_NONE,
    OA_TOOLS_AUTO,
    OA_TOOLS_REQUIRED,
    OA_TOOLS_NAMED
} oa_tool_choice;

typedef enum oa_format { OA_FORMAT_TEXT, OA_FORMAT_JSON_OBJECT, OA_FORMAT_JSON_SCHEMA } oa_format;

/* An error in the OpenAI shape: {"error": {"message", "type", "param", "code"}}. */
typedef struct oa_error {
    int http_status;  /* 400, 404, ... */
    const char *type; /* "invalid_request_error", ... */
    char param[64];   /* the offending field ("" when none) */
    const char *code; /* a machine-readable code, or NULL */
    char message[512];
} oa_error;

typedef struct oa_request {
    oa_kind kind;
    bool responses;    /* asked through /v1/responses: answer in its shape */
    bool native;       /* asked through llama-server's /completion: answer in its shape */
    bool messages_api; /* asked through Anthropic's /v1/messages: answer in its shape */
    const char *model; /* as asked, or NULL (the server's only model) */

    /* OA_CHAT: */
    json_t *template_messages; /* the messages as the chat template reads them (owned): content
                                * a string or null, tool_calls' arguments parsed into objects */
    const json_t *tools;       /* the request's function tools (in root), or NULL */
    oa_tool_choice tool_choice;
    const char *tool_choice_name;       /* OA_TOOLS_NAMED */
    bool parallel_tool_calls;           /* default true, as OpenAI's */
    const json_t *chat_template_kwargs; /* extra template variables (in root), or NULL */
    /* OA_COMPLETION: exactly one of prompt_text (NUL-terminated UTF-8) or prompt_tokens; for an
     * infill prompt_text is /infill's prompt (or the prefix) or NULL, and prompt_tokens NULL. */
    const char *prompt_text;
    int32_t *prompt_tokens; /* [n_prompt_tokens] */
    size_t n_prompt_tokens;

    /* Fill in the middle (infill set): /infill's input_prefix, input_suffix, input_extra and
     * prompt, or /v1/completions' prompt (a text) and suffix. The server tokenizes it into
     * prompt_tokens (syn_tokenize_infill), which the parser leaves NULL. */
    bool infill;
    syn_infill fim;              /* its strings in root */
    syn_infill_chunk *fim_extra; /* [fim.n_extra] (owned), what fim.extra points to */

    int32_t n;                   /* choices, 1..OA_MAX_N (1 for responses, native, messages_api) */
    int32_t max_tokens;          /* -1: not given (generate to the end of the context) */
    syn_sampler_params sampling; /* the library's defaults where a field is absent */
    bool has_seed;               /* "seed" was given (else the server draws one) */
    const char *stop[OA_MAX_STOP];
    size_t n_stop;
    int32_t top_logprobs; /* -1: no logprobs; 0..OA_MAX_TOP_LOGPROBS alternatives per token */
    bool stream;
    bool include_usage;         /* stream_options.include_usage */
    const char *user;           /* NULL when absent */
    oa_format format;           /* response_format */
    const json_t *json_schema;  /* OA_FORMAT_JSON_SCHEMA: the schema (in root) */
    const char *grammar;        /* llama-server's GBNF "grammar", or NULL */
    syn_logit_bias *logit_bias; /* [n_logit_bias] (owned); -100 became -INFINITY */
    size_t n_logit_bias;

    json_t *root; /* the parsed body, owning the strings above */
    char **owned; /* [n_owned] strings built by the parser (joined content parts) */
    size_t n_owned;
} oa_request;

/* Parses and checks body[len] for an endpoint of kind. On success *out owns what it points to
 * (oa_request_free) and 0 is returned; on failure -1 with *err filled (a 400 for any problem with
 * the body) and nothing to free. */
int oa_request_parse(oa_kind kind, const char *body, size_t len, oa_request *out, oa_error *err);

void oa_request_free(oa_request *r);

enum { OA_MAX_EMBED_INPUTS = 2048 }; /* inputs per embeddings request, as OpenAI's limit */

/* POST /v1/embeddings' body. */
typedef struct oa_embed_request {
    const char *model;  /* as asked, or NULL */
    size_t n;           /* inputs, 1..OA_MAX_EMBED_INPUTS */
    const char **texts; /* [n] a non-empty text (in root), or NULL where tokens[i] is the input */
    int32_t **tokens;   /* [n] non-empty arrays of ids >= 0 (owned), NULL where texts[i] is */
    size_t *n_tokens;   /* [n] */
    bool base64;        /* encoding_format "base64" (default "float") */
    int32_t dimensions; /* 0: not given; else >= 1 (the model's width bounds it: the server) */
    json_t *root;       /* the parsed body, owning the texts */
} oa_embed_request;

/* Parses and checks an embeddings body: `input` a string, an array of strings, an array of token
 * ids or an array of such arrays; `encoding_format`, `dimensions`, `model`. As oa_request_parse:
 * 0 with *out to free (oa_embed_request_free), or -1 with *err filled (a 400 naming the field and
 * the input's index) and nothing to free. */
int oa_embed_request_parse(const char *body, size_t len, oa_embed_request *out, oa_error *err);
void oa_embed_request_free(oa_embed_request *r);

/* Fills *err (printf-style message). */
void oa_error_set(oa_error *err, int http_status, const char *type, const char *param,
                  const char *code, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* The error's JSON body (NULL: no memory). */
json_t *oa_error_body(const oa_error *err);

#endif
