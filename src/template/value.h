/*
 * value.h: the values a Jinja template computes with, as Python holds them (None, bool, int,
 * float, str, list/tuple, dict in insertion order) plus Jinja's own (undefined, namespace, macro,
 * loop, bound method, global function).
 *
 * Every value of one render lives in one arena (jt_arena) that is freed whole when the render
 * ends: no reference counts. The arena is bounded (SYN_TEMPLATE_MAX_MEMORY): a template that
 * builds without end fails with an error naming the bound instead of exhausting the machine.
 */
#ifndef SYN_TEMPLATE_VALUE_H
#define SYN_TEMPLATE_VALUE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "synapse.h"

#define SYN_TEMPLATE_MAX_MEMORY ((size_t)64 << 20)

typedef struct jt_arena jt_arena;
jt_arena *jt_arena_new(void);
void jt_arena_free(jt_arena *a);
/* Zeroed memory, or NULL once the bound is passed (the arena then remembers it failed). */
void *jt_alloc(jt_arena *a, size_t n);
bool jt_arena_exhausted(const jt_arena *a);

typedef enum jt_kind {
    JT_UNDEFINED, /* s: the name that was not found, for errors */
    JT_NONE,
    JT_BOOL,
    JT_INT,
    JT_FLOAT,
    JT_STRING,
    JT_LIST, /* also tuples (list->tuple) */
    JT_DICT,
    JT_NAMESPACE, /* a dict whose attributes `set ns.x = ...` may assign */
    JT_MACRO,
    JT_LOOP,
    JT_METHOD,  /* a method bound to its object: "abc".upper */
    JT_BUILTIN, /* a global function: range, namespace, raise_exception, ... */
} jt_kind;

typedef struct jt_list jt_list;
typedef struct jt_dict jt_dict;

typedef struct jt_value {
    jt_kind kind;
    bool safe; /* JT_STRING: Markup (|safe), which escapes the plain text added to it */
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *p; /* UTF-8, not NUL-terminated */
            size_t n;
        } s;
        jt_list *list;
        jt_dict *dict; /* JT_DICT, JT_NAMESPACE */
        void *ptr;     /* JT_MACRO, JT_LOOP, JT_METHOD: owned by the evaluator */
        int builtin;   /* JT_BUILTIN */
    };
} jt_value;

struct jt_list {
    jt_value *items;
    size_t n, cap;
    bool tuple;
};

typedef struct jt_entry {
    jt_value key; /* a string, or an int / bool / None from a literal */
    jt_value value;
} jt_entry;

struct jt_dict {
    jt_entry *entries; /* in insertion order */
    size_t n, cap;
};

static inline jt_value jt_undefined(const char *name, size_t n) {
    return (jt_value){.kind = JT_UNDEFINED, .s = {name, n}};
}
static inline jt_value jt_none(void) { return (jt_value){.kind = JT_NONE}; }
static inline jt_value jt_bool(bool b) { return (jt_value){.kind = JT_BOOL, .b = b}; }
static inline jt_value jt_int(int64_t i) { return (jt_value){.kind = JT_INT, .i = i}; }
static inline jt_value jt_float(double f) { return (jt_value){.kind = JT_FLOAT, .f = f}; }
static inline jt_value jt_str(const char *p, size_t n) {
    return (jt_value){.kind = JT_STRING, .s = {p, n}};
}

/* A copy of the bytes in the arena. */
jt_value jt_str_copy(jt_arena *a, const char *p, size_t n);
jt_value jt_list_new(jt_arena *a, size_t cap);
jt_value jt_dict_new(jt_arena *a);
/* Both false when the arena is exhausted. */
bool jt_list_push(jt_arena *a, jt_list *l, jt_value v);
bool jt_dict_set(jt_arena *a, jt_dict *d, jt_value key, jt_value value);
/* NULL when absent. */
jt_value *jt_dict_get(const jt_dict *d, const char *key, size_t n);
jt_value *jt_dict_find(const jt_dict *d, jt_value key);
bool jt_dict_remove(jt_dict *d, jt_value key, jt_value *removed);

/* JSON into values (objects keep their order). False when the arena is exhausted. */
bool jt_from_json(jt_arena *a, const json_t *j, jt_value *out);

bool jt_truthy(jt_value v);
bool jt_equal(jt_value a, jt_value b);
/* Python's ordering of a and b: *cmp < 0, 0 or > 0; false when they cannot be ordered. */
bool jt_compare(jt_value a, jt_value b, int *cmp);
bool jt_is_number(jt_value v); /* bool, int or float, as Python counts them */
double jt_as_double(jt_value v);
const char *jt_kind_name(jt_value v); /* Python's type name, for errors */

/* A growable byte buffer in the arena, bounded by max (0: the arena's bound). */
typedef struct jt_buf {
    jt_arena *arena;
    char *p;
    size_t n, cap, max;
    bool overflow; /* max or the arena's bound was passed: the content is cut */
} jt_buf;
void jt_buf_put(jt_buf *b, const char *p, size_t n);
void jt_buf_puts(jt_buf *b, const char *s);
void jt_buf_putc(jt_buf *b, char c);

/* Python's str(v) (strings as they are, None as "None", lists and dicts as repr) and repr(v). */
void jt_print_str(jt_buf *b, jt_value v);
void jt_print_repr(jt_buf *b, jt_value v);

/* Python's json.dumps(v, ensure_ascii, indent (<0: None), separators, sort_keys). False for a
 * value JSON has no form for (undefined, a macro): *bad_kind names it. */
typedef struct jt_json_style {
    bool ensure_ascii;
    int indent; /* < 0: None (one line) */
    const char *item_sep, *key_sep;
    bool sort_keys;
} jt_json_style;
bool jt_print_json(jt_buf *b, jt_value v, const jt_json_style *style, const char **bad_kind);

/* UTF-8 helpers on code points, as Python's str counts them. */
size_t jt_utf8_length(const char *p, size_t n);
/* Byte offset of code point index cp (clamped to n). */
size_t jt_utf8_offset(const char *p, size_t n, size_t cp);

#endif
