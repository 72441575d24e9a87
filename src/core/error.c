/* error.c: status names, the thread-local last-error message and the log callback. */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ERROR_MESSAGE_CAP = 1024 };

static _Thread_local char last_error[ERROR_MESSAGE_CAP];

/* Set once before models load (documented as not thread-safe in synapse.h). */
static syn_log_fn log_callback;
static void *log_user_data;

const char *syn_status_name(syn_status status) {
    switch (status) {
    case SYN_OK: return "ok";
    case SYN_ERR_INVALID_ARGUMENT: return "invalid argument";
    case SYN_ERR_IO: return "i/o error";
    case SYN_ERR_FORMAT: return "format error";
    case SYN_ERR_UNSUPPORTED: return "unsupported";
    case SYN_ERR_NO_MEMORY: return "out of memory";
    case SYN_ERR_CONTEXT_FULL: return "context full";
    case SYN_ERR_BUFFER_TOO_SMALL: return "buffer too small";
    case SYN_ERR_UNAVAILABLE: return "unavailable";
    case SYN_ERR_INTERNAL: return "internal error";
    case SYN_ERR_STATE: return "wrong state";
    case SYN_ERR_NOT_FOUND: return "not found";
    }
    return "unknown status";
}

const char *syn_last_error(void) { return last_error; }

void syn_clear_error(void) { last_error[0] = '\0'; }

/* Cuts s (len bytes) to fit cap bytes with its NUL by dropping its middle for "...": the start
 * says what failed and the end why (the system's reason after a long path), so both stay. Cuts
 * fall between UTF-8 characters. */
static void elide_middle(const char *s, size_t len, char *out, size_t cap) {
    static const char gap[] = "...";
    const size_t keep = cap - sizeof gap; /* bytes kept from s, around the gap */
    size_t head = keep / 3, tail = len - (keep - head);
    while (head > 0 && ((unsigned char)s[head] & 0xC0) == 0x80)
        head--;
    while (tail < len && ((unsigned char)s[tail] & 0xC0) == 0x80)
        tail++;
    snprintf(out, cap, "%.*s%s%s", (int)head, s, gap, s + tail);
}

/* Formats the message into last_error, eliding its middle when it is too long to fit whole. */
static void set_error(const char *fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    const int len = vsnprintf(last_error, sizeof last_error, fmt, ap);
    if (len >= (int)sizeof last_error) {
        char *full = malloc((size_t)len + 1);
        if (full) { /* otherwise the message stays cut at its end */
            vsnprintf(full, (size_t)len + 1, fmt, again);
            elide_middle(full, (size_t)len, last_error, sizeof last_error);
            free(full);
        }
    }
    va_end(again);
}

static void set_errorf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error(fmt, ap);
    va_end(ap);
}

syn_status syn_fail(syn_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error(fmt, ap);
    va_end(ap);
    return status;
}

syn_status syn_fail_context(syn_status status, const char *fmt, ...) {
    char previous[ERROR_MESSAGE_CAP];
    memcpy(previous, last_error, sizeof previous);
    char prefix[ERROR_MESSAGE_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    set_errorf("%s: %s", prefix, previous);
    return status;
}

void syn_log_set(syn_log_fn fn, void *user_data) {
    log_callback = fn;
    log_user_data = user_data;
}

void syn_log(syn_log_level level, const char *fmt, ...) {
    if (!log_callback) return;
    char line[ERROR_MESSAGE_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    log_callback(level, line, log_user_data);
}
