/*
 * parse.c: Jinja source into a tree (ast.h), in two passes.
 *
 * The lexer first normalises line breaks as Jinja2 does (every Python line break becomes "\n",
 * one trailing line break is dropped), then splits text from tags and applies the whitespace
 * rules: "-" on a tag strips the whitespace beside it, lstrip_blocks strips a block or comment
 * tag's indentation unless it opens with "+", trim_blocks drops the first newline after a block
 * or comment tag unless it closes with "+". Inside tags it makes expression tokens. The parser
 * is recursive descent with Jinja2's precedence (or, and, not, comparisons, + -, ~, * / // %,
 * **, unary, postfix, filters and tests); its depth is bounded so that hostile nesting fails
 * cleanly.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synapse_internal.h"
#include "template/ast.h"

typedef enum tok_kind {
    TK_TEXT,
    TK_VAR_BEGIN,
    TK_VAR_END,
    TK_BLOCK_BEGIN,
    TK_BLOCK_END,
    TK_NAME,
    TK_STRING,
    TK_INT,
    TK_FLOAT,
    TK_OP,
    TK_EOF,
} tok_kind;

typedef struct token {
    tok_kind kind;
    int line;
    const char *p; /* TK_NAME, TK_OP: the source text; TK_TEXT, TK_STRING: the decoded text */
    size_t n;
    int64_t i;
    double f;
} token;

typedef struct parser {
    jt_arena *arena;
    const char *src; /* normalised */
    size_t n;
    token *toks;
    size_t n_toks, cap_toks;
    size_t pos;
    int depth;
    size_t line_pos; /* line_at's memory: the line of byte line_pos */
    int line;
    syn_status status;
    char error[256];
} parser;

__attribute__((format(printf, 4, 5))) static bool fail(parser *ps, syn_status st, int line,
                                                       const char *fmt, ...) {
    if (ps->status != SYN_OK) return false;
    ps->status = st;
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0)
        snprintf(ps->error, sizeof ps->error, "line %d: %s", line, msg);
    else
        snprintf(ps->error, sizeof ps->error, "%s", msg);
    return false;
}

static bool no_memory(parser *ps) { return fail(ps, SYN_ERR_NO_MEMORY, 0, "out of memory"); }

/* ---- lexer ---- */

static bool push_tok(parser *ps, token t) {
    if (ps->n_toks == ps->cap_toks) {
        size_t cap = ps->cap_toks ? ps->cap_toks * 2 : 256;
        token *p = realloc(ps->toks, cap * sizeof *p);
        if (!p) return no_memory(ps);
        ps->toks = p;
        ps->cap_toks = cap;
    }
    ps->toks[ps->n_toks++] = t;
    return true;
}

/* Length of the Python whitespace character at p (0: none): ASCII blanks, U+001C-001F, U+0085,
 * U+00A0, U+1680, U+2000-200A, U+2028/2029, U+202F, U+205F, U+3000. */
static size_t py_space_len(const char *p, size_t left) {
    unsigned char c = (unsigned char)p[0];
    if (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f)) return 1;
    if (left >= 2 && c == 0xc2 && ((unsigned char)p[1] == 0x85 || (unsigned char)p[1] == 0xa0))
        return 2;
    if (left >= 3 && c == 0xe1 && (unsigned char)p[1] == 0x9a && (unsigned char)p[2] == 0x80)
        return 3;
    if (left >= 3 && c == 0xe2 && (unsigned char)p[1] == 0x80) {
        unsigned char d = (unsigned char)p[2];
        if (d <= 0x8a || d == 0xa8 || d == 0xa9 || d == 0xaf) return 3;
    }
    if (left >= 3 && c == 0xe2 && (unsigned char)p[1] == 0x81 && (unsigned char)p[2] == 0x9f)
        return 3;
    if (left >= 3 && c == 0xe3 && (unsigned char)p[1] == 0x80 && (unsigned char)p[2] == 0x80)
        return 3;
    return 0;
}

/* The byte length of s[0..n) without its trailing Python whitespace. */
static size_t rstrip_len(const char *s, size_t n) {
    size_t end = 0;
    for (size_t i = 0; i < n;) {
        size_t w = py_space_len(s + i, n - i);
        if (w) {
            i += w;
        } else {
            i++;
            while (i < n && ((unsigned char)s[i] & 0xc0) == 0x80)
                i++;
            end = i;
        }
    }
    return end;
}

static size_t skip_space(const char *s, size_t n, size_t i) {
    for (size_t w; i < n && (w = py_space_len(s + i, n - i)) > 0;)
        i += w;
    return i;
}

/* Python's str.splitlines breaks: \n, \r\n, \r, \v, \f, \x1c-\x1e, U+0085, U+2028, U+2029. The
 * length of the break at p, 0 if none. */
static size_t line_break_len(const char *p, size_t left) {
    unsigned char c = (unsigned char)p[0];
    if (c == '\r') return left >= 2 && p[1] == '\n' ? 2 : 1;
    if (c == '\n' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) return 1;
    if (left >= 2 && c == 0xc2 && (unsigned char)p[1] == 0x85) return 2;
    if (left >= 3 && c == 0xe2 && (unsigned char)p[1] == 0x80 &&
        ((unsigned char)p[2] == 0xa8 || (unsigned char)p[2] == 0xa9))
        return 3;
    return 0;
}

static bool normalise(parser *ps, const char *src, size_t n) {
    char *out = jt_alloc(ps->arena, n + 1);
    if (!out) return no_memory(ps);
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t br = line_break_len(src + i, n - i);
        if (br) {
            out[o++] = '\n';
            i += br;
        } else {
            out[o++] = src[i++];
        }
    }
    if (o > 0 && out[o - 1] == '\n') o--; /* keep_trailing_newline is off */
    out[o] = '\0';
    ps->src = out;
    ps->n = o;
    return true;
}

/* The line of byte pos. Lexing asks for increasing positions, so the count resumes from the last
 * answer instead of rescanning the source (which would be quadratic). */
static int line_at(parser *ps, size_t pos) {
    if (pos < ps->line_pos) {
        ps->line_pos = 0;
        ps->line = 1;
    }
    for (; ps->line_pos < pos && ps->line_pos < ps->n; ps->line_pos++)
        ps->line += ps->src[ps->line_pos] == '\n';
    return ps->line;
}

/* A text token of src[from, to), with lstrip/rstrip applied by the tag that follows. */
static bool push_text(parser *ps, size_t from, size_t to, int line) {
    if (to <= from) return true;
    return push_tok(ps, (token){TK_TEXT, line, ps->src + from, to - from, 0, 0});
}

static bool is_name_start(char c) { return isalpha((unsigned char)c) || c == '_'; }
static bool is_name_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* A string literal at ps->src[*pos] (the quote), decoded with Python's escapes. */
static bool lex_string(parser *ps, size_t *pos, int line) {
    char quote = ps->src[*pos];
    size_t i = *pos + 1;
    size_t start = i;
    size_t cap = 0;
    while (i < ps->n && ps->src[i] != quote) {
        if (ps->src[i] == '\\' && i + 1 < ps->n) i++;
        i++;
        cap++;
    }
    if (i >= ps->n) return fail(ps, SYN_ERR_FORMAT, line, "unterminated string literal");
    char *out = jt_alloc(ps->arena, (i - start) * 2 + 8);
    if (!out) return no_memory(ps);
    size_t o = 0;
    for (size_t j = start; j < i; j++) {
        char c = ps->src[j];
        if (c != '\\') {
            out[o++] = c;
            continue;
        }
        char e = ps->src[++j];
        switch (e) {
        case 'n': out[o++] = '\n'; break;
        case 't': out[o++] = '\t'; break;
        case 'r': out[o++] = '\r'; break;
        case '0': out[o++] = '\0'; break;
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'v': out[o++] = '\v'; break;
        case 'a': out[o++] = '\a'; break;
        case '\\':
        case '\'':
        case '"': out[o++] = e; break;
        case '\n': break; /* a continued line */
        case 'x':
        case 'u':
        case 'U': {
            int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t cp = 0;
            int k = 0;
            for (; k < digits && j + 1 < i && isxdigit((unsigned char)ps->src[j + 1]); k++) {
                char h = ps->src[++j];
                cp = cp * 16 +
                     (uint32_t)(isdigit((unsigned char)h) ? h - '0' : (tolower(h) - 'a' + 10));
            }
            if (k != digits || cp > 0x10ffff)
                return fail(ps, SYN_ERR_FORMAT, line, "bad \\%c escape in a string literal", e);
            if (cp < 0x80) {
                out[o++] = (char)cp;
            } else if (cp < 0x800) {
                out[o++] = (char)(0xc0 | cp >> 6);
                out[o++] = (char)(0x80 | (cp & 0x3f));
            } else if (cp < 0x10000) {
                out[o++] = (char)(0xe0 | cp >> 12);
                out[o++] = (char)(0x80 | ((cp >> 6) & 0x3f));
                out[o++] = (char)(0x80 | (cp & 0x3f));
            } else {
                out[o++] = (char)(0xf0 | cp >> 18);
                out[o++] = (char)(0x80 | ((cp >> 12) & 0x3f));
                out[o++] = (char)(0x80 | ((cp >> 6) & 0x3f));
                out[o++] = (char)(0x80 | (cp & 0x3f));
            }
            break;
        }
        default: /* Python keeps an unknown escape as written */ out[o++] = '\\'; out[o++] = e;
        }
    }
    (void)cap;
    *pos = i + 1;
    return push_tok(ps, (token){TK_STRING, line, out, o, 0, 0});
}

static const char *const two_char_ops[] = {"//", "**", "==", "!=", "<=", ">="};

/* The tokens of one tag's inside, from *pos to its closing "}}" or "%}" (with "-" or "+" before
 * it); *strip_after / *keep_newline report that mark. */
static bool lex_tag(parser *ps, size_t *pos, char close, bool *strip_after, bool *keep_newline) {
    size_t i = *pos;
    for (;;) {
        i = skip_space(ps->src, ps->n, i);
        int line = line_at(ps, i);
        if (i >= ps->n) return fail(ps, SYN_ERR_FORMAT, line, "a tag is not closed");
        const char *s = ps->src + i;
        size_t left = ps->n - i;
        if ((s[0] == '-' || s[0] == '+') && left >= 3 && s[1] == close && s[2] == '}') {
            *strip_after = s[0] == '-';
            *keep_newline = s[0] == '+';
            *pos = i + 3;
            return true;
        }
        if (left >= 2 && s[0] == close && s[1] == '}') {
            *strip_after = *keep_newline = false;
            *pos = i + 2;
            return true;
        }
        if (s[0] == '\'' || s[0] == '"') {
            if (!lex_string(ps, &i, line)) return false;
            continue;
        }
        if (isdigit((unsigned char)s[0])) {
            size_t j = i;
            bool is_float = false;
            while (j < ps->n && (isdigit((unsigned char)ps->src[j]) || ps->src[j] == '_'))
                j++;
            if (j + 1 < ps->n && ps->src[j] == '.' && isdigit((unsigned char)ps->src[j + 1])) {
                is_float = true;
                j++;
                while (j < ps->n && isdigit((unsigned char)ps->src[j]))
                    j++;
            }
            if (j < ps->n && (ps->src[j] == 'e' || ps->src[j] == 'E')) {
                size_t k = j + 1;
                if (k < ps->n && (ps->src[k] == '+' || ps->src[k] == '-')) k++;
                if (k < ps->n && isdigit((unsigned char)ps->src[k])) {
                    is_float = true;
                    j = k;
                    while (j < ps->n && isdigit((unsigned char)ps->src[j]))
                        j++;
                }
            }
            char num[64];
            size_t nn = 0;
            for (size_t k = i; k < j && nn < sizeof num - 1; k++)
                if (ps->src[k] != '_') num[nn++] = ps->src[k];
            num[nn] = '\0';
            token t = {is_float ? TK_FLOAT : TK_INT, line, s, j - i, 0, 0};
            if (is_float) {
                t.f = strtod(num, NULL);
            } else {
                char *end;
                errno = 0;
                t.i = strtoll(num, &end, 10);
                if (errno) return fail(ps, SYN_ERR_UNSUPPORTED, line, "integer literal too large");
            }
            if (!push_tok(ps, t)) return false;
            i = j;
            continue;
        }
        if (is_name_start(s[0])) {
            size_t j = i;
            while (j < ps->n && is_name_char(ps->src[j]))
                j++;
            if (!push_tok(ps, (token){TK_NAME, line, s, j - i, 0, 0})) return false;
            i = j;
            continue;
        }
        size_t len = 1;
        for (size_t k = 0; k < sizeof two_char_ops / sizeof *two_char_ops; k++)
            if (left >= 2 && memcmp(s, two_char_ops[k], 2) == 0) len = 2;
        if (len == 1 && !strchr("+-*/%~()[]{},.:|=<>!", s[0]))
            return fail(ps, SYN_ERR_FORMAT, line, "unexpected character '%c' in a tag", s[0]);
        if (!push_tok(ps, (token){TK_OP, line, s, len, 0, 0})) return false;
        i += len;
    }
}

/* Whether the block tag whose tokens start at toks[first] is `{% raw %}`. */
static bool is_raw_tag(const parser *ps, size_t first) {
    return ps->n_toks == first + 1 && ps->toks[first].kind == TK_NAME && ps->toks[first].n == 3 &&
           memcmp(ps->toks[first].p, "raw", 3) == 0;
}

/* After {% raw %}: the text up to {% endraw %} (its own "-" marks honoured). */
static bool lex_raw(parser *ps, size_t *pos, bool strip_before_text) {
    size_t i = *pos;
    if (strip_before_text) i = skip_space(ps->src, ps->n, i);
    for (size_t j = i; j + 1 < ps->n; j++) {
        if (ps->src[j] != '{' || ps->src[j + 1] != '%') continue;
        size_t k = j + 2;
        bool strip = k < ps->n && ps->src[k] == '-';
        if (k < ps->n && (ps->src[k] == '-' || ps->src[k] == '+')) k++;
        k = skip_space(ps->src, ps->n, k);
        if (ps->n - k < 6 || memcmp(ps->src + k, "endraw", 6) != 0) continue;
        k = skip_space(ps->src, ps->n, k + 6);
        bool strip_after = k < ps->n && ps->src[k] == '-';
        bool keep_newline = k < ps->n && ps->src[k] == '+';
        if (k < ps->n && (ps->src[k] == '-' || ps->src[k] == '+')) k++;
        if (ps->n - k < 2 || ps->src[k] != '%' || ps->src[k + 1] != '}') continue;
        size_t end = strip ? i + rstrip_len(ps->src + i, j - i) : j;
        if (!push_text(ps, i, end, line_at(ps, i))) return false;
        k += 2;
        if (strip_after)
            k = skip_space(ps->src, ps->n, k);
        else if (!keep_newline && k < ps->n && ps->src[k] == '\n')
            k++;
        *pos = k;
        return true;
    }
    return fail(ps, SYN_ERR_FORMAT, line_at(ps, *pos), "{%% raw %%} is not closed");
}

static bool lex(parser *ps) {
    size_t i = 0;
    bool line_starting = true; /* the text to come begins a line */
    while (i < ps->n) {
        /* The next tag opening. */
        size_t j = i;
        char kind = 0;
        for (; j + 1 < ps->n; j++) {
            if (ps->src[j] == '{' && strchr("{%#", ps->src[j + 1])) {
                kind = ps->src[j + 1];
                break;
            }
        }
        if (!kind) {
            if (!push_text(ps, i, ps->n, line_at(ps, i))) return false;
            break;
        }
        size_t open = j + 2;
        char mark = open < ps->n ? ps->src[open] : 0;
        size_t text_end = j;
        if (mark == '-') {
            text_end = i + rstrip_len(ps->src + i, j - i);
        } else if (mark != '+' && kind != '{') { /* lstrip_blocks */
            size_t line_start = j;
            while (line_start > i && ps->src[line_start - 1] != '\n')
                line_start--;
            if (line_start > i || line_starting) {
                if (skip_space(ps->src, j, line_start) == j) text_end = line_start;
            }
        }
        if (!push_text(ps, i, text_end, line_at(ps, i))) return false;
        if (mark == '-' || mark == '+') open++;
        int line = line_at(ps, j);

        bool strip_after = false, keep_newline = false;
        size_t after;
        if (kind == '#') {
            const char *end = NULL;
            for (size_t k = open; k + 1 < ps->n; k++)
                if (ps->src[k] == '#' && ps->src[k + 1] == '}') {
                    end = ps->src + k;
                    break;
                }
            if (!end) return fail(ps, SYN_ERR_FORMAT, line, "a comment is not closed");
            after = (size_t)(end - ps->src) + 2;
            strip_after = end > ps->src + open && end[-1] == '-';
            keep_newline = end > ps->src + open && end[-1] == '+';
        } else {
            if (!push_tok(
                    ps, (token){kind == '{' ? TK_VAR_BEGIN : TK_BLOCK_BEGIN, line, NULL, 0, 0, 0}))
                return false;
            size_t first = ps->n_toks;
            after = open;
            if (!lex_tag(ps, &after, kind == '{' ? '}' : '%', &strip_after, &keep_newline))
                return false;
            bool raw = kind == '%' && is_raw_tag(ps, first);
            if (raw) {
                ps->n_toks = first - 1; /* the raw tag itself leaves no tokens */
                if (!strip_after && !keep_newline && after < ps->n && ps->src[after] == '\n')
                    after++;
                if (!lex_raw(ps, &after, strip_after)) return false;
                i = after;
                line_starting = after > 0 && ps->src[after - 1] == '\n';
                continue;
            }
            if (!push_tok(ps, (token){kind == '{' ? TK_VAR_END : TK_BLOCK_END, line_at(ps, after),
                                      NULL, 0, 0, 0}))
                return false;
        }
        if (strip_after)
            after = skip_space(ps->src, ps->n, after);
        else if (kind != '{' && !keep_newline && after < ps->n && ps->src[after] == '\n')
            after++; /* trim_blocks */
        line_starting = after > 0 && ps->src[after - 1] == '\n';
        i = after;
    }
    return push_tok(ps, (token){TK_EOF, line_at(ps, ps->n), NULL, 0, 0, 0});
}

/* ---- parser ---- */

static token *peek(parser *ps) { return &ps->toks[ps->pos]; }
static token *peek_at(parser *ps, size_t ahead) {
    size_t k = ps->pos + ahead;
    return &ps->toks[k < ps->n_toks ? k : ps->n_toks - 1];
}
static token *next(parser *ps) {
    token *t = &ps->toks[ps->pos];
    if (t->kind != TK_EOF) ps->pos++;
    return t;
}

static bool tok_is(const token *t, tok_kind kind, const char *text) {
    if (t->kind != kind) return false;
    return !text || (t->n == strlen(text) && memcmp(t->p, text, t->n) == 0);
}
static bool at_op(parser *ps, const char *op) { return tok_is(peek(ps), TK_OP, op); }
static bool at_name(parser *ps, const char *name) { return tok_is(peek(ps), TK_NAME, name); }

static bool accept_op(parser *ps, const char *op) {
    if (!at_op(ps, op)) return false;
    next(ps);
    return true;
}
static bool accept_name(parser *ps, const char *name) {
    if (!at_name(ps, name)) return false;
    next(ps);
    return true;
}

static const char *describe(const token *t, char *buf, size_t cap) {
    switch (t->kind) {
    case TK_EOF: return "the end of the template";
    case TK_VAR_END: return "'}}'";
    case TK_BLOCK_END: return "'%}'";
    case TK_TEXT: return "text";
    case TK_STRING: return "a string";
    default: snprintf(buf, cap, "'%.*s'", (int)(t->n < 40 ? t->n : 40), t->p); return buf;
    }
}

static bool expect_op(parser *ps, const char *op) {
    if (accept_op(ps, op)) return true;
    char buf[64];
    return fail(ps, SYN_ERR_FORMAT, peek(ps)->line, "expected '%s', found %s", op,
                describe(peek(ps), buf, sizeof buf));
}

static bool expect_block_end(parser *ps) {
    if (peek(ps)->kind == TK_BLOCK_END) {
        next(ps);
        return true;
    }
    char buf[64];
    return fail(ps, SYN_ERR_FORMAT, peek(ps)->line, "expected '%%}', found %s",
                describe(peek(ps), buf, sizeof buf));
}

static jt_node *node(parser *ps, jt_node_kind kind, int line) {
    jt_node *n = jt_alloc(ps->arena, sizeof *n);
    if (!n) {
        no_memory(ps);
        return NULL;
    }
    n->kind = kind;
    n->line = line;
    return n;
}

/* A growable list of nodes (in the arena). */
typedef struct node_list {
    jt_node **items;
    size_t n, cap;
} node_list;

static bool list_add(parser *ps, node_list *l, jt_node *n) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jt_node **p = jt_alloc(ps->arena, cap * sizeof *p);
        if (!p) return no_memory(ps);
        if (l->n) memcpy(p, l->items, l->n * sizeof *p);
        l->items = p;
        l->cap = cap;
    }
    l->items[l->n++] = n;
    return true;
}

typedef struct name_list {
    jt_value *items;
    size_t n, cap;
} name_list;

static bool names_add(parser *ps, name_list *l, jt_value v) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jt_value *p = jt_alloc(ps->arena, cap * sizeof *p);
        if (!p) return no_memory(ps);
        if (l->n) memcpy(p, l->items, l->n * sizeof *p);
        l->items = p;
        l->cap = cap;
    }
    l->items[l->n++] = v;
    return true;
}

static bool enter(parser *ps) {
    if (++ps->depth > SYN_TEMPLATE_MAX_NESTING)
        return fail(ps, SYN_ERR_UNSUPPORTED, peek(ps)->line,
                    "the template nests deeper than %d (the nesting bound)",
                    SYN_TEMPLATE_MAX_NESTING);
    return true;
}
static void leave(parser *ps) { ps->depth--; }

static jt_node *parse_expr(parser *ps, bool with_cond);
static jt_node *parse_unary(parser *ps, bool with_filter);
static jt_node *parse_primary(parser *ps);

static jt_value tok_string(const token *t) { return jt_str(t->p, t->n); }

static bool is_keyword(const token *t) {
    static const char *const words[] = {"and", "or", "not", "in", "is", "if", "else", "recursive"};
    for (size_t k = 0; k < sizeof words / sizeof *words; k++)
        if (tok_is(t, TK_NAME, words[k])) return true;
    return false;
}

/* Call arguments after "(": positional and name=value, up to ")". */
static bool parse_args(parser *ps, jt_node *call) {
    node_list args = {0};
    name_list names = {0};
    while (!at_op(ps, ")")) {
        if (args.n && !expect_op(ps, ",")) return false;
        if (at_op(ps, ")")) break; /* a trailing comma */
        jt_value name = jt_str("", 0);
        if (peek(ps)->kind == TK_NAME && tok_is(peek_at(ps, 1), TK_OP, "=")) {
            name = tok_string(next(ps));
            next(ps);
        } else if (names.n && names.items[names.n - 1].s.n) {
            return fail(ps, SYN_ERR_FORMAT, peek(ps)->line,
                        "a positional argument follows a keyword argument");
        }
        jt_node *arg = parse_expr(ps, true);
        if (!arg || !list_add(ps, &args, arg) || !names_add(ps, &names, name)) return false;
    }
    next(ps);
    call->kids = args.items;
    call->n_kids = args.n;
    call->names = names.items;
    call->n_names = names.n;
    return true;
}

static jt_node *parse_postfix(parser *ps, jt_node *n) {
    for (;;) {
        token *t = peek(ps);
        if (tok_is(t, TK_OP, ".")) {
            next(ps);
            token *attr = next(ps);
            if (attr->kind == TK_NAME) {
                jt_node *a = node(ps, JN_ATTR, attr->line);
                if (!a) return NULL;
                a->a = n;
                a->name = tok_string(attr);
                n = a;
            } else if (attr->kind == TK_INT) { /* x.0 is x[0] */
                jt_node *item = node(ps, JN_ITEM, attr->line);
                jt_node *index = node(ps, JN_LITERAL, attr->line);
                if (!item || !index) return NULL;
                index->value = jt_int(attr->i);
                item->a = n;
                item->b = index;
                n = item;
            } else {
                fail(ps, SYN_ERR_FORMAT, attr->line, "expected a name after '.'");
                return NULL;
            }
        } else if (tok_is(t, TK_OP, "[")) {
            next(ps);
            jt_node *parts[3] = {NULL, NULL, NULL};
            int n_parts = 0;
            bool slice = false;
            for (;;) {
                if (!at_op(ps, ":") && !at_op(ps, "]")) {
                    parts[n_parts] = parse_expr(ps, true);
                    if (!parts[n_parts]) return NULL;
                }
                if (accept_op(ps, ":")) {
                    slice = true;
                    if (++n_parts > 2) {
                        fail(ps, SYN_ERR_FORMAT, t->line, "a slice has at most three parts");
                        return NULL;
                    }
                    continue;
                }
                break;
            }
            if (!expect_op(ps, "]")) return NULL;
            jt_node *s = node(ps, slice ? JN_SLICE : JN_ITEM, t->line);
            if (!s) return NULL;
            s->a = n;
            if (!slice && !parts[0]) {
                fail(ps, SYN_ERR_FORMAT, t->line, "an empty subscript");
                return NULL;
            }
            s->b = parts[0];
            s->c = parts[1];
            s->d = parts[2];
            n = s;
        } else if (tok_is(t, TK_OP, "(")) {
            next(ps);
            jt_node *call = node(ps, JN_CALL, t->line);
            if (!call) return NULL;
            call->a = n;
            if (!parse_args(ps, call)) return NULL;
            n = call;
        } else {
            return n;
        }
    }
}

/* After "|": `name` or `name(args)`, a filter applied to n (NULL: a block's render). */
static jt_node *parse_filter_step(parser *ps, jt_node *n) {
    token *name = next(ps);
    if (name->kind != TK_NAME) {
        fail(ps, SYN_ERR_FORMAT, name->line, "expected a filter name after '|'");
        return NULL;
    }
    jt_node *f = node(ps, JN_FILTER, name->line);
    if (!f) return NULL;
    f->a = n;
    f->name = tok_string(name);
    if (accept_op(ps, "(") && !parse_args(ps, f)) return NULL;
    return f;
}

/* "| name(args)" and "is [not] name args" after n. */
static jt_node *parse_filters_and_tests(parser *ps, jt_node *n) {
    for (;;) {
        if (accept_op(ps, "|")) {
            if (!(n = parse_filter_step(ps, n))) return NULL;
        } else if (at_name(ps, "is")) {
            int line = next(ps)->line;
            bool negated = accept_name(ps, "not");
            token *name = next(ps);
            if (name->kind != TK_NAME) {
                fail(ps, SYN_ERR_FORMAT, name->line, "expected a test name after 'is'");
                return NULL;
            }
            jt_node *t = node(ps, JN_TEST, line);
            if (!t) return NULL;
            t->a = n;
            t->name = tok_string(name);
            t->negated = negated;
            token *arg = peek(ps);
            if (accept_op(ps, "(")) {
                if (!parse_args(ps, t)) return NULL;
            } else if ((arg->kind == TK_NAME || arg->kind == TK_STRING || arg->kind == TK_INT ||
                        arg->kind == TK_FLOAT || tok_is(arg, TK_OP, "[") ||
                        tok_is(arg, TK_OP, "{")) &&
                       !is_keyword(arg)) {
                /* `is divisibleby 3`: one argument without parentheses */
                jt_node *value = parse_primary(ps);
                if (!value) return NULL;
                value = parse_postfix(ps, value);
                if (!value) return NULL;
                t->kids = jt_alloc(ps->arena, sizeof *t->kids);
                t->names = jt_alloc(ps->arena, sizeof *t->names);
                if (!t->kids || !t->names) {
                    no_memory(ps);
                    return NULL;
                }
                t->kids[0] = value;
                t->names[0] = jt_str("", 0);
                t->n_kids = t->n_names = 1;
            }
            n = t;
        } else {
            return n;
        }
    }
}

static jt_node *parse_sequence(parser *ps, jt_node_kind kind, const char *close, int line) {
    jt_node *n = node(ps, kind, line);
    if (!n) return NULL;
    node_list items = {0};
    while (!at_op(ps, close)) {
        if (items.n && !expect_op(ps, ",")) return NULL;
        if (at_op(ps, close)) break;
        jt_node *item = parse_expr(ps, true);
        if (!item || !list_add(ps, &items, item)) return NULL;
        if (kind == JN_DICT) {
            if (!expect_op(ps, ":")) return NULL;
            jt_node *value = parse_expr(ps, true);
            if (!value || !list_add(ps, &items, value)) return NULL;
        }
    }
    next(ps);
    n->kids = items.items;
    n->n_kids = items.n;
    return n;
}

static jt_node *parse_primary(parser *ps) {
    if (!enter(ps)) return NULL;
    jt_node *n = NULL;
    token *t = next(ps);
    switch (t->kind) {
    case TK_NAME: {
        static const struct {
            const char *word;
            int kind; /* 0 none, 1 true, 2 false */
        } constants[] = {{"none", 0}, {"None", 0},  {"true", 1},
                         {"True", 1}, {"false", 2}, {"False", 2}};
        for (size_t k = 0; k < sizeof constants / sizeof *constants; k++) {
            if (!tok_is(t, TK_NAME, constants[k].word)) continue;
            n = node(ps, JN_LITERAL, t->line);
            if (n) n->value = constants[k].kind == 0 ? jt_none() : jt_bool(constants[k].kind == 1);
            break;
        }
        if (!n && (n = node(ps, JN_NAME, t->line))) n->name = tok_string(t);
        break;
    }
    case TK_STRING: {
        /* Adjacent literals join, as in Python. */
        size_t total = t->n;
        size_t k = ps->pos;
        while (ps->toks[k].kind == TK_STRING)
            total += ps->toks[k++].n;
        char *joined = jt_alloc(ps->arena, total + 1);
        n = node(ps, JN_LITERAL, t->line);
        if (!joined || !n) {
            no_memory(ps);
            n = NULL;
            break;
        }
        memcpy(joined, t->p, t->n);
        size_t o = t->n;
        while (peek(ps)->kind == TK_STRING) {
            token *more = next(ps);
            memcpy(joined + o, more->p, more->n);
            o += more->n;
        }
        n->value = jt_str(joined, o);
        break;
    }
    case TK_INT:
    case TK_FLOAT:
        n = node(ps, JN_LITERAL, t->line);
        if (n) n->value = t->kind == TK_INT ? jt_int(t->i) : jt_float(t->f);
        break;
    case TK_OP:
        if (tok_is(t, TK_OP, "(")) {
            if (accept_op(ps, ")")) {
                n = node(ps, JN_TUPLE, t->line);
                break;
            }
            jt_node *first = parse_expr(ps, true);
            if (!first) break;
            if (at_op(ps, ",")) {
                n = node(ps, JN_TUPLE, t->line);
                if (!n) break;
                node_list items = {0};
                if (!list_add(ps, &items, first)) break;
                while (accept_op(ps, ",")) {
                    if (at_op(ps, ")")) break;
                    jt_node *item = parse_expr(ps, true);
                    if (!item || !list_add(ps, &items, item)) {
                        n = NULL;
                        break;
                    }
                }
                if (!n) break;
                n->kids = items.items;
                n->n_kids = items.n;
            } else {
                n = first;
            }
            if (!expect_op(ps, ")")) n = NULL;
            break;
        }
        if (tok_is(t, TK_OP, "[")) {
            n = parse_sequence(ps, JN_LIST, "]", t->line);
            break;
        }
        if (tok_is(t, TK_OP, "{")) {
            n = parse_sequence(ps, JN_DICT, "}", t->line);
            break;
        }
        /* fall through */
    default: {
        char buf[64];
        fail(ps, SYN_ERR_FORMAT, t->line, "unexpected %s", describe(t, buf, sizeof buf));
    }
    }
    leave(ps);
    return n && ps->status == SYN_OK ? n : NULL;
}

static jt_node *parse_unary(parser *ps, bool with_filter) {
    if (!enter(ps)) return NULL;
    jt_node *n;
    token *t = peek(ps);
    if (tok_is(t, TK_OP, "-") || tok_is(t, TK_OP, "+")) {
        next(ps);
        jt_node *operand = parse_unary(ps, false);
        n = operand ? node(ps, tok_is(t, TK_OP, "-") ? JN_NEG : JN_POS, t->line) : NULL;
        if (n) n->a = operand;
    } else {
        n = parse_primary(ps);
        if (n) n = parse_postfix(ps, n);
    }
    if (n && with_filter) n = parse_filters_and_tests(ps, n);
    leave(ps);
    return n;
}

static jt_node *binary(parser *ps, jt_op op, jt_node *a, jt_node *b, int line) {
    if (!a || !b) return NULL;
    jt_node *n = node(ps, JN_BINARY, line);
    if (!n) return NULL;
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static jt_node *parse_pow(parser *ps) {
    jt_node *n = parse_unary(ps, true);
    while (n && at_op(ps, "**")) {
        int line = next(ps)->line;
        n = binary(ps, JO_POW, n, parse_unary(ps, true), line);
    }
    return n;
}

static jt_node *parse_math2(parser *ps) {
    jt_node *n = parse_pow(ps);
    for (;;) {
        jt_op op;
        if (at_op(ps, "*"))
            op = JO_MUL;
        else if (at_op(ps, "/"))
            op = JO_DIV;
        else if (at_op(ps, "//"))
            op = JO_FLOORDIV;
        else if (at_op(ps, "%"))
            op = JO_MOD;
        else
            return n;
        if (!n) return NULL;
        int line = next(ps)->line;
        n = binary(ps, op, n, parse_pow(ps), line);
    }
}

static jt_node *parse_concat(parser *ps) {
    jt_node *n = parse_math2(ps);
    while (n && at_op(ps, "~")) {
        int line = next(ps)->line;
        n = binary(ps, JO_CONCAT, n, parse_math2(ps), line);
    }
    return n;
}

static jt_node *parse_math1(parser *ps) {
    jt_node *n = parse_concat(ps);
    while (n && (at_op(ps, "+") || at_op(ps, "-"))) {
        token *t = next(ps);
        n = binary(ps, tok_is(t, TK_OP, "+") ? JO_ADD : JO_SUB, n, parse_concat(ps), t->line);
    }
    return n;
}

static jt_node *parse_compare(parser *ps) {
    jt_node *n = parse_math1(ps);
    jt_node *chain = NULL; /* a < b < c is (a < b) and (b < c) */
    jt_node *left = n;
    for (;;) {
        if (!left) return NULL;
        static const struct {
            const char *op;
            jt_op code;
        } ops[] = {{"==", JO_EQ}, {"!=", JO_NE}, {"<", JO_LT},
                   {"<=", JO_LE}, {">", JO_GT},  {">=", JO_GE}};
        int line = peek(ps)->line;
        jt_op op;
        bool found = false;
        for (size_t k = 0; k < sizeof ops / sizeof *ops && !found; k++)
            if (at_op(ps, ops[k].op)) {
                op = ops[k].code;
                found = true;
            }
        if (found) {
            next(ps);
        } else if (at_name(ps, "in")) {
            next(ps);
            op = JO_IN;
        } else if (at_name(ps, "not") && tok_is(peek_at(ps, 1), TK_NAME, "in")) {
            next(ps);
            next(ps);
            op = JO_NOT_IN;
        } else {
            return chain ? chain : left;
        }
        jt_node *right = parse_math1(ps);
        jt_node *cmp = binary(ps, op, left, right, line);
        if (!cmp) return NULL;
        if (chain) {
            jt_node *both = node(ps, JN_AND, line);
            if (!both) return NULL;
            both->a = chain;
            both->b = cmp;
            chain = both;
        } else {
            chain = cmp;
        }
        left = right;
    }
}

static jt_node *parse_not(parser *ps) {
    if (at_name(ps, "not")) {
        if (!enter(ps)) return NULL;
        int line = next(ps)->line;
        jt_node *operand = parse_not(ps);
        jt_node *n = operand ? node(ps, JN_NOT, line) : NULL;
        if (n) n->a = operand;
        leave(ps);
        return n;
    }
    return parse_compare(ps);
}

/* `a WORD b WORD c ...` left-associative, each operand parsed by sub. */
static jt_node *parse_logic(parser *ps, const char *word, jt_node_kind kind,
                            jt_node *(*sub)(parser *)) {
    jt_node *n = sub(ps);
    while (n && at_name(ps, word)) {
        int line = next(ps)->line;
        jt_node *right = sub(ps);
        jt_node *both = right ? node(ps, kind, line) : NULL;
        if (!both) return NULL;
        both->a = n;
        both->b = right;
        n = both;
    }
    return n;
}

static jt_node *parse_and(parser *ps) { return parse_logic(ps, "and", JN_AND, parse_not); }
static jt_node *parse_or(parser *ps) { return parse_logic(ps, "or", JN_OR, parse_and); }

static jt_node *parse_expr(parser *ps, bool with_cond) {
    if (!enter(ps)) return NULL;
    jt_node *n = parse_or(ps);
    while (n && with_cond && at_name(ps, "if")) {
        int line = next(ps)->line;
        jt_node *cond = parse_or(ps);
        jt_node *otherwise = NULL;
        if (cond && accept_name(ps, "else")) otherwise = parse_expr(ps, true);
        if (!cond || (ps->status != SYN_OK)) {
            n = NULL;
            break;
        }
        jt_node *c = node(ps, JN_COND, line);
        if (!c) {
            n = NULL;
            break;
        }
        c->a = cond;
        c->b = n;
        c->c = otherwise;
        n = c;
    }
    leave(ps);
    return n;
}

/* An expression, or a tuple of them when commas follow (`set a = 1, 2`, `{{ a, b }}`). */
static jt_node *parse_tuple_expr(parser *ps, bool with_cond) {
    jt_node *first = parse_expr(ps, with_cond);
    if (!first || !at_op(ps, ",")) return first;
    jt_node *t = node(ps, JN_TUPLE, first->line);
    if (!t) return NULL;
    node_list items = {0};
    if (!list_add(ps, &items, first)) return NULL;
    while (accept_op(ps, ",")) {
        if (peek(ps)->kind == TK_BLOCK_END || peek(ps)->kind == TK_VAR_END) break;
        jt_node *item = parse_expr(ps, with_cond);
        if (!item || !list_add(ps, &items, item)) return NULL;
    }
    t->kids = items.items;
    t->n_kids = items.n;
    return t;
}

/* Assignment targets: `a`, `a, b`, `(a, b)`. */
static bool parse_targets(parser *ps, name_list *targets) {
    bool paren = accept_op(ps, "(");
    do {
        token *t = next(ps);
        if (t->kind != TK_NAME || is_keyword(t))
            return fail(ps, SYN_ERR_FORMAT, t->line, "expected a variable name");
        if (!names_add(ps, targets, tok_string(t))) return false;
    } while (accept_op(ps, ","));
    return !paren || expect_op(ps, ")");
}

/* ---- statements ---- */

static bool parse_body(parser *ps, node_list *body, const char *const *ends, size_t n_ends,
                       const char **ended);

static bool block_named(parser *ps, const char *name) {
    return peek(ps)->kind == TK_BLOCK_BEGIN && tok_is(peek_at(ps, 1), TK_NAME, name);
}

/* Parses a body up to one of ends, consuming that end tag's name; *which is the index found. */
static bool parse_until(parser *ps, node_list *body, const char *const *ends, size_t n_ends,
                        size_t *which, int line, const char *what) {
    const char *ended = NULL;
    if (!parse_body(ps, body, ends, n_ends, &ended)) return false;
    if (!ended)
        return fail(ps, SYN_ERR_FORMAT, line, "'%s' is not closed (expected '%s')", what,
                    ends[n_ends - 1]);
    for (size_t k = 0; k < n_ends; k++)
        if (ended == ends[k]) *which = k;
    next(ps); /* the block's begin */
    next(ps); /* its name */
    return true;
}

/* After `{% else`: the branch up to end_name, into n->kids2. */
static bool parse_else_branch(parser *ps, jt_node *n, const char *end_name, int line,
                              const char *what) {
    if (!expect_block_end(ps)) return false;
    const char *const end[] = {end_name};
    node_list orelse = {0};
    size_t which;
    if (!parse_until(ps, &orelse, end, 1, &which, line, what)) return false;
    n->kids2 = orelse.items;
    n->n_kids2 = orelse.n;
    return true;
}

static jt_node *parse_if(parser *ps, int line) {
    jt_node *n = node(ps, JN_IF, line);
    if (!n) return NULL;
    n->a = parse_tuple_expr(ps, true);
    if (!n->a || !expect_block_end(ps)) return NULL;
    static const char *const ends[] = {"elif", "else", "endif"};
    node_list body = {0};
    size_t which = 0;
    if (!parse_until(ps, &body, ends, 3, &which, line, "if")) return NULL;
    n->kids = body.items;
    n->n_kids = body.n;
    if (which == 0) { /* elif: an if in the else branch */
        jt_node *elif = parse_if(ps, peek(ps)->line);
        if (!elif) return NULL;
        n->kids2 = jt_alloc(ps->arena, sizeof *n->kids2);
        if (!n->kids2) return no_memory(ps), NULL;
        n->kids2[0] = elif;
        n->n_kids2 = 1;
        return n;
    }
    if (which == 1) {
        if (!parse_else_branch(ps, n, "endif", line, "if")) return NULL;
    }
    return expect_block_end(ps) ? n : NULL;
}

static jt_node *parse_for(parser *ps, int line) {
    jt_node *n = node(ps, JN_FOR, line);
    if (!n) return NULL;
    name_list targets = {0};
    if (!parse_targets(ps, &targets)) return NULL;
    n->names = targets.items;
    n->n_names = targets.n;
    if (!accept_name(ps, "in")) {
        fail(ps, SYN_ERR_FORMAT, peek(ps)->line, "expected 'in' in a for loop");
        return NULL;
    }
    n->a = parse_tuple_expr(ps, false);
    if (!n->a) return NULL;
    if (accept_name(ps, "if")) {
        n->b = parse_expr(ps, true);
        if (!n->b) return NULL;
    }
    if (accept_name(ps, "recursive")) {
        fail(ps, SYN_ERR_UNSUPPORTED, line, "recursive for loops are not supported");
        return NULL;
    }
    if (!expect_block_end(ps)) return NULL;
    static const char *const ends[] = {"else", "endfor"};
    node_list body = {0};
    size_t which = 0;
    if (!parse_until(ps, &body, ends, 2, &which, line, "for")) return NULL;
    n->kids = body.items;
    n->n_kids = body.n;
    if (which == 0) {
        if (!parse_else_branch(ps, n, "endfor", line, "for")) return NULL;
    }
    return expect_block_end(ps) ? n : NULL;
}

/* A filter chain `| a(x) | b` for {% filter %} and {% set x | f %}: a JN_FILTER whose innermost
 * input is NULL (the block's render). */
static jt_node *parse_filter_chain(parser *ps, bool leading_bar) {
    jt_node *n = NULL;
    bool first = true;
    while (first ? (!leading_bar || accept_op(ps, "|")) : accept_op(ps, "|")) {
        first = false;
        if (!(n = parse_filter_step(ps, n))) return NULL;
    }
    return n;
}

static jt_node *parse_set(parser *ps, int line) {
    token *target = next(ps);
    if (target->kind != TK_NAME) {
        fail(ps, SYN_ERR_FORMAT, target->line, "expected a variable name after 'set'");
        return NULL;
    }
    if (accept_op(ps, ".")) { /* set ns.attr = value */
        token *attr = next(ps);
        if (attr->kind != TK_NAME) {
            fail(ps, SYN_ERR_FORMAT, attr->line, "expected an attribute name");
            return NULL;
        }
        jt_node *n = node(ps, JN_SET, line);
        if (!n) return NULL;
        n->names = jt_alloc(ps->arena, sizeof *n->names);
        if (!n->names) return no_memory(ps), NULL;
        n->names[0] = tok_string(target);
        n->n_names = 1;
        n->name = tok_string(attr);
        if (!expect_op(ps, "=")) return NULL;
        n->a = parse_tuple_expr(ps, true);
        return n->a && expect_block_end(ps) ? n : NULL;
    }
    ps->pos--;
    name_list targets = {0};
    if (!parse_targets(ps, &targets)) return NULL;
    if (accept_op(ps, "=")) {
        jt_node *n = node(ps, JN_SET, line);
        if (!n) return NULL;
        n->names = targets.items;
        n->n_names = targets.n;
        n->a = parse_tuple_expr(ps, true);
        return n->a && expect_block_end(ps) ? n : NULL;
    }
    if (targets.n != 1) {
        fail(ps, SYN_ERR_FORMAT, line, "a block set assigns one variable");
        return NULL;
    }
    jt_node *n = node(ps, JN_SET_BLOCK, line);
    if (!n) return NULL;
    n->names = targets.items;
    n->n_names = 1;
    if (at_op(ps, "|") && !(n->b = parse_filter_chain(ps, true))) return NULL;
    if (!expect_block_end(ps)) return NULL;
    static const char *const end[] = {"endset"};
    node_list body = {0};
    size_t which;
    if (!parse_until(ps, &body, end, 1, &which, line, "set")) return NULL;
    n->kids = body.items;
    n->n_kids = body.n;
    return expect_block_end(ps) ? n : NULL;
}

/* `(a, b=default, ...)` of a macro or a call block. */
static bool parse_params(parser *ps, jt_node *n) {
    name_list names = {0};
    node_list defaults = {0};
    if (!expect_op(ps, "(")) return false;
    while (!at_op(ps, ")")) {
        if (names.n && !expect_op(ps, ",")) return false;
        token *name = next(ps);
        if (name->kind != TK_NAME)
            return fail(ps, SYN_ERR_FORMAT, name->line, "expected a parameter name");
        jt_node *def = NULL;
        if (accept_op(ps, "=") && !(def = parse_expr(ps, true))) return false;
        if (!names_add(ps, &names, tok_string(name)) || !list_add(ps, &defaults, def)) return false;
    }
    next(ps);
    n->names = names.items;
    n->n_names = names.n;
    n->kids2 = defaults.items;
    n->n_kids2 = defaults.n;
    return true;
}

static jt_node *parse_macro(parser *ps, int line) {
    token *name = next(ps);
    if (name->kind != TK_NAME) {
        fail(ps, SYN_ERR_FORMAT, name->line, "expected a macro name");
        return NULL;
    }
    jt_node *n = node(ps, JN_MACRO, line);
    if (!n) return NULL;
    n->name = tok_string(name);
    if (!parse_params(ps, n) || !expect_block_end(ps)) return NULL;
    static const char *const end[] = {"endmacro"};
    node_list body = {0};
    size_t which;
    if (!parse_until(ps, &body, end, 1, &which, line, "macro")) return NULL;
    n->kids = body.items;
    n->n_kids = body.n;
    if (peek(ps)->kind == TK_NAME) next(ps); /* {% endmacro name %} */
    return expect_block_end(ps) ? n : NULL;
}

static jt_node *parse_call_block(parser *ps, int line) {
    jt_node *n = node(ps, JN_CALL_BLOCK, line);
    if (!n) return NULL;
    if (at_op(ps, "(") && !parse_params(ps, n)) return NULL;
    n->a = parse_expr(ps, true);
    if (!n->a) return NULL;
    if (n->a->kind != JN_CALL) {
        fail(ps, SYN_ERR_FORMAT, line, "{%% call %%} needs a macro call");
        return NULL;
    }
    if (!expect_block_end(ps)) return NULL;
    static const char *const end[] = {"endcall"};
    node_list body = {0};
    size_t which;
    if (!parse_until(ps, &body, end, 1, &which, line, "call")) return NULL;
    n->kids = body.items;
    n->n_kids = body.n;
    return expect_block_end(ps) ? n : NULL;
}

static jt_node *parse_simple_block(parser *ps, jt_node_kind kind, const char *end_name, int line) {
    jt_node *n = node(ps, kind, line);
    if (!n) return NULL;
    if (kind == JN_FILTER_BLOCK && !(n->b = parse_filter_chain(ps, false))) return NULL;
    if (!expect_block_end(ps)) return NULL;
    const char *const end[] = {end_name};
    node_list body = {0};
    size_t which;
    if (!parse_until(ps, &body, end, 1, &which, line, end_name + 3)) return NULL;
    n->kids = body.items;
    n->n_kids = body.n;
    return expect_block_end(ps) ? n : NULL;
}

static jt_node *parse_statement(parser *ps) {
    int line = next(ps)->line; /* the block's begin */
    token *t = next(ps);
    if (t->kind != TK_NAME) {
        fail(ps, SYN_ERR_FORMAT, t->line, "expected a statement name after '{%%'");
        return NULL;
    }
    if (!enter(ps)) return NULL;
    jt_node *n = NULL;
    if (tok_is(t, TK_NAME, "if")) {
        n = parse_if(ps, line);
    } else if (tok_is(t, TK_NAME, "for")) {
        n = parse_for(ps, line);
    } else if (tok_is(t, TK_NAME, "set")) {
        n = parse_set(ps, line);
    } else if (tok_is(t, TK_NAME, "macro")) {
        n = parse_macro(ps, line);
    } else if (tok_is(t, TK_NAME, "call")) {
        n = parse_call_block(ps, line);
    } else if (tok_is(t, TK_NAME, "filter")) {
        n = parse_simple_block(ps, JN_FILTER_BLOCK, "endfilter", line);
    } else if (tok_is(t, TK_NAME, "generation")) {
        n = parse_simple_block(ps, JN_BODY, "endgeneration", line);
    } else if (tok_is(t, TK_NAME, "break") || tok_is(t, TK_NAME, "continue")) {
        n = node(ps, tok_is(t, TK_NAME, "break") ? JN_BREAK : JN_CONTINUE, line);
        if (n && !expect_block_end(ps)) n = NULL;
    } else if (tok_is(t, TK_NAME, "include") || tok_is(t, TK_NAME, "extends") ||
               tok_is(t, TK_NAME, "import") || tok_is(t, TK_NAME, "from") ||
               tok_is(t, TK_NAME, "block")) {
        fail(ps, SYN_ERR_UNSUPPORTED, line,
             "'%.*s' needs other templates, which a chat template cannot load", (int)t->n, t->p);
    } else {
        fail(ps, SYN_ERR_FORMAT, line, "unknown statement '%.*s'", (int)(t->n < 40 ? t->n : 40),
             t->p);
    }
    leave(ps);
    return n;
}

/* Nodes up to the end of the template or to a block named in ends (left unconsumed, *ended
 * pointing at that name). An end tag that belongs to no open block is an error. */
static bool parse_body(parser *ps, node_list *body, const char *const *ends, size_t n_ends,
                       const char **ended) {
    static const char *const all_ends[] = {"elif",    "else",      "endif",
                                           "endfor",  "endset",    "endmacro",
                                           "endcall", "endfilter", "endgeneration"};
    *ended = NULL;
    for (;;) {
        token *t = peek(ps);
        jt_node *n = NULL;
        if (t->kind == TK_EOF) return true;
        if (t->kind == TK_TEXT) {
            next(ps);
            n = node(ps, JN_TEXT, t->line);
            if (n) n->value = jt_str(t->p, t->n);
        } else if (t->kind == TK_VAR_BEGIN) {
            next(ps);
            n = node(ps, JN_OUTPUT, t->line);
            if (n && !(n->a = parse_tuple_expr(ps, true))) n = NULL;
            if (n && peek(ps)->kind != TK_VAR_END) {
                char buf[64];
                fail(ps, SYN_ERR_FORMAT, peek(ps)->line, "expected '}}', found %s",
                     describe(peek(ps), buf, sizeof buf));
                n = NULL;
            }
            if (n) next(ps);
        } else if (t->kind == TK_BLOCK_BEGIN) {
            for (size_t k = 0; k < n_ends; k++)
                if (block_named(ps, ends[k])) {
                    *ended = ends[k];
                    return true;
                }
            for (size_t k = 0; k < sizeof all_ends / sizeof *all_ends; k++)
                if (block_named(ps, all_ends[k]))
                    return fail(ps, SYN_ERR_FORMAT, t->line, "unexpected '%s'", all_ends[k]);
            n = parse_statement(ps);
        } else {
            char buf[64];
            return fail(ps, SYN_ERR_FORMAT, t->line, "unexpected %s", describe(t, buf, sizeof buf));
        }
        if (!n || !list_add(ps, body, n)) return false;
    }
}

syn_status syn_template_parse(const char *source, size_t n, syn_template **out) {
    if (!source || !out)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_template_parse: %s is NULL",
                        !source ? "source" : "out");
    *out = NULL;
    if (n > SYN_TEMPLATE_MAX_SOURCE)
        return syn_fail(SYN_ERR_UNSUPPORTED,
                        "template: the source is %zu bytes, over the bound of %zu", n,
                        SYN_TEMPLATE_MAX_SOURCE);
    parser ps = {.arena = jt_arena_new(), .line = 1};
    syn_template *t = calloc(1, sizeof *t);
    if (!ps.arena || !t) {
        jt_arena_free(ps.arena);
        free(t);
        return syn_fail(SYN_ERR_NO_MEMORY, "template: out of memory");
    }
    node_list body = {0};
    const char *ended;
    if (normalise(&ps, source, n) && lex(&ps)) parse_body(&ps, &body, NULL, 0, &ended);
    free(ps.toks);
    if (ps.status != SYN_OK) {
        jt_arena_free(ps.arena);
        free(t);
        return syn_fail(ps.status, "template: %s", ps.error);
    }
    t->arena = ps.arena;
    t->body = body.items;
    t->n_body = body.n;
    *out = t;
    return SYN_OK;
}

void syn_template_free(syn_template *t) {
    if (!t) return;
    jt_arena_free(t->arena);
    free(t);
}
