/*
 * template.h: Jinja templates as Python's Jinja2 renders them under Hugging Face's
 * apply_chat_template settings (a sandboxed environment with trim_blocks, lstrip_blocks, the
 * loop controls break/continue and the {% generation %} block; tojson as json.dumps with
 * ensure_ascii False; globals raise_exception and strftime_now).
 *
 * Templates come from model files, so they are hostile input: the source size, the nesting of
 * blocks and expressions, loop iterations, macro recursion, evaluation steps, memory and output
 * are bounded, and passing a bound is an error naming it (SYN_ERR_UNSUPPORTED), never a hang or
 * a crash. raise_exception(message) fails the render with SYN_ERR_INVALID_ARGUMENT and exactly
 * that message, as the template's author meant it for the user.
 */
#ifndef SYN_TEMPLATE_TEMPLATE_H
#define SYN_TEMPLATE_TEMPLATE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "synapse.h"

#define SYN_TEMPLATE_MAX_SOURCE ((size_t)1 << 20)
#define SYN_TEMPLATE_MAX_NESTING 256
#define SYN_TEMPLATE_MAX_OUTPUT ((size_t)4 << 20)
#define SYN_TEMPLATE_MAX_ITERATIONS 1000000
#define SYN_TEMPLATE_MAX_STEPS 5000000
#define SYN_TEMPLATE_MAX_CALL_DEPTH 64

typedef struct syn_template syn_template;

/* Parses Jinja source (n bytes, UTF-8). SYN_ERR_FORMAT with the line for a syntax error,
 * SYN_ERR_UNSUPPORTED for a bound passed or a statement a sandbox has no use for (include,
 * extends, import). */
syn_status syn_template_parse(const char *source, size_t n, syn_template **out);
void syn_template_free(syn_template *t);

/* Renders t with the variables of the JSON object vars (NULL: none); strftime_now formats the
 * instant now_unix (seconds since 1970, UTC), or the current time when now_unix < 0. *text
 * receives a malloc'd NUL-terminated string (the caller frees it) of *n_bytes bytes.
 * Errors: SYN_ERR_INVALID_ARGUMENT "MESSAGE" for raise_exception(MESSAGE) and for type errors
 * (with the line), SYN_ERR_UNSUPPORTED for a bound, SYN_ERR_NO_MEMORY. */
syn_status syn_template_render(const syn_template *t, const json_t *vars, int64_t now_unix,
                               char **text, size_t *n_bytes);

#endif
