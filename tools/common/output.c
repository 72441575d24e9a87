/* output.c: JSON output and the checks that stdout lost nothing. */
#include "output.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "text.h"

json_t *json_utf8(const char *s, size_t len) {
    /* Each invalid byte becomes the 3-byte U+FFFD. */
    char *clean = malloc(len * 3 + 1);
    if (!clean) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t n = utf8_seq_len((const unsigned char *)s + i, len - i);
        if (n == 0) {
            memcpy(clean + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        } else {
            memcpy(clean + o, s + i, n);
            o += n;
            i += n;
        }
    }
    json_t *j = json_stringn(clean, o);
    free(clean);
    return j;
}

json_t *json_text(const char *s) { return json_utf8(s, strlen(s)); }

json_t *json_ids(const int32_t *ids, size_t n) {
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        if (json_array_append_new(arr, json_integer(ids[i])) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

int print_json(json_t *obj) {
    if (!obj) return fail_runtime("out of memory building the JSON output");
    int rc = json_dumpf(obj, stdout, JSON_DUMP_FLAGS);
    json_decref(obj);
    if (rc != 0) return fail_runtime("cannot write the JSON output");
    fputc('\n', stdout);
    return check_stdout();
}

/* Whether output written to stdout was lost; *err is the failing call's errno, or 0 when an
 * earlier write failed (the stream's error flag). */
static bool stdout_lost(int *err) {
    *err = 0;
    errno = 0;
    if (fflush(stdout) != 0) {
        *err = errno;
        return true;
    }
    return ferror(stdout) != 0;
}

static int fail_stdout(int err) {
    if (err) return fail_runtime("cannot write to stdout: %s", strerror(err));
    return fail_runtime("cannot write to stdout");
}

int check_stdout(void) {
    int err;
    return stdout_lost(&err) ? fail_stdout(err) : EXIT_OK;
}

int close_stdout(int rc) {
    int err;
    bool lost = stdout_lost(&err);
    /* close(2) can report what the flush could not (a deferred write error); EBADF only says that
     * stdout was closed from the start, which loses nothing when nothing was written. */
    if (fclose(stdout) != 0 && !lost && errno != EBADF) {
        lost = true;
        err = errno;
    }
    return lost && rc == EXIT_OK ? fail_stdout(err) : rc;
}
