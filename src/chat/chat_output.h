/*
 * chat_output.h: a model's generated text read back as an assistant message: the reasoning it
 * wrote between <think> and </think>, its answer, and the tool calls it wrote in the syntax its
 * chat template teaches. The syntax is recognised from the template's source; the parse is a pure
 * function of the text, so that the server, the CLI and the tests read calls the same way.
 */
#ifndef SYNAPSE_CHAT_OUTPUT_H
#define SYNAPSE_CHAT_OUTPUT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "synapse.h"

/* How a family's templates teach the model to write a call. */
typedef enum syn_tool_syntax {
    SYN_TOOLS_NONE = 0, /* the template teaches no call syntax: the text is all content */
    SYN_TOOLS_HERMES,   /* Hermes, Qwen2.5, Qwen3: <tool_call>{"name", "arguments"}</tool_call> */
    SYN_TOOLS_QWEN3_CODER, /* Qwen3-Coder, Qwen3.5: <tool_call><function=NAME><parameter=P>V... */
    SYN_TOOLS_LLAMA3,      /* Llama 3.1-3.3: {"name", "parameters"}, maybe after <|python_tag|> */
    SYN_TOOLS_MISTRAL,     /* [TOOL_CALLS][{"name", "arguments", "id"}, ...] (Nemo) or
                            * [TOOL_CALLS]NAME[ARGS]{...} (Small 3.2, Devstral, Ministral 3) */
    SYN_TOOLS_HARMONY, /* gpt-oss: <|channel|>commentary to=functions.NAME ...<|message|>{}<|call|>
                        */
    SYN_TOOLS_COUNT
} syn_tool_syntax;

/* "none", "hermes", "qwen3-coder", "llama3", "mistral", "harmony" ("?" when invalid). */
const char *syn_tool_syntax_name(syn_tool_syntax syntax);

/* The syntax template_source teaches (SYN_TOOLS_NONE for NULL or none). */
syn_tool_syntax syn_tool_syntax_detect(const char *template_source);

/* Whether the template's models think in <think>...</think> before answering (Qwen3, QwQ,
 * DeepSeek R1, ...): their text before </think> is reasoning, not content. */
bool syn_template_thinks(const char *template_source);

/* What the model wrote, split. */
typedef struct syn_chat_output {
    char *content;      /* the answer without the calls and the reasoning (malloc'd, may be "") */
    char *reasoning;    /* the thinking text, or NULL when there was none */
    json_t *tool_calls; /* an OpenAI tool_calls array ([{id, type, function: {name, arguments}}],
                         * arguments a JSON text), or NULL when the text holds no call */
} syn_chat_output;

/* Splits text[len]. tools (the request's OpenAI tools array, or NULL) gives the parameter types
 * that Qwen3-Coder's untyped XML values are read with (a string parameter stays a string);
 * id_seed makes the ids the model did not write (call_ and 9 alphanumerics, as Mistral's
 * templates demand). A call that does not parse (under tool_choice auto the model may write
 * anything) is left in content as text, never an error. Errors: SYN_ERR_NO_MEMORY only. */
syn_status syn_chat_output_parse(const char *text, size_t len, syn_tool_syntax syntax, bool thinks,
                                 const json_t *tools, uint64_t id_seed, syn_chat_output *out);

void syn_chat_output_free(syn_chat_output *out);

#endif
