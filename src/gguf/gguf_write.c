/* gguf_write.c: the GGUF writer: collects metadata and tensor declarations, then streams a v3 file.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file_map.h"
#include "gguf/gguf.h"

typedef struct writer_kv {
    char *key;
    uint32_t type;    /* enum gguf_value_type */
    uint8_t *payload; /* the value exactly as it is written after the type field */
    size_t payload_len;
} writer_kv;

typedef struct writer_tensor {
    char *name;
    uint32_t type; /* enum ggml_type */
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    uint64_t nbytes;
    gguf_fill_fn fill;
    void *user;
} writer_tensor;

struct gguf_writer {
    writer_kv *kvs;
    size_t n_kv, cap_kv;
    writer_tensor *tensors;
    size_t n_tensors, cap_tensors;
};

gguf_writer *gguf_writer_new(void) { return calloc(1, sizeof(gguf_writer)); }

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kvs[i].key);
        free(w->kvs[i].payload);
    }
    for (size_t i = 0; i < w->n_tensors; i++)
        free(w->tensors[i].name);
    free(w->kvs);
    free(w->tensors);
    free(w);
}

/* Grows *arr (of elem_size elements, *cap of them) to hold one more. */
static bool grow(void **arr, size_t *cap, size_t n, size_t elem_size) {
    if (n < *cap) return true;
    size_t new_cap = *cap ? 2 * *cap : 16;
    void *p = realloc(*arr, new_cap * elem_size);
    if (!p) return false;
    *arr = p;
    *cap = new_cap;
    return true;
}

/* Takes ownership of payload (freed on error). */
static syn_status add_kv(gguf_writer *w, const char *key, uint32_t type, uint8_t *payload,
                         size_t len) {
    if (!w || !key || !*key) {
        free(payload);
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "gguf writer: %s",
                        !w ? "writer is NULL" : "empty key");
    }
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kvs[i].key, key) == 0) {
            free(payload);
            return syn_fail(SYN_ERR_INVALID_ARGUMENT, "gguf writer: key '%s' is already set", key);
        }
    char *k = strdup(key);
    if (!k || !grow((void **)&w->kvs, &w->cap_kv, w->n_kv, sizeof *w->kvs)) {
        free(k);
        free(payload);
        return syn_fail(SYN_ERR_NO_MEMORY, "gguf writer: out of memory adding key '%s'", key);
    }
    w->kvs[w->n_kv++] = (writer_kv){k, type, payload, len};
    return SYN_OK;
}

/* A payload holding a copy of len bytes (len may be 0). */
static uint8_t *dup_bytes(const void *src, size_t len) {
    uint8_t *p = malloc(len ? len : 1);
    if (p && len) memcpy(p, src, len);
    return p;
}

static syn_status add_scalar(gguf_writer *w, const char *key, uint32_t type, const void *v) {
    size_t len = gguf_type_size(type);
    uint8_t *p = dup_bytes(v, len);
    if (!p) return syn_fail(SYN_ERR_NO_MEMORY, "gguf writer: out of memory adding key '%s'", key);
    return add_kv(w, key, type, p, len);
}

syn_status gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v) {
    return add_scalar(w, key, GGUF_TYPE_UINT32, &v);
}

syn_status gguf_writer_set_f32(gguf_writer *w, const char *key, float v) {
    return add_scalar(w, key, GGUF_TYPE_FLOAT32, &v);
}

syn_status gguf_writer_set_bool(gguf_writer *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    return add_scalar(w, key, GGUF_TYPE_BOOL, &b);
}

syn_status gguf_writer_set_str(gguf_writer *w, const char *key, const char *v) {
    if (!v)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "gguf writer: key '%s': string is NULL",
                        key ? key : "");
    uint64_t len = strlen(v);
    uint8_t *p = malloc(8 + len);
    if (!p) return syn_fail(SYN_ERR_NO_MEMORY, "gguf writer: out of memory adding key '%s'", key);
    memcpy(p, &len, 8);
    memcpy(p + 8, v, len);
    return add_kv(w, key, GGUF_TYPE_STRING, p, 8 + len);
}

syn_status gguf_writer_set_array(gguf_writer *w, const char *key, uint32_t elem_type,
                                 const void *elems, uint64_t count) {
    uint32_t esize = gguf_type_size(elem_type);
    if (esize == 0)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "gguf writer: key '%s': arrays of %s need another setter", key ? key : "",
                        gguf_type_name(elem_type));
    if (count > (SIZE_MAX - 12) / esize || (count > 0 && !elems))
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "gguf writer: key '%s': bad array of %llu elements", key ? key : "",
                        (unsigned long long)count);
    size_t len = 12 + (size_t)count * esize;
    uint8_t *p = malloc(len);
    if (!p) return syn_fail(SYN_ERR_NO_MEMORY, "gguf writer: out of memory adding key '%s'", key);
    memcpy(p, &elem_type, 4);
    memcpy(p + 4, &count, 8);
    if (count) memcpy(p + 12, elems, len - 12);
    return add_kv(w, key, GGUF_TYPE_ARRAY, p, len);
}

syn_status gguf_writer_set_str_array(gguf_writer *w, const char *key, const char *const *strs,
                                     uint64_t count) {
    size_t len = 12;
    for (uint64_t i = 0; i < count; i++) {
        if (!strs[i])
            return syn_fail(SYN_ERR_INVALID_ARGUMENT, "gguf writer: key '%s': string %llu is NULL",
                            key ? key : "", (unsigned long long)i);
        len += 8 + strlen(strs[i]);
    }
    uint8_t *p = malloc(len);
    if (!p) return syn_fail(SYN_ERR_NO_MEMORY, "gguf writer: out of memory adding key '%s'", key);
    uint32_t type = GGUF_TYPE_STRING;
    memcpy(p, &type, 4);
    memcpy(p + 4, &count, 8);
    size_t at = 12;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t n = strlen(strs[i]);
        memcpy(p + at, &n, 8);
        memcpy(p + at + 8, strs[i], n);
        at += 8 + n;
    }
    return add_kv(w, key, GGUF_TYPE_ARRAY, p, len);
}

syn_status gguf_writer_copy_kv(gguf_writer *w, const gguf_kv *kv) {
    if (!kv) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "gguf writer: kv is NULL");
    char *key = malloc(kv->key.len + 1);
    if (!key) return syn_fail(SYN_ERR_NO_MEMORY, "gguf writer: out of memory");
    memcpy(key, kv->key.data, kv->key.len);
    key[kv->key.len] = '\0';
    uint8_t *p = NULL;
    size_t len = 0;
    if (kv->type == GGUF_TYPE_STRING) {
        len = 8 + kv->value.str.len;
        if ((p = malloc(len))) {
            memcpy(p, &kv->value.str.len, 8);
            memcpy(p + 8, kv->value.str.data, kv->value.str.len);
        }
    } else if (kv->type == GGUF_TYPE_ARRAY) {
        /* The parsed elements are already in file layout (strings included): copy them raw. */
        len = 12 + kv->value.arr.nbytes;
        if ((p = malloc(len))) {
            memcpy(p, &kv->value.arr.type, 4);
            memcpy(p + 4, &kv->value.arr.count, 8);
            memcpy(p + 12, kv->value.arr.data, kv->value.arr.nbytes);
        }
    } else {
        /* Narrow the widened value back to its stored width (little-endian: the low bytes). */
        len = gguf_type_size(kv->type);
        float f32 = (float)kv->value.f64;
        const void *src =
            kv->type == GGUF_TYPE_FLOAT32 ? (const void *)&f32 : (const void *)&kv->value;
        p = dup_bytes(src, len);
    }
    if (!p) {
        free(key);
        return syn_fail(SYN_ERR_NO_MEMORY, "gguf writer: out of memory");
    }
    syn_status st = add_kv(w, key, kv->type, p, len);
    free(key);
    return st;
}

syn_status gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t ggml_type,
                                  uint32_t n_dims, const uint64_t *ne, gguf_fill_fn fill,
                                  void *user) {
    if (!w || !name || !*name || !ne || !fill)
        return syn_fail(
            SYN_ERR_INVALID_ARGUMENT,
            "gguf writer: add_tensor needs a writer, a name, a shape and a fill function");
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "gguf writer: tensor '%s': %u dimensions, expected 1 to %d", name, n_dims,
                        GGUF_MAX_DIMS);
    writer_tensor t = {.type = ggml_type, .n_dims = n_dims, .fill = fill, .user = user};
    uint64_t rows = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        if (t.ne[d] == 0 || (d > 0 && t.ne[d] > UINT64_MAX / rows))
            return syn_fail(SYN_ERR_INVALID_ARGUMENT, "gguf writer: tensor '%s': bad dimension %u",
                            name, d);
        if (d > 0) rows *= t.ne[d];
    }
    uint64_t row = ggml_row_size(ggml_type, t.ne[0]);
    if (row == 0 || rows > UINT64_MAX / row)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "gguf writer: tensor '%s': type %u cannot hold rows of %llu", name,
                        ggml_type, (unsigned long long)t.ne[0]);
    t.nbytes = row * rows;
    for (size_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                            "gguf writer: tensor '%s' is already declared", name);
    t.name = strdup(name);
    if (!t.name || !grow((void **)&w->tensors, &w->cap_tensors, w->n_tensors, sizeof *w->tensors)) {
        free(t.name);
        return syn_fail(SYN_ERR_NO_MEMORY, "gguf writer: out of memory adding tensor '%s'", name);
    }
    w->tensors[w->n_tensors++] = t;
    return SYN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Output
 * ------------------------------------------------------------------------------------------- */

typedef struct sink {
    FILE *fp;
    uint64_t pos;
    bool failed;
} sink;

static void put(sink *s, const void *p, size_t n) {
    if (s->failed || n == 0) return;
    if (fwrite(p, 1, n, s->fp) != n) s->failed = true;
    s->pos += n;
}

static void put_u32(sink *s, uint32_t v) { put(s, &v, 4); }
static void put_u64(sink *s, uint64_t v) { put(s, &v, 8); }

static void put_str(sink *s, const char *str) {
    uint64_t len = strlen(str);
    put_u64(s, len);
    put(s, str, len);
}

static void pad_to(sink *s, uint64_t alignment) {
    static const uint8_t zeros[64];
    while (!s->failed && s->pos % alignment != 0) {
        uint64_t n = alignment - s->pos % alignment;
        put(s, zeros, n < sizeof zeros ? (size_t)n : sizeof zeros);
    }
}

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/* general.alignment when set (validated), else the default. */
static syn_status writer_alignment(const gguf_writer *w, uint32_t *out) {
    *out = GGUF_DEFAULT_ALIGNMENT;
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kvs[i].key, "general.alignment") != 0) continue;
        uint32_t a = 0;
        if (w->kvs[i].type == GGUF_TYPE_UINT32) memcpy(&a, w->kvs[i].payload, 4);
        if (a == 0 || (a & (a - 1)) != 0)
            return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                            "gguf writer: general.alignment must be a nonzero power-of-two uint32");
        *out = a;
    }
    return SYN_OK;
}

static syn_status write_tensor_data(gguf_writer *w, sink *s, uint32_t alignment, const char *path) {
    uint64_t max_bytes = 0;
    for (size_t i = 0; i < w->n_tensors; i++)
        if (w->tensors[i].nbytes > max_bytes) max_bytes = w->tensors[i].nbytes;
    if (max_bytes > SIZE_MAX) return syn_fail(SYN_ERR_NO_MEMORY, "gguf writer: tensor too large");
    /* One buffer of the largest tensor, refilled per tensor: never the whole model in memory. */
    void *buf = w->n_tensors ? malloc((size_t)max_bytes) : NULL;
    if (w->n_tensors && !buf)
        return syn_fail(SYN_ERR_NO_MEMORY, "gguf writer: out of memory for a %llu-byte tensor",
                        (unsigned long long)max_bytes);
    syn_status st = SYN_OK;
    for (size_t i = 0; i < w->n_tensors && st == SYN_OK; i++) {
        writer_tensor *t = &w->tensors[i];
        pad_to(s, alignment);
        st = t->fill(t->user, t->name, buf, t->nbytes);
        if (st != SYN_OK)
            st = syn_fail_context(st, "gguf writer: filling tensor '%s'", t->name);
        else
            put(s, buf, (size_t)t->nbytes);
        if (s->failed && st == SYN_OK)
            st = syn_fail(SYN_ERR_IO, "gguf writer: writing '%s': %s", path, strerror(errno));
    }
    free(buf);
    return st;
}

syn_status gguf_writer_write(gguf_writer *w, const char *path) {
    if (!w || !path)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "gguf writer: writer and path are required");
    uint32_t alignment;
    syn_status st = writer_alignment(w, &alignment);
    if (st != SYN_OK) return st;
    FILE *fp = fopen(path, "wb");
    if (!fp)
        return syn_fail(SYN_ERR_IO, "gguf writer: cannot create '%s': %s", path, strerror(errno));
    /* Whole 4 MiB writes leave the page cache in 2 MiB folios, so the file just written maps in
     * huge pages without the loader's one-time re-read (core/file_map.h). */
    (void)setvbuf(fp, NULL, _IOFBF, 2 * (size_t)SYN_HUGE_PAGE_BYTES);
    sink s = {fp, 0, false};

    put(&s, "GGUF", 4);
    put_u32(&s, 3);
    put_u64(&s, w->n_tensors);
    put_u64(&s, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        put_str(&s, w->kvs[i].key);
        put_u32(&s, w->kvs[i].type);
        put(&s, w->kvs[i].payload, w->kvs[i].payload_len);
    }
    uint64_t offset = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        const writer_tensor *t = &w->tensors[i];
        put_str(&s, t->name);
        put_u32(&s, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++)
            put_u64(&s, t->ne[d]);
        put_u32(&s, t->type);
        put_u64(&s, offset);
        offset = align_up(offset + t->nbytes, alignment);
    }
    if (s.failed) st = syn_fail(SYN_ERR_IO, "gguf writer: writing '%s': %s", path, strerror(errno));
    if (st == SYN_OK) st = write_tensor_data(w, &s, alignment, path);
    if (fclose(fp) != 0 && st == SYN_OK)
        st = syn_fail(SYN_ERR_IO, "gguf writer: closing '%s': %s", path, strerror(errno));
    if (st != SYN_OK) unlink(path); /* never leave a half-written model behind */
    return st;
}
