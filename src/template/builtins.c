/*
 * builtins.c: the filters, tests, methods of str/list/dict and the global functions that chat
 * templates call, each with the behaviour of its Jinja2 or Python original (Python's string
 * methods on code points, Jinja2's filters with their keyword arguments and defaults).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

#include "template/render.h"

static bool is(jt_value s, const char *lit) {
    return s.kind == JT_STRING && s.s.n == strlen(lit) && memcmp(s.s.p, lit, s.s.n) == 0;
}

static bool bad_arg(jt_render *r, int line, const char *what, const char *expected, jt_value v) {
    return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "%s expects %s, not '%s'", what, expected,
                   jt_kind_name(v));
}

static jt_value buf_value(const jt_buf *b) { return b->n ? jt_str(b->p, b->n) : jt_str("", 0); }

jt_value jt_list_of(jt_render *r, jt_value v, int line, bool *ok) {
    *ok = true;
    switch (v.kind) {
    case JT_LIST: return v;
    case JT_UNDEFINED: return jt_list_new(r->arena, 0);
    case JT_DICT:
    case JT_NAMESPACE: {
        jt_value l = jt_list_new(r->arena, v.dict->n);
        for (size_t i = 0; i < v.dict->n; i++)
            if (!jt_list_push(r->arena, l.list, v.dict->entries[i].key)) *ok = jt_out_of_memory(r);
        return l;
    }
    case JT_STRING: {
        jt_value l = jt_list_new(r->arena, v.s.n);
        size_t n = jt_utf8_length(v.s.p, v.s.n);
        for (size_t i = 0, at = 0; i < n; i++) {
            size_t next = jt_utf8_offset(v.s.p, v.s.n, i + 1);
            if (!jt_list_push(r->arena, l.list, jt_str(v.s.p + at, next - at)))
                *ok = jt_out_of_memory(r);
            at = next;
        }
        return l;
    }
    default:
        *ok = jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "'%s' object is not iterable",
                      jt_kind_name(v));
        return jt_list_new(r->arena, 0);
    }
}

/* ---- strings on code points ---- */

static int32_t next_cp(const char *p, size_t n, size_t *i) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t len =
        utf8proc_iterate((const utf8proc_uint8_t *)p + *i, (utf8proc_ssize_t)(n - *i), &cp);
    if (len <= 0) {
        cp = (unsigned char)p[*i];
        len = 1;
    }
    *i += (size_t)len;
    return cp;
}

static void put_cp(jt_buf *b, int32_t cp) {
    utf8proc_uint8_t s[4];
    utf8proc_ssize_t len = utf8proc_encode_char(cp, s);
    jt_buf_put(b, (const char *)s, (size_t)(len > 0 ? len : 0));
}

static bool is_space_cp(int32_t c) {
    if (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f) || c == 0x85) return true;
    utf8proc_category_t cat = utf8proc_category(c);
    return cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL ||
           cat == UTF8PROC_CATEGORY_ZP;
}

static bool cp_in(int32_t c, jt_value chars) {
    for (size_t i = 0; i < chars.s.n;)
        if (next_cp(chars.s.p, chars.s.n, &i) == c) return true;
    return false;
}

/* str.strip / lstrip / rstrip: chars is a string of code points, or none for whitespace. */
static jt_value strip(jt_value s, const jt_value *chars, bool left, bool right) {
    bool by_chars = chars && chars->kind == JT_STRING;
    size_t start = 0, end = s.s.n;
    if (left) {
        while (start < end) {
            size_t i = start;
            int32_t c = next_cp(s.s.p, end, &i);
            if (by_chars ? !cp_in(c, *chars) : !is_space_cp(c)) break;
            start = i;
        }
    }
    if (right) {
        while (end > start) {
            size_t back = end - 1;
            while (back > start && ((unsigned char)s.s.p[back] & 0xc0) == 0x80)
                back--;
            size_t i = back;
            int32_t c = next_cp(s.s.p, end, &i);
            if (by_chars ? !cp_in(c, *chars) : !is_space_cp(c)) break;
            end = back;
        }
    }
    return jt_str(s.s.p + start, end - start);
}

typedef enum case_change { CASE_UPPER, CASE_LOWER, CASE_TITLE, CASE_CAPITALIZE } case_change;

static jt_value change_case(jt_render *r, jt_value s, case_change how) {
    jt_buf b = {.arena = r->arena};
    bool prev_cased = false;
    for (size_t i = 0, k = 0; i < s.s.n; k++) {
        int32_t c = next_cp(s.s.p, s.s.n, &i);
        bool upper;
        switch (how) {
        case CASE_UPPER: upper = true; break;
        case CASE_LOWER: upper = false; break;
        case CASE_TITLE: upper = !prev_cased; break;
        default: upper = k == 0; break;
        }
        int32_t changed = upper ? utf8proc_toupper(c) : utf8proc_tolower(c);
        put_cp(&b, changed);
        utf8proc_category_t cat = utf8proc_category(c);
        prev_cased = cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL ||
                     cat == UTF8PROC_CATEGORY_LT;
    }
    if (b.overflow) jt_out_of_memory(r);
    return buf_value(&b);
}

static jt_value replace(jt_render *r, jt_value s, jt_value old, jt_value new, int64_t count) {
    jt_buf b = {.arena = r->arena};
    size_t i = 0;
    int64_t done = 0;
    while (i <= s.s.n && (count < 0 || done < count)) {
        const char *hit;
        if (old.s.n == 0) {
            /* "" matches between every code point */
            jt_buf_put(&b, new.s.p, new.s.n);
            done++;
            if (i == s.s.n) break;
            size_t j = i;
            next_cp(s.s.p, s.s.n, &j);
            jt_buf_put(&b, s.s.p + i, j - i);
            i = j;
            continue;
        }
        hit = memmem(s.s.p + i, s.s.n - i, old.s.p, old.s.n);
        if (!hit) break;
        jt_buf_put(&b, s.s.p + i, (size_t)(hit - s.s.p) - i);
        jt_buf_put(&b, new.s.p, new.s.n);
        i = (size_t)(hit - s.s.p) + old.s.n;
        done++;
    }
    if (i < s.s.n) jt_buf_put(&b, s.s.p + i, s.s.n - i);
    if (b.overflow) jt_out_of_memory(r);
    return buf_value(&b);
}

/* str.split(sep=None, maxsplit=-1). */
static bool split(jt_render *r, jt_value s, const jt_value *sep, int64_t maxsplit, int line,
                  jt_value *out) {
    *out = jt_list_new(r->arena, 0);
    jt_list *l = out->list;
    if (!sep || sep->kind == JT_NONE) {
        size_t i = 0;
        for (;;) {
            while (i < s.s.n) { /* skip whitespace */
                size_t j = i;
                if (!is_space_cp(next_cp(s.s.p, s.s.n, &j))) break;
                i = j;
            }
            if (i >= s.s.n) break;
            size_t start = i;
            if (maxsplit >= 0 && (int64_t)l->n >= maxsplit) {
                jt_value rest = strip(jt_str(s.s.p + start, s.s.n - start), NULL, false, true);
                if (!jt_list_push(r->arena, l, rest)) return jt_out_of_memory(r);
                break;
            }
            while (i < s.s.n) {
                size_t j = i;
                if (is_space_cp(next_cp(s.s.p, s.s.n, &j))) break;
                i = j;
            }
            if (!jt_list_push(r->arena, l, jt_str(s.s.p + start, i - start)))
                return jt_out_of_memory(r);
        }
        return true;
    }
    if (sep->kind != JT_STRING) return bad_arg(r, line, "split()", "a string separator", *sep);
    if (sep->s.n == 0) return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "empty separator");
    size_t i = 0;
    for (;;) {
        const char *hit = maxsplit >= 0 && (int64_t)l->n >= maxsplit
                              ? NULL
                              : memmem(s.s.p + i, s.s.n - i, sep->s.p, sep->s.n);
        size_t end = hit ? (size_t)(hit - s.s.p) : s.s.n;
        if (!jt_list_push(r->arena, l, jt_str(s.s.p + i, end - i))) return jt_out_of_memory(r);
        if (!hit) return true;
        i = end + sep->s.n;
    }
}

static bool affix(jt_value s, jt_value p, bool start) {
    if (p.kind != JT_STRING || p.s.n > s.s.n) return false;
    return memcmp(start ? s.s.p : s.s.p + s.s.n - p.s.n, p.s.p, p.s.n) == 0;
}

static jt_value join(jt_render *r, jt_value items, jt_value sep) {
    jt_buf b = {.arena = r->arena};
    for (size_t i = 0; i < items.list->n; i++) {
        if (i) jt_buf_put(&b, sep.s.p, sep.s.n);
        jt_print_str(&b, items.list->items[i]);
    }
    if (b.overflow) jt_out_of_memory(r);
    return buf_value(&b);
}

/* ---- Python's printf-style formatting: "%s of %d" % (a, b) and |format ---- */

static bool percent_format(jt_render *r, jt_value fmt, const jt_value *args, size_t n_args,
                           int line, jt_value *out) {
    jt_buf b = {.arena = r->arena};
    size_t used = 0;
    for (size_t i = 0; i < fmt.s.n; i++) {
        char c = fmt.s.p[i];
        if (c != '%') {
            jt_buf_putc(&b, c);
            continue;
        }
        if (++i >= fmt.s.n) return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "incomplete format");
        char conv = fmt.s.p[i];
        if (conv == '%') {
            jt_buf_putc(&b, '%');
            continue;
        }
        if (used >= n_args)
            return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line,
                           "not enough arguments for format string");
        jt_value v = args[used++];
        if (conv == 's') {
            jt_print_str(&b, v);
        } else if (conv == 'r') {
            jt_print_repr(&b, v);
        } else if ((conv == 'd' || conv == 'i') && jt_is_number(v)) {
            char num[32];
            snprintf(num, sizeof num, "%lld",
                     (long long)(v.kind == JT_FLOAT  ? (int64_t)v.f
                                 : v.kind == JT_BOOL ? v.b
                                                     : v.i));
            jt_buf_puts(&b, num);
        } else {
            return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line,
                           "format '%%%c' is not supported for '%s'", conv, jt_kind_name(v));
        }
    }
    if (used < n_args)
        return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line,
                       "not all arguments converted during string formatting");
    if (b.overflow) return jt_out_of_memory(r);
    *out = buf_value(&b);
    return true;
}

bool jt_percent(jt_render *r, jt_value fmt, jt_value args, int line, jt_value *out) {
    if (args.kind == JT_LIST && args.list->tuple)
        return percent_format(r, fmt, args.list->items, args.list->n, line, out);
    return percent_format(r, fmt, &args, 1, line, out);
}

/* ---- tests ---- */

static bool is_string(jt_value v) { return v.kind == JT_STRING; }

bool jt_call_test(jt_render *r, jt_value name, jt_value v, const jt_args *args, bool *out) {
    const jt_value *arg = jt_arg(args, 0, NULL);
    if (is(name, "defined"))
        *out = v.kind != JT_UNDEFINED;
    else if (is(name, "undefined"))
        *out = v.kind == JT_UNDEFINED;
    else if (is(name, "none"))
        *out = v.kind == JT_NONE;
    else if (is(name, "string"))
        *out = is_string(v);
    else if (is(name, "mapping"))
        *out = v.kind == JT_DICT;
    else if (is(name, "iterable"))
        *out =
            v.kind == JT_LIST || v.kind == JT_DICT || v.kind == JT_STRING || v.kind == JT_UNDEFINED;
    else if (is(name, "sequence"))
        *out =
            v.kind == JT_LIST || v.kind == JT_DICT || v.kind == JT_STRING || v.kind == JT_UNDEFINED;
    else if (is(name, "number"))
        *out = jt_is_number(v);
    else if (is(name, "integer"))
        *out = v.kind == JT_INT;
    else if (is(name, "float"))
        *out = v.kind == JT_FLOAT;
    else if (is(name, "boolean"))
        *out = v.kind == JT_BOOL;
    else if (is(name, "true"))
        *out = v.kind == JT_BOOL && v.b;
    else if (is(name, "false"))
        *out = v.kind == JT_BOOL && !v.b;
    else if (is(name, "callable"))
        *out = v.kind == JT_MACRO || v.kind == JT_METHOD || v.kind == JT_BUILTIN ||
               v.kind == JT_UNDEFINED;
    else if (is(name, "lower") || is(name, "upper")) {
        if (!is_string(v)) return bad_arg(r, args->line, "the lower/upper test", "a string", v);
        jt_value changed = change_case(r, v, is(name, "lower") ? CASE_LOWER : CASE_UPPER);
        *out = jt_equal(changed, v);
    } else if (is(name, "odd") || is(name, "even") || is(name, "divisibleby")) {
        int64_t d = 2;
        if (is(name, "divisibleby")) {
            if (!arg || arg->kind != JT_INT || arg->i == 0)
                return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, args->line,
                               "divisibleby needs a non-zero integer");
            d = arg->i;
        }
        if (v.kind != JT_INT && v.kind != JT_BOOL)
            return bad_arg(r, args->line, "an odd/even test", "an integer", v);
        int64_t x = v.kind == JT_BOOL ? v.b : v.i;
        int64_t m = x % d;
        *out = is(name, "odd") ? m != 0 : m == 0;
    } else if (is(name, "eq") || is(name, "equalto") || is(name, "==") || is(name, "sameas"))
        *out = arg &&
               (is(name, "sameas") ? v.kind == arg->kind && jt_equal(v, *arg) : jt_equal(v, *arg));
    else if (is(name, "ne") || is(name, "!="))
        *out = !arg || !jt_equal(v, *arg);
    else if (is(name, "lt") || is(name, "le") || is(name, "gt") || is(name, "ge") ||
             is(name, "lessthan") || is(name, "greaterthan")) {
        int cmp;
        if (!arg || !jt_compare(v, *arg, &cmp))
            return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, args->line, "cannot compare '%s'",
                           jt_kind_name(v));
        *out = is(name, "lt") || is(name, "lessthan")      ? cmp < 0
               : is(name, "le")                            ? cmp <= 0
               : is(name, "gt") || is(name, "greaterthan") ? cmp > 0
                                                           : cmp >= 0;
    } else if (is(name, "in")) {
        if (!arg) return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, args->line, "'in' needs a value");
        if (arg->kind == JT_STRING && v.kind == JT_STRING)
            *out = v.s.n == 0 || memmem(arg->s.p, arg->s.n, v.s.p, v.s.n) != NULL;
        else if (arg->kind == JT_LIST) {
            *out = false;
            for (size_t i = 0; i < arg->list->n && !*out; i++)
                *out = jt_equal(v, arg->list->items[i]);
        } else if (arg->kind == JT_DICT)
            *out = jt_dict_find(arg->dict, v) != NULL;
        else
            return bad_arg(r, args->line, "the 'in' test", "a container", *arg);
    } else
        return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, args->line, "no test named '%.*s'",
                       (int)name.s.n, name.s.p);
    return true;
}

/* ---- filters ---- */

static int64_t int_arg(const jt_value *v, int64_t dflt) {
    if (!v) return dflt;
    if (v->kind == JT_INT) return v->i;
    if (v->kind == JT_BOOL) return v->b;
    return dflt;
}

static bool bool_arg(const jt_value *v, bool dflt) { return v ? jt_truthy(*v) : dflt; }

static bool tojson(jt_render *r, jt_value v, const jt_args *args, jt_value *out) {
    const jt_value *ensure_ascii = jt_arg(args, 0, "ensure_ascii");
    const jt_value *indent = jt_arg(args, 1, "indent");
    const jt_value *separators = jt_arg(args, 2, "separators");
    const jt_value *sort_keys = jt_arg(args, 3, "sort_keys");
    jt_json_style style = {bool_arg(ensure_ascii, false), -1, ", ", ": ",
                           bool_arg(sort_keys, false)};
    char *spaces = NULL;
    if (indent && indent->kind != JT_NONE) {
        if (indent->kind != JT_INT || indent->i < 0 || indent->i > 64)
            return bad_arg(r, args->line, "tojson's indent", "an integer 0..64", *indent);
        style.indent = (int)indent->i;
        style.item_sep = ",";
    }
    (void)spaces;
    if (separators && separators->kind != JT_NONE) {
        if (separators->kind != JT_LIST || separators->list->n != 2 ||
            separators->list->items[0].kind != JT_STRING ||
            separators->list->items[1].kind != JT_STRING)
            return bad_arg(r, args->line, "tojson's separators", "two strings", *separators);
        jt_value item =
            jt_str_copy(r->arena, separators->list->items[0].s.p, separators->list->items[0].s.n);
        jt_value key =
            jt_str_copy(r->arena, separators->list->items[1].s.p, separators->list->items[1].s.n);
        style.item_sep = item.s.p;
        style.key_sep = key.s.p;
    }
    jt_buf b = {.arena = r->arena};
    const char *bad = NULL;
    if (!jt_print_json(&b, v, &style, &bad))
        return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, args->line,
                       "Object of type %s is not JSON serializable", bad);
    if (b.overflow) return jt_out_of_memory(r);
    *out = buf_value(&b);
    return true;
}

static jt_value indent(jt_render *r, jt_value s, const jt_args *args) {
    const jt_value *width = jt_arg(args, 0, "width");
    bool first = bool_arg(jt_arg(args, 1, "first"), false);
    bool blank = bool_arg(jt_arg(args, 2, "blank"), false);
    jt_buf pad = {.arena = r->arena};
    if (width && width->kind == JT_STRING)
        jt_buf_put(&pad, width->s.p, width->s.n);
    else
        for (int64_t i = 0, n = int_arg(width, 4); i < n && i < 1024; i++)
            jt_buf_putc(&pad, ' ');
    jt_buf b = {.arena = r->arena};
    if (first) jt_buf_put(&b, pad.p, pad.n);
    /* Lines as Python's splitlines() of s + "\n" gives them. */
    size_t i = 0;
    bool first_line = true;
    while (i < s.s.n) {
        size_t end = i;
        while (end < s.s.n && s.s.p[end] != '\n' && s.s.p[end] != '\r')
            end++;
        bool empty = end == i;
        if (!first_line) {
            jt_buf_putc(&b, '\n');
            if (!empty || blank) jt_buf_put(&b, pad.p, pad.n);
        }
        jt_buf_put(&b, s.s.p + i, end - i);
        first_line = false;
        if (end < s.s.n && s.s.p[end] == '\r' && end + 1 < s.s.n && s.s.p[end + 1] == '\n') end++;
        i = end + 1;
        if (i == s.s.n && end < s.s.n) { /* a trailing break: one more, empty, line */
            jt_buf_putc(&b, '\n');
            if (blank) jt_buf_put(&b, pad.p, pad.n);
        }
    }
    if (b.overflow) jt_out_of_memory(r);
    return buf_value(&b);
}

typedef struct sort_ctx {
    jt_render *r;
    jt_value attribute; /* JT_STRING, or undefined: the item itself */
    bool case_sensitive;
    bool by_value; /* dictsort by='value' */
    bool failed;
} sort_ctx;

static _Thread_local sort_ctx *sorting;

static jt_value sort_key(jt_value v) {
    sort_ctx *c = sorting;
    if (v.kind == JT_LIST && v.list->tuple && v.list->n == 2) v = v.list->items[c->by_value];
    if (c->attribute.kind == JT_STRING) jt_get_attr_path(c->r, v, c->attribute, 0, &v);
    if (!c->case_sensitive && v.kind == JT_STRING) v = change_case(c->r, v, CASE_LOWER);
    return v;
}

static int compare_items(const void *x, const void *y) {
    int cmp = 0;
    if (!jt_compare(sort_key(*(const jt_value *)x), sort_key(*(const jt_value *)y), &cmp))
        sorting->failed = true;
    return cmp;
}

static bool sort_list(jt_render *r, jt_value *items, size_t n, sort_ctx *c, bool reverse,
                      int line) {
    sort_ctx *saved = sorting;
    sorting = c;
    /* qsort is not stable; Python's sort is: break ties by the original position. */
    typedef struct {
        jt_value v;
        size_t pos;
    } tagged;
    tagged *t = jt_alloc(r->arena, (n + 1) * sizeof *t);
    if (!t) return jt_out_of_memory(r);
    for (size_t i = 0; i < n; i++)
        t[i] = (tagged){items[i], i};
    /* insertion sort on the keys: lists in templates are short, and it is stable */
    for (size_t i = 1; i < n; i++) {
        tagged cur = t[i];
        size_t j = i;
        while (j > 0) {
            int cmp = compare_items(&t[j - 1].v, &cur.v);
            if (reverse ? cmp >= 0 : cmp <= 0) break;
            t[j] = t[j - 1];
            j--;
        }
        t[j] = cur;
    }
    for (size_t i = 0; i < n; i++)
        items[i] = t[i].v;
    sorting = saved;
    if (c->failed) return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "the items cannot be ordered");
    return true;
}

static bool copy_list(jt_render *r, jt_value v, int line, jt_value *out) {
    bool ok;
    jt_value l = jt_list_of(r, v, line, &ok);
    if (!ok) return false;
    *out = jt_list_new(r->arena, l.list->n);
    for (size_t i = 0; i < l.list->n; i++)
        if (!jt_list_push(r->arena, out->list, l.list->items[i])) return jt_out_of_memory(r);
    return true;
}

static bool items_of(jt_render *r, jt_value v, int line, jt_value *out) {
    if (v.kind == JT_UNDEFINED) {
        *out = jt_list_new(r->arena, 0);
        return true;
    }
    if (v.kind != JT_DICT && v.kind != JT_NAMESPACE)
        return bad_arg(r, line, "items", "a mapping", v);
    *out = jt_list_new(r->arena, v.dict->n);
    for (size_t i = 0; i < v.dict->n; i++) {
        jt_value pair = jt_list_new(r->arena, 2);
        pair.list->tuple = true;
        if (!jt_list_push(r->arena, pair.list, v.dict->entries[i].key) ||
            !jt_list_push(r->arena, pair.list, v.dict->entries[i].value) ||
            !jt_list_push(r->arena, out->list, pair))
            return jt_out_of_memory(r);
    }
    return true;
}

/* select / reject / selectattr / rejectattr. */
static bool select_items(jt_render *r, jt_value v, const jt_args *args, bool by_attr, bool keep,
                         jt_value *out) {
    bool ok = true;
    /* Jinja2 selects nothing from a false value (None included) */
    jt_value l = jt_truthy(v) ? jt_list_of(r, v, args->line, &ok) : jt_list_new(r->arena, 0);
    if (!ok) return false;
    size_t first_test_arg = by_attr ? 1 : 0;
    const jt_value *attr = by_attr ? jt_arg(args, 0, NULL) : NULL;
    if (by_attr && (!attr || attr->kind != JT_STRING))
        return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, args->line, "selectattr needs an attribute");
    const jt_value *test = jt_arg(args, first_test_arg, NULL);
    jt_args test_args = {.line = args->line};
    if (test && args->n_pos > first_test_arg + 1) {
        test_args.pos = args->pos + first_test_arg + 1;
        test_args.n_pos = args->n_pos - first_test_arg - 1;
    }
    *out = jt_list_new(r->arena, 0);
    for (size_t i = 0; i < l.list->n; i++) {
        jt_value item = l.list->items[i], subject = item;
        if (attr && !jt_get_attr_path(r, item, *attr, args->line, &subject)) return false;
        bool pass;
        if (test) {
            if (test->kind != JT_STRING)
                return bad_arg(r, args->line, "select", "a test name", *test);
            if (!jt_call_test(r, *test, subject, &test_args, &pass)) return false;
        } else {
            pass = jt_truthy(subject);
        }
        if (pass == keep && !jt_list_push(r->arena, out->list, item)) return jt_out_of_memory(r);
    }
    return true;
}

static bool map_items(jt_render *r, jt_value v, const jt_args *args, jt_value *out) {
    bool ok = true;
    jt_value l = jt_truthy(v) ? jt_list_of(r, v, args->line, &ok) : jt_list_new(r->arena, 0);
    if (!ok) return false;
    const jt_value *attr = jt_arg(args, (size_t)-1, "attribute");
    const jt_value *dflt = jt_arg(args, (size_t)-1, "default");
    const jt_value *filter = attr ? NULL : jt_arg(args, 0, NULL);
    if ((!attr || attr->kind != JT_STRING) && (!filter || filter->kind != JT_STRING))
        return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, args->line,
                       "map needs a filter name or attribute=");
    jt_args rest = {.line = args->line};
    if (filter && args->n_pos > 1) {
        rest.pos = args->pos + 1;
        rest.n_pos = args->n_pos - 1;
    }
    *out = jt_list_new(r->arena, l.list->n);
    for (size_t i = 0; i < l.list->n; i++) {
        jt_value mapped;
        if (attr) {
            if (!jt_get_attr_path(r, l.list->items[i], *attr, args->line, &mapped)) return false;
            if (mapped.kind == JT_UNDEFINED && dflt) mapped = *dflt;
        } else if (!jt_call_filter(r, *filter, l.list->items[i], &rest, &mapped)) {
            return false;
        }
        if (!jt_list_push(r->arena, out->list, mapped)) return jt_out_of_memory(r);
    }
    return true;
}

/* The text of v without surrounding whitespace in buf (NUL-terminated); false when it is empty
 * or too long to be a number. */
static bool number_text(jt_value v, char *buf, size_t cap) {
    jt_value t = strip(v, NULL, true, true);
    if (t.s.n == 0 || t.s.n >= cap) return false;
    memcpy(buf, t.s.p, t.s.n);
    buf[t.s.n] = '\0';
    return true;
}

/* |int and |float: Python's int() / float() of a number or a numeric string, else default. */
static void to_number(jt_value v, const jt_args *args, bool to_float, jt_value *out) {
    const jt_value *dflt = jt_arg(args, 0, "default");
    *out = dflt ? *dflt : to_float ? jt_float(0) : jt_int(0);
    char buf[64], *end;
    if (jt_is_number(v)) {
        if (to_float)
            *out = jt_float(jt_as_double(v));
        else if (v.kind != JT_FLOAT)
            *out = jt_int(v.kind == JT_BOOL ? v.b : v.i);
        else if (isfinite(v.f))
            *out = jt_int((int64_t)v.f);
    } else if (v.kind == JT_STRING && number_text(v, buf, sizeof buf)) {
        long long i = strtoll(buf, &end, 10);
        if (*end == '\0' && !to_float) {
            *out = jt_int(i);
            return;
        }
        double f = strtod(buf, &end);
        if (*end == '\0' && (to_float || isfinite(f)))
            *out = to_float ? jt_float(f) : jt_int((int64_t)f);
    }
}

static bool need_string(jt_render *r, jt_value *v, const char *filter, int line) {
    if (v->kind == JT_STRING) return true;
    if (v->kind == JT_UNDEFINED) {
        *v = jt_str("", 0);
        return true;
    }
    (void)filter;
    (void)line;
    *v = jt_str_of(r, *v);
    return true;
}

bool jt_call_filter(jt_render *r, jt_value name, jt_value v, const jt_args *args, jt_value *out) {
    int line = args->line;
    bool ok;
    if (is(name, "tojson")) return tojson(r, v, args, out);
    if (is(name, "safe") || is(name, "e") || is(name, "escape") || is(name, "forceescape")) {
        /* No autoescaping in chat templates: markup is text. */
        *out = jt_str_of(r, v);
        out->safe = is(name, "safe");
        return true;
    }
    if (is(name, "length") || is(name, "count")) {
        switch (v.kind) {
        case JT_UNDEFINED: *out = jt_int(0); return true;
        case JT_STRING: *out = jt_int((int64_t)jt_utf8_length(v.s.p, v.s.n)); return true;
        case JT_LIST: *out = jt_int((int64_t)v.list->n); return true;
        case JT_DICT:
        case JT_NAMESPACE: *out = jt_int((int64_t)v.dict->n); return true;
        default:
            return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "object of type '%s' has no len()",
                           jt_kind_name(v));
        }
    }
    if (is(name, "default") || is(name, "d")) {
        const jt_value *dflt = jt_arg(args, 0, "default_value");
        bool boolean = bool_arg(jt_arg(args, 1, "boolean"), false);
        bool use = v.kind == JT_UNDEFINED || (boolean && !jt_truthy(v));
        *out = use ? (dflt ? *dflt : jt_str("", 0)) : v;
        return true;
    }
    if (is(name, "string")) {
        *out = v.kind == JT_UNDEFINED ? jt_str("", 0) : jt_str_of(r, v);
        return true;
    }
    if (is(name, "trim")) {
        need_string(r, &v, "trim", line);
        *out = strip(v, jt_arg(args, 0, "chars"), true, true);
        return true;
    }
    if (is(name, "upper") || is(name, "lower") || is(name, "title") || is(name, "capitalize")) {
        need_string(r, &v, "case", line);
        *out = change_case(r, v,
                           is(name, "upper")   ? CASE_UPPER
                           : is(name, "lower") ? CASE_LOWER
                           : is(name, "title") ? CASE_TITLE
                                               : CASE_CAPITALIZE);
        return r->status == SYN_OK;
    }
    if (is(name, "replace")) {
        const jt_value *old = jt_arg(args, 0, "old"), *new = jt_arg(args, 1, "new");
        if (!old || !new || old->kind != JT_STRING || new->kind != JT_STRING)
            return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "replace needs two strings");
        need_string(r, &v, "replace", line);
        *out = replace(r, v, *old, *new, int_arg(jt_arg(args, 2, "count"), -1));
        return r->status == SYN_OK;
    }
    if (is(name, "join")) {
        const jt_value *sep = jt_arg(args, 0, "d");
        const jt_value *attr = jt_arg(args, 1, "attribute");
        jt_value l = jt_list_of(r, v, line, &ok);
        if (!ok) return false;
        if (attr) {
            jt_args map_args = {.kw_names = (jt_value[]){jt_str("attribute", 9)},
                                .kw_values = (jt_value[]){*attr},
                                .n_kw = 1,
                                .line = line};
            if (!map_items(r, l, &map_args, &l)) return false;
        }
        *out = join(r, l, sep && sep->kind == JT_STRING ? *sep : jt_str("", 0));
        return r->status == SYN_OK;
    }
    if (is(name, "list")) return copy_list(r, v, line, out);
    if (is(name, "items")) return items_of(r, v, line, out);
    if (is(name, "first") || is(name, "last")) {
        jt_value l = jt_list_of(r, v, line, &ok);
        if (!ok) return false;
        *out = l.list->n == 0 ? jt_undefined("", 0)
                              : l.list->items[is(name, "first") ? 0 : l.list->n - 1];
        return true;
    }
    if (is(name, "reverse")) {
        if (v.kind == JT_STRING) {
            jt_value chars = jt_list_of(r, v, line, &ok);
            jt_buf b = {.arena = r->arena};
            for (size_t i = chars.list->n; i-- > 0;)
                jt_buf_put(&b, chars.list->items[i].s.p, chars.list->items[i].s.n);
            *out = buf_value(&b);
            return ok;
        }
        if (!copy_list(r, v, line, out)) return false;
        for (size_t i = 0, n = out->list->n; i < n / 2; i++) {
            jt_value t = out->list->items[i];
            out->list->items[i] = out->list->items[n - 1 - i];
            out->list->items[n - 1 - i] = t;
        }
        return true;
    }
    if (is(name, "sort") || is(name, "dictsort")) {
        bool dict = is(name, "dictsort");
        if (dict ? !items_of(r, v, line, out) : !copy_list(r, v, line, out)) return false;
        const jt_value *attribute = dict ? NULL : jt_arg(args, 2, "attribute");
        const jt_value *by = dict ? jt_arg(args, 1, "by") : NULL;
        sort_ctx c = {r, attribute ? *attribute : jt_undefined("", 0),
                      bool_arg(jt_arg(args, dict ? 0 : 1, "case_sensitive"), false),
                      by && is(*by, "value"), false};
        if (!dict) c.by_value = false;
        bool reverse = bool_arg(jt_arg(args, dict ? 2 : 0, "reverse"), false);
        if (!dict) {
            /* a plain list sorts its items, not (key, value) pairs */
            for (size_t i = 0; i < out->list->n; i++)
                if (out->list->items[i].kind == JT_LIST && out->list->items[i].list->tuple) {
                    c.by_value = false;
                    break;
                }
        }
        return sort_list(r, out->list->items, out->list->n, &c, reverse, line);
    }
    if (is(name, "unique")) {
        jt_value l = jt_list_of(r, v, line, &ok);
        if (!ok) return false;
        *out = jt_list_new(r->arena, 0);
        for (size_t i = 0; i < l.list->n; i++) {
            bool seen = false;
            for (size_t k = 0; k < out->list->n && !seen; k++)
                seen = jt_equal(out->list->items[k], l.list->items[i]);
            if (!seen && !jt_list_push(r->arena, out->list, l.list->items[i]))
                return jt_out_of_memory(r);
        }
        return true;
    }
    if (is(name, "select") || is(name, "reject"))
        return select_items(r, v, args, false, is(name, "select"), out);
    if (is(name, "selectattr") || is(name, "rejectattr"))
        return select_items(r, v, args, true, is(name, "selectattr"), out);
    if (is(name, "map")) return map_items(r, v, args, out);
    if (is(name, "indent")) {
        need_string(r, &v, "indent", line);
        *out = indent(r, v, args);
        return r->status == SYN_OK;
    }
    if (is(name, "int") || is(name, "float")) {
        to_number(v, args, is(name, "float"), out);
        return true;
    }
    if (is(name, "abs")) {
        if (!jt_is_number(v)) return bad_arg(r, line, "abs", "a number", v);
        *out =
            v.kind == JT_FLOAT ? jt_float(fabs(v.f)) : jt_int(llabs(v.kind == JT_BOOL ? v.b : v.i));
        return true;
    }
    if (is(name, "round")) {
        if (!jt_is_number(v)) return bad_arg(r, line, "round", "a number", v);
        int64_t precision = int_arg(jt_arg(args, 0, "precision"), 0);
        const jt_value *method = jt_arg(args, 1, "method");
        double x = jt_as_double(v), scale = pow(10.0, (double)precision);
        double y = method && is(*method, "floor")  ? floor(x * scale) / scale
                   : method && is(*method, "ceil") ? ceil(x * scale) / scale
                                                   : nearbyint(x * scale) / scale;
        *out = jt_float(y);
        return true;
    }
    if (is(name, "sum")) {
        jt_value l = jt_list_of(r, v, line, &ok);
        if (!ok) return false;
        const jt_value *attr = jt_arg(args, 0, "attribute");
        const jt_value *start = jt_arg(args, 1, "start");
        jt_value total = start ? *start : jt_int(0);
        for (size_t i = 0; i < l.list->n; i++) {
            jt_value item = l.list->items[i];
            if (attr && attr->kind == JT_STRING && !jt_get_attr_path(r, item, *attr, line, &item))
                return false;
            if (!jt_is_number(item) || !jt_is_number(total))
                return bad_arg(r, line, "sum", "numbers", item);
            total = total.kind == JT_FLOAT || item.kind == JT_FLOAT
                        ? jt_float(jt_as_double(total) + jt_as_double(item))
                        : jt_int((total.kind == JT_BOOL ? total.b : total.i) +
                                 (item.kind == JT_BOOL ? item.b : item.i));
        }
        *out = total;
        return true;
    }
    if (is(name, "min") || is(name, "max")) {
        jt_value l;
        if (!copy_list(r, v, line, &l)) return false;
        if (l.list->n == 0) {
            *out = jt_undefined("", 0);
            return true;
        }
        const jt_value *attribute = jt_arg(args, 1, "attribute");
        sort_ctx c = {r, attribute ? *attribute : jt_undefined("", 0),
                      bool_arg(jt_arg(args, 0, "case_sensitive"), false), false, false};
        if (!sort_list(r, l.list->items, l.list->n, &c, false, line)) return false;
        *out = l.list->items[is(name, "min") ? 0 : l.list->n - 1];
        return true;
    }
    if (is(name, "wordcount")) {
        need_string(r, &v, "wordcount", line);
        jt_value words;
        if (!split(r, v, NULL, -1, line, &words)) return false;
        *out = jt_int((int64_t)words.list->n);
        return true;
    }
    if (is(name, "format")) {
        need_string(r, &v, "format", line);
        return percent_format(r, v, args->pos, args->n_pos, line, out);
    }
    return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "no filter named '%.*s'", (int)name.s.n,
                   name.s.p);
}

/* ---- methods ---- */

static bool str_predicate(jt_value s, int kind) {
    if (s.s.n == 0) return false;
    bool any_cased = false;
    for (size_t i = 0; i < s.s.n;) {
        int32_t c = next_cp(s.s.p, s.s.n, &i);
        utf8proc_category_t cat = utf8proc_category(c);
        switch (kind) {
        case 0:
            if (cat != UTF8PROC_CATEGORY_ND) return false;
            break;
        case 1:
            if (cat < UTF8PROC_CATEGORY_LU || cat > UTF8PROC_CATEGORY_LO) return false;
            break;
        case 2:
            if (!is_space_cp(c)) return false;
            break;
        case 3:
            if (cat == UTF8PROC_CATEGORY_LL) return false;
            any_cased |= cat == UTF8PROC_CATEGORY_LU;
            break;
        default:
            if (cat == UTF8PROC_CATEGORY_LU) return false;
            any_cased |= cat == UTF8PROC_CATEGORY_LL;
        }
    }
    return kind < 3 || any_cased;
}

static bool string_method(jt_render *r, jt_value s, jt_value name, const jt_args *a,
                          jt_value *out) {
    const jt_value *arg0 = jt_arg(a, 0, NULL), *arg1 = jt_arg(a, 1, NULL);
    int line = a->line;
    if (is(name, "upper") || is(name, "lower") || is(name, "title") || is(name, "capitalize")) {
        *out = change_case(r, s,
                           is(name, "upper")   ? CASE_UPPER
                           : is(name, "lower") ? CASE_LOWER
                           : is(name, "title") ? CASE_TITLE
                                               : CASE_CAPITALIZE);
        return r->status == SYN_OK;
    }
    if (is(name, "strip") || is(name, "lstrip") || is(name, "rstrip")) {
        if (arg0 && arg0->kind != JT_STRING && arg0->kind != JT_NONE)
            return bad_arg(r, line, "strip()", "a string", *arg0);
        *out = strip(s, arg0, !is(name, "rstrip"), !is(name, "lstrip"));
        return true;
    }
    if (is(name, "split"))
        return split(r, s, jt_arg(a, 0, "sep"), int_arg(jt_arg(a, 1, "maxsplit"), -1), line, out);
    if (is(name, "startswith") || is(name, "endswith")) {
        if (!arg0)
            return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "%.*s() needs an argument",
                           (int)name.s.n, name.s.p);
        bool start = is(name, "startswith");
        if (arg0->kind == JT_LIST) {
            *out = jt_bool(false);
            for (size_t i = 0; i < arg0->list->n; i++)
                if (affix(s, arg0->list->items[i], start)) *out = jt_bool(true);
            return true;
        }
        if (arg0->kind != JT_STRING) return bad_arg(r, line, "startswith()", "a string", *arg0);
        *out = jt_bool(affix(s, *arg0, start));
        return true;
    }
    if (is(name, "replace")) {
        if (!arg0 || !arg1 || arg0->kind != JT_STRING || arg1->kind != JT_STRING)
            return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "replace() needs two strings");
        *out = replace(r, s, *arg0, *arg1, int_arg(jt_arg(a, 2, NULL), -1));
        return r->status == SYN_OK;
    }
    if (is(name, "find") || is(name, "rfind") || is(name, "count")) {
        if (!arg0 || arg0->kind != JT_STRING)
            return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "%.*s() needs a string",
                           (int)name.s.n, name.s.p);
        int64_t count = 0, found = -1;
        for (size_t i = 0; i + arg0->s.n <= s.s.n;) {
            const char *hit = memmem(s.s.p + i, s.s.n - i, arg0->s.p, arg0->s.n);
            if (!hit) break;
            size_t at = (size_t)(hit - s.s.p);
            if (found < 0 || is(name, "rfind")) found = (int64_t)jt_utf8_length(s.s.p, at);
            count++;
            if (is(name, "find")) break;
            i = at + (arg0->s.n ? arg0->s.n : 1);
        }
        if (arg0->s.n == 0) {
            found = is(name, "rfind") ? (int64_t)jt_utf8_length(s.s.p, s.s.n) : 0;
            count = (int64_t)jt_utf8_length(s.s.p, s.s.n) + 1;
        }
        *out = jt_int(is(name, "count") ? count : found);
        return true;
    }
    if (is(name, "join")) {
        bool ok;
        jt_value l = arg0 ? jt_list_of(r, *arg0, line, &ok) : jt_list_new(r->arena, 0);
        if (!arg0) return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "join() needs a list");
        if (!ok) return false;
        *out = join(r, l, s);
        return r->status == SYN_OK;
    }
    if (is(name, "splitlines")) {
        *out = jt_list_new(r->arena, 0);
        for (size_t i = 0; i < s.s.n;) {
            size_t end = i;
            while (end < s.s.n && s.s.p[end] != '\n' && s.s.p[end] != '\r')
                end++;
            if (!jt_list_push(r->arena, out->list, jt_str(s.s.p + i, end - i)))
                return jt_out_of_memory(r);
            if (end + 1 < s.s.n && s.s.p[end] == '\r' && s.s.p[end + 1] == '\n') end++;
            i = end + 1;
        }
        return true;
    }
    if (is(name, "format"))
        return jt_fail(r, SYN_ERR_UNSUPPORTED, line, "str.format() is not supported");
    static const char *const predicates[] = {"isdigit", "isalpha", "isspace", "isupper", "islower"};
    for (int k = 0; k < 5; k++)
        if (is(name, predicates[k])) {
            *out = jt_bool(str_predicate(s, k));
            return true;
        }
    return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "str has no method '%.*s'", (int)name.s.n,
                   name.s.p);
}

static bool list_method(jt_render *r, jt_value l, jt_value name, const jt_args *a, jt_value *out) {
    const jt_value *arg0 = jt_arg(a, 0, NULL);
    jt_list *list = l.list;
    int line = a->line;
    *out = jt_none();
    if (is(name, "append")) {
        if (!arg0) return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "append() needs a value");
        return jt_list_push(r->arena, list, *arg0) || jt_out_of_memory(r);
    }
    if (is(name, "extend")) {
        bool ok;
        jt_value more = arg0 ? jt_list_of(r, *arg0, line, &ok) : jt_list_new(r->arena, 0);
        if (!arg0 || !ok)
            return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "extend() needs a list");
        size_t n = more.list->n; /* extending a list with itself */
        for (size_t i = 0; i < n; i++)
            if (!jt_list_push(r->arena, list, more.list->items[i])) return jt_out_of_memory(r);
        return true;
    }
    if (is(name, "pop") || is(name, "insert")) {
        bool pop = is(name, "pop");
        int64_t i = arg0 ? int_arg(arg0, 0) : pop ? -1 : 0;
        int64_t n = (int64_t)list->n;
        if (i < 0) i += n;
        if (pop) {
            if (i < 0 || i >= n)
                return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "pop index out of range");
            *out = list->items[i];
            memmove(list->items + i, list->items + i + 1, (size_t)(n - i - 1) * sizeof(jt_value));
            list->n--;
            return true;
        }
        const jt_value *value = jt_arg(a, 1, NULL);
        if (!value) return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "insert() needs a value");
        if (i < 0) i = 0;
        if (i > n) i = n;
        if (!jt_list_push(r->arena, list, *value)) return jt_out_of_memory(r);
        memmove(list->items + i + 1, list->items + i, (size_t)(n - i) * sizeof(jt_value));
        list->items[i] = *value;
        return true;
    }
    if (is(name, "index") || is(name, "count") || is(name, "remove")) {
        if (!arg0)
            return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "%.*s() needs a value", (int)name.s.n,
                           name.s.p);
        int64_t count = 0, first = -1;
        for (size_t i = 0; i < list->n; i++)
            if (jt_equal(list->items[i], *arg0)) {
                if (first < 0) first = (int64_t)i;
                count++;
            }
        if (is(name, "count")) {
            *out = jt_int(count);
            return true;
        }
        if (first < 0)
            return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "the value is not in the list");
        if (is(name, "index")) {
            *out = jt_int(first);
            return true;
        }
        memmove(list->items + first, list->items + first + 1,
                (list->n - (size_t)first - 1) * sizeof(jt_value));
        list->n--;
        return true;
    }
    /* copy */
    return copy_list(r, l, line, out);
}

static bool dict_method(jt_render *r, jt_value d, jt_value name, const jt_args *a, jt_value *out) {
    const jt_value *arg0 = jt_arg(a, 0, NULL), *arg1 = jt_arg(a, 1, NULL);
    int line = a->line;
    bool ok;
    if (is(name, "items")) return items_of(r, d, line, out);
    if (is(name, "keys")) {
        *out = jt_list_of(r, d, line, &ok);
        return ok;
    }
    if (is(name, "values")) {
        *out = jt_list_new(r->arena, d.dict->n);
        for (size_t i = 0; i < d.dict->n; i++)
            if (!jt_list_push(r->arena, out->list, d.dict->entries[i].value))
                return jt_out_of_memory(r);
        return true;
    }
    if (is(name, "get") || is(name, "setdefault")) {
        if (!arg0) return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "get() needs a key");
        jt_value *v = jt_dict_find(d.dict, *arg0);
        *out = v ? *v : arg1 ? *arg1 : jt_none();
        if (!v && is(name, "setdefault") && !jt_dict_set(r->arena, d.dict, *arg0, *out))
            return jt_out_of_memory(r);
        return true;
    }
    if (is(name, "pop")) {
        if (!arg0) return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "pop() needs a key");
        if (jt_dict_remove(d.dict, *arg0, out)) return true;
        if (arg1) {
            *out = *arg1;
            return true;
        }
        return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "pop(): the key is not in the dict");
    }
    if (is(name, "update")) {
        if (arg0 && arg0->kind == JT_DICT)
            for (size_t i = 0; i < arg0->dict->n; i++)
                if (!jt_dict_set(r->arena, d.dict, arg0->dict->entries[i].key,
                                 arg0->dict->entries[i].value))
                    return jt_out_of_memory(r);
        for (size_t i = 0; i < a->n_kw; i++)
            if (!jt_dict_set(r->arena, d.dict, a->kw_names[i], a->kw_values[i]))
                return jt_out_of_memory(r);
        *out = jt_none();
        return true;
    }
    /* copy */
    *out = jt_dict_new(r->arena);
    for (size_t i = 0; i < d.dict->n; i++)
        if (!jt_dict_set(r->arena, out->dict, d.dict->entries[i].key, d.dict->entries[i].value))
            return jt_out_of_memory(r);
    return true;
}

bool jt_call_method(jt_render *r, const jt_method *m, const jt_args *args, jt_value *out) {
    switch (m->self.kind) {
    case JT_STRING: return string_method(r, m->self, m->name, args, out);
    case JT_LIST: return list_method(r, m->self, m->name, args, out);
    case JT_DICT: return dict_method(r, m->self, m->name, args, out);
    case JT_LOOP: { /* loop.cycle(a, b, ...) */
        const jt_loop *loop = m->self.ptr;
        if (args->n_pos == 0)
            return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, args->line, "cycle() needs values");
        *out = args->pos[loop->index0 % args->n_pos];
        return true;
    }
    default:
        return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, args->line, "'%s' has no methods",
                       jt_kind_name(m->self));
    }
}

/* ---- global functions ---- */

static const char *const builtin_names[] = {
    [JB_RANGE] = "range",
    [JB_NAMESPACE] = "namespace",
    [JB_DICT] = "dict",
    [JB_RAISE_EXCEPTION] = "raise_exception",
    [JB_STRFTIME_NOW] = "strftime_now",
};

bool jt_builtin_named(jt_value name, int *id) {
    for (int i = 0; i < (int)(sizeof builtin_names / sizeof *builtin_names); i++)
        if (builtin_names[i] && is(name, builtin_names[i])) {
            *id = i;
            return true;
        }
    return false;
}

static bool range(jt_render *r, const jt_args *a, jt_value *out) {
    int64_t start = 0, stop, step = 1;
    for (size_t i = 0; i < a->n_pos; i++)
        if (a->pos[i].kind != JT_INT && a->pos[i].kind != JT_BOOL)
            return bad_arg(r, a->line, "range()", "integers", a->pos[i]);
    if (a->n_pos == 1) {
        stop = int_arg(&a->pos[0], 0);
    } else if (a->n_pos == 2 || a->n_pos == 3) {
        start = int_arg(&a->pos[0], 0);
        stop = int_arg(&a->pos[1], 0);
        if (a->n_pos == 3) step = int_arg(&a->pos[2], 1);
    } else {
        return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, a->line, "range() takes 1 to 3 integers");
    }
    if (step == 0) return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, a->line, "range() step is zero");
    double count = step > 0 ? ceil(((double)stop - (double)start) / (double)step)
                            : ceil(((double)start - (double)stop) / (double)-step);
    /* The items a range makes count against the iteration bound as the passes over them do:
     * nested ranges that would loop without end fail at once, not when memory runs out. */
    if (count > 0) r->iterations += (uint64_t)count;
    if (r->iterations > SYN_TEMPLATE_MAX_ITERATIONS)
        return jt_fail(r, SYN_ERR_UNSUPPORTED, a->line,
                       "range() of %.0f items takes the loops past %d passes (the iteration "
                       "bound)",
                       count, SYN_TEMPLATE_MAX_ITERATIONS);
    *out = jt_list_new(r->arena, count > 0 ? (size_t)count : 0);
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
        if (!jt_list_push(r->arena, out->list, jt_int(i))) return jt_out_of_memory(r);
    return true;
}

static bool strftime_now(jt_render *r, const jt_args *a, jt_value *out) {
    const jt_value *fmt = jt_arg(a, 0, NULL);
    if (!fmt || fmt->kind != JT_STRING)
        return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, a->line, "strftime_now() needs a format");
    time_t now = r->now_unix >= 0 ? (time_t)r->now_unix : time(NULL);
    struct tm tm;
    if (r->now_unix >= 0)
        gmtime_r(&now, &tm);
    else
        localtime_r(&now, &tm);
    char f[256], text[512];
    if (fmt->s.n >= sizeof f)
        return jt_fail(r, SYN_ERR_UNSUPPORTED, a->line, "strftime_now(): the format is too long");
    memcpy(f, fmt->s.p, fmt->s.n);
    f[fmt->s.n] = '\0';
    size_t n = strftime(text, sizeof text, f, &tm);
    *out = jt_str_copy(r->arena, text, n);
    return true;
}

bool jt_call_builtin(jt_render *r, int id, const jt_args *a, jt_value *out) {
    switch (id) {
    case JB_RANGE: return range(r, a, out);
    case JB_NAMESPACE:
    case JB_DICT: {
        *out = jt_dict_new(r->arena);
        if (id == JB_NAMESPACE) out->kind = JT_NAMESPACE;
        if (a->n_pos && a->pos[0].kind == JT_DICT)
            for (size_t i = 0; i < a->pos[0].dict->n; i++)
                if (!jt_dict_set(r->arena, out->dict, a->pos[0].dict->entries[i].key,
                                 a->pos[0].dict->entries[i].value))
                    return jt_out_of_memory(r);
        for (size_t i = 0; i < a->n_kw; i++)
            if (!jt_dict_set(r->arena, out->dict, a->kw_names[i], a->kw_values[i]))
                return jt_out_of_memory(r);
        return true;
    }
    case JB_RAISE_EXCEPTION: {
        jt_value msg = a->n_pos ? jt_str_of(r, a->pos[0]) : jt_str("", 0);
        return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, 0, "%.*s", (int)msg.s.n, msg.s.p);
    }
    case JB_STRFTIME_NOW: return strftime_now(r, a, out);
    default: return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, a->line, "not a function");
    }
}
