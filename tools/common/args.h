/*
 * args.h: strict command-line parsing for the synapse tool: every number is parsed in full and
 * range-checked, every option that takes a value must have one, and anything unrecognised is a
 * usage error. Errors are printed here, as the one "synapse: error: ..." line, and the caller only
 * propagates the exit code.
 */
#ifndef SYNAPSE_TOOL_ARGS_H
#define SYNAPSE_TOOL_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exit codes of the tool. */
enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

/* Returned by option parsers when --help was asked for (usage printed; exit 0). Distinct from
 * every exit code. */
enum { ARGS_HELP = -1 };

/* Print "synapse: error: <message>" on stderr and return EXIT_USAGE / EXIT_RUNTIME. */
int fail_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int fail_runtime(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same as fail_runtime, with ": <syn_last_error()>" appended (for library failures). */
int fail_lib(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Walks argv[1..argc-1] (argv[0] is the command name). */
typedef struct arg_iter {
    int argc;
    char **argv;
    int i; /* index of the next argument */
} arg_iter;

arg_iter args_begin(int argc, char **argv);

/* The next argument, or NULL at the end. */
const char *args_next(arg_iter *it);

/* True for "-h" and "--help". */
bool args_is_help(const char *arg);

/* The value following option opt. Returns EXIT_OK, or EXIT_USAGE (printed) when it is missing. */
int args_value(arg_iter *it, const char *opt, const char **out);

/* The usage error for an argument no parser recognised. */
int args_unknown(const char *arg);

/* Decimal integer in [min, max], the whole string. */
int parse_long(const char *opt, const char *s, long min, long max, long *out);
/* Decimal unsigned 64-bit integer, the whole string (no sign). */
int parse_u64(const char *opt, const char *s, uint64_t *out);
/* Finite float in [min, max]; with min_open the lower bound itself is excluded. */
int parse_float(const char *opt, const char *s, double min, bool min_open, double max, float *out);

/* Comma-separated decimal integers, e.g. "1,2,3": at least one, each in [min, max] (min >= 0:
 * no signs), no empty elements and no spaces. what names an element in errors ("token id").
 * *vals is malloc'd; the caller frees it. */
int parse_int_list(const char *opt, const char *s, int32_t min, int32_t max, const char *what,
                   int32_t **vals, size_t *n);

/* parse_int_list for token ids in [0, INT32_MAX]. Whether an id exists in the model's vocabulary
 * is checked later, against the model (exit 1). */
int parse_token_list(const char *opt, const char *s, int32_t **ids, size_t *n);

#endif
