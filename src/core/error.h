/* error.h: the thread-local "last error" message and the log callback behind synapse.h. */
#ifndef SYN_CORE_ERROR_H
#define SYN_CORE_ERROR_H

#include "synapse.h"
#include "synapse_internal.h" /* syn_fail */

/* Prefixes the current last-error message with a formatted context ("loading X: <old message>"). */
syn_status syn_fail_context(syn_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void syn_clear_error(void);

/* Sends one formatted line to the installed log callback, if any. */
void syn_log(syn_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
