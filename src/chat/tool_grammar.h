/*
 * tool_grammar.h: a GBNF grammar of the tool calls a model family writes, for forced calls
 * (tool_choice "required" or a named function): every sentence is a call, in the syntax its
 * template teaches, naming one of the tools, with arguments that match that tool's
 * `parameters` schema; syn_chat_output_parse reads each sentence back as those calls.
 */
#ifndef SYNAPSE_TOOL_GRAMMAR_H
#define SYNAPSE_TOOL_GRAMMAR_H

#include <jansson.h>
#include <stdbool.h>

#include "chat/chat_output.h"
#include "synapse.h"

/* Writes into *out (malloc'd GBNF text, root rule `root`) the calls syntax can write for tools
 * (an OpenAI tools array of {"type": "function", "function": {"name", "parameters"}}): only the
 * tool named `only` when it is not NULL; one call, or with parallel one or more where the syntax
 * has several calls in one message (Hermes, Qwen3-Coder, Mistral; Llama 3 and harmony write one).
 * template_source picks Mistral's variant ([TOOL_CALLS]NAME[ARGS]{...} when it writes [ARGS],
 * else the [TOOL_CALLS][{...}] array) and may be NULL. Errors: SYN_ERR_INVALID_ARGUMENT (no
 * syntax, no tools, `only` not among them, a tool without a name), SYN_ERR_UNSUPPORTED (a
 * parameters schema that cannot be enforced, naming the tool and the keyword),
 * SYN_ERR_NO_MEMORY. */
syn_status syn_tool_call_grammar(syn_tool_syntax syntax, const char *template_source,
                                 const json_t *tools, const char *only, bool parallel, char **out);

#endif
