/* grammar.c: the GBNF parser (desugaring into flat rules) and the bounded pushdown matcher. */
#include "grammar/grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synapse_internal.h"
#include "tokenizer/tokenizer.h"

enum { G_END = 0, G_SET = 1, G_REF = 2, G_ALT = 3 };

typedef struct gelem {
    uint8_t kind;
    uint32_t v; /* G_SET: index into sets; G_REF: rule id */
} gelem;

typedef struct gvec {
    gelem *e;
    size_t n, cap;
} gvec;

typedef struct grule {
    char *name;
    bool defined;
    size_t line, col; /* of the first reference, for "undefined rule" */
    gvec body;        /* alternatives separated by G_ALT */
} grule;

struct syn_grammar {
    gelem *el; /* every alternative's elements, each ended by G_END */
    size_t n_el;
    uint32_t *alt_start; /* index into el of each alternative */
    uint32_t *rule_first_alt, *rule_n_alts;
    uint32_t n_rules, root;
    uint32_t (*sets)[8]; /* 256-bit byte sets */
    int16_t *set_single; /* [n_sets] the byte of a one-byte set, else -1 */
    size_t n_sets;
};

/* ---- parsing ---- */

typedef struct parser {
    const char *text, *p;
    grule *rules;
    size_t n_rules, cap_rules;
    uint32_t (*sets)[8];
    size_t n_sets, cap_sets;
    size_t total; /* elements so far, against SYN_GRAMMAR_MAX_ELEMENTS */
    unsigned gen; /* generated rule counter */
} parser;

static void where(const parser *ps, const char *at, size_t *line, size_t *col) {
    *line = 1;
    *col = 1;
    for (const char *c = ps->text; c < at; c++) {
        if (*c == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

static syn_status perr(const parser *ps, const char *msg) {
    size_t line, col;
    where(ps, ps->p, &line, &col);
    return syn_fail(SYN_ERR_FORMAT, "grammar: line %zu column %zu: %s", line, col, msg);
}

static syn_status vpush(parser *ps, gvec *v, uint8_t kind, uint32_t val) {
    if (++ps->total > SYN_GRAMMAR_MAX_ELEMENTS)
        return syn_fail(SYN_ERR_UNSUPPORTED, "grammar: more than %u elements (the size bound)",
                        SYN_GRAMMAR_MAX_ELEMENTS);
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 8;
        gelem *e = realloc(v->e, cap * sizeof *e);
        if (!e) return syn_fail(SYN_ERR_NO_MEMORY, "grammar: out of memory");
        v->e = e;
        v->cap = cap;
    }
    v->e[v->n++] = (gelem){kind, val};
    return SYN_OK;
}

static syn_status vappend(parser *ps, gvec *v, const gvec *w) {
    for (size_t i = 0; i < w->n; i++) {
        syn_status st = vpush(ps, v, w->e[i].kind, w->e[i].v);
        if (st != SYN_OK) return st;
    }
    return SYN_OK;
}

static syn_status new_set(parser *ps, uint32_t *id) {
    if (ps->n_sets == ps->cap_sets) {
        size_t cap = ps->cap_sets ? ps->cap_sets * 2 : 16;
        uint32_t(*s)[8] = realloc(ps->sets, cap * sizeof *s);
        if (!s) return syn_fail(SYN_ERR_NO_MEMORY, "grammar: out of memory");
        ps->sets = s;
        ps->cap_sets = cap;
    }
    memset(ps->sets[ps->n_sets], 0, sizeof ps->sets[0]);
    *id = (uint32_t)ps->n_sets++;
    return SYN_OK;
}

static void set_range(parser *ps, uint32_t id, unsigned lo, unsigned hi) {
    for (unsigned b = lo; b <= hi; b++)
        ps->sets[id][b >> 5] |= 1u << (b & 31);
}

static syn_status byte_range(parser *ps, gvec *v, unsigned lo, unsigned hi) {
    uint32_t id;
    syn_status st = new_set(ps, &id);
    if (st != SYN_OK) return st;
    set_range(ps, id, lo, hi);
    return vpush(ps, v, G_SET, id);
}

/* Finds or creates the rule called name[0..n). */
static syn_status rule_id(parser *ps, const char *name, size_t n, uint32_t *id) {
    for (size_t i = 0; i < ps->n_rules; i++)
        if (strlen(ps->rules[i].name) == n && !memcmp(ps->rules[i].name, name, n)) {
            *id = (uint32_t)i;
            return SYN_OK;
        }
    if (ps->n_rules == ps->cap_rules) {
        size_t cap = ps->cap_rules ? ps->cap_rules * 2 : 16;
        grule *r = realloc(ps->rules, cap * sizeof *r);
        if (!r) return syn_fail(SYN_ERR_NO_MEMORY, "grammar: out of memory");
        ps->rules = r;
        ps->cap_rules = cap;
    }
    grule *r = &ps->rules[ps->n_rules];
    memset(r, 0, sizeof *r);
    r->name = malloc(n + 1);
    if (!r->name) return syn_fail(SYN_ERR_NO_MEMORY, "grammar: out of memory");
    memcpy(r->name, name, n);
    r->name[n] = 0;
    where(ps, ps->p, &r->line, &r->col);
    *id = (uint32_t)ps->n_rules++;
    return SYN_OK;
}

/* A generated rule; '#' cannot appear in a GBNF name, so it never collides. */
static syn_status gen_rule(parser *ps, uint32_t *id) {
    char name[32];
    int n = snprintf(name, sizeof name, "#%u", ps->gen++);
    syn_status st = rule_id(ps, name, (size_t)n, id);
    if (st == SYN_OK) ps->rules[*id].defined = true;
    return st;
}

static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

/* Skips blanks and comments; newlines too. */
static void skip_space(parser *ps) {
    for (;;) {
        char c = *ps->p;
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
            ps->p++;
        } else if (c == '#') {
            while (*ps->p && *ps->p != '\n')
                ps->p++;
        } else {
            return;
        }
    }
}

/* Whether the text at p starts a rule definition `name ::=`. */
static bool at_definition(const parser *ps) {
    const char *c = ps->p;
    if (!is_name_char(*c)) return false;
    while (is_name_char(*c))
        c++;
    while (*c == ' ' || *c == '\t')
        c++;
    return c[0] == ':' && c[1] == ':' && c[2] == '=';
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Reads one (possibly escaped) character of a literal or class as a code point. */
static syn_status read_char(parser *ps, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)ps->p;
    if (!*s) return perr(ps, "unterminated literal or class");
    if (*s == '\\') {
        char e = (char)s[1];
        int digits = 0;
        switch (e) {
        case 'n': *cp = '\n'; break;
        case 't': *cp = '\t'; break;
        case 'r': *cp = '\r'; break;
        case '\\':
        case '"':
        case '\'':
        case '[':
        case ']':
        case '-':
        case '^': *cp = (uint32_t)e; break;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        default: return perr(ps, "unknown escape");
        }
        ps->p += 2;
        if (digits) {
            uint32_t v = 0;
            for (int i = 0; i < digits; i++) {
                int h = hexval(*ps->p);
                if (h < 0) return perr(ps, "bad hex digits in escape");
                v = v * 16 + (uint32_t)h;
                ps->p++;
            }
            if (v > 0x10FFFF) return perr(ps, "escape beyond U+10FFFF");
            *cp = v;
        }
        return SYN_OK;
    }
    /* UTF-8 in the grammar text itself */
    int len = *s < 0x80             ? 1
              : (*s & 0xE0) == 0xC0 ? 2
              : (*s & 0xF0) == 0xE0 ? 3
              : (*s & 0xF8) == 0xF0 ? 4
                                    : 0;
    if (!len) return perr(ps, "invalid UTF-8");
    uint32_t v = len == 1 ? *s : *s & (0x7Fu >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return perr(ps, "invalid UTF-8");
        v = (v << 6) | (s[i] & 0x3F);
    }
    ps->p += len;
    *cp = v;
    return SYN_OK;
}

static int utf8_encode(uint32_t cp, unsigned char *b) {
    if (cp < 0x80) {
        b[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        b[0] = (unsigned char)(0xC0 | cp >> 6);
        b[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        b[0] = (unsigned char)(0xE0 | cp >> 12);
        b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    b[0] = (unsigned char)(0xF0 | cp >> 18);
    b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    b[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Appends to body, as alternatives, byte sequences matching exactly the UTF-8 encodings of the
 * code points lo..hi: split until every piece differs only in whole trailing-byte ranges. */
static syn_status utf8_ranges(parser *ps, gvec *body, uint32_t lo, uint32_t hi) {
    static const uint32_t len_max[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
    for (int i = 0; i < 3; i++)
        if (lo <= len_max[i] && hi > len_max[i]) {
            syn_status st = utf8_ranges(ps, body, lo, len_max[i]);
            return st != SYN_OK ? st : utf8_ranges(ps, body, len_max[i] + 1, hi);
        }
    unsigned char a[4], b[4];
    int n = utf8_encode(lo, a);
    for (int i = 1; i < n; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if (lo & m) {
                syn_status st = utf8_ranges(ps, body, lo, lo | m);
                return st != SYN_OK ? st : utf8_ranges(ps, body, (lo | m) + 1, hi);
            }
            if ((hi & m) != m) {
                syn_status st = utf8_ranges(ps, body, lo, (hi & ~m) - 1);
                return st != SYN_OK ? st : utf8_ranges(ps, body, hi & ~m, hi);
            }
        }
    }
    utf8_encode(hi, b);
    syn_status st = SYN_OK;
    if (body->n) st = vpush(ps, body, G_ALT, 0);
    for (int i = 0; i < n && st == SYN_OK; i++)
        st = byte_range(ps, body, a[i], b[i]);
    return st;
}

typedef struct cprange {
    uint32_t lo, hi;
} cprange;

static int cmp_range(const void *a, const void *b) {
    const cprange *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Turns a set of code point ranges (sorted and merged here; negated against all scalar values)
 * into one item: a byte set when all of it is ASCII, else a generated rule. */
static syn_status class_item(parser *ps, cprange *r, size_t n, bool negate, gvec *item) {
    if (n) qsort(r, n, sizeof *r, cmp_range);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && r[i].lo <= r[m - 1].hi + 1) {
            if (r[i].hi > r[m - 1].hi) r[m - 1].hi = r[i].hi;
        } else {
            r[m++] = r[i];
        }
    }
    cprange out[260];
    size_t k = 0;
    if (negate) {
        uint32_t next = 0;
        for (size_t i = 0; i < m; i++) {
            if (r[i].lo > next) out[k++] = (cprange){next, r[i].lo - 1};
            next = r[i].hi + 1;
        }
        if (next <= 0x10FFFF) out[k++] = (cprange){next, 0x10FFFF};
    } else {
        memcpy(out, r, m * sizeof *r);
        k = m;
    }
    /* surrogates are not characters: cut D800..DFFF out */
    cprange fin[262];
    size_t f = 0;
    for (size_t i = 0; i < k; i++) {
        if (out[i].hi < 0xD800 || out[i].lo > 0xDFFF) {
            fin[f++] = out[i];
            continue;
        }
        if (out[i].lo < 0xD800) fin[f++] = (cprange){out[i].lo, 0xD7FF};
        if (out[i].hi > 0xDFFF) fin[f++] = (cprange){0xE000, out[i].hi};
    }
    if (!f) return perr(ps, "character class matches nothing");
    if (fin[f - 1].hi < 0x80) {
        uint32_t id;
        syn_status st = new_set(ps, &id);
        if (st != SYN_OK) return st;
        for (size_t i = 0; i < f; i++)
            set_range(ps, id, fin[i].lo, fin[i].hi);
        return vpush(ps, item, G_SET, id);
    }
    uint32_t rid;
    syn_status st = gen_rule(ps, &rid);
    gvec body = {0};
    /* the ASCII part as one set: one alternative (one parser stack) instead of one per range */
    if (st == SYN_OK && fin[0].lo < 0x80) {
        uint32_t id;
        st = new_set(ps, &id);
        for (size_t i = 0; i < f && st == SYN_OK && fin[i].lo < 0x80; i++)
            set_range(ps, id, fin[i].lo, fin[i].hi < 0x80 ? fin[i].hi : 0x7F);
        if (st == SYN_OK) st = vpush(ps, &body, G_SET, id);
    }
    for (size_t i = 0; i < f && st == SYN_OK; i++)
        if (fin[i].hi >= 0x80)
            st = utf8_ranges(ps, &body, fin[i].lo < 0x80 ? 0x80 : fin[i].lo, fin[i].hi);
    ps->rules[rid].body = body;
    return st != SYN_OK ? st : vpush(ps, item, G_REF, rid);
}

static syn_status parse_class(parser *ps, gvec *item) {
    ps->p++; /* '[' */
    bool negate = false;
    if (*ps->p == '^') {
        negate = true;
        ps->p++;
    }
    cprange r[256];
    size_t n = 0;
    while (*ps->p != ']') {
        if (!*ps->p) return perr(ps, "unterminated character class");
        if (n == 256) return perr(ps, "more than 256 ranges in one character class");
        uint32_t lo, hi;
        syn_status st = read_char(ps, &lo);
        if (st != SYN_OK) return st;
        hi = lo;
        if (ps->p[0] == '-' && ps->p[1] != ']' && ps->p[1]) {
            ps->p++;
            st = read_char(ps, &hi);
            if (st != SYN_OK) return st;
            if (hi < lo) return perr(ps, "character range runs backwards");
        }
        r[n++] = (cprange){lo, hi};
    }
    ps->p++;
    if (!n && !negate) return perr(ps, "empty character class");
    return class_item(ps, r, n, negate, item);
}

static syn_status parse_alternatives(parser *ps, uint32_t rid, bool nested);

static syn_status read_uint(parser *ps, unsigned *v) {
    if (*ps->p < '0' || *ps->p > '9') return perr(ps, "expected a number in { }");
    unsigned long x = 0;
    while (*ps->p >= '0' && *ps->p <= '9') {
        x = x * 10 + (unsigned long)(*ps->p++ - '0');
        if (x > SYN_GRAMMAR_MAX_REPEAT) {
            size_t line, col;
            where(ps, ps->p, &line, &col);
            return syn_fail(SYN_ERR_UNSUPPORTED,
                            "grammar: line %zu column %zu: repetition count above %u (the bound)",
                            line, col, SYN_GRAMMAR_MAX_REPEAT);
        }
    }
    *v = (unsigned)x;
    return SYN_OK;
}

/* Appends item{min,max} (max UINT32_MAX: unbounded) to seq via generated rules:
 * item* is S ::= item S | (empty); the optional tail of {m,n} nests R_k ::= item R_k-1 | (). */
static syn_status repeat(parser *ps, gvec *seq, gvec *item, unsigned min, unsigned max) {
    syn_status st = SYN_OK;
    if (item->n != 1) { /* wrap a multi-byte literal so that it repeats as a whole */
        uint32_t w;
        st = gen_rule(ps, &w);
        if (st != SYN_OK) return st;
        ps->rules[w].body = *item;
        *item = (gvec){0};
        st = vpush(ps, item, G_REF, w);
        if (st != SYN_OK) return st;
    }
    for (unsigned i = 0; i < min && st == SYN_OK; i++)
        st = vappend(ps, seq, item);
    if (st != SYN_OK || max == min) return st;
    uint32_t prev = UINT32_MAX;
    unsigned levels = max == UINT32_MAX ? 1 : max - min;
    for (unsigned k = 0; k < levels && st == SYN_OK; k++) {
        uint32_t r;
        st = gen_rule(ps, &r);
        if (st != SYN_OK) return st;
        gvec body = {0};
        st = vappend(ps, &body, item);
        if (st == SYN_OK && max == UINT32_MAX) st = vpush(ps, &body, G_REF, r);
        if (st == SYN_OK && prev != UINT32_MAX) st = vpush(ps, &body, G_REF, prev);
        if (st == SYN_OK) st = vpush(ps, &body, G_ALT, 0);
        ps->rules[r].body = body;
        prev = r;
    }
    return st != SYN_OK ? st : vpush(ps, seq, G_REF, prev);
}

static syn_status parse_sequence(parser *ps, gvec *seq, bool nested) {
    for (;;) {
        skip_space(ps);
        char c = *ps->p;
        if (!c || c == '|' || c == ')' || at_definition(ps)) return SYN_OK;
        gvec item = {0};
        syn_status st = SYN_OK;
        if (c == '"') {
            ps->p++;
            while (st == SYN_OK && *ps->p != '"') {
                uint32_t cp;
                st = read_char(ps, &cp);
                unsigned char b[4];
                int n = st == SYN_OK ? utf8_encode(cp, b) : 0;
                for (int i = 0; i < n && st == SYN_OK; i++)
                    st = byte_range(ps, &item, b[i], b[i]);
            }
            if (st == SYN_OK) ps->p++;
        } else if (c == '[') {
            st = parse_class(ps, &item);
        } else if (c == '.') {
            ps->p++;
            st = class_item(ps, NULL, 0, true, &item);
        } else if (c == '(') {
            ps->p++;
            uint32_t r;
            st = gen_rule(ps, &r);
            if (st == SYN_OK) st = parse_alternatives(ps, r, true);
            if (st == SYN_OK && *ps->p != ')') st = perr(ps, "expected ')'");
            if (st == SYN_OK) {
                ps->p++;
                st = vpush(ps, &item, G_REF, r);
            }
        } else if (is_name_char(c)) {
            const char *s = ps->p;
            while (is_name_char(*ps->p))
                ps->p++;
            uint32_t r;
            const char *end = ps->p;
            ps->p = s; /* the rule's first reference is recorded here */
            st = rule_id(ps, s, (size_t)(end - s), &r);
            ps->p = end;
            if (st == SYN_OK) st = vpush(ps, &item, G_REF, r);
        } else {
            st = perr(ps, nested ? "unexpected character in group" : "unexpected character");
        }
        c = *ps->p;
        if (st == SYN_OK && item.n && (c == '*' || c == '+' || c == '?' || c == '{')) {
            unsigned min = 0, max = UINT32_MAX;
            ps->p++;
            if (c == '+') min = 1;
            if (c == '?') max = 1;
            if (c == '{') {
                skip_space(ps);
                st = read_uint(ps, &min);
                skip_space(ps);
                if (st == SYN_OK && *ps->p == ',') {
                    ps->p++;
                    skip_space(ps);
                    if (*ps->p != '}') st = read_uint(ps, &max);
                } else {
                    max = min;
                }
                skip_space(ps);
                if (st == SYN_OK && *ps->p != '}') st = perr(ps, "expected '}'");
                if (st == SYN_OK && max < min) st = perr(ps, "repetition {m,n} with n < m");
                if (st == SYN_OK) ps->p++;
            }
            if (st == SYN_OK) st = repeat(ps, seq, &item, min, max);
        } else if (st == SYN_OK) {
            st = vappend(ps, seq, &item);
        }
        free(item.e);
        if (st != SYN_OK) return st;
    }
}

static syn_status parse_alternatives(parser *ps, uint32_t rid, bool nested) {
    gvec body = {0};
    syn_status st;
    for (;;) {
        st = parse_sequence(ps, &body, nested);
        if (st != SYN_OK || *ps->p != '|') break;
        ps->p++;
        st = vpush(ps, &body, G_ALT, 0);
        if (st != SYN_OK) break;
    }
    if (st == SYN_OK && !nested && *ps->p == ')') st = perr(ps, "unmatched ')'");
    free(ps->rules[rid].body.e);
    ps->rules[rid].body = body;
    return st;
}

static syn_status parse_rules(parser *ps) {
    for (;;) {
        skip_space(ps);
        if (!*ps->p) return SYN_OK;
        if (!at_definition(ps)) return perr(ps, "expected a rule: name ::= ...");
        const char *s = ps->p;
        while (is_name_char(*ps->p))
            ps->p++;
        uint32_t r;
        syn_status st = rule_id(ps, s, (size_t)(ps->p - s), &r);
        if (st != SYN_OK) return st;
        if (ps->rules[r].defined) {
            ps->p = s;
            return perr(ps, "rule defined twice");
        }
        ps->rules[r].defined = true;
        ps->p = strstr(ps->p, "::=") + 3;
        st = parse_alternatives(ps, r, false);
        if (st != SYN_OK) return st;
    }
}

/* Lays the parsed rules out flat: every alternative's elements then G_END. */
static syn_status flatten(parser *ps, syn_grammar *g) {
    size_t n_alts = 0, n_el = 0;
    for (size_t r = 0; r < ps->n_rules; r++) {
        const grule *ru = &ps->rules[r];
        if (!ru->defined)
            return syn_fail(SYN_ERR_FORMAT, "grammar: line %zu column %zu: undefined rule '%s'",
                            ru->line, ru->col, ru->name);
        n_alts++;
        n_el += ru->body.n + 1;
        for (size_t i = 0; i < ru->body.n; i++)
            n_alts += ru->body.e[i].kind == G_ALT;
    }
    g->el = malloc(n_el * sizeof *g->el);
    g->alt_start = malloc(n_alts * sizeof *g->alt_start);
    g->rule_first_alt = malloc(ps->n_rules * sizeof *g->rule_first_alt);
    g->rule_n_alts = malloc(ps->n_rules * sizeof *g->rule_n_alts);
    if (!g->el || !g->alt_start || !g->rule_first_alt || !g->rule_n_alts)
        return syn_fail(SYN_ERR_NO_MEMORY, "grammar: out of memory");
    size_t e = 0, a = 0;
    for (size_t r = 0; r < ps->n_rules; r++) {
        const grule *ru = &ps->rules[r];
        g->rule_first_alt[r] = (uint32_t)a;
        g->alt_start[a++] = (uint32_t)e;
        for (size_t i = 0; i < ru->body.n; i++) {
            if (ru->body.e[i].kind == G_ALT) {
                g->el[e++] = (gelem){G_END, 0};
                g->alt_start[a++] = (uint32_t)e;
            } else {
                g->el[e++] = ru->body.e[i];
            }
        }
        g->el[e++] = (gelem){G_END, 0};
        g->rule_n_alts[r] = (uint32_t)(a - g->rule_first_alt[r]);
    }
    g->n_el = e;
    g->n_rules = (uint32_t)ps->n_rules;
    return SYN_OK;
}

syn_status syn_grammar_parse_gbnf(const char *text, syn_grammar **out) {
    if (!text || !out) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "grammar: NULL argument");
    *out = NULL;
    parser ps = {.text = text, .p = text};
    syn_grammar *g = calloc(1, sizeof *g);
    syn_status st = g ? parse_rules(&ps) : syn_fail(SYN_ERR_NO_MEMORY, "grammar: out of memory");
    uint32_t root = UINT32_MAX;
    for (size_t r = 0; st == SYN_OK && r < ps.n_rules; r++)
        if (!strcmp(ps.rules[r].name, "root")) root = (uint32_t)r;
    if (st == SYN_OK && root == UINT32_MAX)
        st = syn_fail(SYN_ERR_FORMAT, "grammar: no 'root' rule");
    if (st == SYN_OK) st = flatten(&ps, g);
    for (size_t r = 0; r < ps.n_rules; r++) {
        free(ps.rules[r].name);
        free(ps.rules[r].body.e);
    }
    free(ps.rules);
    if (g) {
        g->sets = ps.sets;
        g->n_sets = ps.n_sets;
        g->root = root;
        g->set_single = malloc((ps.n_sets ? ps.n_sets : 1) * sizeof *g->set_single);
        if (!g->set_single && st == SYN_OK)
            st = syn_fail(SYN_ERR_NO_MEMORY, "grammar: out of memory");
        for (size_t i = 0; g->set_single && i < ps.n_sets; i++) {
            int n = 0, byte = -1;
            for (int b = 0; b < 256; b++)
                if (ps.sets[i][b >> 5] >> (b & 31) & 1) {
                    n++;
                    byte = b;
                }
            g->set_single[i] = (int16_t)(n == 1 ? byte : -1);
        }
    } else {
        free(ps.sets);
    }
    if (st != SYN_OK) {
        syn_grammar_free(g);
        return st;
    }
    *out = g;
    return SYN_OK;
}

void syn_grammar_free(syn_grammar *g) {
    if (!g) return;
    free(g->el);
    free(g->alt_start);
    free(g->rule_first_alt);
    free(g->rule_n_alts);
    free(g->sets);
    free(g->set_single);
    free(g);
}

/* ---- matching ---- */

/* A set of stacks, each a run of element indices in data (bottom first; the top is the element
 * to match next, always a byte set; an empty stack means the sentence may end here). */
typedef struct stackset {
    uint32_t n, cap;
    uint32_t *start, *len;
    uint64_t *hash;
    uint32_t *data;
    size_t used, dcap;
} stackset;

/* ---- the lazy DFA over stack sets ----
 *
 * Every distinct stack set the matcher meets becomes a state, interned by an order-free hash,
 * with its 256 transitions filled in on first use. Inside a JSON string nearly every byte leads
 * back to the same state, so the vocabulary walk costs one table look-up per trie node, and a
 * state's token mask, once computed, is copied on every later visit. */

enum { DFA_UNKNOWN = -1, DFA_DEAD = -2 };
#define DFA_MAX_STATES 4096 /* more: the cache restarts (keeping the states in use) */
#define DFA_MAX_MASKS 64    /* token masks kept per matcher (19 KiB each on 151,936 tokens) */

typedef struct dstate {
    stackset set;
    uint64_t hash;
    bool can_end;
    int32_t next[256];
    uint64_t *mask; /* the allowed tokens here; NULL until computed */
} dstate;

struct syn_grammar_matcher {
    const syn_grammar *g;
    dstate *st;
    uint32_t n_st, cap_st;
    int32_t *table; /* [DFA_MAX_STATES * 2] open addressing: state ids, -1 empty */
    int32_t cur;
    /* the states a walk or a feed is going through, kept across a cache restart */
    int32_t *path;
    uint32_t depth, cap_path;
    stackset next;
    const syn_grammar_vocab *mask_vocab; /* the vocabulary the cached masks are for */
    uint32_t n_masks;
    uint32_t *scratch; /* SYN_GRAMMAR_MAX_NEST + 2 stacks of SYN_GRAMMAR_MAX_DEPTH, for expand */
};

static void set_release(stackset *s) {
    free(s->start);
    free(s->len);
    free(s->hash);
    free(s->data);
}

/* Adds the stack s[0..len) unless an equal one is there. */
static syn_status set_add(stackset *set, const uint32_t *s, uint32_t len) {
    uint64_t h = 1469598103934665603ull ^ len;
    for (uint32_t i = 0; i < len; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    for (uint32_t i = 0; i < set->n; i++)
        if (set->hash[i] == h && set->len[i] == len &&
            (!len || !memcmp(set->data + set->start[i], s, len * sizeof *s)))
            return SYN_OK;
    if (set->n == SYN_GRAMMAR_MAX_STACKS)
        return syn_fail(SYN_ERR_UNSUPPORTED,
                        "grammar: more than %d parser stacks at once (the ambiguity bound)",
                        SYN_GRAMMAR_MAX_STACKS);
    if (set->n == set->cap) {
        uint32_t cap = set->cap ? set->cap * 2 : 16;
        uint32_t *st = realloc(set->start, cap * sizeof *st);
        if (st) set->start = st;
        uint32_t *ln = realloc(set->len, cap * sizeof *ln);
        if (ln) set->len = ln;
        uint64_t *hs = realloc(set->hash, cap * sizeof *hs);
        if (hs) set->hash = hs;
        if (!st || !ln || !hs) return syn_fail(SYN_ERR_NO_MEMORY, "grammar: out of memory");
        set->cap = cap;
    }
    if (set->used + len > set->dcap) {
        size_t cap = set->dcap ? set->dcap : 256;
        while (cap < set->used + len)
            cap *= 2;
        uint32_t *d = realloc(set->data, cap * sizeof *d);
        if (!d) return syn_fail(SYN_ERR_NO_MEMORY, "grammar: out of memory");
        set->data = d;
        set->dcap = cap;
    }
    if (len) memcpy(set->data + set->used, s, len * sizeof *s);
    set->start[set->n] = (uint32_t)set->used;
    set->len[set->n] = len;
    set->hash[set->n++] = h;
    set->used += len;
    return SYN_OK;
}

/* Adds to set every stack s[0..len) reaches without consuming a byte: rule references on top
 * are replaced by each alternative; finished alternatives pop. A reference that ends its
 * alternative pushes no continuation, so right recursion (repetition) keeps a constant depth. */
static syn_status expand(syn_grammar_matcher *m, stackset *set, const uint32_t *s, uint32_t len,
                         unsigned nest) {
    if (nest > SYN_GRAMMAR_MAX_NEST)
        return syn_fail(SYN_ERR_UNSUPPORTED,
                        "grammar: more than %d rule expansions without a byte (left recursion?)",
                        SYN_GRAMMAR_MAX_NEST);
    const syn_grammar *g = m->g;
    uint32_t *w = m->scratch + (size_t)nest * SYN_GRAMMAR_MAX_DEPTH;
    if (w != s) memmove(w, s, len * sizeof *s);
    for (;;) {
        if (!len) return set_add(set, w, 0);
        uint32_t idx = w[len - 1];
        const gelem el = g->el[idx];
        if (el.kind == G_END) {
            len--;
            continue;
        }
        if (el.kind == G_SET) return set_add(set, w, len);
        len--;
        if (g->el[idx + 1].kind != G_END) w[len++] = idx + 1;
        if (len + 1 > SYN_GRAMMAR_MAX_DEPTH)
            return syn_fail(SYN_ERR_UNSUPPORTED,
                            "grammar: parser stack deeper than %d (the depth bound)",
                            SYN_GRAMMAR_MAX_DEPTH);
        const uint32_t first = g->rule_first_alt[el.v], n = g->rule_n_alts[el.v];
        uint32_t *child = m->scratch + (size_t)(nest + 1) * SYN_GRAMMAR_MAX_DEPTH;
        for (uint32_t a = 0; a < n; a++) {
            memcpy(child, w, len * sizeof *w);
            child[len] = g->alt_start[first + a];
            syn_status st = expand(m, set, child, len + 1, nest + 1);
            if (st != SYN_OK) return st;
        }
        return SYN_OK;
    }
}

#define DFA_TABLE (DFA_MAX_STATES * 2)

static uint64_t set_hash(const stackset *s) {
    uint64_t h = s->n;
    for (uint32_t i = 0; i < s->n; i++) /* a sum: the same set in any order hashes alike */
        h += (s->hash[i] ^ (s->hash[i] >> 29)) * 0xBF58476D1CE4E5B9ull;
    return h;
}

static bool set_equal(const stackset *a, const stackset *b) {
    if (a->n != b->n) return false;
    for (uint32_t i = 0; i < a->n; i++) {
        bool found = false;
        for (uint32_t j = 0; j < b->n && !found; j++)
            found =
                a->hash[i] == b->hash[j] && a->len[i] == b->len[j] &&
                !memcmp(a->data + a->start[i], b->data + b->start[j], a->len[i] * sizeof *a->data);
        if (!found) return false;
    }
    return true;
}

static void table_insert(syn_grammar_matcher *m, int32_t id) {
    uint32_t i = (uint32_t)m->st[id].hash & (DFA_TABLE - 1);
    while (m->table[i] >= 0)
        i = (i + 1) & (DFA_TABLE - 1);
    m->table[i] = id;
}

static bool pinned(const syn_grammar_matcher *m, int32_t id) {
    if (id == m->cur) return true;
    for (uint32_t d = 0; d < m->depth; d++)
        if (m->path[d] == id) return true;
    return false;
}

/* Drops every state but the current one and those on the path, renumbering them. */
static void dfa_restart(syn_grammar_matcher *m) {
    int32_t *remap = m->table; /* reused: rebuilt below */
    uint32_t kept = 0;
    for (uint32_t i = 0; i < m->n_st; i++) {
        if (!pinned(m, (int32_t)i)) {
            set_release(&m->st[i].set);
            if (m->st[i].mask) m->n_masks--;
            free(m->st[i].mask);
            continue;
        }
        m->st[kept] = m->st[i];
        for (int b = 0; b < 256; b++)
            m->st[kept].next[b] = DFA_UNKNOWN;
        remap[i] = (int32_t)kept++;
    }
    m->cur = remap[m->cur];
    for (uint32_t d = 0; d < m->depth; d++)
        m->path[d] = remap[m->path[d]];
    m->n_st = kept;
    memset(m->table, 0xFF, DFA_TABLE * sizeof *m->table);
    for (uint32_t i = 0; i < kept; i++)
        table_insert(m, (int32_t)i);
}

/* The state of the stacks in s (taken over when new: s is left empty). */
static syn_status intern(syn_grammar_matcher *m, stackset *s, int32_t *id) {
    const uint64_t h = set_hash(s);
    for (uint32_t i = (uint32_t)h & (DFA_TABLE - 1); m->table[i] >= 0;
         i = (i + 1) & (DFA_TABLE - 1))
        if (m->st[m->table[i]].hash == h && set_equal(&m->st[m->table[i]].set, s)) {
            *id = m->table[i];
            return SYN_OK;
        }
    if (m->n_st == DFA_MAX_STATES) dfa_restart(m);
    if (m->n_st == m->cap_st) {
        uint32_t cap = m->cap_st ? m->cap_st * 2 : 16;
        dstate *n = realloc(m->st, cap * sizeof *n);
        if (!n) return syn_fail(SYN_ERR_NO_MEMORY, "grammar: out of memory");
        m->st = n;
        m->cap_st = cap;
    }
    dstate *d = &m->st[m->n_st];
    d->set = *s;
    *s = (stackset){0};
    d->hash = h;
    d->can_end = false;
    for (uint32_t i = 0; i < d->set.n; i++)
        d->can_end |= d->set.len[i] == 0;
    for (int b = 0; b < 256; b++)
        d->next[b] = DFA_UNKNOWN;
    d->mask = NULL;
    *id = (int32_t)m->n_st++;
    table_insert(m, *id);
    return SYN_OK;
}

/* Moves every stack whose top accepts byte b past it into next (literal: only tops that are a
 * single byte, i.e. spelled out in the grammar). */
static syn_status step(syn_grammar_matcher *m, const stackset *cur, stackset *next, uint8_t b,
                       bool literal) {
    const syn_grammar *g = m->g;
    next->n = 0;
    next->used = 0;
    for (uint32_t i = 0; i < cur->n; i++) {
        uint32_t len = cur->len[i];
        if (!len) continue;
        const uint32_t *s = cur->data + cur->start[i];
        const uint32_t top = s[len - 1], set = g->el[top].v;
        if (!(g->sets[set][b >> 5] >> (b & 31) & 1)) continue;
        if (literal && g->set_single[set] < 0) continue;
        memcpy(m->scratch, s, len * sizeof *s);
        m->scratch[len - 1] = top + 1;
        syn_status st = expand(m, next, m->scratch, len, 0);
        if (st != SYN_OK) return st;
    }
    return SYN_OK;
}

/* The transition of the state in *from on byte b (DFA_DEAD: no stack takes it). *from must be
 * m->cur or on the path, so that a restart renumbers it. */
static syn_status transition(syn_grammar_matcher *m, const int32_t *from, uint8_t b, int32_t *to) {
    *to = m->st[*from].next[b];
    if (*to != DFA_UNKNOWN) return SYN_OK;
    syn_status st = step(m, &m->st[*from].set, &m->next, b, false);
    if (st != SYN_OK) return st;
    if (!m->next.n) {
        *to = DFA_DEAD;
    } else {
        st = intern(m, &m->next, to);
        if (st != SYN_OK) return st;
    }
    m->st[*from].next[b] = *to;
    return SYN_OK;
}

static syn_status path_reserve(syn_grammar_matcher *m, uint32_t n) {
    if (n <= m->cap_path) return SYN_OK;
    int32_t *p = realloc(m->path, n * sizeof *p);
    if (!p) return syn_fail(SYN_ERR_NO_MEMORY, "grammar: out of memory");
    m->path = p;
    m->cap_path = n;
    return SYN_OK;
}

syn_status syn_grammar_matcher_new(const syn_grammar *g, syn_grammar_matcher **out) {
    if (!g || !out) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "grammar: NULL argument");
    *out = NULL;
    syn_grammar_matcher *m = calloc(1, sizeof *m);
    if (m) {
        m->scratch =
            malloc((size_t)(SYN_GRAMMAR_MAX_NEST + 2) * SYN_GRAMMAR_MAX_DEPTH * sizeof *m->scratch);
        m->table = malloc(DFA_TABLE * sizeof *m->table);
    }
    if (!m || !m->scratch || !m->table || path_reserve(m, 16) != SYN_OK) {
        syn_grammar_matcher_free(m);
        return syn_fail(SYN_ERR_NO_MEMORY, "grammar: out of memory");
    }
    memset(m->table, 0xFF, DFA_TABLE * sizeof *m->table);
    m->g = g;
    m->cur = -1;
    const uint32_t first = g->rule_first_alt[g->root];
    stackset start = {0};
    syn_status st = SYN_OK;
    for (uint32_t a = 0; a < g->rule_n_alts[g->root] && st == SYN_OK; a++) {
        uint32_t s = g->alt_start[first + a];
        st = expand(m, &start, &s, 1, 0);
    }
    if (st == SYN_OK) st = intern(m, &start, &m->cur);
    set_release(&start);
    if (st != SYN_OK) {
        syn_grammar_matcher_free(m);
        return st;
    }
    *out = m;
    return SYN_OK;
}

void syn_grammar_matcher_free(syn_grammar_matcher *m) {
    if (!m) return;
    for (uint32_t i = 0; i < m->n_st; i++) {
        set_release(&m->st[i].set);
        free(m->st[i].mask);
    }
    free(m->st);
    free(m->table);
    free(m->path);
    set_release(&m->next);
    free(m->scratch);
    free(m);
}

/* Runs bytes through the DFA; commits the end state to m->cur only when asked and accepted. */
static syn_status run_bytes(syn_grammar_matcher *m, const uint8_t *b, size_t n, bool commit,
                            bool *accepted) {
    *accepted = true;
    m->path[0] = m->cur;
    m->depth = 1;
    syn_status st = SYN_OK;
    for (size_t i = 0; i < n && st == SYN_OK && *accepted; i++) {
        int32_t to;
        st = transition(m, &m->path[0], b[i], &to);
        if (st == SYN_OK && to == DFA_DEAD) *accepted = false;
        if (st == SYN_OK && *accepted) m->path[0] = to;
    }
    if (st == SYN_OK && *accepted && commit) m->cur = m->path[0];
    m->depth = 0;
    return st;
}

syn_status syn_grammar_matcher_feed(syn_grammar_matcher *m, const void *bytes, size_t n,
                                    bool *accepted) {
    if (!m || (!bytes && n) || !accepted)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "grammar: NULL argument");
    return run_bytes(m, bytes, n, true, accepted);
}

syn_status syn_grammar_matcher_accepts(syn_grammar_matcher *m, const void *bytes, size_t n,
                                       bool *accepted) {
    if (!m || (!bytes && n) || !accepted)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "grammar: NULL argument");
    return run_bytes(m, bytes, n, false, accepted);
}

bool syn_grammar_matcher_can_end(const syn_grammar_matcher *m) { return m->st[m->cur].can_end; }

/* ---- the vocabulary trie and token masks ---- */

typedef struct trie_node {
    uint32_t first_child, n_children; /* children are contiguous nodes */
    uint32_t first_token, n_tokens;   /* into syn_grammar_vocab.ids: tokens ending here */
    uint8_t byte;                     /* the edge from the parent */
} trie_node;

enum { TOKEN_TEXT = 0, TOKEN_EOG = 1, TOKEN_SPECIAL = 2, TOKEN_EMPTY = 3 };

struct syn_grammar_vocab {
    int32_t n_vocab;
    trie_node *nodes;
    size_t n_nodes, cap_nodes;
    int32_t *ids; /* the trie's tokens in byte order */
    int32_t *eog;
    size_t n_eog;
    /* control and user-defined tokens: allowed only where the grammar spells out their text */
    int32_t *special;
    size_t *special_off;
    uint32_t *special_len;
    size_t n_special;
    uint8_t *kind;    /* [n_vocab] TOKEN_* */
    uint32_t max_len; /* the longest token, in bytes: the trie's depth */
    uint8_t *bytes;   /* all token bytes back to back */
    const syn_tokenizer *tok;
};

typedef struct tok_entry {
    const uint8_t *p;
    uint32_t len;
    int32_t id;
} tok_entry;

static int cmp_tok(const void *a, const void *b) {
    const tok_entry *x = a, *y = b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = n ? memcmp(x->p, y->p, n) : 0;
    if (c) return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

/* Fills node (already allocated) from the sorted tokens [lo, hi) sharing their first d bytes. */
static syn_status trie_build(syn_grammar_vocab *v, const tok_entry *t, uint32_t node, uint32_t lo,
                             uint32_t hi, uint32_t d) {
    uint32_t i = lo;
    while (i < hi && t[i].len == d)
        i++; /* ending here: they sort first */
    v->nodes[node].first_token = lo;
    v->nodes[node].n_tokens = i - lo;
    uint32_t groups = 0;
    for (uint32_t j = i; j < hi; j++)
        groups += j == i || t[j].p[d] != t[j - 1].p[d];
    if (v->n_nodes + groups > v->cap_nodes) {
        size_t cap = v->cap_nodes * 2 + groups;
        trie_node *n = realloc(v->nodes, cap * sizeof *n);
        if (!n) return syn_fail(SYN_ERR_NO_MEMORY, "grammar: out of memory");
        v->nodes = n;
        v->cap_nodes = cap;
    }
    const uint32_t first = (uint32_t)v->n_nodes;
    v->nodes[node].first_child = first;
    v->nodes[node].n_children = groups;
    v->n_nodes += groups;
    uint32_t c = first;
    for (uint32_t j = i; j < hi;) {
        uint32_t k = j + 1;
        while (k < hi && t[k].p[d] == t[j].p[d])
            k++;
        memset(&v->nodes[c], 0, sizeof v->nodes[c]);
        v->nodes[c].byte = t[j].p[d];
        syn_status st = trie_build(v, t, c, j, k, d + 1);
        if (st != SYN_OK) return st;
        c++;
        j = k;
    }
    return SYN_OK;
}

syn_status syn_grammar_vocab_new(const syn_tokenizer *tok, syn_grammar_vocab **out) {
    if (!tok || !out) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "grammar: NULL argument");
    *out = NULL;
    const int32_t n = syn_tokenizer_n_vocab(tok);
    syn_grammar_vocab *v = calloc(1, sizeof *v);
    tok_entry *t = malloc((size_t)n * sizeof *t);
    size_t *off = malloc((size_t)n * sizeof *off);
    size_t cap = (size_t)n * 8 + 64, used = 0;
    if (v) {
        v->bytes = malloc(cap);
        v->ids = malloc((size_t)n * sizeof *v->ids);
        v->eog = malloc((size_t)n * sizeof *v->eog);
        v->special = malloc((size_t)n * sizeof *v->special);
        v->special_off = malloc((size_t)n * sizeof *v->special_off);
        v->special_len = malloc((size_t)n * sizeof *v->special_len);
        v->kind = malloc((size_t)n);
    }
    syn_status st = SYN_OK;
    if (!v || !t || !off || !v->bytes || !v->ids || !v->eog || !v->special || !v->special_off ||
        !v->special_len || !v->kind)
        st = syn_fail(SYN_ERR_NO_MEMORY, "grammar: out of memory");
    uint32_t n_t = 0;
    for (int32_t id = 0; st == SYN_OK && id < n; id++) {
        if (syn_tokenizer_is_eog(tok, id)) {
            v->kind[id] = TOKEN_EOG;
            v->eog[v->n_eog++] = id;
            continue;
        }
        size_t len;
        st = syn_tokenizer_token_bytes(tok, id, (char *)v->bytes + used, cap - used, &len);
        if (st == SYN_ERR_BUFFER_TOO_SMALL) {
            while (cap - used < len)
                cap *= 2;
            uint8_t *b = realloc(v->bytes, cap);
            if (!b) {
                st = syn_fail(SYN_ERR_NO_MEMORY, "grammar: out of memory");
                break;
            }
            v->bytes = b;
            st = syn_tokenizer_token_bytes(tok, id, (char *)v->bytes + used, cap - used, &len);
        }
        v->kind[id] = TOKEN_EMPTY;
        if (st != SYN_OK || !len) {
            st = SYN_OK; /* ids past the token list have no bytes: never allowed */
            continue;
        }
        if (tokenizer_is_special(tok, id)) {
            v->kind[id] = TOKEN_SPECIAL;
            v->special[v->n_special] = id;
            v->special_off[v->n_special] = used;
            v->special_len[v->n_special++] = (uint32_t)len;
        } else {
            v->kind[id] = TOKEN_TEXT;
            off[n_t] = used;
            t[n_t++] = (tok_entry){NULL, (uint32_t)len, id};
            if (len > v->max_len) v->max_len = (uint32_t)len;
        }
        used += len;
    }
    if (st == SYN_OK) {
        for (uint32_t i = 0; i < n_t; i++)
            t[i].p = v->bytes + off[i];
        qsort(t, n_t, sizeof *t, cmp_tok);
        for (uint32_t i = 0; i < n_t; i++)
            v->ids[i] = t[i].id;
        v->cap_nodes = (size_t)n_t * 2 + 1;
        v->nodes = malloc(v->cap_nodes * sizeof *v->nodes);
        if (!v->nodes) st = syn_fail(SYN_ERR_NO_MEMORY, "grammar: out of memory");
    }
    if (st == SYN_OK) {
        memset(&v->nodes[0], 0, sizeof v->nodes[0]);
        v->n_nodes = 1;
        st = trie_build(v, t, 0, 0, n_t, 0);
    }
    free(t);
    free(off);
    if (st != SYN_OK) {
        syn_grammar_vocab_free(v);
        return st;
    }
    v->n_vocab = n;
    v->tok = tok;
    *out = v;
    return SYN_OK;
}

void syn_grammar_vocab_free(syn_grammar_vocab *v) {
    if (!v) return;
    free(v->nodes);
    free(v->ids);
    free(v->eog);
    free(v->special);
    free(v->special_off);
    free(v->special_len);
    free(v->kind);
    free(v->bytes);
    free(v);
}

/* Marks the tokens below node whose bytes the state at m->path[d] can take. */
static syn_status walk(syn_grammar_matcher *m, const syn_grammar_vocab *v, uint32_t node,
                       uint32_t d, uint64_t *allowed) {
    const trie_node *nd = &v->nodes[node];
    for (uint32_t c = 0; c < nd->n_children; c++) {
        const trie_node *ch = &v->nodes[nd->first_child + c];
        int32_t to;
        syn_status st = transition(m, &m->path[d], ch->byte, &to);
        if (st != SYN_OK) return st;
        if (to == DFA_DEAD) continue; /* the whole subtree fails at this byte */
        for (uint32_t i = 0; i < ch->n_tokens; i++) {
            const int32_t id = v->ids[ch->first_token + i];
            allowed[id >> 6] |= 1ull << (id & 63);
        }
        if (!ch->n_children) continue;
        m->path[d + 1] = to;
        m->depth = d + 2;
        st = walk(m, v, nd->first_child + c, d + 1, allowed);
        m->depth = d + 1;
        if (st != SYN_OK) return st;
    }
    return SYN_OK;
}

/* Whether the grammar spells out bytes[0..n) literally from the current state. */
static syn_status literal_accepts(syn_grammar_matcher *m, const uint8_t *bytes, size_t n,
                                  bool *accepted) {
    stackset a = {0}, b = {0};
    const stackset *from = &m->st[m->cur].set;
    syn_status st = SYN_OK;
    *accepted = true;
    for (size_t i = 0; i < n && st == SYN_OK && *accepted; i++) {
        st = step(m, from, &a, bytes[i], true);
        *accepted = a.n > 0;
        stackset t = a;
        a = b;
        b = t;
        from = &b;
    }
    set_release(&a);
    set_release(&b);
    return st;
}

syn_status syn_grammar_matcher_allowed(syn_grammar_matcher *m, const syn_grammar_vocab *v,
                                       uint64_t *allowed) {
    if (!m || !v || !allowed) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "grammar: NULL argument");
    const size_t words = ((size_t)v->n_vocab + 63) / 64;
    if (m->mask_vocab != v) { /* masks are per vocabulary */
        for (uint32_t i = 0; i < m->n_st; i++) {
            free(m->st[i].mask);
            m->st[i].mask = NULL;
        }
        m->n_masks = 0;
        m->mask_vocab = v;
    }
    if (m->st[m->cur].mask) {
        memcpy(allowed, m->st[m->cur].mask, words * sizeof *allowed);
        return SYN_OK;
    }
    syn_status st = path_reserve(m, v->max_len + 2);
    if (st != SYN_OK) return st;
    memset(allowed, 0, words * sizeof *allowed);
    m->path[0] = m->cur;
    m->depth = 1;
    st = walk(m, v, 0, 0, allowed);
    m->depth = 0;
    for (size_t i = 0; i < v->n_special && st == SYN_OK; i++) {
        bool ok;
        st = literal_accepts(m, v->bytes + v->special_off[i], v->special_len[i], &ok);
        if (ok) allowed[v->special[i] >> 6] |= 1ull << (v->special[i] & 63);
    }
    if (st != SYN_OK) return st;
    if (m->st[m->cur].can_end)
        for (size_t i = 0; i < v->n_eog; i++)
            allowed[v->eog[i] >> 6] |= 1ull << (v->eog[i] & 63);
    if (m->n_masks == DFA_MAX_MASKS) {
        for (uint32_t i = 0; i < m->n_st; i++) {
            free(m->st[i].mask);
            m->st[i].mask = NULL;
        }
        m->n_masks = 0;
    }
    uint64_t *copy = malloc(words * sizeof *copy);
    if (copy) { /* without memory the mask is simply not cached */
        memcpy(copy, allowed, words * sizeof *copy);
        m->st[m->cur].mask = copy;
        m->n_masks++;
    }
    return SYN_OK;
}

syn_status syn_grammar_matcher_feed_token(syn_grammar_matcher *m, const syn_grammar_vocab *v,
                                          int32_t id, bool *accepted) {
    if (!m || !v || !accepted || id < 0 || id >= v->n_vocab)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "grammar: bad token or NULL argument");
    *accepted = false;
    switch (v->kind[id]) {
    case TOKEN_EOG: *accepted = syn_grammar_matcher_can_end(m); return SYN_OK;
    case TOKEN_EMPTY: return SYN_OK;
    default: break;
    }
    char buf[1024];
    size_t len;
    syn_status st = syn_tokenizer_token_bytes(v->tok, id, buf, sizeof buf, &len);
    if (st != SYN_OK) return st;
    if (v->kind[id] == TOKEN_SPECIAL) {
        st = literal_accepts(m, (const uint8_t *)buf, len, accepted);
        if (st != SYN_OK || !*accepted) return st;
    }
    return syn_grammar_matcher_feed(m, buf, len, accepted);
}
