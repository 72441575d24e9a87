/*
 * text.h: text helpers of the tools: the clock, reading a file's exact bytes, UTF-8 checks, model
 * aliases and a growable text buffer.
 */
#ifndef SYNAPSE_TOOL_TEXT_H
#define SYNAPSE_TOOL_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* The file's exact bytes, NUL-terminated for convenience (*len excludes the NUL). Caller frees. */
int read_file(const char *path, char **data, size_t *len);

/* Length of the valid UTF-8 sequence at s (1 to 4 bytes), or 0 when s[0] does not start one
 * (overlong forms, surrogates and code points above U+10FFFF are invalid). avail >= 1. */
size_t utf8_seq_len(const unsigned char *s, size_t avail);

/* The offset of the first byte of s[len] that is not valid UTF-8; len when all of it is. */
size_t utf8_valid_prefix(const char *s, size_t len);

/* The longest model alias (--alias, /admin/models, cluster-config). */
enum { MODEL_ALIAS_MAX = 64 };

/* Whether alias can name a served model: 1..MODEL_ALIAS_MAX letters, digits and -_.:, which an
 * HAProxy configuration and a Prometheus label take unquoted and match exactly. */
bool model_alias_valid(const char *alias);

/* Growable byte buffer for decoded text. */
typedef struct text_buf {
    char *data;
    size_t len, cap;
} text_buf;

int text_append(text_buf *b, const char *s, size_t n);

#endif
