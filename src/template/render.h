/*
 * render.h: the state of one render, shared by the evaluator (eval.c) and the filters, tests,
 * methods and global functions (builtins.c).
 */
#ifndef SYN_TEMPLATE_RENDER_H
#define SYN_TEMPLATE_RENDER_H

#include "template/ast.h"

typedef struct jt_scope {
    jt_dict *vars;
    struct jt_scope *parent;
} jt_scope;

typedef struct jt_macro {
    const jt_node *def; /* JN_MACRO, or the JN_CALL_BLOCK whose body is `caller` */
    jt_scope *closure;
    jt_value caller; /* the caller macro a call block passes, or undefined */
} jt_macro;

typedef struct jt_loop {
    jt_list *items;
    size_t index0;
} jt_loop;

typedef struct jt_method {
    jt_value self;
    jt_value name;
} jt_method;

typedef enum jt_builtin_id {
    JB_RANGE,
    JB_NAMESPACE,
    JB_DICT,
    JB_RAISE_EXCEPTION,
    JB_STRFTIME_NOW,
} jt_builtin_id;

typedef struct jt_render {
    jt_arena *arena;
    jt_scope *globals;
    int64_t now_unix;
    uint64_t steps;
    uint64_t iterations;
    int call_depth;
    syn_status status; /* SYN_OK until the render fails */
    char error[512];
} jt_render;

/* Marks the render failed (the first failure wins); returns false for `return jt_fail(...)`. */
bool jt_fail(jt_render *r, syn_status status, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
bool jt_out_of_memory(jt_render *r);
/* The error of using undefined v (its name, when it has one). */
bool jt_undefined_error(jt_render *r, jt_value v, int line);

/* Call arguments, evaluated: positional first, then named. */
typedef struct jt_args {
    jt_value *pos;
    size_t n_pos;
    jt_value *kw_names;
    jt_value *kw_values;
    size_t n_kw;
    int line;
} jt_args;

/* The argument called name, or positional index pos (-1: keyword only); NULL when absent. */
const jt_value *jt_arg(const jt_args *a, size_t pos, const char *name);

bool jt_call_filter(jt_render *r, jt_value name, jt_value input, const jt_args *args,
                    jt_value *out);
bool jt_call_test(jt_render *r, jt_value name, jt_value input, const jt_args *args, bool *out);
/* The attribute of a value that is a method (str.split, dict.items, ...), if it has one. */
bool jt_has_method(jt_value self, jt_value name);
bool jt_call_method(jt_render *r, const jt_method *m, const jt_args *args, jt_value *out);
bool jt_call_builtin(jt_render *r, int id, const jt_args *args, jt_value *out);
/* A global function by name (range, namespace, ...); false if there is none. */
bool jt_builtin_named(jt_value name, int *id);

/* Python's printf-style fmt % args (args a tuple or one value): %s, %r, %d, %i, %%. */
bool jt_percent(jt_render *r, jt_value fmt, jt_value args, int line, jt_value *out);

/* Invokes a macro value with arguments (eval.c). */
bool jt_call_macro(jt_render *r, jt_value macro, const jt_args *args, jt_value *out);
/* The attribute of a value as Jinja's getattr reads it (the loop's fields, a dict's keys). */
bool jt_get_attr(jt_render *r, jt_value obj, jt_value name, int line, jt_value *out);
/* The attribute path "a.b" of item, for map/selectattr/sort(attribute=...). */
bool jt_get_attr_path(jt_render *r, jt_value item, jt_value path, int line, jt_value *out);

jt_value jt_str_of(jt_render *r, jt_value v);                      /* str(v) as a new string */
jt_value jt_list_of(jt_render *r, jt_value v, int line, bool *ok); /* list(v) */

#endif
