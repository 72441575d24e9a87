/*
 * ast.h: a parsed Jinja template, the tree parse.c builds and eval.c walks.
 *
 * One node type serves expressions and statements; which fields a kind uses is said beside it.
 * Every node lives in the template's arena.
 */
#ifndef SYN_TEMPLATE_AST_H
#define SYN_TEMPLATE_AST_H

#include "template/template.h"
#include "template/value.h"

typedef enum jt_node_kind {
    /* expressions */
    JN_LITERAL, /* value */
    JN_NAME,    /* name */
    JN_ATTR,    /* a.name */
    JN_ITEM,    /* a[b] */
    JN_SLICE,   /* a[b:c:d], each of b, c, d may be NULL */
    JN_CALL,    /* a(kids), kid i named names[i] (empty name: positional) */
    JN_FILTER,  /* a | name(kids, names as for calls); a NULL in a filter block */
    JN_TEST,    /* a is [not] name(kids) */
    JN_BINARY,  /* a op b */
    JN_NEG,     /* -a */
    JN_POS,     /* +a */
    JN_NOT,     /* not a */
    JN_AND,     /* a and b */
    JN_OR,      /* a or b */
    JN_COND,    /* b if a else c (c NULL: undefined) */
    JN_LIST,    /* [kids] */
    JN_TUPLE,   /* (kids) */
    JN_DICT,    /* {kids[0]: kids[1], kids[2]: kids[3], ...} */
    /* statements */
    JN_TEXT,         /* value: the text */
    JN_OUTPUT,       /* {{ a }} */
    JN_IF,           /* if a: kids else kids2 */
    JN_FOR,          /* for names in a [if b]: kids else kids2 */
    JN_SET,          /* names = a; attr set: names[0].name = a */
    JN_SET_BLOCK,    /* names[0] = the render of kids, through the filter chain b (NULL: none) */
    JN_MACRO,        /* macro name(names = kids2 defaults, NULL where none): kids */
    JN_CALL_BLOCK,   /* call(names = kids2 defaults) a: kids is caller's body */
    JN_FILTER_BLOCK, /* filter chain b applied to the render of kids */
    JN_BREAK,
    JN_CONTINUE,
    JN_BODY, /* kids in order (a generation block) */
} jt_node_kind;

typedef enum jt_op {
    JO_ADD,
    JO_SUB,
    JO_MUL,
    JO_DIV,
    JO_FLOORDIV,
    JO_MOD,
    JO_POW,
    JO_CONCAT, /* ~ */
    JO_EQ,
    JO_NE,
    JO_LT,
    JO_LE,
    JO_GT,
    JO_GE,
    JO_IN,
    JO_NOT_IN,
} jt_op;

typedef struct jt_node jt_node;
struct jt_node {
    jt_node_kind kind;
    jt_op op;
    int line;
    bool negated; /* JN_TEST: is not */
    jt_node *a, *b, *c, *d;
    jt_node **kids;
    size_t n_kids;
    jt_node **kids2;
    size_t n_kids2;
    jt_value *names; /* strings */
    size_t n_names;
    jt_value name; /* a string */
    jt_value value;
};

struct syn_template {
    jt_arena *arena;
    jt_node **body;
    size_t n_body;
};

#endif
