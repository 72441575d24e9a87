/* text.c: file bytes, UTF-8 checks, aliases and text buffers of the tools. */
#include "text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "synapse_internal.h"

int read_file(const char *path, char **data, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return fail_runtime("cannot open '%s': %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - 1 - n, f);
        if (n < cap - 1) break; /* end of file or an error, told apart below */
        char *grown = realloc(buf, cap * 2);
        if (!grown) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = grown;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf) return fail_runtime("out of memory reading '%s'", path);
    if (err) {
        free(buf);
        return fail_runtime("cannot read '%s'", path);
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return EXIT_OK;
}

size_t utf8_seq_len(const unsigned char *s, size_t avail) {
    uint32_t cp;
    int n = syn_utf8_next(s, avail, &cp);
    return n > 0 ? (size_t)n : 0;
}

size_t utf8_valid_prefix(const char *s, size_t len) {
    size_t i = 0;
    for (size_t n; i < len && (n = utf8_seq_len((const unsigned char *)s + i, len - i)) != 0;)
        i += n;
    return i;
}

bool model_alias_valid(const char *alias) {
    size_t n = 0;
    for (; alias[n]; n++) {
        const char c = alias[n];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.' || c == ':'))
            return false;
    }
    return n >= 1 && n <= MODEL_ALIAS_MAX;
}

int text_append(text_buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown) return fail_runtime("out of memory for %zu bytes of text", b->len + n);
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return EXIT_OK;
}
