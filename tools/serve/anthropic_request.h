/*
 * anthropic_request.h: the body of an Anthropic Messages API request (POST /v1/messages and
 * /v1/messages/count_tokens) rewritten into the chat completion body that openai_request.c
 * checks: the same messages, tool calls and tool results the chat template renders, so both APIs
 * share the one parser, tool-call reader and constrained decoding. Pure, like openai_request.c
 * (fuzzed through oa_request_parse).
 */
#ifndef SYNAPSE_SERVE_ANTHROPIC_REQUEST_H
#define SYNAPSE_SERVE_ANTHROPIC_REQUEST_H

#include <jansson.h>
#include <stdbool.h>

#include "openai_request.h"

/* Replaces *root (an Anthropic body, released) with the equivalent chat completion body (a new
 * reference); count_only: /v1/messages/count_tokens, where max_tokens is not required. 0, or -1
 * with *err filled (a 400 naming the Anthropic field) and *root unchanged. */
int anthropic_to_chat(json_t **root, bool count_only, oa_error *err);

#endif
