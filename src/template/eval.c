/*
 * eval.c: walks a parsed template (ast.h) with Jinja2's semantics: scopes (a for loop or a macro
 * call opens one, an if does not, so `set` inside a loop does not leak out: namespaces exist
 * for that), Undefined (printing it gives "", using it in arithmetic or reading an attribute of
 * it is an error), getattr before getitem for `a.b` and the reverse for `a[b]`, Python's
 * operators, loop variables and macros with `caller`.
 *
 * Every node evaluated counts a step and every loop pass an iteration, so a template that would
 * run away stops at a bound with an error naming it.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synapse_internal.h"
#include "template/render.h"

typedef enum flow { FLOW_NORMAL, FLOW_BREAK, FLOW_CONTINUE, FLOW_ERROR } flow;

static bool step(jt_render *r, int line) {
    if (++r->steps > SYN_TEMPLATE_MAX_STEPS)
        return jt_fail(r, SYN_ERR_UNSUPPORTED, line,
                       "the render takes more than %d steps (the evaluation bound)",
                       SYN_TEMPLATE_MAX_STEPS);
    if (jt_arena_exhausted(r->arena)) return jt_out_of_memory(r);
    return r->status == SYN_OK;
}

/* ---- scopes ---- */

static jt_scope *scope_new(jt_render *r, jt_scope *parent) {
    jt_scope *s = jt_alloc(r->arena, sizeof *s);
    if (!s) return NULL;
    s->vars = jt_dict_new(r->arena).dict;
    s->parent = parent;
    return s;
}

static bool scope_set(jt_render *r, jt_scope *s, jt_value name, jt_value v) {
    return jt_dict_set(r->arena, s->vars, name, v) || jt_out_of_memory(r);
}

static jt_value lookup(jt_render *r, jt_scope *s, jt_value name) {
    for (; s; s = s->parent) {
        jt_value *v = jt_dict_find(s->vars, name);
        if (v) return *v;
    }
    int id;
    if (jt_builtin_named(name, &id)) return (jt_value){.kind = JT_BUILTIN, .builtin = id};
    (void)r;
    return jt_undefined(name.s.p, name.s.n);
}

/* ---- attributes and items ---- */

static bool get_item(jt_render *r, jt_value obj, jt_value key, int line, jt_value *out) {
    if (obj.kind == JT_UNDEFINED) return jt_undefined_error(r, obj, line);
    if (obj.kind == JT_DICT || obj.kind == JT_NAMESPACE) {
        jt_value *v = jt_dict_find(obj.dict, key);
        if (v) {
            *out = *v;
            return true;
        }
    } else if ((obj.kind == JT_LIST || obj.kind == JT_STRING) &&
               (key.kind == JT_INT || key.kind == JT_BOOL)) {
        int64_t i = key.kind == JT_BOOL ? key.b : key.i;
        size_t n = obj.kind == JT_LIST ? obj.list->n : jt_utf8_length(obj.s.p, obj.s.n);
        if (i < 0) i += (int64_t)n;
        if (i >= 0 && (uint64_t)i < n) {
            if (obj.kind == JT_LIST) {
                *out = obj.list->items[i];
            } else {
                size_t from = jt_utf8_offset(obj.s.p, obj.s.n, (size_t)i);
                size_t to = jt_utf8_offset(obj.s.p, obj.s.n, (size_t)i + 1);
                *out = jt_str(obj.s.p + from, to - from);
            }
            return true;
        }
    }
    if (key.kind == JT_STRING) return jt_get_attr(r, obj, key, line, out);
    *out = jt_undefined("", 0);
    return true;
}

static bool slice_bound(jt_render *r, jt_value v, int line, bool *given, int64_t *out) {
    *given = false;
    if (v.kind == JT_NONE || v.kind == JT_UNDEFINED) return true;
    if (v.kind != JT_INT && v.kind != JT_BOOL)
        return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "slice indices must be integers or None");
    *given = true;
    *out = v.kind == JT_BOOL ? v.b : v.i;
    return true;
}

/* Python's slice of n items: the indices start, start+step, ... before stop. */
static bool slice(jt_render *r, jt_value obj, jt_value lo, jt_value hi, jt_value st, int line,
                  jt_value *out) {
    if (obj.kind != JT_LIST && obj.kind != JT_STRING) {
        if (obj.kind == JT_UNDEFINED) return jt_undefined_error(r, obj, line);
        return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "'%s' object is not subscriptable",
                       jt_kind_name(obj));
    }
    bool has_lo, has_hi, has_step;
    int64_t a = 0, b = 0, s = 1;
    if (!slice_bound(r, lo, line, &has_lo, &a) || !slice_bound(r, hi, line, &has_hi, &b) ||
        !slice_bound(r, st, line, &has_step, &s))
        return false;
    if (!has_step) s = 1;
    if (s == 0) return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "slice step cannot be zero");
    int64_t n =
        obj.kind == JT_LIST ? (int64_t)obj.list->n : (int64_t)jt_utf8_length(obj.s.p, obj.s.n);
    if (!has_lo)
        a = s > 0 ? 0 : n - 1;
    else if (a < 0)
        a = a + n < 0 ? (s > 0 ? 0 : -1) : a + n;
    else if (a >= n)
        a = s > 0 ? n : n - 1;
    if (!has_hi)
        b = s > 0 ? n : -1;
    else if (b < 0)
        b = b + n < 0 ? (s > 0 ? 0 : -1) : b + n;
    else if (b >= n)
        b = s > 0 ? n : n - 1;

    if (obj.kind == JT_LIST) {
        *out = jt_list_new(r->arena, 0);
        for (int64_t i = a; s > 0 ? i < b : i > b; i += s)
            if (!jt_list_push(r->arena, out->list, obj.list->items[i])) return jt_out_of_memory(r);
        return true;
    }
    if (s == 1) {
        size_t from = jt_utf8_offset(obj.s.p, obj.s.n, (size_t)a);
        size_t to = b > a ? jt_utf8_offset(obj.s.p, obj.s.n, (size_t)b) : from;
        *out = jt_str(obj.s.p + from, to - from);
        return true;
    }
    jt_buf buf = {.arena = r->arena};
    for (int64_t i = a; s > 0 ? i < b : i > b; i += s) {
        size_t from = jt_utf8_offset(obj.s.p, obj.s.n, (size_t)i);
        size_t to = jt_utf8_offset(obj.s.p, obj.s.n, (size_t)i + 1);
        jt_buf_put(&buf, obj.s.p + from, to - from);
    }
    if (buf.overflow) return jt_out_of_memory(r);
    *out = buf.n ? jt_str(buf.p, buf.n) : jt_str("", 0);
    return true;
}

/* ---- operators ---- */

static bool type_error(jt_render *r, int line, const char *op, jt_value a, jt_value b) {
    if (a.kind == JT_UNDEFINED) return jt_undefined_error(r, a, line);
    if (b.kind == JT_UNDEFINED) return jt_undefined_error(r, b, line);
    return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line,
                   "unsupported operand type(s) for %s: '%s' and '%s'", op, jt_kind_name(a),
                   jt_kind_name(b));
}

static bool repeat(jt_render *r, jt_value seq, int64_t times, int line, jt_value *out) {
    if (times < 0) times = 0;
    if (seq.kind == JT_STRING) {
        if (seq.s.n && (uint64_t)times > SYN_TEMPLATE_MAX_OUTPUT / seq.s.n)
            return jt_fail(r, SYN_ERR_UNSUPPORTED, line,
                           "a repeated string over %zu MiB (the output bound)",
                           SYN_TEMPLATE_MAX_OUTPUT >> 20);
        size_t total = seq.s.n * (size_t)times;
        char *p = jt_alloc(r->arena, total + 1);
        if (!p) return jt_out_of_memory(r);
        if (total) { /* the copy doubles what is there already: log(times) memcpys */
            memcpy(p, seq.s.p, seq.s.n);
            for (size_t have = seq.s.n; have < total; have *= 2)
                memcpy(p + have, p, have < total - have ? have : total - have);
        }
        *out = jt_str(p, total);
        return true;
    }
    if (seq.list->n && (uint64_t)times > SYN_TEMPLATE_MAX_ITERATIONS / seq.list->n)
        return jt_fail(r, SYN_ERR_UNSUPPORTED, line, "a repeated list over %d items",
                       SYN_TEMPLATE_MAX_ITERATIONS);
    *out = jt_list_new(r->arena, 0);
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < seq.list->n; k++)
            if (!jt_list_push(r->arena, out->list, seq.list->items[k])) return jt_out_of_memory(r);
    return true;
}

static bool contains(jt_render *r, jt_value needle, jt_value hay, int line, bool *out) {
    switch (hay.kind) {
    case JT_UNDEFINED: *out = false; return true;
    case JT_STRING:
        if (needle.kind != JT_STRING)
            return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line,
                           "'in <string>' requires string as left operand, not %s",
                           jt_kind_name(needle));
        *out = needle.s.n == 0 ||
               (needle.s.n <= hay.s.n && memmem(hay.s.p, hay.s.n, needle.s.p, needle.s.n));
        return true;
    case JT_LIST:
        *out = false;
        for (size_t i = 0; i < hay.list->n && !*out; i++)
            *out = jt_equal(needle, hay.list->items[i]);
        return true;
    case JT_DICT:
    case JT_NAMESPACE: *out = jt_dict_find(hay.dict, needle) != NULL; return true;
    default:
        return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "argument of type '%s' is not iterable",
                       jt_kind_name(hay));
    }
}

/* s as it joins Markup: escaped (& < > ' ") unless it is Markup itself. */
static void put_maybe_escaped(jt_buf *b, jt_value s, bool escape) {
    if (!escape || s.safe) return jt_buf_put(b, s.s.p, s.s.n);
    for (size_t i = 0; i < s.s.n; i++) {
        switch (s.s.p[i]) {
        case '&': jt_buf_puts(b, "&amp;"); break;
        case '<': jt_buf_puts(b, "&lt;"); break;
        case '>': jt_buf_puts(b, "&gt;"); break;
        case '\'': jt_buf_puts(b, "&#39;"); break;
        case '"': jt_buf_puts(b, "&#34;"); break;
        default: jt_buf_putc(b, s.s.p[i]);
        }
    }
}

static bool arith(jt_render *r, jt_op op, jt_value a, jt_value b, int line, jt_value *out) {
    static const char *const names[] = {"+", "-", "*", "/", "//", "%", "**"};
    if (jt_is_number(a) && jt_is_number(b)) {
        bool floats = a.kind == JT_FLOAT || b.kind == JT_FLOAT || op == JO_DIV;
        if (!floats) {
            int64_t x = a.kind == JT_BOOL ? a.b : a.i, y = b.kind == JT_BOOL ? b.b : b.i;
            int64_t z;
            switch (op) {
            case JO_ADD:
                if (__builtin_add_overflow(x, y, &z)) goto overflow;
                break;
            case JO_SUB:
                if (__builtin_sub_overflow(x, y, &z)) goto overflow;
                break;
            case JO_MUL:
                if (__builtin_mul_overflow(x, y, &z)) goto overflow;
                break;
            case JO_FLOORDIV:
            case JO_MOD:
                if (y == 0)
                    return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line,
                                   "integer division or modulo by zero");
                if (x == INT64_MIN && y == -1) goto overflow;
                z = op == JO_FLOORDIV ? x / y : x % y;
                if (op == JO_FLOORDIV && (x % y != 0) && ((x < 0) != (y < 0))) z--;
                if (op == JO_MOD && z != 0 && ((z < 0) != (y < 0))) z += y;
                break;
            case JO_POW:
                if (y < 0) {
                    *out = jt_float(pow((double)x, (double)y));
                    return true;
                }
                z = 1;
                for (int64_t k = 0; k < y; k++)
                    if (__builtin_mul_overflow(z, x, &z))
                        goto overflow;
                    else if (z == 0 || z == 1)
                        break;
                if (z == 1 && x == -1 && (y & 1)) z = -1;
                break;
            default: return type_error(r, line, "?", a, b);
            }
            *out = jt_int(z);
            return true;
        overflow:
            return jt_fail(r, SYN_ERR_UNSUPPORTED, line, "integer overflow in '%s'",
                           names[op - JO_ADD]);
        }
        double x = jt_as_double(a), y = jt_as_double(b), z;
        switch (op) {
        case JO_ADD: z = x + y; break;
        case JO_SUB: z = x - y; break;
        case JO_MUL: z = x * y; break;
        case JO_DIV:
        case JO_FLOORDIV:
        case JO_MOD:
            if (y == 0) return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "division by zero");
            z = op == JO_DIV ? x / y : op == JO_FLOORDIV ? floor(x / y) : x - y * floor(x / y);
            break;
        case JO_POW: z = pow(x, y); break;
        default: return type_error(r, line, "?", a, b);
        }
        *out = jt_float(z);
        return true;
    }
    if (op == JO_MOD && a.kind == JT_STRING) return jt_percent(r, a, b, line, out);
    if (op == JO_ADD && a.kind == JT_STRING && b.kind == JT_STRING) {
        /* Markup + str escapes the str, as markupsafe does; the sum is Markup. */
        bool safe = a.safe || b.safe;
        jt_buf buf = {.arena = r->arena};
        put_maybe_escaped(&buf, a, safe);
        put_maybe_escaped(&buf, b, safe);
        if (buf.overflow) return jt_out_of_memory(r);
        *out = buf.n ? jt_str(buf.p, buf.n) : jt_str("", 0);
        out->safe = safe;
        return true;
    }
    if (op == JO_ADD && a.kind == JT_LIST && b.kind == JT_LIST) {
        *out = jt_list_new(r->arena, a.list->n + b.list->n);
        out->list->tuple = a.list->tuple && b.list->tuple;
        for (size_t i = 0; i < a.list->n; i++)
            if (!jt_list_push(r->arena, out->list, a.list->items[i])) return jt_out_of_memory(r);
        for (size_t i = 0; i < b.list->n; i++)
            if (!jt_list_push(r->arena, out->list, b.list->items[i])) return jt_out_of_memory(r);
        return true;
    }
    if (op == JO_MUL && (a.kind == JT_STRING || a.kind == JT_LIST) &&
        (b.kind == JT_INT || b.kind == JT_BOOL))
        return repeat(r, a, b.kind == JT_BOOL ? b.b : b.i, line, out);
    if (op == JO_MUL && (b.kind == JT_STRING || b.kind == JT_LIST) &&
        (a.kind == JT_INT || a.kind == JT_BOOL))
        return repeat(r, b, a.kind == JT_BOOL ? a.b : a.i, line, out);
    if (op == JO_ADD && a.kind == JT_STRING && b.kind != JT_UNDEFINED)
        return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line,
                       "can only concatenate str (not \"%s\") to str", jt_kind_name(b));
    return type_error(r, line, names[op - JO_ADD], a, b);
}

static bool binary(jt_render *r, const jt_node *n, jt_value a, jt_value b, jt_value *out) {
    switch (n->op) {
    case JO_CONCAT: {
        jt_buf buf = {.arena = r->arena};
        jt_print_str(&buf, a);
        jt_print_str(&buf, b);
        if (buf.overflow) return jt_out_of_memory(r);
        *out = buf.n ? jt_str(buf.p, buf.n) : jt_str("", 0);
        return true;
    }
    case JO_EQ: *out = jt_bool(jt_equal(a, b)); return true;
    case JO_NE: *out = jt_bool(!jt_equal(a, b)); return true;
    case JO_LT:
    case JO_LE:
    case JO_GT:
    case JO_GE: {
        int cmp;
        if (!jt_compare(a, b, &cmp)) {
            static const char *const ops[] = {"<", "<=", ">", ">="};
            if (a.kind == JT_UNDEFINED) return jt_undefined_error(r, a, n->line);
            if (b.kind == JT_UNDEFINED) return jt_undefined_error(r, b, n->line);
            return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, n->line,
                           "'%s' not supported between instances of '%s' and '%s'",
                           ops[n->op - JO_LT], jt_kind_name(a), jt_kind_name(b));
        }
        *out = jt_bool(n->op == JO_LT   ? cmp < 0
                       : n->op == JO_LE ? cmp <= 0
                       : n->op == JO_GT ? cmp > 0
                                        : cmp >= 0);
        return true;
    }
    case JO_IN:
    case JO_NOT_IN: {
        bool found = false;
        if (!contains(r, a, b, n->line, &found)) return false;
        *out = jt_bool(n->op == JO_IN ? found : !found);
        return true;
    }
    default: return arith(r, n->op, a, b, n->line, out);
    }
}

/* ---- expressions ---- */

static bool eval(jt_render *r, const jt_node *n, jt_scope *sc, jt_value *out);

static bool eval_args(jt_render *r, const jt_node *n, jt_scope *sc, jt_args *args) {
    *args = (jt_args){.line = n->line};
    if (n->n_kids == 0) return true;
    args->pos = jt_alloc(r->arena, n->n_kids * sizeof(jt_value));
    args->kw_names = jt_alloc(r->arena, n->n_kids * sizeof(jt_value));
    args->kw_values = jt_alloc(r->arena, n->n_kids * sizeof(jt_value));
    if (!args->pos || !args->kw_names || !args->kw_values) return jt_out_of_memory(r);
    for (size_t i = 0; i < n->n_kids; i++) {
        jt_value v;
        if (!eval(r, n->kids[i], sc, &v)) return false;
        if (n->names[i].s.n) {
            args->kw_names[args->n_kw] = n->names[i];
            args->kw_values[args->n_kw++] = v;
        } else {
            args->pos[args->n_pos++] = v;
        }
    }
    return true;
}

static bool call_value(jt_render *r, jt_value callee, const jt_args *args, int line,
                       jt_value *out) {
    switch (callee.kind) {
    case JT_MACRO: return jt_call_macro(r, callee, args, out);
    case JT_METHOD: return jt_call_method(r, callee.ptr, args, out);
    case JT_BUILTIN: return jt_call_builtin(r, callee.builtin, args, out);
    case JT_UNDEFINED: return jt_undefined_error(r, callee, line);
    default:
        return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "'%s' object is not callable",
                       jt_kind_name(callee));
    }
}

static bool eval_sequence(jt_render *r, const jt_node *n, jt_scope *sc, jt_value *out) {
    if (n->kind == JN_DICT) {
        *out = jt_dict_new(r->arena);
        for (size_t i = 0; i + 1 < n->n_kids; i += 2) {
            jt_value k, v;
            if (!eval(r, n->kids[i], sc, &k) || !eval(r, n->kids[i + 1], sc, &v)) return false;
            if (!jt_dict_set(r->arena, out->dict, k, v)) return jt_out_of_memory(r);
        }
        return true;
    }
    *out = jt_list_new(r->arena, n->n_kids);
    out->list->tuple = n->kind == JN_TUPLE;
    for (size_t i = 0; i < n->n_kids; i++) {
        jt_value v;
        if (!eval(r, n->kids[i], sc, &v)) return false;
        if (!jt_list_push(r->arena, out->list, v)) return jt_out_of_memory(r);
    }
    return true;
}

/* A filter chain; input is the value a block filter feeds the innermost filter. */
static bool eval_filter(jt_render *r, const jt_node *n, jt_scope *sc, const jt_value *input,
                        jt_value *out) {
    jt_value in;
    if (n->a) {
        if (n->a->kind == JN_FILTER ? !eval_filter(r, n->a, sc, input, &in)
                                    : !eval(r, n->a, sc, &in))
            return false;
    } else {
        in = *input;
    }
    jt_args args;
    return eval_args(r, n, sc, &args) && jt_call_filter(r, n->name, in, &args, out);
}

static bool eval(jt_render *r, const jt_node *n, jt_scope *sc, jt_value *out) {
    if (!step(r, n->line)) return false;
    jt_value a, b;
    switch (n->kind) {
    case JN_LITERAL: *out = n->value; return true;
    case JN_NAME: *out = lookup(r, sc, n->name); return true;
    case JN_ATTR: return eval(r, n->a, sc, &a) && jt_get_attr(r, a, n->name, n->line, out);
    case JN_ITEM:
        return eval(r, n->a, sc, &a) && eval(r, n->b, sc, &b) && get_item(r, a, b, n->line, out);
    case JN_SLICE: {
        jt_value parts[3] = {jt_none(), jt_none(), jt_none()};
        const jt_node *nodes[3] = {n->b, n->c, n->d};
        if (!eval(r, n->a, sc, &a)) return false;
        for (int k = 0; k < 3; k++)
            if (nodes[k] && !eval(r, nodes[k], sc, &parts[k])) return false;
        return slice(r, a, parts[0], parts[1], parts[2], n->line, out);
    }
    case JN_CALL: {
        jt_args args;
        return eval(r, n->a, sc, &a) && eval_args(r, n, sc, &args) &&
               call_value(r, a, &args, n->line, out);
    }
    case JN_FILTER: return eval_filter(r, n, sc, NULL, out);
    case JN_TEST: {
        jt_args args;
        bool result;
        if (!eval(r, n->a, sc, &a) || !eval_args(r, n, sc, &args) ||
            !jt_call_test(r, n->name, a, &args, &result))
            return false;
        *out = jt_bool(result != n->negated);
        return true;
    }
    case JN_BINARY:
        return eval(r, n->a, sc, &a) && eval(r, n->b, sc, &b) && binary(r, n, a, b, out);
    case JN_NEG:
    case JN_POS:
        if (!eval(r, n->a, sc, &a)) return false;
        if (!jt_is_number(a)) {
            if (a.kind == JT_UNDEFINED) return jt_undefined_error(r, a, n->line);
            return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, n->line,
                           "bad operand type for unary %c: '%s'", n->kind == JN_NEG ? '-' : '+',
                           jt_kind_name(a));
        }
        if (n->kind == JN_POS)
            *out = a.kind == JT_BOOL ? jt_int(a.b) : a;
        else if (a.kind == JT_FLOAT)
            *out = jt_float(-a.f);
        else
            *out = jt_int(-(a.kind == JT_BOOL ? a.b : a.i));
        return true;
    case JN_NOT:
        if (!eval(r, n->a, sc, &a)) return false;
        *out = jt_bool(!jt_truthy(a));
        return true;
    case JN_AND:
        if (!eval(r, n->a, sc, &a)) return false;
        if (!jt_truthy(a)) {
            *out = a;
            return true;
        }
        return eval(r, n->b, sc, out);
    case JN_OR:
        if (!eval(r, n->a, sc, &a)) return false;
        if (jt_truthy(a)) {
            *out = a;
            return true;
        }
        return eval(r, n->b, sc, out);
    case JN_COND:
        if (!eval(r, n->a, sc, &a)) return false;
        if (jt_truthy(a)) return eval(r, n->b, sc, out);
        if (n->c) return eval(r, n->c, sc, out);
        *out = jt_undefined("", 0);
        return true;
    case JN_LIST:
    case JN_TUPLE:
    case JN_DICT: return eval_sequence(r, n, sc, out);
    default: return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, n->line, "not an expression");
    }
}

/* ---- statements ---- */

static flow exec_body(jt_render *r, jt_node *const *body, size_t n, jt_scope *sc, jt_buf *out);

static bool assign(jt_render *r, jt_scope *sc, const jt_value *names, size_t n_names, jt_value v,
                   int line) {
    if (n_names == 1) return scope_set(r, sc, names[0], v);
    bool ok;
    jt_value items = jt_list_of(r, v, line, &ok);
    if (!ok) return false;
    if (items.list->n != n_names)
        return jt_fail(r, SYN_ERR_INVALID_ARGUMENT, line, "cannot unpack %zu values into %zu names",
                       items.list->n, n_names);
    for (size_t i = 0; i < n_names; i++)
        if (!scope_set(r, sc, names[i], items.list->items[i])) return false;
    return true;
}

static flow exec_for(jt_render *r, const jt_node *n, jt_scope *sc, jt_buf *out) {
    jt_value seq;
    if (!eval(r, n->a, sc, &seq)) return FLOW_ERROR;
    bool ok;
    jt_value all =
        seq.kind == JT_UNDEFINED ? jt_list_new(r->arena, 0) : jt_list_of(r, seq, n->line, &ok);
    if (seq.kind != JT_UNDEFINED && !ok) return FLOW_ERROR;
    jt_scope *inner = scope_new(r, sc);
    if (!inner) return jt_out_of_memory(r), FLOW_ERROR;
    jt_value items = all;
    if (n->b) { /* `for x in xs if cond`: loop.* counts the items kept */
        items = jt_list_new(r->arena, 0);
        for (size_t i = 0; i < all.list->n; i++) {
            jt_value keep;
            if (!assign(r, inner, n->names, n->n_names, all.list->items[i], n->line) ||
                !eval(r, n->b, inner, &keep))
                return FLOW_ERROR;
            if (jt_truthy(keep) && !jt_list_push(r->arena, items.list, all.list->items[i]))
                return jt_out_of_memory(r), FLOW_ERROR;
        }
    }
    jt_loop *loop = jt_alloc(r->arena, sizeof *loop);
    if (!loop) return jt_out_of_memory(r), FLOW_ERROR;
    loop->items = items.list;
    jt_value loop_value = {.kind = JT_LOOP, .ptr = loop};
    for (size_t i = 0; i < items.list->n; i++) {
        if (++r->iterations > SYN_TEMPLATE_MAX_ITERATIONS) {
            jt_fail(r, SYN_ERR_UNSUPPORTED, n->line,
                    "loops run more than %d times (the iteration bound)",
                    SYN_TEMPLATE_MAX_ITERATIONS);
            return FLOW_ERROR;
        }
        /* Each pass starts from the loop's outer scope: a `set` does not carry over. */
        jt_scope *pass = scope_new(r, sc);
        if (!pass) return jt_out_of_memory(r), FLOW_ERROR;
        loop->index0 = i;
        if (!scope_set(r, pass, jt_str("loop", 4), loop_value) ||
            !assign(r, pass, n->names, n->n_names, items.list->items[i], n->line))
            return FLOW_ERROR;
        flow f = exec_body(r, n->kids, n->n_kids, pass, out);
        if (f == FLOW_ERROR) return f;
        if (f == FLOW_BREAK) break;
    }
    if (items.list->n == 0) return exec_body(r, n->kids2, n->n_kids2, sc, out);
    return FLOW_NORMAL;
}

static jt_value render_to_string(jt_render *r, jt_node *const *body, size_t n, jt_scope *sc,
                                 flow *f) {
    jt_buf buf = {.arena = r->arena, .max = SYN_TEMPLATE_MAX_OUTPUT};
    *f = exec_body(r, body, n, sc, &buf);
    if (buf.overflow && *f != FLOW_ERROR) {
        jt_fail(r, SYN_ERR_UNSUPPORTED, 0, "a block renders more than %zu MiB (the output bound)",
                SYN_TEMPLATE_MAX_OUTPUT >> 20);
        *f = FLOW_ERROR;
    }
    return buf.n ? jt_str(buf.p, buf.n) : jt_str("", 0);
}

bool jt_call_macro(jt_render *r, jt_value macro, const jt_args *args, jt_value *out) {
    const jt_macro *m = macro.ptr;
    const jt_node *def = m->def;
    if (r->call_depth >= SYN_TEMPLATE_MAX_CALL_DEPTH)
        return jt_fail(r, SYN_ERR_UNSUPPORTED, def->line,
                       "macros call each other deeper than %d (the recursion bound)",
                       SYN_TEMPLATE_MAX_CALL_DEPTH);
    jt_scope *sc = scope_new(r, m->closure);
    if (!sc) return jt_out_of_memory(r);
    jt_value varargs = jt_list_new(r->arena, 0);
    varargs.list->tuple = true;
    jt_value kwargs = jt_dict_new(r->arena);
    for (size_t i = 0; i < args->n_pos; i++) {
        if (i < def->n_names) {
            if (!scope_set(r, sc, def->names[i], args->pos[i])) return false;
        } else if (!jt_list_push(r->arena, varargs.list, args->pos[i])) {
            return jt_out_of_memory(r);
        }
    }
    for (size_t k = 0; k < args->n_kw; k++) {
        bool is_param = false;
        for (size_t i = 0; i < def->n_names; i++)
            if (jt_equal(def->names[i], args->kw_names[k])) is_param = true;
        if (is_param ? !scope_set(r, sc, args->kw_names[k], args->kw_values[k])
                     : !jt_dict_set(r->arena, kwargs.dict, args->kw_names[k], args->kw_values[k]))
            return jt_out_of_memory(r);
    }
    for (size_t i = 0; i < def->n_names; i++) {
        if (jt_dict_find(sc->vars, def->names[i])) continue;
        jt_value v = jt_undefined(def->names[i].s.p, def->names[i].s.n);
        if (def->kids2[i] && !eval(r, def->kids2[i], sc, &v)) return false;
        if (!scope_set(r, sc, def->names[i], v)) return false;
    }
    if (!scope_set(r, sc, jt_str("varargs", 7), varargs) ||
        !scope_set(r, sc, jt_str("kwargs", 6), kwargs))
        return false;
    if (m->caller.kind == JT_MACRO && !scope_set(r, sc, jt_str("caller", 6), m->caller))
        return false;
    r->call_depth++;
    flow f;
    *out = render_to_string(r, def->kids, def->n_kids, sc, &f);
    r->call_depth--;
    return f != FLOW_ERROR;
}

static bool new_macro(jt_render *r, const jt_node *def, jt_scope *closure, jt_value caller,
                      jt_value *out) {
    jt_macro *m = jt_alloc(r->arena, sizeof *m);
    if (!m) return jt_out_of_memory(r);
    *m = (jt_macro){def, closure, caller};
    *out = (jt_value){.kind = JT_MACRO, .ptr = m};
    return true;
}

static flow exec_call_block(jt_render *r, const jt_node *n, jt_scope *sc, jt_buf *out) {
    jt_value caller, callee;
    if (!new_macro(r, n, sc, jt_undefined("", 0), &caller)) return FLOW_ERROR;
    if (!eval(r, n->a->a, sc, &callee)) return FLOW_ERROR;
    if (callee.kind != JT_MACRO) {
        jt_fail(r, SYN_ERR_INVALID_ARGUMENT, n->line, "{%% call %%} needs a macro, not '%s'",
                jt_kind_name(callee));
        return FLOW_ERROR;
    }
    jt_value with_caller;
    const jt_macro *m = callee.ptr;
    if (!new_macro(r, m->def, m->closure, caller, &with_caller)) return FLOW_ERROR;
    jt_args args;
    jt_value result;
    if (!eval_args(r, n->a, sc, &args) || !jt_call_macro(r, with_caller, &args, &result))
        return FLOW_ERROR;
    jt_buf_put(out, result.s.p, result.s.n);
    return FLOW_NORMAL;
}

static flow exec(jt_render *r, const jt_node *n, jt_scope *sc, jt_buf *out) {
    if (!step(r, n->line)) return FLOW_ERROR;
    jt_value v;
    switch (n->kind) {
    case JN_TEXT: jt_buf_put(out, n->value.s.p, n->value.s.n); return FLOW_NORMAL;
    case JN_OUTPUT:
        if (!eval(r, n->a, sc, &v)) return FLOW_ERROR;
        jt_print_str(out, v);
        return FLOW_NORMAL;
    case JN_IF:
        if (!eval(r, n->a, sc, &v)) return FLOW_ERROR;
        return jt_truthy(v) ? exec_body(r, n->kids, n->n_kids, sc, out)
                            : exec_body(r, n->kids2, n->n_kids2, sc, out);
    case JN_FOR: return exec_for(r, n, sc, out);
    case JN_SET:
        if (!eval(r, n->a, sc, &v)) return FLOW_ERROR;
        if (n->name.kind == JT_STRING) { /* set ns.attr */
            jt_value ns = lookup(r, sc, n->names[0]);
            if (ns.kind != JT_NAMESPACE) {
                jt_fail(r, SYN_ERR_INVALID_ARGUMENT, n->line,
                        "cannot assign attribute on non-namespace object");
                return FLOW_ERROR;
            }
            return jt_dict_set(r->arena, ns.dict, n->name, v) ? FLOW_NORMAL
                                                              : (jt_out_of_memory(r), FLOW_ERROR);
        }
        return assign(r, sc, n->names, n->n_names, v, n->line) ? FLOW_NORMAL : FLOW_ERROR;
    case JN_SET_BLOCK: {
        flow f;
        v = render_to_string(r, n->kids, n->n_kids, sc, &f);
        if (f == FLOW_ERROR) return f;
        if (n->b && !eval_filter(r, n->b, sc, &v, &v)) return FLOW_ERROR;
        return scope_set(r, sc, n->names[0], v) ? FLOW_NORMAL : FLOW_ERROR;
    }
    case JN_MACRO:
        if (!new_macro(r, n, sc, jt_undefined("", 0), &v)) return FLOW_ERROR;
        return scope_set(r, sc, n->name, v) ? FLOW_NORMAL : FLOW_ERROR;
    case JN_CALL_BLOCK: return exec_call_block(r, n, sc, out);
    case JN_FILTER_BLOCK: {
        flow f;
        v = render_to_string(r, n->kids, n->n_kids, sc, &f);
        if (f == FLOW_ERROR || !eval_filter(r, n->b, sc, &v, &v)) return FLOW_ERROR;
        jt_print_str(out, v);
        return f;
    }
    case JN_BREAK: return FLOW_BREAK;
    case JN_CONTINUE: return FLOW_CONTINUE;
    case JN_BODY: return exec_body(r, n->kids, n->n_kids, sc, out);
    default: jt_fail(r, SYN_ERR_INVALID_ARGUMENT, n->line, "not a statement"); return FLOW_ERROR;
    }
}

static flow exec_body(jt_render *r, jt_node *const *body, size_t n, jt_scope *sc, jt_buf *out) {
    for (size_t i = 0; i < n; i++) {
        flow f = exec(r, body[i], sc, out);
        if (out->overflow && r->status == SYN_OK)
            jt_fail(r, SYN_ERR_UNSUPPORTED, body[i]->line,
                    "the output passes %zu MiB (the output bound)", SYN_TEMPLATE_MAX_OUTPUT >> 20);
        if (r->status != SYN_OK) return FLOW_ERROR;
        if (f != FLOW_NORMAL) return f;
    }
    return FLOW_NORMAL;
}

syn_status syn_template_render(const syn_template *t, const json_t *vars, int64_t now_unix,
                               char **text, size_t *n_bytes) {
    if (!t || !text || !n_bytes)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_template_render: %s is NULL",
                        !t      ? "template"
                        : !text ? "text"
                                : "n_bytes");
    *text = NULL;
    *n_bytes = 0;
    if (vars && !json_is_object(vars))
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "template: the variables must be an object");
    jt_render r = {.arena = jt_arena_new(), .now_unix = now_unix};
    if (!r.arena) return syn_fail(SYN_ERR_NO_MEMORY, "template: out of memory");
    r.globals = scope_new(&r, NULL);
    jt_value root;
    if (!r.globals || (vars && !jt_from_json(r.arena, vars, &root))) {
        jt_arena_free(r.arena);
        return syn_fail(SYN_ERR_UNSUPPORTED, "template: the variables need more than %zu MiB",
                        SYN_TEMPLATE_MAX_MEMORY >> 20);
    }
    if (vars) r.globals->vars = root.dict;
    jt_buf out = {.arena = r.arena, .max = SYN_TEMPLATE_MAX_OUTPUT};
    exec_body(&r, t->body, t->n_body, r.globals, &out);
    syn_status st = r.status;
    if (st == SYN_OK) {
        char *s = malloc(out.n + 1);
        if (s) {
            if (out.n) memcpy(s, out.p, out.n);
            s[out.n] = '\0';
            *text = s;
            *n_bytes = out.n;
        } else {
            st = syn_fail(SYN_ERR_NO_MEMORY, "template: out of memory");
        }
    } else {
        st = syn_fail(st, "template: %s", r.error);
    }
    jt_arena_free(r.arena);
    return st;
}
