/*
 * output.h: what the commands print: JSON values from the library's outputs (token ids, text that
 * may not be valid UTF-8) and stdout written in full or reported.
 */
#ifndef SYNAPSE_TOOL_OUTPUT_H
#define SYNAPSE_TOOL_OUTPUT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* A JSON string of len bytes; bytes that are not valid UTF-8 become U+FFFD. NULL: no memory.
 * Text from a file or the command line goes through it: jansson refuses invalid UTF-8. */
json_t *json_utf8(const char *s, size_t len);

/* json_utf8 of a NUL-terminated string. */
json_t *json_text(const char *s);

/* A JSON array of token ids; NULL: no memory. */
json_t *json_ids(const int32_t *ids, size_t n);

/* How every JSON output is written. Nine significant digits round-trip a float32 exactly. */
#define JSON_DUMP_FLAGS JSON_REAL_PRECISION(9)

/* Prints the object on stdout, compact, with a newline, and releases it. NULL: out of memory. */
int print_json(json_t *obj);

/* Flushes stdout: EXIT_OK, or "cannot write to stdout" (exit 1) when any output was lost. Long
 * outputs call it as they go, so that a full disk or a closed pipe stops the work early. */
int check_stdout(void);

/* Flushes and closes stdout once the command is done: rc, or 1 with "cannot write to stdout"
 * when rc was 0 but output was lost (an error already reported keeps its own status). */
int close_stdout(int rc);

#endif
