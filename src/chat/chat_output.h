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
 * anything) is left in content as text, never an error. thinks: the template may open <think>;
 * in_think: the prompt ended inside an open <think> (QwQ's, DeepSeek R1's generation prompts),
 * so the text is reasoning up to a </think>, all of it when none comes. Errors:
 * SYN_ERR_NO_MEMORY only. */
syn_status syn_chat_output_parse(const char *text, size_t len, syn_tool_syntax syntax, bool thinks,
                                 bool in_think, const json_t *tools, uint64_t id_seed,
                                 syn_chat_output *out);

void syn_chat_output_free(syn_chat_output *out);

/* A reply cut off inside a later call (max_tokens) still holds the whole calls before it: the
 * text of those calls alone, malloc'd (*n bytes), or NULL when no whole call precedes the cut or
 * the syntax has no boundary to find (Llama 3's bare JSON). The text ends before the last call's
 * opener (<tool_call>, [TOOL_CALLS], harmony's <|channel|>); in Mistral's array form it is the
 * array up to its last whole element, closed. */
char *syn_chat_output_whole_calls(const char *text, size_t len, syn_tool_syntax syntax, size_t *n);

/* The id of a call the model wrote none for: "call_" and 9 alphanumerics, or for Mistral (whose
 * templates demand it) the 9 alphanumerics alone; a function of seed. cap >= 15. */
void syn_chat_call_id(syn_tool_syntax syntax, uint64_t seed, char *id, size_t cap);

/* Qwen3-Coder's XML parameters: the JSON type the tools' schema gives parameter param of function
 * fn[fn_len] (NULL when not known), and a parameter's text v[n] (one newline trimmed at each end)
 * as the value it stands for: itself for a string parameter, else the JSON it spells when it
 * spells one (numbers, booleans, objects, arrays), else itself. NULL: no memory. */
const char *syn_chat_xml_parameter_type(const json_t *tools, const char *fn, size_t fn_len,
                                        const char *param);
json_t *syn_chat_xml_value(const char *v, size_t n, const char *type);

/* ---- Streaming: the same reading, piece by piece as the text is generated ----
 *
 * Content and reasoning are passed on as they come, except for text that could still be the start
 * of a marker (<tool_call>, [TOOL_CALLS], </think>, harmony's <|channel|>, ...) or whitespace that
 * would be trimmed before one: that is held back until the next piece decides it. A call is
 * buffered until it is complete (its closing marker, the end of its JSON, or the end of the
 * stream) and then read with syn_chat_output_parse, so its arguments arrive whole, in one piece;
 * a call that does not parse is passed on as content, as written. Llama 3's calls have no closing
 * marker: a reply that starts like one is held to the end of the stream. Unlike the whole parse,
 * text that was already passed on stays content when a later call turns out malformed, and text
 * after a call is content too.
 *
 * With stream_arguments (for a caller whose calls cannot be malformed: constrained decoding
 * forces them), a call in a JSON form (Hermes, Llama 3, Mistral's NAME[ARGS] and its arrays) is
 * announced as soon as its name is written and its arguments are passed on as they are
 * generated, as the model spells them (not re-serialised). Qwen3-Coder's XML calls are announced
 * at <function=NAME> and their parameters passed on as the compact JSON the whole parse makes of
 * them: a string parameter's text as it comes, escaped, any other value when its </parameter>
 * closes it. Harmony's calls still arrive whole. */

typedef enum syn_chat_event_kind {
    SYN_CHAT_CONTENT,        /* a piece of the answer: text[len] */
    SYN_CHAT_REASONING,      /* a piece of the thinking: text[len] */
    SYN_CHAT_CALL_BEGIN,     /* a call opens: index, id, name */
    SYN_CHAT_CALL_ARGUMENTS, /* a piece of its arguments' JSON text: text[len] */
    SYN_CHAT_CALL_END        /* it is complete: index, id, name and arguments (all the pieces) */
} syn_chat_event_kind;

typedef struct syn_chat_event {
    syn_chat_event_kind kind;
    const char *text; /* CONTENT, REASONING, CALL_ARGUMENTS (not NUL-terminated) */
    size_t len;
    size_t index;          /* the calls: 0 for the reply's first call, then 1, ... */
    const char *id;        /* CALL_BEGIN, CALL_END: as in syn_chat_output's tool_calls */
    const char *name;      /* CALL_BEGIN, CALL_END */
    const char *arguments; /* CALL_END: the JSON object's text */
} syn_chat_event;

/* Called for each event, in the order of the text; the pointers live until it returns. */
typedef void (*syn_chat_event_fn)(const syn_chat_event *event, void *user);

typedef struct syn_chat_stream syn_chat_stream;

/* A reader for one reply; syntax, thinks, tools and id_seed as for syn_chat_output_parse (tools
 * must outlive the reader). think_open: the prompt ends inside an open <think> (QwQ's and
 * DeepSeek R1's generation prompts), so the text starts as reasoning; otherwise, for a template
 * that thinks, the reply is reasoning only when it opens <think> itself. stream_arguments: see
 * above. Errors: no memory. */
syn_status syn_chat_stream_create(syn_tool_syntax syntax, bool thinks, bool think_open,
                                  bool stream_arguments, const json_t *tools, uint64_t id_seed,
                                  syn_chat_event_fn fn, void *user, syn_chat_stream **out);

/* The next piece of generated text; events for what it decides. Errors: no memory. */
syn_status syn_chat_stream_feed(syn_chat_stream *s, const char *text, size_t len);

/* The end of the text: what was held back is decided (an unfinished call becomes content). */
syn_status syn_chat_stream_finish(syn_chat_stream *s);

/* The calls passed on so far. */
size_t syn_chat_stream_n_calls(const syn_chat_stream *s);

/* Whether the text ended inside a streamed call's arguments (stream_arguments: max_tokens cut a
 * call already announced, whose arguments are then not whole JSON). */
bool syn_chat_stream_cut_call(const syn_chat_stream *s);

void syn_chat_stream_free(syn_chat_stream *s);

#endif
