/* gguf_read.c: the GGUF parser: maps a file, validates every field and indexes keys and tensors. */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file_map.h"
#include "gguf/gguf.h"

/* GGUF is little-endian and the reader loads fields with memcpy. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "the GGUF reader assumes a little-endian host");

enum {
    HEADER_BYTES = 24, /* magic, version, n_tensors, n_kv */
    /* The smallest possible entries, used to bound counts by the file size before allocating:
     * a key is a length, at least one byte, a type and a one-byte value; a tensor info is a
     * name length, at least one byte, n_dims, one dimension, a type and an offset. */
    MIN_KV_BYTES = 8 + 1 + 4 + 1,
    MIN_TENSOR_BYTES = 8 + 1 + 4 + 8 + 4 + 8,
    NAME_IN_MESSAGE_MAX = 96, /* longer names are cut in error messages */
};

/* ---------------------------------------------------------------------------------------------
 * Name index: open addressing, linear probing, at most half full, so that duplicate detection
 * and lookups stay linear even for files with 1e5 tiny keys.
 * ------------------------------------------------------------------------------------------- */

typedef struct gguf_index_slot {
    gguf_str name;  /* points into the mapping; data == NULL: empty slot */
    uint64_t entry; /* index into kvs or tensors */
} gguf_index_slot;

struct gguf_index {
    uint64_t mask; /* capacity - 1; capacity is a power of two */
    gguf_index_slot slots[];
};

static uint64_t hash_bytes(const char *s, uint64_t len) {
    uint64_t h = 0xcbf29ce484222325u; /* FNV-1a */
    for (uint64_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)s[i]) * 0x100000001b3u;
    return h;
}

static struct gguf_index *index_new(uint64_t n_entries) {
    uint64_t cap = 4;
    while (cap < 2 * n_entries)
        cap *= 2; /* n_entries is bounded by the file size: no overflow */
    struct gguf_index *idx = calloc(1, sizeof *idx + cap * sizeof(gguf_index_slot));
    if (idx) idx->mask = cap - 1;
    return idx;
}

/* The slot holding name, or the empty slot where it would go. */
static gguf_index_slot *index_slot(const struct gguf_index *idx, const char *name, uint64_t len) {
    uint64_t i = hash_bytes(name, len) & idx->mask;
    for (;;) {
        gguf_index_slot *s = (gguf_index_slot *)&idx->slots[i];
        if (!s->name.data || (s->name.len == len && memcmp(s->name.data, name, len) == 0)) return s;
        i = (i + 1) & idx->mask;
    }
}

/* Adds name -> entry; false when the name is already present. */
static bool index_add(struct gguf_index *idx, gguf_str name, uint64_t entry) {
    gguf_index_slot *s = index_slot(idx, name.data, name.len);
    if (s->name.data) return false;
    s->name = name;
    s->entry = entry;
    return true;
}

static const gguf_index_slot *index_find(const struct gguf_index *idx, const char *name) {
    if (!idx || !name) return NULL;
    const gguf_index_slot *s = index_slot(idx, name, strlen(name));
    return s->name.data ? s : NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Cursor and messages
 * ------------------------------------------------------------------------------------------- */

typedef struct cursor {
    const uint8_t *base;
    size_t size;
    size_t pos;
} cursor;

/* Which entry a parse step belongs to, so that every message names it. */
typedef struct where {
    const char *kind; /* "key" or "tensor" */
    uint64_t index;
    gguf_str name;  /* empty until the name has been read */
    uint64_t start; /* byte offset of the entry */
} where;

/* Copies s into buf for a one-line message: at most NAME_IN_MESSAGE_MAX bytes, control bytes
 * replaced by '?', "..." marking a cut. */
static const char *printable(gguf_str s, char *buf, size_t cap) {
    size_t n = s.len < NAME_IN_MESSAGE_MAX ? (size_t)s.len : NAME_IN_MESSAGE_MAX;
    if (n > cap - 4) n = cap - 4;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s.data[i];
        buf[i] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
    }
    size_t end = n;
    if (n < s.len) {
        memcpy(buf + n, "...", 3);
        end += 3;
    }
    buf[end] = '\0';
    return buf;
}

/* "gguf: key 'name' at byte N: <detail>" (or "key #i" before the name is known). */
__attribute__((format(printf, 3, 4))) static syn_status fail_at(syn_status status, const where *w,
                                                                const char *fmt, ...) {
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (w->name.len > 0) {
        char name[NAME_IN_MESSAGE_MAX + 4];
        return syn_fail(status, "gguf: %s '%s' at byte %llu: %s", w->kind,
                        printable(w->name, name, sizeof name), (unsigned long long)w->start,
                        detail);
    }
    return syn_fail(status, "gguf: %s #%llu at byte %llu: %s", w->kind,
                    (unsigned long long)w->index, (unsigned long long)w->start, detail);
}

static size_t remaining(const cursor *c) { return c->size - c->pos; }

static uint32_t load_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint64_t load_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Reads n bytes (n <= 8) or fails naming what was being read. */
static syn_status take(cursor *c, const where *w, size_t n, const char *what, const uint8_t **out) {
    if (remaining(c) < n)
        return fail_at(SYN_ERR_FORMAT, w,
                       "file truncated at byte %zu while reading %s (%zu bytes left)", c->pos, what,
                       remaining(c));
    *out = c->base + c->pos;
    c->pos += n;
    return SYN_OK;
}

static syn_status read_u32(cursor *c, const where *w, const char *what, uint32_t *out) {
    const uint8_t *p = NULL;
    syn_status st = take(c, w, 4, what, &p);
    if (st == SYN_OK) *out = load_u32(p);
    return st;
}

static syn_status read_u64(cursor *c, const where *w, const char *what, uint64_t *out) {
    const uint8_t *p = NULL;
    syn_status st = take(c, w, 8, what, &p);
    if (st == SYN_OK) *out = load_u64(p);
    return st;
}

static syn_status read_str(cursor *c, const where *w, const char *what, gguf_str *out) {
    uint64_t len;
    size_t at = c->pos;
    syn_status st = read_u64(c, w, what, &len);
    if (st != SYN_OK) return st;
    if (len > remaining(c))
        return fail_at(SYN_ERR_FORMAT, w,
                       "%s at byte %zu: string length %llu exceeds the %zu bytes left in the file",
                       what, at, (unsigned long long)len, remaining(c));
    out->len = len;
    out->data = (const char *)c->base + c->pos;
    c->pos += (size_t)len;
    return SYN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Metadata
 * ------------------------------------------------------------------------------------------- */

/* Reads a fixed-size scalar of type into kv->value, widened. */
static void decode_scalar(uint32_t type, const uint8_t *p, gguf_kv *kv) {
    switch (type) {
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_BOOL: kv->value.u64 = p[0]; break;
    case GGUF_TYPE_INT8: kv->value.i64 = (int8_t)p[0]; break;
    case GGUF_TYPE_UINT16: {
        uint16_t v;
        memcpy(&v, p, 2);
        kv->value.u64 = v;
        break;
    }
    case GGUF_TYPE_INT16: {
        int16_t v;
        memcpy(&v, p, 2);
        kv->value.i64 = v;
        break;
    }
    case GGUF_TYPE_UINT32: kv->value.u64 = load_u32(p); break;
    case GGUF_TYPE_INT32: kv->value.i64 = (int32_t)load_u32(p); break;
    case GGUF_TYPE_FLOAT32: {
        float v;
        memcpy(&v, p, 4);
        kv->value.f64 = v;
        break;
    }
    case GGUF_TYPE_UINT64: kv->value.u64 = load_u64(p); break;
    case GGUF_TYPE_INT64: kv->value.i64 = (int64_t)load_u64(p); break;
    case GGUF_TYPE_FLOAT64: {
        double v;
        memcpy(&v, p, 8);
        kv->value.f64 = v;
        break;
    }
    default: break;
    }
}

static syn_status parse_array(cursor *c, const where *w, gguf_array *arr) {
    uint32_t elem_type;
    syn_status st = read_u32(c, w, "the array element type", &elem_type);
    if (st != SYN_OK) return st;
    if (elem_type == GGUF_TYPE_ARRAY)
        return fail_at(SYN_ERR_FORMAT, w, "nested arrays are not supported");
    if (elem_type >= GGUF_TYPE_COUNT)
        return fail_at(SYN_ERR_FORMAT, w, "invalid array element type %u", elem_type);
    uint64_t count;
    if ((st = read_u64(c, w, "the array length", &count)) != SYN_OK) return st;
    arr->type = elem_type;
    arr->count = count;
    arr->data = c->base + c->pos;
    size_t start = c->pos;
    if (elem_type != GGUF_TYPE_STRING) {
        uint32_t esize = gguf_type_size(elem_type);
        if (count > remaining(c) / esize)
            return fail_at(SYN_ERR_FORMAT, w,
                           "array of %llu %s elements exceeds the %zu bytes left in the file",
                           (unsigned long long)count, gguf_type_name(elem_type), remaining(c));
        c->pos += (size_t)(count * esize);
    } else {
        if (count > remaining(c) / 8)
            return fail_at(SYN_ERR_FORMAT, w,
                           "array of %llu strings exceeds the %zu bytes left in the file",
                           (unsigned long long)count, remaining(c));
        /* Every length is checked here so that gguf_array_next_str() can trust them later. */
        for (uint64_t i = 0; i < count; i++) {
            size_t at = c->pos;
            if (remaining(c) < 8)
                return fail_at(SYN_ERR_FORMAT, w,
                               "file truncated at byte %zu inside string %llu of %llu", at,
                               (unsigned long long)i, (unsigned long long)count);
            uint64_t len = load_u64(c->base + c->pos);
            c->pos += 8;
            if (len > remaining(c))
                return fail_at(
                    SYN_ERR_FORMAT, w,
                    "string %llu at byte %zu: length %llu exceeds the %zu bytes left in the file",
                    (unsigned long long)i, at, (unsigned long long)len, remaining(c));
            c->pos += (size_t)len;
        }
    }
    arr->nbytes = c->pos - start;
    return SYN_OK;
}

static syn_status parse_kv(cursor *c, uint64_t i, gguf_kv *kv) {
    where w = {"key", i, {0, NULL}, c->pos};
    kv->file_offset = c->pos;
    syn_status st = read_str(c, &w, "the key name", &kv->key);
    if (st != SYN_OK) return st;
    if (kv->key.len == 0) return fail_at(SYN_ERR_FORMAT, &w, "empty key name");
    w.name = kv->key;
    if ((st = read_u32(c, &w, "the value type", &kv->type)) != SYN_OK) return st;
    if (kv->type >= GGUF_TYPE_COUNT)
        return fail_at(SYN_ERR_FORMAT, &w, "invalid value type %u", kv->type);
    if (kv->type == GGUF_TYPE_STRING) return read_str(c, &w, "the string value", &kv->value.str);
    if (kv->type == GGUF_TYPE_ARRAY) return parse_array(c, &w, &kv->value.arr);
    const uint8_t *p = NULL;
    if ((st = take(c, &w, gguf_type_size(kv->type), "the value", &p)) != SYN_OK) return st;
    decode_scalar(kv->type, p, kv);
    return SYN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Tensor infos
 * ------------------------------------------------------------------------------------------- */

static syn_status parse_tensor_info(cursor *c, uint64_t i, uint32_t alignment, gguf_tensor *t) {
    where w = {"tensor", i, {0, NULL}, c->pos};
    syn_status st = read_str(c, &w, "the tensor name", &t->name);
    if (st != SYN_OK) return st;
    if (t->name.len == 0) return fail_at(SYN_ERR_FORMAT, &w, "empty tensor name");
    w.name = t->name;
    if ((st = read_u32(c, &w, "the dimension count", &t->n_dims)) != SYN_OK) return st;
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return fail_at(SYN_ERR_FORMAT, &w, "%u dimensions, expected 1 to %d", t->n_dims,
                       GGUF_MAX_DIMS);
    uint64_t n_elements = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d >= t->n_dims) continue;
        if ((st = read_u64(c, &w, "a dimension", &t->ne[d])) != SYN_OK) return st;
        if (t->ne[d] == 0) return fail_at(SYN_ERR_FORMAT, &w, "dimension %u is zero", d);
        /* ggml counts elements in int64_t: keep the product below INT64_MAX */
        if (t->ne[d] > (uint64_t)INT64_MAX / n_elements)
            return fail_at(SYN_ERR_FORMAT, &w, "the element count overflows (dimension %u is %llu)",
                           d, (unsigned long long)t->ne[d]);
        n_elements *= t->ne[d];
    }
    t->n_elements = n_elements;
    if ((st = read_u32(c, &w, "the tensor type", &t->type)) != SYN_OK) return st;
    uint32_t block = ggml_block_size(t->type);
    if (block == 0) return fail_at(SYN_ERR_UNSUPPORTED, &w, "unknown tensor type id %u", t->type);
    if (t->ne[0] % block != 0)
        return fail_at(SYN_ERR_FORMAT, &w,
                       "row length %llu is not a multiple of the %s block size %u",
                       (unsigned long long)t->ne[0], ggml_type_name(t->type), block);
    /* n_elements < 2^63, but up to 8 bytes per element can still overflow 64 bits */
    uint64_t blocks = n_elements / block, tsize = ggml_type_size(t->type);
    if (blocks > UINT64_MAX / tsize) return fail_at(SYN_ERR_FORMAT, &w, "the byte size overflows");
    t->nbytes = blocks * tsize;
    if ((st = read_u64(c, &w, "the data offset", &t->offset)) != SYN_OK) return st;
    if (t->offset % alignment != 0)
        return fail_at(SYN_ERR_FORMAT, &w, "data offset %llu is not a multiple of the alignment %u",
                       (unsigned long long)t->offset, alignment);
    return SYN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * The whole file
 * ------------------------------------------------------------------------------------------- */

static syn_status parse_header(cursor *c, gguf_file *f) {
    if (c->size >= 4 && memcmp(c->base, "GGUF", 4) != 0)
        return syn_fail(SYN_ERR_FORMAT,
                        "gguf: bad magic at byte 0: expected \"GGUF\", found %02x %02x %02x %02x",
                        c->base[0], c->base[1], c->base[2], c->base[3]);
    if (c->size < HEADER_BYTES)
        return syn_fail(SYN_ERR_FORMAT,
                        "gguf: file truncated: %zu bytes, shorter than the %d-byte header", c->size,
                        HEADER_BYTES);
    f->version = load_u32(c->base + 4);
    if (f->version != 2 && f->version != 3) {
        const char *hint = f->version == 1 ? " (GGUF version 1 is obsolete)"
                           : (f->version & 0xffff) == 0 && f->version != 0 ? " (a big-endian file?)"
                                                                           : "";
        return syn_fail(
            SYN_ERR_UNSUPPORTED,
            "gguf: version %u at byte 4 is not supported: this reader handles versions 2 and 3%s",
            f->version, hint);
    }
    f->n_tensors = load_u64(c->base + 8);
    f->n_kv = load_u64(c->base + 16);
    c->pos = HEADER_BYTES;
    size_t left = remaining(c);
    if (f->n_kv > left / MIN_KV_BYTES)
        return syn_fail(SYN_ERR_FORMAT,
                        "gguf: key count %llu at byte 16 is impossible: the %zu bytes after the "
                        "header hold at most %zu keys",
                        (unsigned long long)f->n_kv, left, left / MIN_KV_BYTES);
    if (f->n_tensors > left / MIN_TENSOR_BYTES ||
        f->n_kv * MIN_KV_BYTES > left - f->n_tensors * MIN_TENSOR_BYTES)
        return syn_fail(SYN_ERR_FORMAT,
                        "gguf: tensor count %llu at byte 8 is impossible: the %zu bytes after the "
                        "header and %llu keys cannot hold them",
                        (unsigned long long)f->n_tensors, left, (unsigned long long)f->n_kv);
    return SYN_OK;
}

static syn_status read_alignment(gguf_file *f) {
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_kv *kv = gguf_find_kv(f, "general.alignment");
    if (!kv) return SYN_OK;
    if (kv->type != GGUF_TYPE_UINT32)
        return syn_fail(SYN_ERR_FORMAT,
                        "gguf: key 'general.alignment' at byte %llu has type %s, expected uint32",
                        (unsigned long long)kv->file_offset, gguf_type_name(kv->type));
    uint64_t a = kv->value.u64;
    if (a == 0 || (a & (a - 1)) != 0)
        return syn_fail(
            SYN_ERR_FORMAT,
            "gguf: general.alignment = %llu (key at byte %llu) is not a nonzero power of two",
            (unsigned long long)a, (unsigned long long)kv->file_offset);
    f->alignment = (uint32_t)a;
    return SYN_OK;
}

static syn_status parse(gguf_file *f) {
    cursor c = {f->base, f->size, 0};
    syn_status st = parse_header(&c, f);
    if (st != SYN_OK) return st;

    /* Both counts are bounded by the file size now, so these allocations are too. */
    f->kvs = calloc(f->n_kv ? f->n_kv : 1, sizeof *f->kvs);
    f->tensors = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *f->tensors);
    f->kv_index = index_new(f->n_kv);
    f->tensor_index = index_new(f->n_tensors);
    if (!f->kvs || !f->tensors || !f->kv_index || !f->tensor_index)
        return syn_fail(SYN_ERR_NO_MEMORY,
                        "gguf: out of memory indexing %llu keys and %llu tensors",
                        (unsigned long long)f->n_kv, (unsigned long long)f->n_tensors);

    for (uint64_t i = 0; i < f->n_kv; i++) {
        gguf_kv *kv = &f->kvs[i];
        if ((st = parse_kv(&c, i, kv)) != SYN_OK) return st;
        if (!index_add(f->kv_index, kv->key, i)) {
            char name[NAME_IN_MESSAGE_MAX + 4];
            return syn_fail(SYN_ERR_FORMAT, "gguf: duplicate key '%s' at byte %llu",
                            printable(kv->key, name, sizeof name),
                            (unsigned long long)kv->file_offset);
        }
    }
    if ((st = read_alignment(f)) != SYN_OK) return st;

    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        size_t at = c.pos;
        if ((st = parse_tensor_info(&c, i, f->alignment, t)) != SYN_OK) return st;
        if (!index_add(f->tensor_index, t->name, i)) {
            char name[NAME_IN_MESSAGE_MAX + 4];
            return syn_fail(SYN_ERR_FORMAT, "gguf: duplicate tensor '%s' at byte %zu",
                            printable(t->name, name, sizeof name), at);
        }
    }

    /* Tensor data start at the next multiple of the alignment after the infos. */
    uint64_t pad = (f->alignment - c.pos % f->alignment) % f->alignment;
    f->data_offset = (uint64_t)c.pos + pad;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        uint64_t avail = f->data_offset <= f->size ? f->size - f->data_offset : 0;
        if (t->offset > avail || t->nbytes > avail - t->offset) {
            char name[NAME_IN_MESSAGE_MAX + 4];
            return syn_fail(SYN_ERR_FORMAT,
                            "gguf: tensor '%s': data at offset %llu + %llu bytes lies past the end "
                            "of the file (data section starts at byte %llu, file is %zu bytes)",
                            printable(t->name, name, sizeof name), (unsigned long long)t->offset,
                            (unsigned long long)t->nbytes, (unsigned long long)f->data_offset,
                            f->size);
        }
        t->data = f->base + f->data_offset + t->offset;
    }
    return SYN_OK;
}

static syn_status open_buffer(const uint8_t *base, size_t size, bool owns_mapping,
                              gguf_file **out) {
    gguf_file *f = calloc(1, sizeof *f);
    if (!f) {
        if (owns_mapping) munmap((void *)base, size);
        return syn_fail(SYN_ERR_NO_MEMORY, "gguf: out of memory");
    }
    f->base = base;
    f->size = size;
    f->owns_mapping = owns_mapping;
    syn_status st = parse(f);
    if (st != SYN_OK) {
        gguf_close(f);
        return st;
    }
    *out = f;
    return SYN_OK;
}

syn_status gguf_open_memory(const void *data, size_t size, gguf_file **out) {
    if (!out) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "gguf_open_memory: out is NULL");
    *out = NULL;
    if (!data && size > 0)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "gguf_open_memory: data is NULL");
    static const uint8_t empty[1];
    return open_buffer(data ? data : empty, size, false, out);
}

syn_status gguf_open_ex(const char *path, unsigned flags, gguf_file **out) {
    if (!out) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "gguf_open: out is NULL");
    *out = NULL;
    if (!path) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "gguf_open: path is NULL");
    int fd;
    uint64_t file_size;
    syn_status st = syn_file_open_regular(path, &fd, &file_size);
    if (st != SYN_OK) return st;
    if (file_size > SIZE_MAX) {
        close(fd);
        return syn_fail(SYN_ERR_IO, "'%s' is too large to map", path);
    }
    size_t size = (size_t)file_size;
    if (size < HEADER_BYTES) {
        /* mmap of an empty file fails; parse a copy of the few bytes for the usual messages. */
        uint8_t head[HEADER_BYTES];
        ssize_t n = size ? read(fd, head, size) : 0;
        close(fd);
        if (n < 0 || (size_t)n != size) return syn_fail(SYN_ERR_IO, "cannot read '%s'", path);
        gguf_file tmp = {.base = head, .size = size};
        cursor c = {head, size, 0};
        return parse_header(&c, &tmp);
    }
    void *map;
    const bool huge = (flags & GGUF_OPEN_HUGE_PAGES) != 0;
    st = syn_file_map(fd, size, path, huge, &map);
    if (st == SYN_OK) st = open_buffer(map, size, true, out); /* unmaps on failure */
    if (st == SYN_OK && huge) syn_file_map_recache_huge(fd, map, size);
    close(fd); /* the mapping keeps the file alive */
    return st;
}

syn_status gguf_open(const char *path, gguf_file **out) { return gguf_open_ex(path, 0, out); }

void gguf_close(gguf_file *f) {
    if (!f) return;
    if (f->owns_mapping) munmap((void *)f->base, f->size);
    free(f->kvs);
    free(f->tensors);
    free(f->kv_index);
    free(f->tensor_index);
    free(f);
}

/* ---------------------------------------------------------------------------------------------
 * Lookups and typed getters
 * ------------------------------------------------------------------------------------------- */

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key) {
    const gguf_index_slot *s = f ? index_find(f->kv_index, key) : NULL;
    return s ? &f->kvs[s->entry] : NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    const gguf_index_slot *s = f ? index_find(f->tensor_index, name) : NULL;
    return s ? &f->tensors[s->entry] : NULL;
}

bool gguf_str_eq(gguf_str s, const char *cstr) {
    size_t n = strlen(cstr);
    return s.len == n && (n == 0 || memcmp(s.data, cstr, n) == 0);
}

static bool is_unsigned_int(uint32_t type) {
    return type == GGUF_TYPE_UINT8 || type == GGUF_TYPE_UINT16 || type == GGUF_TYPE_UINT32 ||
           type == GGUF_TYPE_UINT64;
}

static bool is_signed_int(uint32_t type) {
    return type == GGUF_TYPE_INT8 || type == GGUF_TYPE_INT16 || type == GGUF_TYPE_INT32 ||
           type == GGUF_TYPE_INT64;
}

static syn_status wrong_type(const gguf_kv *kv, const char *key, const char *expected) {
    return syn_fail(SYN_ERR_FORMAT, "gguf: key '%s' at byte %llu has type %s, expected %s", key,
                    (unsigned long long)kv->file_offset, gguf_type_name(kv->type), expected);
}

static syn_status missing(const char *key) {
    return syn_fail(SYN_ERR_FORMAT, "gguf: missing key '%s'", key);
}

syn_status gguf_get_u32_opt(const gguf_file *f, const char *key, uint32_t *out) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return SYN_OK;
    bool fits;
    if (is_unsigned_int(kv->type)) {
        fits = kv->value.u64 <= UINT32_MAX;
        if (fits) *out = (uint32_t)kv->value.u64;
    } else if (is_signed_int(kv->type)) {
        fits = kv->value.i64 >= 0 && kv->value.i64 <= (int64_t)UINT32_MAX;
        if (fits) *out = (uint32_t)kv->value.i64;
    } else {
        return wrong_type(kv, key, "an integer");
    }
    if (!fits) {
        char value[32];
        if (is_unsigned_int(kv->type))
            snprintf(value, sizeof value, "%llu", (unsigned long long)kv->value.u64);
        else
            snprintf(value, sizeof value, "%lld", (long long)kv->value.i64);
        return syn_fail(SYN_ERR_FORMAT,
                        "gguf: key '%s' at byte %llu: value %s is out of range for uint32", key,
                        (unsigned long long)kv->file_offset, value);
    }
    return SYN_OK;
}

syn_status gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out) {
    return gguf_find_kv(f, key) ? gguf_get_u32_opt(f, key, out) : missing(key);
}

syn_status gguf_get_f32_opt(const gguf_file *f, const char *key, float *out) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return SYN_OK;
    if (kv->type != GGUF_TYPE_FLOAT32 && kv->type != GGUF_TYPE_FLOAT64)
        return wrong_type(kv, key, "float32");
    double v = kv->value.f64;
    /* NaN and infinities pass through: callers decide which values make sense. */
    if (isfinite(v) && fabs(v) > FLT_MAX)
        return syn_fail(SYN_ERR_FORMAT,
                        "gguf: key '%s' at byte %llu: value %g is out of range for float32", key,
                        (unsigned long long)kv->file_offset, v);
    *out = (float)v;
    return SYN_OK;
}

syn_status gguf_get_f32(const gguf_file *f, const char *key, float *out) {
    return gguf_find_kv(f, key) ? gguf_get_f32_opt(f, key, out) : missing(key);
}

syn_status gguf_get_str_opt(const gguf_file *f, const char *key, gguf_str *out) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return SYN_OK;
    if (kv->type != GGUF_TYPE_STRING) return wrong_type(kv, key, "string");
    *out = kv->value.str;
    return SYN_OK;
}

syn_status gguf_get_str(const gguf_file *f, const char *key, gguf_str *out) {
    return gguf_find_kv(f, key) ? gguf_get_str_opt(f, key, out) : missing(key);
}

syn_status gguf_get_array(const gguf_file *f, const char *key, uint32_t elem_type,
                          gguf_array *out) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return missing(key);
    if (kv->type != GGUF_TYPE_ARRAY) {
        char expected[48];
        snprintf(expected, sizeof expected, "an array of %s", gguf_type_name(elem_type));
        return wrong_type(kv, key, expected);
    }
    if (kv->value.arr.type != elem_type)
        return syn_fail(SYN_ERR_FORMAT,
                        "gguf: key '%s' at byte %llu is an array of %s, expected an array of %s",
                        key, (unsigned long long)kv->file_offset,
                        gguf_type_name(kv->value.arr.type), gguf_type_name(elem_type));
    *out = kv->value.arr;
    return SYN_OK;
}

gguf_str gguf_array_next_str(const uint8_t **pos) {
    gguf_str s;
    s.len = load_u64(*pos);
    s.data = (const char *)*pos + 8;
    *pos += 8 + s.len;
    return s;
}

int64_t gguf_array_get_int(const gguf_array *arr, uint64_t i) {
    if (i >= arr->count) return 0;
    const uint8_t *p = arr->data + i * gguf_type_size(arr->type);
    switch (arr->type) {
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_BOOL: return p[0];
    case GGUF_TYPE_INT8: return (int8_t)p[0];
    case GGUF_TYPE_UINT16: {
        uint16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    case GGUF_TYPE_INT16: {
        int16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    case GGUF_TYPE_UINT32: return load_u32(p);
    case GGUF_TYPE_INT32: return (int32_t)load_u32(p);
    case GGUF_TYPE_UINT64: /* values above INT64_MAX wrap: callers range-check ids anyway */
    case GGUF_TYPE_INT64: return (int64_t)load_u64(p);
    default: return 0;
    }
}
