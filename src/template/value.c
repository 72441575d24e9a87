/*
 * value.c: the arena, containers, conversion from JSON, Python's comparisons and Python's
 * printing of values (str, repr and json.dumps), byte for byte as CPython writes them.
 */
#include "template/value.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena ---- */

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} arena_chunk;

struct jt_arena {
    arena_chunk *head;
    size_t total;
    bool exhausted;
};

jt_arena *jt_arena_new(void) { return calloc(1, sizeof(jt_arena)); }

void jt_arena_free(jt_arena *a) {
    if (!a) return;
    for (arena_chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(a);
}

bool jt_arena_exhausted(const jt_arena *a) { return a->exhausted; }

/* Memory from the arena, not zeroed. */
static void *arena_take(jt_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    if (a->exhausted || n > SYN_TEMPLATE_MAX_MEMORY - a->total) {
        a->exhausted = true;
        return NULL;
    }
    arena_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 64 * 1024 ? n : 64 * 1024;
        c = malloc(sizeof *c + cap);
        if (!c) {
            a->exhausted = true;
            return NULL;
        }
        c->cap = cap;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    a->total += n;
    return p;
}

void *jt_alloc(jt_arena *a, size_t n) {
    void *p = arena_take(a, n);
    if (p) memset(p, 0, n);
    return p;
}

/* ---- containers ---- */

jt_value jt_str_copy(jt_arena *a, const char *p, size_t n) {
    char *q = jt_alloc(a, n + 1);
    if (!q) return jt_str("", 0);
    memcpy(q, p, n);
    return jt_str(q, n);
}

jt_value jt_list_new(jt_arena *a, size_t cap) {
    jt_list *l = jt_alloc(a, sizeof *l);
    if (l && cap) {
        l->items = jt_alloc(a, cap * sizeof(jt_value));
        l->cap = l->items ? cap : 0;
    }
    if (!l) {
        static jt_list exhausted_list; /* never written: pushes fail on an exhausted arena */
        l = &exhausted_list;
    }
    return (jt_value){.kind = JT_LIST, .list = l};
}

jt_value jt_dict_new(jt_arena *a) {
    jt_dict *d = jt_alloc(a, sizeof *d);
    if (!d) {
        static jt_dict exhausted_dict;
        d = &exhausted_dict;
    }
    return (jt_value){.kind = JT_DICT, .dict = d};
}

static bool grow(jt_arena *a, void **items, size_t *cap, size_t n, size_t size) {
    if (n < *cap) return true;
    size_t new_cap = *cap ? *cap * 2 : 4;
    void *p = jt_alloc(a, new_cap * size);
    if (!p) return false;
    if (*cap) memcpy(p, *items, *cap * size);
    *items = p;
    *cap = new_cap;
    return true;
}

bool jt_list_push(jt_arena *a, jt_list *l, jt_value v) {
    if (jt_arena_exhausted(a) || !grow(a, (void **)&l->items, &l->cap, l->n, sizeof(jt_value)))
        return false;
    l->items[l->n++] = v;
    return true;
}

jt_value *jt_dict_find(const jt_dict *d, jt_value key) {
    for (size_t i = 0; i < d->n; i++)
        if (jt_equal(d->entries[i].key, key)) return &d->entries[i].value;
    return NULL;
}

jt_value *jt_dict_get(const jt_dict *d, const char *key, size_t n) {
    return jt_dict_find(d, jt_str(key, n));
}

bool jt_dict_set(jt_arena *a, jt_dict *d, jt_value key, jt_value value) {
    jt_value *slot = jt_dict_find(d, key);
    if (slot) {
        *slot = value;
        return true;
    }
    if (jt_arena_exhausted(a) || !grow(a, (void **)&d->entries, &d->cap, d->n, sizeof(jt_entry)))
        return false;
    d->entries[d->n++] = (jt_entry){key, value};
    return true;
}

bool jt_dict_remove(jt_dict *d, jt_value key, jt_value *removed) {
    for (size_t i = 0; i < d->n; i++) {
        if (!jt_equal(d->entries[i].key, key)) continue;
        *removed = d->entries[i].value;
        memmove(d->entries + i, d->entries + i + 1, (d->n - i - 1) * sizeof(jt_entry));
        d->n--;
        return true;
    }
    return false;
}

bool jt_from_json(jt_arena *a, const json_t *j, jt_value *out) {
    switch (json_typeof(j)) {
    case JSON_NULL: *out = jt_none(); return true;
    case JSON_TRUE: *out = jt_bool(true); return true;
    case JSON_FALSE: *out = jt_bool(false); return true;
    case JSON_INTEGER: *out = jt_int(json_integer_value(j)); return true;
    case JSON_REAL: *out = jt_float(json_real_value(j)); return true;
    case JSON_STRING:
        *out =
            jt_str(json_string_value(j), json_string_length(j)); /* the JSON outlives the render */
        return true;
    case JSON_ARRAY: {
        *out = jt_list_new(a, json_array_size(j));
        size_t i;
        json_t *item;
        json_array_foreach(j, i, item) {
            jt_value v;
            if (!jt_from_json(a, item, &v) || !jt_list_push(a, out->list, v)) return false;
        }
        return !jt_arena_exhausted(a);
    }
    case JSON_OBJECT: {
        *out = jt_dict_new(a);
        const char *key;
        size_t key_len;
        json_t *item;
        json_object_keylen_foreach((json_t *)j, key, key_len, item) {
            jt_value v;
            if (!jt_from_json(a, item, &v) || !jt_dict_set(a, out->dict, jt_str(key, key_len), v))
                return false;
        }
        return !jt_arena_exhausted(a);
    }
    }
    return false;
}

/* ---- Python semantics ---- */

bool jt_truthy(jt_value v) {
    switch (v.kind) {
    case JT_UNDEFINED:
    case JT_NONE: return false;
    case JT_BOOL: return v.b;
    case JT_INT: return v.i != 0;
    case JT_FLOAT: return v.f != 0.0;
    case JT_STRING: return v.s.n > 0;
    case JT_LIST: return v.list->n > 0;
    case JT_DICT: return v.dict->n > 0;
    default: return true;
    }
}

bool jt_is_number(jt_value v) {
    return v.kind == JT_BOOL || v.kind == JT_INT || v.kind == JT_FLOAT;
}

double jt_as_double(jt_value v) {
    return v.kind == JT_FLOAT ? v.f : v.kind == JT_INT ? (double)v.i : v.kind == JT_BOOL ? v.b : 0;
}

static int64_t as_int(jt_value v) { return v.kind == JT_BOOL ? v.b : v.i; }

bool jt_equal(jt_value a, jt_value b) {
    if (jt_is_number(a) && jt_is_number(b)) {
        if (a.kind == JT_FLOAT || b.kind == JT_FLOAT) return jt_as_double(a) == jt_as_double(b);
        return as_int(a) == as_int(b);
    }
    if (a.kind != b.kind) {
        /* A namespace compares as the dict it holds. */
        bool dicts = (a.kind == JT_DICT || a.kind == JT_NAMESPACE) &&
                     (b.kind == JT_DICT || b.kind == JT_NAMESPACE);
        if (!dicts) return false;
    }
    switch (a.kind) {
    case JT_UNDEFINED:
    case JT_NONE: return true;
    case JT_STRING: return a.s.n == b.s.n && memcmp(a.s.p, b.s.p, a.s.n) == 0;
    case JT_LIST:
        if (a.list->n != b.list->n) return false;
        for (size_t i = 0; i < a.list->n; i++)
            if (!jt_equal(a.list->items[i], b.list->items[i])) return false;
        return true;
    case JT_DICT:
    case JT_NAMESPACE:
        if (a.dict->n != b.dict->n) return false;
        for (size_t i = 0; i < a.dict->n; i++) {
            jt_value *other = jt_dict_find(b.dict, a.dict->entries[i].key);
            if (!other || !jt_equal(a.dict->entries[i].value, *other)) return false;
        }
        return true;
    case JT_BUILTIN: return a.builtin == b.builtin;
    default: return a.ptr == b.ptr;
    }
}

bool jt_compare(jt_value a, jt_value b, int *cmp) {
    if (jt_is_number(a) && jt_is_number(b)) {
        if (a.kind == JT_FLOAT || b.kind == JT_FLOAT) {
            double x = jt_as_double(a), y = jt_as_double(b);
            *cmp = x < y ? -1 : x > y ? 1 : 0;
        } else {
            int64_t x = as_int(a), y = as_int(b);
            *cmp = x < y ? -1 : x > y ? 1 : 0;
        }
        return true;
    }
    if (a.kind == JT_STRING && b.kind == JT_STRING) {
        /* UTF-8 byte order is code point order. */
        size_t n = a.s.n < b.s.n ? a.s.n : b.s.n;
        int c = memcmp(a.s.p, b.s.p, n);
        *cmp = c != 0 ? c : a.s.n < b.s.n ? -1 : a.s.n > b.s.n ? 1 : 0;
        return true;
    }
    if (a.kind == JT_LIST && b.kind == JT_LIST) {
        size_t n = a.list->n < b.list->n ? a.list->n : b.list->n;
        for (size_t i = 0; i < n; i++) {
            if (jt_equal(a.list->items[i], b.list->items[i])) continue;
            return jt_compare(a.list->items[i], b.list->items[i], cmp);
        }
        *cmp = a.list->n < b.list->n ? -1 : a.list->n > b.list->n ? 1 : 0;
        return true;
    }
    return false;
}

const char *jt_kind_name(jt_value v) {
    switch (v.kind) {
    case JT_UNDEFINED: return "Undefined";
    case JT_NONE: return "NoneType";
    case JT_BOOL: return "bool";
    case JT_INT: return "int";
    case JT_FLOAT: return "float";
    case JT_STRING: return "str";
    case JT_LIST: return v.list->tuple ? "tuple" : "list";
    case JT_DICT: return "dict";
    case JT_NAMESPACE: return "Namespace";
    case JT_MACRO: return "Macro";
    case JT_LOOP: return "LoopContext";
    case JT_METHOD: return "method";
    case JT_BUILTIN: return "function";
    }
    return "object";
}

/* ---- buffers ---- */

void jt_buf_put(jt_buf *b, const char *p, size_t n) {
    if (b->overflow || n == 0) return;
    size_t max = b->max ? b->max : SYN_TEMPLATE_MAX_MEMORY;
    if (n > max - b->n) {
        b->overflow = true;
        return;
    }
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *q = arena_take(b->arena, cap); /* text is written before it is read */
        if (!q) {
            b->overflow = true;
            return;
        }
        if (b->n) memcpy(q, b->p, b->n);
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void jt_buf_puts(jt_buf *b, const char *s) { jt_buf_put(b, s, strlen(s)); }
void jt_buf_putc(jt_buf *b, char c) { jt_buf_put(b, &c, 1); }

/* ---- printing ---- */

/* Python's repr of a float: the shortest digits that read back to it, positional for decimal
 * exponents -4..15 and scientific (1e-05, 1.5e+16) beyond. */
static void print_float(jt_buf *b, double f) {
    if (isnan(f)) return jt_buf_puts(b, "nan");
    if (isinf(f)) return jt_buf_puts(b, f < 0 ? "-inf" : "inf");
    char sci[40];
    for (int prec = 0; prec <= 17; prec++) {
        snprintf(sci, sizeof sci, "%.*e", prec, f);
        if (strtod(sci, NULL) == f) break;
    }
    /* sci is [-]d[.ddd]e[+-]XX: take the digits and the exponent apart. */
    const char *p = sci;
    bool negative = *p == '-';
    if (negative) p++;
    char digits[24];
    size_t nd = 0;
    for (; *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    if (negative) jt_buf_putc(b, '-');
    if (exp < -4 || exp >= 16) {
        jt_buf_putc(b, digits[0]);
        if (nd > 1) {
            jt_buf_putc(b, '.');
            jt_buf_put(b, digits + 1, nd - 1);
        }
        char e[8];
        snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
        jt_buf_puts(b, e);
    } else if (exp < 0) {
        jt_buf_puts(b, "0.");
        for (int i = -1; i > exp; i--)
            jt_buf_putc(b, '0');
        jt_buf_put(b, digits, nd);
    } else {
        size_t whole = (size_t)exp + 1;
        for (size_t i = 0; i < whole; i++)
            jt_buf_putc(b, i < nd ? digits[i] : '0');
        jt_buf_putc(b, '.');
        if (nd > whole)
            jt_buf_put(b, digits + whole, nd - whole);
        else
            jt_buf_putc(b, '0');
    }
}

static void print_int(jt_buf *b, int64_t i) {
    char s[24];
    snprintf(s, sizeof s, "%lld", (long long)i);
    jt_buf_puts(b, s);
}

/* The code point at p (n bytes left) and its length; a bad byte reads as itself (length 1). */
static uint32_t utf8_next(const unsigned char *p, size_t n, size_t *len) {
    uint32_t c = p[0];
    size_t need = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (need <= 1 || need > n) {
        *len = 1;
        return c;
    }
    uint32_t cp = c & (0x7f >> need);
    for (size_t i = 1; i < need; i++) {
        if ((p[i] & 0xc0) != 0x80) {
            *len = 1;
            return c;
        }
        cp = cp << 6 | (p[i] & 0x3f);
    }
    *len = need;
    return cp;
}

size_t jt_utf8_length(const char *p, size_t n) {
    size_t count = 0;
    for (size_t i = 0, len; i < n; i += len, count++)
        utf8_next((const unsigned char *)p + i, n - i, &len);
    return count;
}

size_t jt_utf8_offset(const char *p, size_t n, size_t cp) {
    size_t i = 0, len;
    for (; i < n && cp > 0; i += len, cp--)
        utf8_next((const unsigned char *)p + i, n - i, &len);
    return i;
}

/* Python's repr of a str: single quotes unless the text has ' and no ", backslash escapes for
 * the quote, backslash and control characters; printable non-ASCII kept. */
static void print_repr_string(jt_buf *b, const char *p, size_t n) {
    char quote = memchr(p, '\'', n) && !memchr(p, '"', n) ? '"' : '\'';
    jt_buf_putc(b, quote);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        char esc[8];
        if (c == (unsigned char)quote || c == '\\') {
            jt_buf_putc(b, '\\');
            jt_buf_putc(b, (char)c);
        } else if (c == '\n') {
            jt_buf_puts(b, "\\n");
        } else if (c == '\r') {
            jt_buf_puts(b, "\\r");
        } else if (c == '\t') {
            jt_buf_puts(b, "\\t");
        } else if (c < 0x20 || c == 0x7f) {
            snprintf(esc, sizeof esc, "\\x%02x", c);
            jt_buf_puts(b, esc);
        } else {
            jt_buf_putc(b, (char)c);
        }
    }
    jt_buf_putc(b, quote);
}

static void print_container(jt_buf *b, jt_value v) {
    if (v.kind == JT_LIST) {
        jt_buf_putc(b, v.list->tuple ? '(' : '[');
        for (size_t i = 0; i < v.list->n; i++) {
            if (i) jt_buf_puts(b, ", ");
            jt_print_repr(b, v.list->items[i]);
        }
        if (v.list->tuple && v.list->n == 1) jt_buf_putc(b, ',');
        jt_buf_putc(b, v.list->tuple ? ')' : ']');
        return;
    }
    if (v.kind == JT_NAMESPACE) jt_buf_puts(b, "<Namespace ");
    jt_buf_putc(b, '{');
    for (size_t i = 0; i < v.dict->n; i++) {
        if (i) jt_buf_puts(b, ", ");
        jt_print_repr(b, v.dict->entries[i].key);
        jt_buf_puts(b, ": ");
        jt_print_repr(b, v.dict->entries[i].value);
    }
    jt_buf_putc(b, '}');
    if (v.kind == JT_NAMESPACE) jt_buf_putc(b, '>');
}

void jt_print_repr(jt_buf *b, jt_value v) {
    if (v.kind == JT_STRING) return print_repr_string(b, v.s.p, v.s.n);
    if (v.kind == JT_UNDEFINED) return jt_buf_puts(b, "Undefined");
    jt_print_str(b, v);
}

void jt_print_str(jt_buf *b, jt_value v) {
    switch (v.kind) {
    case JT_UNDEFINED: return;
    case JT_NONE: return jt_buf_puts(b, "None");
    case JT_BOOL: return jt_buf_puts(b, v.b ? "True" : "False");
    case JT_INT: return print_int(b, v.i);
    case JT_FLOAT: return print_float(b, v.f);
    case JT_STRING: return jt_buf_put(b, v.s.p, v.s.n);
    case JT_LIST:
    case JT_DICT:
    case JT_NAMESPACE: return print_container(b, v);
    case JT_MACRO: return jt_buf_puts(b, "<Macro>");
    case JT_LOOP: return jt_buf_puts(b, "<LoopContext>");
    case JT_METHOD: return jt_buf_puts(b, "<bound method>");
    case JT_BUILTIN: return jt_buf_puts(b, "<function>");
    }
}

static void print_json_string(jt_buf *b, const char *p, size_t n, bool ensure_ascii) {
    jt_buf_putc(b, '"');
    for (size_t i = 0, len; i < n; i += len) {
        unsigned char c = (unsigned char)p[i];
        len = 1;
        char esc[16];
        switch (c) {
        case '"': jt_buf_puts(b, "\\\""); continue;
        case '\\': jt_buf_puts(b, "\\\\"); continue;
        case '\n': jt_buf_puts(b, "\\n"); continue;
        case '\r': jt_buf_puts(b, "\\r"); continue;
        case '\t': jt_buf_puts(b, "\\t"); continue;
        case '\b': jt_buf_puts(b, "\\b"); continue;
        case '\f': jt_buf_puts(b, "\\f"); continue;
        default: break;
        }
        if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            jt_buf_puts(b, esc);
        } else if (c < 0x80 || !ensure_ascii) {
            jt_buf_putc(b, (char)c);
        } else {
            uint32_t cp = utf8_next((const unsigned char *)p + i, n - i, &len);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xd800 + (cp >> 10),
                         0xdc00 + (cp & 0x3ff));
            } else {
                snprintf(esc, sizeof esc, "\\u%04x", cp);
            }
            jt_buf_puts(b, esc);
        }
    }
    jt_buf_putc(b, '"');
}

static void json_newline(jt_buf *b, const jt_json_style *style, int depth) {
    jt_buf_putc(b, '\n');
    for (int i = 0; i < style->indent * depth; i++)
        jt_buf_putc(b, ' ');
}

static int compare_keys(const void *x, const void *y) {
    const jt_entry *a = *(const jt_entry *const *)x, *b = *(const jt_entry *const *)y;
    int cmp = 0;
    jt_compare(a->key, b->key, &cmp);
    return cmp;
}

static bool print_json_at(jt_buf *b, jt_value v, const jt_json_style *style, int depth,
                          const char **bad_kind) {
    if (depth > 256) {
        *bad_kind = "a value nested over 256 deep";
        return false;
    }
    switch (v.kind) {
    case JT_NONE: jt_buf_puts(b, "null"); return true;
    case JT_BOOL: jt_buf_puts(b, v.b ? "true" : "false"); return true;
    case JT_INT: print_int(b, v.i); return true;
    case JT_FLOAT:
        if (isnan(v.f))
            jt_buf_puts(b, "NaN");
        else if (isinf(v.f))
            jt_buf_puts(b, v.f < 0 ? "-Infinity" : "Infinity");
        else
            print_float(b, v.f);
        return true;
    case JT_STRING: print_json_string(b, v.s.p, v.s.n, style->ensure_ascii); return true;
    case JT_LIST:
        jt_buf_putc(b, '[');
        for (size_t i = 0; i < v.list->n; i++) {
            if (i) jt_buf_puts(b, style->item_sep);
            if (style->indent >= 0) json_newline(b, style, depth + 1);
            if (!print_json_at(b, v.list->items[i], style, depth + 1, bad_kind)) return false;
        }
        if (style->indent >= 0 && v.list->n) json_newline(b, style, depth);
        jt_buf_putc(b, ']');
        return true;
    case JT_DICT:
    case JT_NAMESPACE: {
        const jt_entry **order = jt_alloc(b->arena, (v.dict->n + 1) * sizeof *order);
        if (!order) return true; /* the arena's bound: the caller sees it */
        for (size_t i = 0; i < v.dict->n; i++)
            order[i] = &v.dict->entries[i];
        if (style->sort_keys) qsort(order, v.dict->n, sizeof *order, compare_keys);
        jt_buf_putc(b, '{');
        for (size_t i = 0; i < v.dict->n; i++) {
            if (i) jt_buf_puts(b, style->item_sep);
            if (style->indent >= 0) json_newline(b, style, depth + 1);
            jt_value key = order[i]->key;
            if (key.kind == JT_STRING) {
                print_json_string(b, key.s.p, key.s.n, style->ensure_ascii);
            } else { /* json.dumps writes other keys as the string of their JSON */
                jt_buf_putc(b, '"');
                if (!print_json_at(b, key, style, depth + 1, bad_kind)) return false;
                jt_buf_putc(b, '"');
            }
            jt_buf_puts(b, style->key_sep);
            if (!print_json_at(b, order[i]->value, style, depth + 1, bad_kind)) return false;
        }
        if (style->indent >= 0 && v.dict->n) json_newline(b, style, depth);
        jt_buf_putc(b, '}');
        return true;
    }
    default: *bad_kind = jt_kind_name(v); return false;
    }
}

bool jt_print_json(jt_buf *b, jt_value v, const jt_json_style *style, const char **bad_kind) {
    return print_json_at(b, v, style, 0, bad_kind);
}
