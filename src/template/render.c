/*
 * render.c: what the evaluator and the builtins share: failing a render with a message, call
 * arguments by position or name, str() of a value, and attribute access as Jinja's getattr does
 * it (a value's methods first, then a dict's keys; the loop's fields).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/render.h"

bool jt_fail(jt_render *r, syn_status status, int line, const char *fmt, ...) {
    if (r->status != SYN_OK) return false;
    r->status = status;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0)
        snprintf(r->error, sizeof r->error, "line %d: %s", line, msg);
    else
        snprintf(r->error, sizeof r->error, "%s", msg);
    return false;
}

bool jt_out_of_memory(jt_render *r) {
    return jt_fail(r, SYN_ERR_UNSUPPORTED, 0,
                   "the render needs more than %zu MiB (the memory bound)",
                   SYN_TEMPLATE_MAX_MEMORY >> 20);
}

bool jt_undefined_error(jt_render *r, jt_value v, int line) {
    if (v.s.n)
        return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "'%.*s' is undefined", (int)v.s.n, v.s.p);
    return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "a value is undefined");
}

const jt_value *jt_arg(const jt_args *a, size_t pos, const char *name) {
    if (name)
        for (size_t i = 0; i < a->n_kw; i++)
            if (a->kw_names[i].s.n == strlen(name) &&
                memcmp(a->kw_names[i].s.p, name, a->kw_names[i].s.n) == 0)
                return &a->kw_values[i];
    if (pos != (size_t)-1 && pos < a->n_pos) return &a->pos[pos];
    return NULL;
}

jt_value jt_str_of(jt_render *r, jt_value v) {
    if (v.kind == JT_STRING) return v;
    jt_buf b = {.arena = r->arena};
    jt_print_str(&b, v);
    return b.n ? jt_str(b.p, b.n) : jt_str("", 0);
}

static bool str_eq(jt_value s, const char *lit) {
    return s.kind == JT_STRING && s.s.n == strlen(lit) && memcmp(s.s.p, lit, s.s.n) == 0;
}

static const char *const string_methods[] = {
    "upper",   "lower",   "strip",      "lstrip",  "rstrip",  "split", "startswith", "endswith",
    "replace", "title",   "capitalize", "find",    "rfind",   "count", "join",       "splitlines",
    "isdigit", "isalpha", "isspace",    "isupper", "islower", "format"};
static const char *const list_methods[] = {"append", "pop",   "extend", "insert",
                                           "index",  "count", "remove", "copy"};
static const char *const dict_methods[] = {"items", "keys",   "values",     "get",
                                           "pop",   "update", "setdefault", "copy"};

static bool in_names(jt_value name, const char *const *names, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (str_eq(name, names[i])) return true;
    return false;
}

#define IN_NAMES(name, table) in_names(name, table, sizeof table / sizeof *table)

bool jt_has_method(jt_value self, jt_value name) {
    switch (self.kind) {
    case JT_STRING: return IN_NAMES(name, string_methods);
    case JT_LIST: return IN_NAMES(name, list_methods);
    case JT_DICT: return IN_NAMES(name, dict_methods);
    default: return false;
    }
}

static bool loop_attr(jt_render *r, const jt_loop *l, jt_value name, jt_value obj, jt_value *out) {
    size_t n = l->items->n, i = l->index0;
    if (str_eq(name, "index"))
        *out = jt_int((int64_t)i + 1);
    else if (str_eq(name, "index0"))
        *out = jt_int((int64_t)i);
    else if (str_eq(name, "revindex"))
        *out = jt_int((int64_t)(n - i));
    else if (str_eq(name, "revindex0"))
        *out = jt_int((int64_t)(n - i - 1));
    else if (str_eq(name, "first"))
        *out = jt_bool(i == 0);
    else if (str_eq(name, "last"))
        *out = jt_bool(i + 1 == n);
    else if (str_eq(name, "length"))
        *out = jt_int((int64_t)n);
    else if (str_eq(name, "depth"))
        *out = jt_int(1);
    else if (str_eq(name, "depth0"))
        *out = jt_int(0);
    else if (str_eq(name, "previtem"))
        *out = i > 0 ? l->items->items[i - 1] : jt_undefined("previtem", 8);
    else if (str_eq(name, "nextitem"))
        *out = i + 1 < n ? l->items->items[i + 1] : jt_undefined("nextitem", 8);
    else if (str_eq(name, "cycle")) {
        jt_method *m = jt_alloc(r->arena, sizeof *m);
        if (!m) return jt_out_of_memory(r);
        *m = (jt_method){obj, name};
        *out = (jt_value){.kind = JT_METHOD, .ptr = m};
    } else
        *out = jt_undefined(name.s.p, name.s.n);
    return true;
}

bool jt_get_attr(jt_render *r, jt_value obj, jt_value name, int line, jt_value *out) {
    if (obj.kind == JT_UNDEFINED) return jt_undefined_error(r, obj, line);
    if (obj.kind == JT_LOOP) return loop_attr(r, obj.ptr, name, obj, out);
    if (name.kind == JT_STRING && obj.kind != JT_NAMESPACE && jt_has_method(obj, name)) {
        jt_method *m = jt_alloc(r->arena, sizeof *m);
        if (!m) return jt_out_of_memory(r);
        *m = (jt_method){obj, name};
        *out = (jt_value){.kind = JT_METHOD, .ptr = m};
        return true;
    }
    if (obj.kind == JT_DICT || obj.kind == JT_NAMESPACE) {
        jt_value *v = jt_dict_find(obj.dict, name);
        *out = v ? *v : jt_undefined(name.s.p, name.s.n);
        return true;
    }
    *out = name.kind == JT_STRING ? jt_undefined(name.s.p, name.s.n) : jt_undefined("", 0);
    return true;
}

bool jt_get_attr_path(jt_render *r, jt_value item, jt_value path, int line, jt_value *out) {
    /* "a.b.0": each part an attribute, a number an index */
    const char *p = path.s.p, *end = p + path.s.n;
    jt_value v = item;
    while (p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        if (!dot) dot = end;
        jt_value part = jt_str(p, (size_t)(dot - p));
        char *num_end;
        char buf[24];
        size_t len = part.s.n < sizeof buf - 1 ? part.s.n : sizeof buf - 1;
        memcpy(buf, part.s.p, len);
        buf[len] = '\0';
        long long index = strtoll(buf, &num_end, 10);
        if (len && *num_end == '\0' && v.kind == JT_LIST) {
            if (index < 0) index += (long long)v.list->n;
            v = index >= 0 && (size_t)index < v.list->n ? v.list->items[index]
                                                        : jt_undefined("", 0);
        } else if (v.kind == JT_DICT) {
            jt_value *found = jt_dict_find(v.dict, part);
            v = found ? *found : jt_undefined(part.s.p, part.s.n);
        } else if (!jt_get_attr(r, v, part, line, &v)) {
            return false;
        }
        p = dot + 1;
    }
    *out = v;
    return true;
}
