/*
 * generate.h: the sampling loop shared by `synapse run` and `synapse chat`: sample, stream the
 * text as complete UTF-8 characters, decode the token, until an end-of-generation token, the
 * token budget or a full context.
 */
#ifndef SYNAPSE_TOOL_GENERATE_H
#define SYNAPSE_TOOL_GENERATE_H

#include "common/text.h"
#include "synapse.h"
#include "synapse_internal.h"
#include <stdio.h>

/* A growable token list. */
typedef struct token_vec {
    int32_t *ids;
    size_t n, cap;
} token_vec;

int tokens_push(token_vec *v, int32_t id);
int tokens_append(token_vec *v, const int32_t *ids, size_t n);

typedef enum stop_reason { STOP_LENGTH, STOP_EOG, STOP_CONTEXT } stop_reason;

const char *stop_reason_name(stop_reason r); /* "length", "eog", "context" */

typedef struct gen_request {
    syn_context *ctx; /* holds the prompt already: its logits are the first step's */
    syn_sampler *sampler;
    const syn_tokenizer *tok;
    int32_t n_predict; /* tokens to generate at most */
    bool ignore_eos;   /* mask end-of-generation tokens out instead of stopping */
    FILE *stream;      /* where text goes as it is generated (flushed per token), or NULL */
} gen_request;

typedef struct gen_result {
    size_t n_generated; /* tokens appended to the history (an end-of-generation token is not) */
    int32_t n_decode;   /* decode calls made after the first sample */
    text_buf text;      /* all generated text; caller frees text.data, also after an error */
    stop_reason stop;
    double t_first_ms; /* syn_now_ms() when the first token was sampled (0 when none was) */
    double t_end_ms;   /* syn_now_ms() at the end */
} gen_result;

/* Runs the loop; history holds the tokens so far (for the repetition penalty) and receives the
 * generated ones. On error the message is printed and the exit code returned. */
int generate(const gen_request *req, token_vec *history, gen_result *res);

#endif
