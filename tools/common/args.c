/* args.c: strict option and number parsing, and the tool's one-line error messages. */
#include "args.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synapse.h"

static void print_error(const char *fmt, va_list ap, const char *suffix) {
    fputs("synapse: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    if (suffix) fprintf(stderr, ": %s", suffix);
    fputc('\n', stderr);
}

int fail_usage(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    print_error(fmt, ap, NULL);
    va_end(ap);
    return EXIT_USAGE;
}

int fail_runtime(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    print_error(fmt, ap, NULL);
    va_end(ap);
    return EXIT_RUNTIME;
}

int fail_lib(const char *fmt, ...) {
    const char *cause = syn_last_error();
    va_list ap;
    va_start(ap, fmt);
    print_error(fmt, ap, cause[0] ? cause : "unknown error");
    va_end(ap);
    return EXIT_RUNTIME;
}

arg_iter args_begin(int argc, char **argv) {
    arg_iter it = {argc, argv, 1};
    return it;
}

const char *args_next(arg_iter *it) { return it->i < it->argc ? it->argv[it->i++] : NULL; }

bool args_is_help(const char *arg) { return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0; }

int args_value(arg_iter *it, const char *opt, const char **out) {
    if (it->i >= it->argc) return fail_usage("option %s needs a value", opt);
    *out = it->argv[it->i++];
    return EXIT_OK;
}

int args_unknown(const char *arg) {
    if (arg[0] == '-' && arg[1] != '\0') return fail_usage("unknown option '%s'", arg);
    return fail_usage("unexpected argument '%s'", arg);
}

int parse_long(const char *opt, const char *s, long min, long max, long *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (s[0] == '\0' || *end != '\0' || s[0] == ' ' || s[0] == '\t')
        return fail_usage("%s: '%s' is not an integer", opt, s);
    if (errno == ERANGE || v < min || v > max)
        return fail_usage("%s: %s is out of range [%ld, %ld]", opt, s, min, max);
    *out = v;
    return EXIT_OK;
}

int parse_u64(const char *opt, const char *s, uint64_t *out) {
    char *end = NULL;
    /* strtoull accepts a sign and whitespace: require a leading digit instead. */
    if (s[0] < '0' || s[0] > '9') return fail_usage("%s: '%s' is not an unsigned integer", opt, s);
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end != '\0') return fail_usage("%s: '%s' is not an unsigned integer", opt, s);
    if (errno == ERANGE) return fail_usage("%s: %s is out of range", opt, s);
    *out = (uint64_t)v;
    return EXIT_OK;
}

int parse_float(const char *opt, const char *s, double min, bool min_open, double max, float *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (s[0] == '\0' || *end != '\0' || s[0] == ' ' || s[0] == '\t')
        return fail_usage("%s: '%s' is not a number", opt, s);
    const char open = min_open ? '(' : '[';
    if (errno == ERANGE || !isfinite(v) || v < min || (min_open && v == min) || v > max)
        return fail_usage("%s: %s is out of range %c%g, %g]", opt, s, open, min, max);
    /* The value is used as a float: one that rounds onto an open bound is out of range too. */
    const float f = (float)v;
    if (min_open && f == min)
        return fail_usage("%s: %s is out of range %c%g, %g]: it rounds to %g in single precision",
                          opt, s, open, min, max, (double)f);
    *out = f;
    return EXIT_OK;
}

int parse_int_list(const char *opt, const char *s, int32_t min, int32_t max, const char *what,
                   int32_t **vals, size_t *n) {
    size_t count = 1;
    for (const char *p = s; *p; p++)
        count += *p == ',';
    int32_t *out = malloc(count * sizeof *out);
    if (!out) return fail_runtime("out of memory");
    const char *p = s;
    for (size_t i = 0; i < count; i++) {
        /* Each element: one or more digits, then ',' or the end. */
        if (*p < '0' || *p > '9') {
            free(out);
            return fail_usage("%s: element %zu of '%s' is not a %s", opt, i + 1, s, what);
        }
        int64_t v = 0;
        while (*p >= '0' && *p <= '9') {
            v = v * 10 + (*p++ - '0');
            if (v > max) break; /* stop before the value can overflow */
        }
        if (v < min || v > max) {
            free(out);
            return fail_usage("%s: %s at element %zu of '%s' is out of range [%d, %d]", opt, what,
                              i + 1, s, min, max);
        }
        if (*p != (i + 1 < count ? ',' : '\0')) {
            free(out);
            return fail_usage("%s: element %zu of '%s' is not a %s", opt, i + 1, s, what);
        }
        p++;
        out[i] = (int32_t)v;
    }
    *vals = out;
    *n = count;
    return EXIT_OK;
}

int parse_token_list(const char *opt, const char *s, int32_t **ids, size_t *n) {
    return parse_int_list(opt, s, 0, INT32_MAX, "token id", ids, n);
}
