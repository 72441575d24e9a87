/* error.c: status names, the thread-local last-error message and the log callback. */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { ERROR_MESSAGE_CAP = 1024 };

static _Thread_local char last_error[ERROR_MESSAGE_CAP];

/* Set once before models load (documented as not thread-safe in synapse.h). */
static syn_log_fn log_callback;
static void *log_user_data;

const char *syn_status_str(syn_status status) {
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
    }
    return "unknown status";
}

const char *syn_last_error(void) { return last_error; }

void syn_clear_error(void) { last_error[0] = '\0'; }

syn_status syn_fail(syn_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
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
    snprintf(last_error, sizeof last_error, "%s: %s", prefix, previous);
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
