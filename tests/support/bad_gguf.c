/* bad_gguf.c: builds corrupted GGUF files (and the small valid ones they derive from) for tests. */
#include "bad_gguf.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/blocks.h"
#include "kernels/fp16.h"
#include "model/model.h"

/* ---------------------------------------------------------------------------------------------
 * A permissive in-memory GGUF description and its serialiser. Unlike gguf_writer it writes
 * whatever it is given (bad counts, types, shapes, offsets), which is the point here.
 * ------------------------------------------------------------------------------------------- */

enum { GB_MAX_KV = 64, GB_MAX_TENSORS = 64, GB_MAX_DIMS = 8, GB_ALIGN = 32, KEEP_TOKENS = 1024 };

typedef struct gb_kv {
    const char *key;
    uint32_t type;
    const uint8_t *val; /* the bytes after the type field */
    size_t len;
} gb_kv;

typedef struct gb_tensor {
    const char *name;
    uint32_t n_dims;
    uint64_t ne[GB_MAX_DIMS];
    uint32_t type;
    bool fixed_offset; /* offset as given and no data written; else the next aligned slot */
    uint64_t offset;
    const uint8_t *data; /* source bytes, copied up to the size the shape implies, zero-padded */
    uint64_t data_len;
} gb_tensor;

typedef struct gb_model {
    uint32_t version;
    gb_kv kvs[GB_MAX_KV];
    size_t n_kv;
    gb_tensor tensors[GB_MAX_TENSORS];
    size_t n_tensors;
} gb_model;

/* Where the serialiser put things, for byte-level patches and truncations. */
typedef struct gb_layout {
    size_t kv_start[GB_MAX_KV];
    size_t kv_value[GB_MAX_KV]; /* after the type field */
    size_t tensor_start[GB_MAX_TENSORS];
    size_t data_start;
} gb_layout;

typedef struct gb_bytes {
    uint8_t *p;
    size_t len, cap;
    bool oom;
} gb_bytes;

/* Every allocation of a corpus build, freed together at the end. */
typedef struct gb_arena {
    void **ptrs;
    size_t n, cap;
} gb_arena;

static void *arena_alloc(gb_arena *a, size_t size) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 256;
        void **p = realloc(a->ptrs, cap * sizeof *p);
        if (!p) return NULL;
        a->ptrs = p;
        a->cap = cap;
    }
    void *m = calloc(1, size ? size : 1);
    if (m) a->ptrs[a->n++] = m;
    return m;
}

static void arena_free(gb_arena *a) {
    for (size_t i = 0; i < a->n; i++)
        free(a->ptrs[i]);
    free(a->ptrs);
}

static void put(gb_bytes *b, const void *src, size_t n) {
    if (b->oom) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    if (src)
        memcpy(b->p + b->len, src, n);
    else
        memset(b->p + b->len, 0, n);
    b->len += n;
}

static void put_u32(gb_bytes *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(gb_bytes *b, uint64_t v) { put(b, &v, 8); }

static void put_str(gb_bytes *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

/* Bytes the tensor's shape and type imply, 0 when they imply nothing sensible. */
static uint64_t implied_bytes(const gb_tensor *t) {
    if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS) return 0;
    uint64_t row = ggml_row_size(t->type, t->ne[0]), rows = 1;
    for (uint32_t d = 1; d < t->n_dims; d++) {
        if (t->ne[d] == 0 || rows > UINT64_MAX / t->ne[d]) return 0;
        rows *= t->ne[d];
    }
    if (row == 0 || rows > (1u << 30) / row) return 0;
    return row * rows;
}

static int emit(const gb_model *m, gb_bytes *out, gb_layout *lay) {
    memset(out, 0, sizeof *out);
    gb_layout scratch;
    if (!lay) lay = &scratch;
    put(out, "GGUF", 4);
    put_u32(out, m->version);
    put_u64(out, m->n_tensors);
    put_u64(out, m->n_kv);
    for (size_t i = 0; i < m->n_kv; i++) {
        lay->kv_start[i] = out->len;
        put_str(out, m->kvs[i].key);
        put_u32(out, m->kvs[i].type);
        lay->kv_value[i] = out->len;
        put(out, m->kvs[i].val, m->kvs[i].len);
    }
    uint64_t offsets[GB_MAX_TENSORS], next = 0;
    for (size_t i = 0; i < m->n_tensors; i++) {
        const gb_tensor *t = &m->tensors[i];
        offsets[i] = t->fixed_offset ? t->offset : next;
        if (!t->fixed_offset) next = (next + implied_bytes(t) + GB_ALIGN - 1) / GB_ALIGN * GB_ALIGN;
        lay->tensor_start[i] = out->len;
        put_str(out, t->name);
        put_u32(out, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims && d < GB_MAX_DIMS; d++)
            put_u64(out, t->ne[d]);
        put_u32(out, t->type);
        put_u64(out, offsets[i]);
    }
    put(out, NULL, (GB_ALIGN - out->len % GB_ALIGN) % GB_ALIGN);
    lay->data_start = out->len;
    for (size_t i = 0; i < m->n_tensors; i++) {
        const gb_tensor *t = &m->tensors[i];
        if (t->fixed_offset) continue;
        uint64_t n = implied_bytes(t), copy = t->data_len < n ? t->data_len : n;
        put(out, NULL, lay->data_start + offsets[i] - out->len);
        put(out, t->data, copy);
        put(out, NULL, n - copy);
    }
    put(out, NULL, (GB_ALIGN - out->len % GB_ALIGN) % GB_ALIGN);
    if (out->oom) {
        fprintf(stderr, "bad_gguf: out of memory serialising\n");
        free(out->p);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Editing helpers
 * ------------------------------------------------------------------------------------------- */

/* The bases of the cases, each borrowing data from its valid source file: the reduced qwen2 tiny
 * model, and llama.cpp's qwen3 and llama files of tests/data/arch (already small). */
enum { GB_QWEN2, GB_QWEN3, GB_LLAMA, GB_GEMMA3, GB_N_BASES };

typedef struct gb_ctx {
    gb_arena arena;
    gb_model base[GB_N_BASES];
    gguf_file *src[GB_N_BASES];
} gb_ctx;

static int find_kv(const gb_model *m, const char *key) {
    for (size_t i = 0; i < m->n_kv; i++)
        if (strcmp(m->kvs[i].key, key) == 0) return (int)i;
    return -1;
}

static int find_tensor(const gb_model *m, const char *name) {
    for (size_t i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return (int)i;
    return -1;
}

/* Replaces key's value (or appends the key); val is copied into the arena. */
static int set_kv(gb_ctx *c, gb_model *m, const char *key, uint32_t type, const void *val,
                  size_t len) {
    uint8_t *copy = arena_alloc(&c->arena, len);
    if (!copy) return -1;
    memcpy(copy, val, len);
    int i = find_kv(m, key);
    if (i < 0) {
        if (m->n_kv == GB_MAX_KV) return -1;
        i = (int)m->n_kv++;
        m->kvs[i].key = key;
    }
    m->kvs[i].type = type;
    m->kvs[i].val = copy;
    m->kvs[i].len = len;
    return 0;
}

static int set_u32(gb_ctx *c, gb_model *m, const char *key, uint32_t v) {
    return set_kv(c, m, key, GGUF_TYPE_UINT32, &v, 4);
}

static int set_i32(gb_ctx *c, gb_model *m, const char *key, int32_t v) {
    return set_kv(c, m, key, GGUF_TYPE_INT32, &v, 4);
}

static int set_f32(gb_ctx *c, gb_model *m, const char *key, float v) {
    return set_kv(c, m, key, GGUF_TYPE_FLOAT32, &v, 4);
}

static int set_str(gb_ctx *c, gb_model *m, const char *key, const char *s) {
    uint64_t n = strlen(s);
    uint8_t buf[256];
    if (n > sizeof buf - 8) return -1;
    memcpy(buf, &n, 8);
    memcpy(buf + 8, s, n);
    return set_kv(c, m, key, GGUF_TYPE_STRING, buf, 8 + n);
}

static int del_kv(gb_model *m, const char *key) {
    int i = find_kv(m, key);
    if (i < 0) return -1;
    memmove(&m->kvs[i], &m->kvs[i + 1], (m->n_kv - (size_t)i - 1) * sizeof m->kvs[0]);
    m->n_kv--;
    return 0;
}

static int del_tensor(gb_model *m, const char *name) {
    int i = find_tensor(m, name);
    if (i < 0) return -1;
    memmove(&m->tensors[i], &m->tensors[i + 1],
            (m->n_tensors - (size_t)i - 1) * sizeof m->tensors[0]);
    m->n_tensors--;
    return 0;
}

static gb_tensor *tensor(gb_model *m, const char *name) {
    int i = find_tensor(m, name);
    return i < 0 ? NULL : &m->tensors[i];
}

/* A string array payload from n C strings. */
static int set_str_array(gb_ctx *c, gb_model *m, const char *key, const char *const *strs,
                         size_t n) {
    size_t len = 12;
    for (size_t i = 0; i < n; i++)
        len += 8 + strlen(strs[i]);
    uint8_t *p = malloc(len);
    if (!p) return -1;
    uint32_t type = GGUF_TYPE_STRING;
    uint64_t count = n;
    memcpy(p, &type, 4);
    memcpy(p + 4, &count, 8);
    size_t at = 12;
    for (size_t i = 0; i < n; i++) {
        uint64_t sl = strlen(strs[i]);
        memcpy(p + at, &sl, 8);
        memcpy(p + at + 8, strs[i], sl);
        at += 8 + sl;
    }
    int rc = set_kv(c, m, key, GGUF_TYPE_ARRAY, p, len);
    free(p);
    return rc;
}

/* Emits m, then overwrites 4 or 8 bytes at pos. */
static void patch(gb_bytes *b, size_t pos, const void *v, size_t n) {
    if (pos + n <= b->len) memcpy(b->p + pos, v, n);
}

/* ---------------------------------------------------------------------------------------------
 * The reduced valid base: the real file's metadata and tensors with a 1024-token vocabulary.
 * ------------------------------------------------------------------------------------------- */

/* The value bytes of a parsed kv, as they sit in the file after the type field. */
static const uint8_t *kv_payload(const gguf_file *f, const gguf_kv *kv, size_t *len) {
    const uint8_t *p = f->base + kv->file_offset + 8 + kv->key.len + 4;
    if (kv->type == GGUF_TYPE_STRING)
        *len = 8 + kv->value.str.len;
    else if (kv->type == GGUF_TYPE_ARRAY)
        *len = 12 + kv->value.arr.nbytes;
    else
        *len = gguf_type_size(kv->type);
    return p;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool in_sorted(char **sorted, size_t n, const char *s) {
    return bsearch(&s, sorted, n, sizeof *sorted, cmp_str) != NULL;
}

static char *arena_strn(gb_arena *a, const char *s, size_t n) {
    char *p = arena_alloc(a, n + 1);
    if (p) memcpy(p, s, n);
    return p;
}

/* Keeps tokens [0, KEEP_TOKENS) and every control/user-defined token; remap[old] = new id or -1. */
static int reduce_vocab(gb_ctx *c, const gguf_file *f, gb_model *m, int32_t **remap_out,
                        int32_t *n_kept_out) {
    gguf_array toks, types, merges;
    /* SentencePiece vocabularies (gemma3's) have no merges */
    const bool bpe = gguf_find_kv(f, "tokenizer.ggml.merges") != NULL;
    if (gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks) != SYN_OK ||
        gguf_get_array(f, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &types) != SYN_OK ||
        (bpe && gguf_get_array(f, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &merges) != SYN_OK) ||
        types.count != toks.count)
        return -1;
    size_t n = (size_t)toks.count, n_kept = 0;
    int32_t *remap = arena_alloc(&c->arena, n * sizeof *remap);
    char **kept = arena_alloc(&c->arena, n * sizeof *kept);
    int32_t *kept_types = arena_alloc(&c->arena, n * sizeof *kept_types);
    if (!remap || !kept || !kept_types) return -1;
    const uint8_t *cur = toks.data;
    for (size_t i = 0; i < n; i++) {
        gguf_str s = gguf_array_next_str(&cur);
        int64_t type = gguf_array_get_int(&types, i);
        remap[i] = -1;
        if (i < KEEP_TOKENS || type == 3 || type == 4) {
            remap[i] = (int32_t)n_kept;
            kept_types[n_kept] = (int32_t)type;
            if (!(kept[n_kept++] = arena_strn(&c->arena, s.data, (size_t)s.len))) return -1;
        }
    }
    if (set_str_array(c, m, "tokenizer.ggml.tokens", (const char *const *)kept, n_kept) != 0)
        return -1;
    uint8_t *tt = arena_alloc(&c->arena, 12 + 4 * n_kept);
    uint32_t i32 = GGUF_TYPE_INT32;
    uint64_t cnt = n_kept;
    memcpy(tt, &i32, 4);
    memcpy(tt + 4, &cnt, 8);
    memcpy(tt + 12, kept_types, 4 * n_kept);
    if (set_kv(c, m, "tokenizer.ggml.token_type", GGUF_TYPE_ARRAY, tt, 12 + 4 * n_kept) != 0)
        return -1;

    if (bpe) {
        /* Merges whose two parts and result are all kept BPE tokens. */
        /* Small vocabularies are kept whole. */
        const size_t n_sorted = n < KEEP_TOKENS ? n : KEEP_TOKENS;
        char **sorted = arena_alloc(&c->arena, n_sorted * sizeof *sorted);
        char **kept_merges = arena_alloc(&c->arena, merges.count * sizeof *kept_merges);
        if (!sorted || !kept_merges) return -1;
        memcpy(sorted, kept, n_sorted * sizeof *sorted);
        qsort(sorted, n_sorted, sizeof *sorted, cmp_str);
        size_t n_merges = 0;
        cur = merges.data;
        for (uint64_t i = 0; i < merges.count; i++) {
            gguf_str s = gguf_array_next_str(&cur);
            char *text = arena_strn(&c->arena, s.data, (size_t)s.len);
            char *joined = arena_alloc(&c->arena, (size_t)s.len + 1);
            if (!text || !joined) return -1;
            char *sp = strchr(text, ' ');
            if (!sp) continue;
            *sp = '\0';
            bool keep = in_sorted(sorted, n_sorted, text) && in_sorted(sorted, n_sorted, sp + 1);
            snprintf(joined, (size_t)s.len + 1, "%s%s", text, sp + 1);
            *sp = ' ';
            if (keep && in_sorted(sorted, n_sorted, joined)) kept_merges[n_merges++] = text;
        }
        if (set_str_array(c, m, "tokenizer.ggml.merges", (const char *const *)kept_merges,
                          n_merges) != 0)
            return -1;
    }

    const char *id_keys[] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                             "tokenizer.ggml.padding_token_id"};
    for (size_t k = 0; k < 3; k++) {
        uint32_t id;
        if (!gguf_find_kv(f, id_keys[k])) continue;
        if (gguf_get_u32(f, id_keys[k], &id) != SYN_OK || id >= n || remap[id] < 0) return -1;
        if (set_u32(c, m, id_keys[k], (uint32_t)remap[id]) != 0) return -1;
    }
    *remap_out = remap;
    *n_kept_out = (int32_t)n_kept;
    return 0;
}

static int build_base(gb_ctx *c, int which, const char *valid_path) {
    if (gguf_open(valid_path, &c->src[which]) != SYN_OK) {
        fprintf(stderr, "bad_gguf: cannot load '%s': %s\n", valid_path, syn_last_error());
        return -1;
    }
    const gguf_file *f = c->src[which];
    gb_model *m = &c->base[which];
    m->version = 3;
    if (f->n_kv > GB_MAX_KV || f->n_tensors > GB_MAX_TENSORS) {
        fprintf(stderr, "bad_gguf: '%s' has more keys or tensors than the builder holds\n",
                valid_path);
        return -1;
    }
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kvs[i];
        gb_kv *d = &m->kvs[m->n_kv++];
        d->key = arena_strn(&c->arena, kv->key.data, (size_t)kv->key.len);
        d->type = kv->type;
        d->val = kv_payload(f, kv, &d->len);
        if (!d->key) return -1;
    }
    int32_t *remap = NULL, n_kept = 0;
    if (reduce_vocab(c, f, m, &remap, &n_kept) != 0) {
        fprintf(stderr, "bad_gguf: '%s' lacks the expected tokenizer arrays\n", valid_path);
        return -1;
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        gb_tensor *d = &m->tensors[m->n_tensors++];
        d->name = arena_strn(&c->arena, t->name.data, (size_t)t->name.len);
        d->n_dims = t->n_dims;
        memcpy(d->ne, t->ne, sizeof t->ne);
        d->type = t->type;
        d->data = t->data;
        d->data_len = t->nbytes;
        if (!d->name) return -1;
        if (strcmp(d->name, "token_embd.weight") == 0) {
            /* Keep the embedding rows of the kept tokens, in their new order. */
            uint64_t row = ggml_row_size(t->type, t->ne[0]);
            uint8_t *rows = arena_alloc(&c->arena, (size_t)(row * (uint64_t)n_kept));
            if (!rows) return -1;
            for (uint64_t r = 0; r < t->ne[1]; r++)
                if (remap[r] >= 0)
                    memcpy(rows + remap[r] * row, (const uint8_t *)t->data + r * row, row);
            d->ne[1] = (uint64_t)n_kept;
            d->data = rows;
            d->data_len = row * (uint64_t)n_kept;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * The cases. Each gets a copy of the base, edits it and serialises it into out.
 * ------------------------------------------------------------------------------------------- */

typedef int (*gb_case_fn)(gb_ctx *c, gb_model *m, gb_bytes *out);

static int emit_plain(gb_model *m, gb_bytes *out) { return emit(m, out, NULL); }

/* Byte-level edits after serialisation. */
static int header_u32(gb_model *m, gb_bytes *out, size_t pos, uint32_t v) {
    if (emit(m, out, NULL) != 0) return -1;
    patch(out, pos, &v, 4);
    return 0;
}

static int header_u64(gb_model *m, gb_bytes *out, size_t pos, uint64_t v) {
    if (emit(m, out, NULL) != 0) return -1;
    patch(out, pos, &v, 8);
    return 0;
}

static int truncate_at(gb_bytes *out, size_t len) {
    if (len < out->len) out->len = len;
    return 0;
}

#define CASE(fn) static int fn(gb_ctx *c, gb_model *m, gb_bytes *out)
#define UNUSED_CTX (void)c

CASE(truncated_empty) {
    UNUSED_CTX;
    return emit_plain(m, out) || truncate_at(out, 0);
}
CASE(truncated_header) {
    UNUSED_CTX;
    return emit_plain(m, out) || truncate_at(out, 20);
}
/* Cut so early that the key count no longer fits: refused before any key is read. */
CASE(truncated_in_first_keys) {
    UNUSED_CTX;
    gb_layout lay;
    return emit(m, out, &lay) || truncate_at(out, lay.kv_value[3] - 2);
}
/* Keys after the tokenizer arrays: the counts still fit, the key itself does not. */
CASE(truncated_in_key) {
    UNUSED_CTX;
    gb_layout lay;
    return emit(m, out, &lay) ||
           truncate_at(out, lay.kv_value[find_kv(m, "tokenizer.ggml.eos_token_id")] - 2);
}
CASE(truncated_in_string_value) {
    UNUSED_CTX;
    gb_layout lay;
    return emit(m, out, &lay) ||
           truncate_at(out, lay.kv_value[find_kv(m, "tokenizer.chat_template")] + 12);
}
CASE(truncated_in_token_array) {
    UNUSED_CTX;
    gb_layout lay;
    int i = find_kv(m, "tokenizer.ggml.tokens");
    return emit(m, out, &lay) || truncate_at(out, lay.kv_value[i] + m->kvs[i].len / 2);
}
CASE(truncated_in_tensor_info) {
    UNUSED_CTX;
    gb_layout lay;
    return emit(m, out, &lay) ||
           truncate_at(out, lay.tensor_start[3] + 8 + strlen(m->tensors[3].name) + 2);
}
CASE(truncated_in_data) {
    UNUSED_CTX;
    gb_layout lay;
    return emit(m, out, &lay) || truncate_at(out, lay.data_start + (out->len - lay.data_start) / 2);
}
CASE(bad_magic) {
    UNUSED_CTX;
    return emit_plain(m, out) || (patch(out, 0, "GGML", 4), 0);
}
CASE(version_0) {
    UNUSED_CTX;
    return header_u32(m, out, 4, 0);
}
CASE(version_1) {
    UNUSED_CTX;
    return header_u32(m, out, 4, 1);
}
CASE(version_4) {
    UNUSED_CTX;
    return header_u32(m, out, 4, 4);
}
CASE(version_max) {
    UNUSED_CTX;
    return header_u32(m, out, 4, 0xffffffffu);
}
CASE(n_tensors_huge) {
    UNUSED_CTX;
    return header_u64(m, out, 8, 1ull << 62);
}
CASE(n_kv_huge) {
    UNUSED_CTX;
    return header_u64(m, out, 16, 1ull << 62);
}
CASE(key_length_huge) {
    UNUSED_CTX;
    return header_u64(m, out, 24, 1ull << 60);
}
CASE(string_value_huge) {
    UNUSED_CTX;
    gb_layout lay;
    uint64_t v = 1ull << 60;
    if (emit(m, out, &lay) != 0) return -1;
    patch(out, lay.kv_value[find_kv(m, "general.name")], &v, 8);
    return 0;
}
CASE(array_count_huge) {
    UNUSED_CTX;
    gb_layout lay;
    uint64_t v = 1ull << 61;
    if (emit(m, out, &lay) != 0) return -1;
    patch(out, lay.kv_value[find_kv(m, "tokenizer.ggml.token_type")] + 4, &v, 8);
    return 0;
}
CASE(string_array_count_huge) {
    UNUSED_CTX;
    gb_layout lay;
    uint64_t v = 1ull << 61;
    if (emit(m, out, &lay) != 0) return -1;
    patch(out, lay.kv_value[find_kv(m, "tokenizer.ggml.tokens")] + 4, &v, 8);
    return 0;
}
CASE(string_array_element_huge) {
    UNUSED_CTX;
    gb_layout lay;
    if (emit(m, out, &lay) != 0) return -1;
    size_t pos = lay.kv_value[find_kv(m, "tokenizer.ggml.tokens")] + 12;
    for (int i = 0; i < 5; i++) {
        uint64_t len;
        memcpy(&len, out->p + pos, 8);
        pos += 8 + len;
    }
    uint64_t v = 1ull << 59;
    patch(out, pos, &v, 8);
    return 0;
}
CASE(value_type_13) {
    UNUSED_CTX;
    gb_layout lay;
    uint32_t v = 13;
    if (emit(m, out, &lay) != 0) return -1;
    patch(out, lay.kv_value[2] - 4, &v, 4);
    return 0;
}
CASE(value_type_max) {
    UNUSED_CTX;
    gb_layout lay;
    uint32_t v = 0xffffffffu;
    if (emit(m, out, &lay) != 0) return -1;
    patch(out, lay.kv_value[2] - 4, &v, 4);
    return 0;
}
CASE(nested_array) {
    uint8_t v[12 + 12];
    uint32_t arr = GGUF_TYPE_ARRAY, u8 = GGUF_TYPE_UINT8;
    uint64_t one = 1, zero = 0;
    memcpy(v, &arr, 4);
    memcpy(v + 4, &one, 8);
    memcpy(v + 12, &u8, 4);
    memcpy(v + 16, &zero, 8);
    return set_kv(c, m, "test.nested", GGUF_TYPE_ARRAY, v, sizeof v) || emit_plain(m, out);
}
CASE(array_element_type_99) {
    uint8_t v[12];
    uint32_t t = 99;
    uint64_t zero = 0;
    memcpy(v, &t, 4);
    memcpy(v + 4, &zero, 8);
    return set_kv(c, m, "test.bad_array", GGUF_TYPE_ARRAY, v, sizeof v) || emit_plain(m, out);
}
CASE(empty_key) {
    m->kvs[1].key = "";
    UNUSED_CTX;
    return emit_plain(m, out);
}
CASE(duplicate_key) {
    UNUSED_CTX;
    if (m->n_kv == GB_MAX_KV) return -1;
    m->kvs[m->n_kv++] = m->kvs[find_kv(m, "qwen2.block_count")];
    return emit_plain(m, out);
}
CASE(alignment_0) { return set_u32(c, m, "general.alignment", 0) || emit_plain(m, out); }
CASE(alignment_3) { return set_u32(c, m, "general.alignment", 3) || emit_plain(m, out); }
CASE(alignment_string) { return set_str(c, m, "general.alignment", "32") || emit_plain(m, out); }
CASE(tensor_0_dims) {
    UNUSED_CTX;
    tensor(m, "blk.0.attn_q.weight")->n_dims = 0;
    return emit_plain(m, out);
}
CASE(tensor_5_dims) {
    UNUSED_CTX;
    gb_tensor *t = tensor(m, "blk.0.attn_q.weight");
    t->n_dims = 5;
    t->ne[2] = t->ne[3] = t->ne[4] = 1;
    return emit_plain(m, out);
}
CASE(tensor_zero_dim) {
    UNUSED_CTX;
    tensor(m, "blk.0.attn_q.weight")->ne[1] = 0;
    return emit_plain(m, out);
}
CASE(tensor_dims_overflow) {
    UNUSED_CTX;
    gb_tensor *t = tensor(m, "blk.0.attn_q.weight");
    t->n_dims = 4;
    t->ne[1] = t->ne[2] = t->ne[3] = 1ull << 22; /* 64 * 2^66 elements */
    return emit_plain(m, out);
}
CASE(tensor_type_99) {
    UNUSED_CTX;
    tensor(m, "blk.0.attn_q.weight")->type = 99;
    return emit_plain(m, out);
}
CASE(tensor_type_31) {
    UNUSED_CTX;
    tensor(m, "blk.0.attn_q.weight")->type = 31;
    return emit_plain(m, out);
}
CASE(tensor_row_not_block_multiple) {
    UNUSED_CTX;
    gb_tensor *t = tensor(m, "blk.0.attn_q.weight");
    t->ne[0] = 48;
    return emit_plain(m, out);
}
CASE(tensor_offset_past_end) {
    UNUSED_CTX;
    gb_tensor *t = tensor(m, "blk.1.ffn_up.weight");
    t->fixed_offset = true;
    t->offset = 1u << 24;
    return emit_plain(m, out);
}
CASE(tensor_offset_huge) {
    UNUSED_CTX;
    gb_tensor *t = tensor(m, "blk.1.ffn_up.weight");
    t->fixed_offset = true;
    t->offset = 1ull << 63;
    return emit_plain(m, out);
}
CASE(tensor_offset_misaligned) {
    UNUSED_CTX;
    gb_tensor *t = tensor(m, "blk.1.ffn_up.weight");
    t->fixed_offset = true;
    t->offset = 4;
    return emit_plain(m, out);
}
CASE(duplicate_tensor) {
    UNUSED_CTX;
    if (m->n_tensors == GB_MAX_TENSORS) return -1;
    m->tensors[m->n_tensors++] = *tensor(m, "blk.0.attn_q.weight");
    return emit_plain(m, out);
}
CASE(empty_tensor_name) {
    UNUSED_CTX;
    m->tensors[2].name = "";
    return emit_plain(m, out);
}

CASE(arch_gemma) { return set_str(c, m, "general.architecture", "gemma") || emit_plain(m, out); }
CASE(arch_missing) {
    UNUSED_CTX;
    return del_kv(m, "general.architecture") || emit_plain(m, out);
}
CASE(arch_not_string) { return set_u32(c, m, "general.architecture", 2) || emit_plain(m, out); }
CASE(block_count_string) { return set_str(c, m, "qwen2.block_count", "2") || emit_plain(m, out); }
CASE(block_count_huge) { return set_u32(c, m, "qwen2.block_count", 1000) || emit_plain(m, out); }
CASE(embedding_length_missing) {
    UNUSED_CTX;
    return del_kv(m, "qwen2.embedding_length") || emit_plain(m, out);
}
CASE(embedding_length_negative) {
    return set_i32(c, m, "qwen2.embedding_length", -64) || emit_plain(m, out);
}
CASE(embedding_length_mismatch) {
    return set_u32(c, m, "qwen2.embedding_length", 128) || emit_plain(m, out);
}
CASE(head_count_0) { return set_u32(c, m, "qwen2.attention.head_count", 0) || emit_plain(m, out); }
CASE(head_count_not_dividing) {
    return set_u32(c, m, "qwen2.attention.head_count", 5) || emit_plain(m, out);
}
CASE(head_count_kv_above) {
    return set_u32(c, m, "qwen2.attention.head_count_kv", 8) || emit_plain(m, out);
}
CASE(head_count_kv_0) {
    return set_u32(c, m, "qwen2.attention.head_count_kv", 0) || emit_plain(m, out);
}
CASE(context_length_0) { return set_u32(c, m, "qwen2.context_length", 0) || emit_plain(m, out); }
CASE(ffn_length_0) { return set_u32(c, m, "qwen2.feed_forward_length", 0) || emit_plain(m, out); }
CASE(rope_base_nan) { return set_f32(c, m, "qwen2.rope.freq_base", NAN) || emit_plain(m, out); }
CASE(rope_base_negative) {
    return set_f32(c, m, "qwen2.rope.freq_base", -1.0f) || emit_plain(m, out);
}
CASE(rope_base_inf) {
    return set_f32(c, m, "qwen2.rope.freq_base", INFINITY) || emit_plain(m, out);
}
CASE(rms_eps_nan) {
    return set_f32(c, m, "qwen2.attention.layer_norm_rms_epsilon", -NAN) || emit_plain(m, out);
}
CASE(rms_eps_negative) {
    return set_f32(c, m, "qwen2.attention.layer_norm_rms_epsilon", -1e-6f) || emit_plain(m, out);
}
CASE(rms_eps_zero) {
    return set_f32(c, m, "qwen2.attention.layer_norm_rms_epsilon", 0.0f) || emit_plain(m, out);
}
CASE(tensor_missing) {
    UNUSED_CTX;
    return del_tensor(m, "blk.1.ffn_down.weight") || emit_plain(m, out);
}
CASE(token_embd_missing) {
    UNUSED_CTX;
    return del_tensor(m, "token_embd.weight") || emit_plain(m, out);
}
CASE(tensor_shape_wrong) {
    UNUSED_CTX;
    tensor(m, "blk.1.ffn_up.weight")->ne[1] = 100;
    return emit_plain(m, out);
}
CASE(tensor_shape_3d) {
    UNUSED_CTX;
    gb_tensor *t = tensor(m, "blk.0.attn_output.weight");
    t->n_dims = 3;
    t->ne[2] = 2;
    return emit_plain(m, out);
}
CASE(tensor_type_iq4_nl) {
    UNUSED_CTX;
    tensor(m, "blk.0.attn_q.weight")->type = 20; /* iq4_nl: Q4_0's geometry, not computed here */
    return emit_plain(m, out);
}
CASE(norm_type_q8_0) {
    UNUSED_CTX;
    tensor(m, "output_norm.weight")->type = GGML_TYPE_Q8_0;
    return emit_plain(m, out);
}

CASE(tokens_above_embedding) {
    /* Ten fewer embedding rows than there are tokens. */
    UNUSED_CTX;
    gb_tensor *t = tensor(m, "token_embd.weight");
    t->ne[1] -= 10;
    t->data_len = ggml_row_size(t->type, t->ne[0]) * t->ne[1];
    return emit_plain(m, out);
}
CASE(merge_without_space) {
    UNUSED_CTX;
    gb_layout lay;
    if (emit(m, out, &lay) != 0) return -1;
    /* The first merge is "Ġ Ġ" (UTF-8 c4 a0 20 c4 a0): turn its space into 'x'. */
    size_t pos = lay.kv_value[find_kv(m, "tokenizer.ggml.merges")] + 12 + 8;
    if (out->p[pos + 2] != ' ') return -1;
    out->p[pos + 2] = 'x';
    return 0;
}
CASE(eos_out_of_range) {
    return set_u32(c, m, "tokenizer.ggml.eos_token_id", 99999) || emit_plain(m, out);
}
CASE(bos_out_of_range) {
    return set_u32(c, m, "tokenizer.ggml.bos_token_id", 99999) || emit_plain(m, out);
}
CASE(padding_out_of_range) {
    return set_u32(c, m, "tokenizer.ggml.padding_token_id", 99999) || emit_plain(m, out);
}
CASE(tokenizer_model_llama) {
    return set_str(c, m, "tokenizer.ggml.model", "llama") || emit_plain(m, out);
}
CASE(tokenizer_model_bert) {
    return set_str(c, m, "tokenizer.ggml.model", "bert") || emit_plain(m, out);
}
CASE(tokenizer_pre_unknown) {
    return set_str(c, m, "tokenizer.ggml.pre", "no-such-pre") || emit_plain(m, out);
}
CASE(tokens_missing) {
    UNUSED_CTX;
    return del_kv(m, "tokenizer.ggml.tokens") || emit_plain(m, out);
}
CASE(token_type_short) {
    /* One type fewer than there are tokens: drop the array's last element. */
    int i = find_kv(m, "tokenizer.ggml.token_type");
    uint8_t *v = arena_alloc(&c->arena, m->kvs[i].len - 4);
    if (!v) return -1;
    memcpy(v, m->kvs[i].val, m->kvs[i].len - 4);
    uint64_t count;
    memcpy(&count, v + 4, 8);
    count--;
    memcpy(v + 4, &count, 8);
    m->kvs[i].val = v;
    m->kvs[i].len -= 4;
    return emit_plain(m, out);
}

/* ---- qwen3 and llama (bases from tests/data/arch) ---- */

#define QWEN3_CASE(fn)                                                                             \
    CASE(fn##_body);                                                                               \
    CASE(fn) {                                                                                     \
        *m = c->base[GB_QWEN3];                                                                    \
        return fn##_body(c, m, out);                                                               \
    }                                                                                              \
    CASE(fn##_body)
#define LLAMA_CASE(fn)                                                                             \
    CASE(fn##_body);                                                                               \
    CASE(fn) {                                                                                     \
        *m = c->base[GB_LLAMA];                                                                    \
        return fn##_body(c, m, out);                                                               \
    }                                                                                              \
    CASE(fn##_body)

/* gemma3 (base from tests/data/arch2). */
#define GEMMA3_CASE(fn)                                                                            \
    CASE(fn##_body);                                                                               \
    CASE(fn) {                                                                                     \
        *m = c->base[GB_GEMMA3];                                                                   \
        return fn##_body(c, m, out);                                                               \
    }                                                                                              \
    CASE(fn##_body)

QWEN3_CASE(qwen3_q_norm_missing) {
    UNUSED_CTX;
    return del_tensor(m, "blk.1.attn_q_norm.weight") || emit_plain(m, out);
}
QWEN3_CASE(qwen3_k_norm_shape) {
    UNUSED_CTX;
    tensor(m, "blk.0.attn_k_norm.weight")->ne[0] = 32;
    return emit_plain(m, out);
}
QWEN3_CASE(qwen3_key_length_0) {
    return set_u32(c, m, "qwen3.attention.key_length", 0) || emit_plain(m, out);
}
QWEN3_CASE(qwen3_key_length_wrong) {
    /* Heads of 32 with value_length 32 too: the query matrix no longer fits. */
    return set_u32(c, m, "qwen3.attention.key_length", 32) ||
           set_u32(c, m, "qwen3.attention.value_length", 32) || emit_plain(m, out);
}
QWEN3_CASE(qwen3_value_length_differs) {
    return set_u32(c, m, "qwen3.attention.value_length", 128) || emit_plain(m, out);
}
QWEN3_CASE(qwen3_key_length_odd) {
    return set_u32(c, m, "qwen3.attention.key_length", 63) ||
           set_u32(c, m, "qwen3.attention.value_length", 63) || emit_plain(m, out);
}
QWEN3_CASE(qwen3_attn_output_shape) {
    /* As if the query width were the model width (qwen2's rule). */
    UNUSED_CTX;
    tensor(m, "blk.0.attn_output.weight")->ne[0] = 256;
    return emit_plain(m, out);
}
QWEN3_CASE(qwen3_experts) { return set_u32(c, m, "qwen3.expert_count", 8) || emit_plain(m, out); }
QWEN3_CASE(qwen3_sliding_window) {
    return set_u32(c, m, "qwen3.attention.sliding_window", 4096) || emit_plain(m, out);
}
QWEN3_CASE(arch_qwen3moe) {
    return set_str(c, m, "general.architecture", "qwen3moe") || emit_plain(m, out);
}
GEMMA3_CASE(gemma3_window_0) {
    return set_u32(c, m, "gemma3.attention.sliding_window", 0) || emit_plain(m, out);
}
GEMMA3_CASE(gemma3_window_missing) {
    UNUSED_CTX;
    return del_kv(m, "gemma3.attention.sliding_window") || emit_plain(m, out);
}
GEMMA3_CASE(gemma3_window_too_big) {
    return set_u32(c, m, "gemma3.attention.sliding_window", 0x80000000u) || emit_plain(m, out);
}
GEMMA3_CASE(gemma3_pattern_0) {
    return set_u32(c, m, "gemma3.attention.sliding_window_pattern", 0) || emit_plain(m, out);
}
GEMMA3_CASE(gemma3_pattern_array) {
    /* Some converters write one flag per layer; Synapse reads the period only. */
    const char *const flags[] = {"1", "1", "0"};
    return set_str_array(c, m, "gemma3.attention.sliding_window_pattern", flags, 3) ||
           emit_plain(m, out);
}
GEMMA3_CASE(gemma3_rope_base_swa_negative) {
    return set_f32(c, m, "gemma3.rope.freq_base_swa", -1.0f) || emit_plain(m, out);
}
GEMMA3_CASE(gemma3_rope_scaling_factor_0) {
    return set_f32(c, m, "gemma3.rope.scaling.factor", 0.0f) || emit_plain(m, out);
}
GEMMA3_CASE(gemma3_softcap_nan) {
    return set_f32(c, m, "gemma3.final_logit_softcapping", NAN) || emit_plain(m, out);
}
GEMMA3_CASE(gemma3_post_ffw_norm_missing) {
    UNUSED_CTX;
    return del_tensor(m, "blk.1.post_ffw_norm.weight") || emit_plain(m, out);
}
LLAMA_CASE(llama_rope_freqs_shape) {
    UNUSED_CTX;
    tensor(m, "rope_freqs.weight")->ne[0] = 16;
    return emit_plain(m, out);
}
LLAMA_CASE(llama_rope_above_head) {
    return set_u32(c, m, "llama.rope.dimension_count", 96) || emit_plain(m, out);
}
LLAMA_CASE(llama_rope_scaling_yarn) {
    return set_str(c, m, "llama.rope.scaling.type", "yarn") || emit_plain(m, out);
}
LLAMA_CASE(llama_q4_k_row_not_blocks) {
    /* A Q4_K row of 128 values: half a 256-value super-block. */
    UNUSED_CTX;
    gb_tensor *t = tensor(m, "blk.0.attn_q.weight");
    t->ne[0] = 128;
    t->ne[1] = 512;
    return emit_plain(m, out);
}
LLAMA_CASE(llama_norm_type_q4_k) {
    UNUSED_CTX;
    gb_tensor *t = tensor(m, "blk.2.ffn_norm.weight");
    t->type = GGML_TYPE_Q4_K;
    return emit_plain(m, out);
}
LLAMA_CASE(llama_wk_shape) {
    UNUSED_CTX;
    tensor(m, "blk.2.attn_k.weight")->ne[1] = 256; /* as many rows as query heads */
    return emit_plain(m, out);
}

typedef struct gb_case {
    bad_gguf_case pub;
    gb_case_fn fn;
} gb_case;

static const gb_case cases[] = {
    {{"truncated-empty.gguf", "truncated"}, truncated_empty},
    {{"truncated-header.gguf", "truncated"}, truncated_header},
    {{"truncated-in-first-keys.gguf", "key count 24"}, truncated_in_first_keys},
    {{"truncated-in-key.gguf", "key 'tokenizer.ggml.eos_token_id' at byte"}, truncated_in_key},
    {{"truncated-in-string-value.gguf", "key 'tokenizer.chat_template'"},
     truncated_in_string_value},
    {{"truncated-in-token-array.gguf", "key 'tokenizer.ggml.tokens'"}, truncated_in_token_array},
    {{"truncated-in-tensor-info.gguf", "file truncated"}, truncated_in_tensor_info},
    {{"truncated-in-data.gguf", "past the end of the file"}, truncated_in_data},
    {{"bad-magic.gguf", "bad magic"}, bad_magic},
    {{"version-0.gguf", "version 0 "}, version_0},
    {{"version-1.gguf", "version 1 "}, version_1},
    {{"version-4.gguf", "version 4 "}, version_4},
    {{"version-ffffffff.gguf", "version 4294967295"}, version_max},
    {{"n-tensors-2e62.gguf", "tensor count 4611686018427387904"}, n_tensors_huge},
    {{"n-kv-2e62.gguf", "key count 4611686018427387904"}, n_kv_huge},
    {{"key-length-huge.gguf", "string length 1152921504606846976"}, key_length_huge},
    {{"string-value-huge.gguf", "string length 1152921504606846976"}, string_value_huge},
    {{"array-count-huge.gguf", "array of 2305843009213693952 int32"}, array_count_huge},
    {{"string-array-count-huge.gguf", "array of 2305843009213693952 strings"},
     string_array_count_huge},
    {{"string-array-element-huge.gguf", "length 576460752303423488 exceeds"},
     string_array_element_huge},
    {{"value-type-13.gguf", "invalid value type 13"}, value_type_13},
    {{"value-type-ffffffff.gguf", "invalid value type 4294967295"}, value_type_max},
    {{"nested-array.gguf", "nested arrays"}, nested_array},
    {{"array-element-type-99.gguf", "invalid array element type 99"}, array_element_type_99},
    {{"empty-key.gguf", "empty key"}, empty_key},
    {{"duplicate-key.gguf", "duplicate key 'qwen2.block_count'"}, duplicate_key},
    {{"alignment-0.gguf", "general.alignment = 0"}, alignment_0},
    {{"alignment-3.gguf", "general.alignment = 3"}, alignment_3},
    {{"alignment-string.gguf", "key 'general.alignment'"}, alignment_string},
    {{"tensor-0-dims.gguf", "0 dimensions"}, tensor_0_dims},
    {{"tensor-5-dims.gguf", "5 dimensions"}, tensor_5_dims},
    {{"tensor-zero-dim.gguf", "dimension 1 is zero"}, tensor_zero_dim},
    {{"tensor-dims-overflow.gguf", "element count overflows"}, tensor_dims_overflow},
    {{"tensor-type-99.gguf", "unknown tensor type id 99"}, tensor_type_99},
    {{"tensor-type-31.gguf", "unknown tensor type id 31"}, tensor_type_31},
    {{"tensor-row-not-block-multiple.gguf", "not a multiple of the q8_0 block size"},
     tensor_row_not_block_multiple},
    {{"tensor-offset-past-end.gguf", "past the end of the file"}, tensor_offset_past_end},
    {{"tensor-offset-huge.gguf", "past the end of the file"}, tensor_offset_huge},
    {{"tensor-offset-misaligned.gguf", "not a multiple of the alignment"},
     tensor_offset_misaligned},
    {{"duplicate-tensor.gguf", "duplicate tensor 'blk.0.attn_q.weight'"}, duplicate_tensor},
    {{"empty-tensor-name.gguf", "empty tensor name"}, empty_tensor_name},
    {{"arch-gemma.gguf", "unsupported architecture 'gemma' (general.architecture); this build "
                         "supports qwen2, qwen3, llama"},
     arch_gemma},
    {{"arch-missing.gguf", "missing key 'general.architecture'"}, arch_missing},
    {{"arch-not-string.gguf", "key 'general.architecture'"}, arch_not_string},
    {{"block-count-string.gguf", "key 'qwen2.block_count'"}, block_count_string},
    {{"block-count-huge.gguf", "qwen2.block_count 1000 needs 12000 tensors"}, block_count_huge},
    {{"embedding-length-missing.gguf", "missing key 'qwen2.embedding_length'"},
     embedding_length_missing},
    {{"embedding-length-negative.gguf", "key 'qwen2.embedding_length'"}, embedding_length_negative},
    {{"embedding-length-mismatch.gguf", "tensor 'token_embd.weight' has shape [64, 1046] but the "
                                        "hyperparameters require [128, 1046]"},
     embedding_length_mismatch},
    {{"head-count-0.gguf", "qwen2.attention.head_count is 0"}, head_count_0},
    {{"head-count-not-dividing.gguf", "head_count 5 does not divide"}, head_count_not_dividing},
    {{"head-count-kv-above-heads.gguf", "head_count_kv 8 must divide"}, head_count_kv_above},
    {{"head-count-kv-0.gguf", "qwen2.attention.head_count_kv is 0"}, head_count_kv_0},
    {{"context-length-0.gguf", "qwen2.context_length is 0"}, context_length_0},
    {{"ffn-length-0.gguf", "qwen2.feed_forward_length is 0"}, ffn_length_0},
    {{"rope-base-nan.gguf", "qwen2.rope.freq_base is nan"}, rope_base_nan},
    {{"rope-base-negative.gguf", "qwen2.rope.freq_base is -1"}, rope_base_negative},
    {{"rope-base-inf.gguf", "qwen2.rope.freq_base is inf"}, rope_base_inf},
    {{"rms-eps-nan.gguf", "layer_norm_rms_epsilon is nan"}, rms_eps_nan},
    {{"rms-eps-negative.gguf", "layer_norm_rms_epsilon is -1e-06"}, rms_eps_negative},
    {{"rms-eps-zero.gguf", "layer_norm_rms_epsilon is 0"}, rms_eps_zero},
    {{"tensor-missing.gguf", "missing tensor 'blk.1.ffn_down.weight'"}, tensor_missing},
    {{"token-embd-missing.gguf", "missing tensor 'token_embd.weight'"}, token_embd_missing},
    {{"tensor-shape-wrong.gguf",
      "tensor 'blk.1.ffn_up.weight' has shape [64, 100] but the hyperparameters require [64, 128]"},
     tensor_shape_wrong},
    {{"tensor-shape-3d.gguf", "tensor 'blk.0.attn_output.weight' has shape [64, 64, 2]"},
     tensor_shape_3d},
    {{"tensor-type-iq4_nl.gguf",
      "tensor 'blk.0.attn_q.weight' has type iq4_nl, which this build does not support"},
     tensor_type_iq4_nl},
    {{"norm-type-q8_0.gguf", "tensor 'output_norm.weight' has type q8_0"}, norm_type_q8_0},
    {{"tokens-above-embedding.gguf", "tokenizer.ggml.tokens"}, tokens_above_embedding},
    {{"merge-without-space.gguf", "tokenizer.ggml.merges"}, merge_without_space},
    {{"eos-out-of-range.gguf", "tokenizer.ggml.eos_token_id"}, eos_out_of_range},
    {{"bos-out-of-range.gguf", "tokenizer.ggml.bos_token_id"}, bos_out_of_range},
    {{"padding-out-of-range.gguf", "tokenizer.ggml.padding_token_id"}, padding_out_of_range},
    /* a byte-level vocabulary called SentencePiece has none of SPM's <0xXX> byte tokens */
    {{"tokenizer-model-llama.gguf", "no byte token <0x00>"}, tokenizer_model_llama},
    {{"tokenizer-model-bert.gguf", "tokenizer.ggml.model"}, tokenizer_model_bert},
    {{"tokenizer-pre-unknown.gguf", "tokenizer.ggml.pre"}, tokenizer_pre_unknown},
    {{"tokens-missing.gguf", "tokenizer.ggml.tokens"}, tokens_missing},
    {{"token-type-short.gguf", "tokenizer.ggml.token_type"}, token_type_short},
    {{"qwen3-q-norm-missing.gguf", "missing tensor 'blk.1.attn_q_norm.weight'"},
     qwen3_q_norm_missing},
    {{"qwen3-k-norm-shape.gguf",
      "tensor 'blk.0.attn_k_norm.weight' has shape [32] but the hyperparameters require [64]"},
     qwen3_k_norm_shape},
    {{"qwen3-key-length-0.gguf", "qwen3.attention.key_length is 0"}, qwen3_key_length_0},
    {{"qwen3-key-length-wrong.gguf", "tensor 'blk.0.attn_q.weight' has shape [256, 512] but the "
                                     "hyperparameters require [256, 256]"},
     qwen3_key_length_wrong},
    {{"qwen3-value-length-differs.gguf",
      "qwen3.attention.value_length 128 differs from the key head size 64"},
     qwen3_value_length_differs},
    {{"qwen3-key-length-odd.gguf", "head size 63 must be even"}, qwen3_key_length_odd},
    {{"qwen3-attn-output-shape.gguf", "tensor 'blk.0.attn_output.weight' has shape [256, 256] but "
                                      "the hyperparameters require [512, 256]"},
     qwen3_attn_output_shape},
    {{"qwen3-experts.gguf", "qwen3.expert_count is 8: mixture-of-experts"}, qwen3_experts},
    {{"qwen3-sliding-window.gguf", "qwen3.attention.sliding_window is set"}, qwen3_sliding_window},
    {{"arch-qwen3moe.gguf", "unsupported architecture 'qwen3moe'"}, arch_qwen3moe},
    {{"gemma3-window-0.gguf", "gemma3.attention.sliding_window is 0"}, gemma3_window_0},
    {{"gemma3-window-missing.gguf", "missing key 'gemma3.attention.sliding_window'"},
     gemma3_window_missing},
    {{"gemma3-window-too-big.gguf",
      "gemma3.attention.sliding_window is 2147483648, above the supported maximum"},
     gemma3_window_too_big},
    {{"gemma3-pattern-0.gguf", "gemma3.attention.sliding_window_pattern is 0"}, gemma3_pattern_0},
    {{"gemma3-pattern-array.gguf", "gemma3.attention.sliding_window_pattern"},
     gemma3_pattern_array},
    {{"gemma3-rope-base-swa-negative.gguf", "gemma3.rope.freq_base_swa is -1"},
     gemma3_rope_base_swa_negative},
    {{"gemma3-rope-scaling-factor-0.gguf", "gemma3.rope.scaling.factor is 0"},
     gemma3_rope_scaling_factor_0},
    {{"gemma3-softcap-nan.gguf", "gemma3.final_logit_softcapping is nan"}, gemma3_softcap_nan},
    {{"gemma3-post-ffw-norm-missing.gguf", "missing tensor 'blk.1.post_ffw_norm.weight'"},
     gemma3_post_ffw_norm_missing},
    {{"llama-rope-freqs-shape.gguf",
      "tensor 'rope_freqs.weight' has shape [16] but the hyperparameters require [32]"},
     llama_rope_freqs_shape},
    {{"llama-rope-above-head.gguf",
      "llama.rope.dimension_count 96 must be even and at most the head size 64"},
     llama_rope_above_head},
    {{"llama-rope-scaling-yarn.gguf", "llama.rope.scaling.type 'yarn' is not supported"},
     llama_rope_scaling_yarn},
    {{"llama-q4_k-row-not-blocks.gguf",
      "row length 128 is not a multiple of the q4_k block size 256"},
     llama_q4_k_row_not_blocks},
    {{"llama-norm-type-q4_k.gguf", "tensor 'blk.2.ffn_norm.weight' has type q4_k"},
     llama_norm_type_q4_k},
    {{"llama-wk-shape.gguf", "tensor 'blk.2.attn_k.weight' has shape [256, 256] but the "
                             "hyperparameters require [256, 128]"},
     llama_wk_shape},
};

size_t bad_gguf_case_count(void) { return sizeof cases / sizeof cases[0]; }

const bad_gguf_case *bad_gguf_case_at(size_t i) {
    return i < bad_gguf_case_count() ? &cases[i].pub : NULL;
}

static int write_bytes(const char *dir, const char *name, const gb_bytes *b) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        fprintf(stderr, "bad_gguf: cannot create '%s'\n", path);
        return -1;
    }
    size_t n = b->len ? fwrite(b->p, 1, b->len, fp) : 0;
    if (fclose(fp) != 0 || n != b->len) {
        fprintf(stderr, "bad_gguf: cannot write '%s'\n", path);
        return -1;
    }
    return 0;
}

int bad_gguf_write_corpus(const char *valid_path, const char *out_dir) {
    gb_ctx *c = calloc(1, sizeof *c);
    if (!c) return -1;
    /* The qwen3, llama and gemma3 bases: llama.cpp's files in the arch and arch2 folders beside
     * valid_path. */
    const char *slash = strrchr(valid_path, '/');
    const int dir_len = slash ? (int)(slash - valid_path + 1) : 0;
    char qwen3_path[4096], llama_path[4096], gemma3_path[4096];
    snprintf(qwen3_path, sizeof qwen3_path, "%.*sarch/qwen3-s5-q8_0.gguf", dir_len, valid_path);
    snprintf(llama_path, sizeof llama_path, "%.*sarch/llama-s5-q4_k_m.gguf", dir_len, valid_path);
    snprintf(gemma3_path, sizeof gemma3_path, "%.*sarch2/gemma3-s5-q8_0.gguf", dir_len, valid_path);
    int rc = build_base(c, GB_QWEN2, valid_path);
    if (rc == 0) rc = build_base(c, GB_QWEN3, qwen3_path);
    if (rc == 0) rc = build_base(c, GB_LLAMA, llama_path);
    if (rc == 0) rc = build_base(c, GB_GEMMA3, gemma3_path);
    if (rc == 0) {
        gb_bytes b;
        rc = emit(&c->base[GB_QWEN2], &b, NULL);
        if (rc == 0) {
            rc = write_bytes(out_dir, BAD_GGUF_VALID_BASE, &b);
            free(b.p);
        }
    }
    for (size_t i = 0; rc == 0 && i < bad_gguf_case_count(); i++) {
        gb_model *m = malloc(sizeof *m);
        gb_bytes b = {0};
        if (!m) {
            rc = -1;
            break;
        }
        *m = c->base[GB_QWEN2];
        if (cases[i].fn(c, m, &b) != 0) {
            fprintf(stderr, "bad_gguf: building case '%s' failed\n", cases[i].pub.file);
            rc = -1;
        } else {
            rc = write_bytes(out_dir, cases[i].pub.file, &b);
        }
        free(b.p);
        free(m);
    }
    for (int i = 0; i < GB_N_BASES; i++)
        gguf_close(c->src[i]);
    arena_free(&c->arena);
    free(c);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * The fuzzing seed, written with the library's own gguf_writer.
 * ------------------------------------------------------------------------------------------- */

enum { SEED_EMBD = 32, SEED_HEADS = 2, SEED_KV_HEADS = 1, SEED_FF = 32, SEED_BYTES = 256 };

/* Deterministic contents: Q8_0 blocks with scale 1/64 and codes from a small LCG; float vectors
 * of ones (F32/F16/BF16 by type). */
static syn_status seed_fill(void *user, const char *name, void *dst, uint64_t nbytes) {
    uint32_t type = *(const uint32_t *)user;
    uint32_t state = (uint32_t)strlen(name) * 2654435761u;
    uint8_t *p = dst;
    if (type == GGML_TYPE_Q8_0) {
        for (uint64_t b = 0; b < nbytes / sizeof(block_q8_0); b++) {
            block_q8_0 blk;
            blk.d = syn_k_f32_to_fp16(1.0f / 64.0f);
            for (int j = 0; j < QK8_0; j++) {
                state = state * 1664525u + 1013904223u;
                blk.qs[j] = (int8_t)((int)((state >> 24) % 255) - 127);
            }
            memcpy(p + b * sizeof blk, &blk, sizeof blk);
        }
    } else if (type == GGML_TYPE_F32) {
        for (uint64_t i = 0; i < nbytes / 4; i++) {
            float one = 1.0f;
            memcpy(p + 4 * i, &one, 4);
        }
    } else {
        uint16_t one = type == GGML_TYPE_F16 ? 0x3c00 : 0x3f80; /* 1.0 in fp16 / bf16 */
        for (uint64_t i = 0; i < nbytes / 2; i++)
            memcpy(p + 2 * i, &one, 2);
    }
    return SYN_OK;
}

/* GPT-2's byte-level alphabet: printable bytes stand for themselves, the rest map to U+0100+. */
static void byte_token(int byte, char out[4]) {
    bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xa1 && byte <= 0xac) || byte >= 0xae;
    int cp = byte;
    if (!printable) {
        int n = 0;
        for (int b = 0; b < byte; b++)
            if (!((b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae)) n++;
        cp = 256 + n;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = '\0';
    } else {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        out[2] = '\0';
    }
}

int bad_gguf_write_seed(const char *path) {
    static const uint32_t t_f32 = GGML_TYPE_F32, t_f16 = GGML_TYPE_F16, t_bf16 = GGML_TYPE_BF16,
                          t_q8 = GGML_TYPE_Q8_0;
    static const char *const extra[] = {"Ġt",           "he",        "Ġthe", "<|endoftext|>",
                                        "<|im_start|>", "<|im_end|>"};
    static const char *const merges[] = {"Ġ t", "h e", "Ġt he"};
    enum { N_TOKENS = SEED_BYTES + 6 };
    char bytes[SEED_BYTES][4];
    const char *tokens[N_TOKENS];
    int32_t types[N_TOKENS];
    for (int i = 0; i < SEED_BYTES; i++) {
        byte_token(i, bytes[i]);
        tokens[i] = bytes[i];
        types[i] = 1;
    }
    for (int i = 0; i < 6; i++) {
        tokens[SEED_BYTES + i] = extra[i];
        types[SEED_BYTES + i] = i < 3 ? 1 : 3;
    }
    const int kv_dim = SEED_EMBD / SEED_HEADS * SEED_KV_HEADS;
    gguf_writer *w = gguf_writer_new();
    if (!w) return -1;
    syn_status st = SYN_OK;
#define TRY(call)                                                                                  \
    if (st == SYN_OK) st = (call)
    TRY(gguf_writer_set_str(w, "general.architecture", "qwen2"));
    TRY(gguf_writer_set_str(w, "general.name", "fuzz seed"));
    TRY(gguf_writer_set_u32(w, "qwen2.block_count", 1));
    TRY(gguf_writer_set_u32(w, "qwen2.context_length", 256));
    TRY(gguf_writer_set_u32(w, "qwen2.embedding_length", SEED_EMBD));
    TRY(gguf_writer_set_u32(w, "qwen2.feed_forward_length", SEED_FF));
    TRY(gguf_writer_set_u32(w, "qwen2.attention.head_count", SEED_HEADS));
    TRY(gguf_writer_set_u32(w, "qwen2.attention.head_count_kv", SEED_KV_HEADS));
    TRY(gguf_writer_set_f32(w, "qwen2.rope.freq_base", 1000000.0f));
    TRY(gguf_writer_set_f32(w, "qwen2.attention.layer_norm_rms_epsilon", 1e-6f));
    TRY(gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2"));
    TRY(gguf_writer_set_str(w, "tokenizer.ggml.pre", "qwen2"));
    TRY(gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", tokens, N_TOKENS));
    TRY(gguf_writer_set_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, N_TOKENS));
    TRY(gguf_writer_set_str_array(w, "tokenizer.ggml.merges", merges, 3));
    TRY(gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", SEED_BYTES + 3));
    TRY(gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", SEED_BYTES + 5));
    /* A bool, as real files carry: written from a kv (the writer has no bool setter). */
    static const char add_bos[] = "tokenizer.ggml.add_bos_token";
    const gguf_kv add_bos_kv = {.key = {sizeof add_bos - 1, add_bos}, .type = GGUF_TYPE_BOOL};
    TRY(gguf_writer_copy_kv(w, &add_bos_kv));
    const struct {
        const char *name;
        uint64_t ne0, ne1;
        const uint32_t *type;
    } ts[] = {
        {"token_embd.weight", SEED_EMBD, N_TOKENS, &t_q8},
        {"output_norm.weight", SEED_EMBD, 0, &t_f16},
        {"blk.0.attn_norm.weight", SEED_EMBD, 0, &t_f32},
        {"blk.0.attn_q.weight", SEED_EMBD, SEED_EMBD, &t_q8},
        {"blk.0.attn_q.bias", SEED_EMBD, 0, &t_bf16},
        {"blk.0.attn_k.weight", SEED_EMBD, (uint64_t)kv_dim, &t_q8},
        {"blk.0.attn_k.bias", (uint64_t)kv_dim, 0, &t_f32},
        {"blk.0.attn_v.weight", SEED_EMBD, (uint64_t)kv_dim, &t_q8},
        {"blk.0.attn_v.bias", (uint64_t)kv_dim, 0, &t_f32},
        {"blk.0.attn_output.weight", SEED_EMBD, SEED_EMBD, &t_q8},
        {"blk.0.ffn_norm.weight", SEED_EMBD, 0, &t_f32},
        {"blk.0.ffn_gate.weight", SEED_EMBD, SEED_FF, &t_q8},
        {"blk.0.ffn_up.weight", SEED_EMBD, SEED_FF, &t_q8},
        {"blk.0.ffn_down.weight", SEED_FF, SEED_EMBD, &t_q8},
    };
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        uint64_t ne[2] = {ts[i].ne0, ts[i].ne1};
        TRY(gguf_writer_add_tensor(w, ts[i].name, *ts[i].type, ts[i].ne1 ? 2 : 1, ne, seed_fill,
                                   (void *)ts[i].type));
    }
    TRY(gguf_writer_write(w, path));
#undef TRY
    gguf_writer_free(w);
    if (st != SYN_OK) {
        fprintf(stderr, "bad_gguf: writing the seed '%s': %s\n", path, syn_last_error());
        return -1;
    }
    return 0;
}
