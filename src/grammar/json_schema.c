/* json_schema.c: JSON Schema -> GBNF text, then parsed by grammar.c. Every keyword either shapes
 * the grammar or is refused by name: a schema is never silently loosened. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "grammar/grammar.h"
#include "synapse_internal.h"

#define SCHEMA_MAX_BYTES (1u << 20)
#define SCHEMA_MAX_DEPTH 64
#define SCHEMA_MAX_REFS 256

typedef struct strbuf {
    char *s;
    size_t n, cap;
    bool oom;
} strbuf;

static void sb_add(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(strbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if (b->s && b->n + (size_t)n < b->cap) {
            b->n += (size_t)n;
            return;
        }
        size_t cap = (b->cap + (size_t)n + 1) * 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = true;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

typedef struct ctx {
    strbuf out; /* the rules */
    json_t *root;
    unsigned next;
    const char *ref_name[SCHEMA_MAX_REFS];
    unsigned ref_rule[SCHEMA_MAX_REFS];
    size_t n_refs;
} ctx;

/* Appends bytes as a GBNF literal. */
static void add_literal(strbuf *b, const char *s) {
    sb_add(b, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            sb_add(b, "\\%c", *c);
        else if (*c < 0x20)
            sb_add(b, "\\x%02x", *c);
        else
            sb_add(b, "%c", *c);
    }
    sb_add(b, "\"");
}

static const char *const COMMON_RULES =
    "ws ::= [ \\t\\n]{0,4}\n"
    "jchar ::= [^\"\\\\\\x00-\\x1f] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n"
    "jstring ::= \"\\\"\" jchar* \"\\\"\"\n"
    "jint ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15})\n"
    "jnumber ::= jint (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?\n"
    "jbool ::= \"true\" | \"false\"\n"
    "jnull ::= \"null\"\n"
    "jvalue ::= jobject | jarray | jstring | jnumber | jbool | jnull\n"
    "jobject ::= \"{\" ws (jstring ws \":\" ws jvalue ws (\",\" ws jstring ws \":\" ws jvalue "
    "ws)*)? \"}\"\n"
    "jarray ::= \"[\" ws (jvalue ws (\",\" ws jvalue ws)*)? \"]\"\n"
    "d2 ::= [0-9] [0-9]\n"
    "jmd ::= (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]) | (\"0\" "
    "[13-9] | \"1\" [0-2]) \"-\" (\"29\" | \"30\") | (\"0\" [13578] | \"1\" [02]) \"-31\" | "
    "\"02-29\"\n"
    "jday ::= d2 d2 \"-\" jmd\n"
    "jtime ::= ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" ([0-5] [0-9] | \"60\") (\".\" "
    "[0-9]{1,9})? (\"Z\" | [-+] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])\n"
    "jdate ::= \"\\\"\" jday \"\\\"\"\n"
    "jdatetime ::= \"\\\"\" jday \"T\" jtime \"\\\"\"\n"
    "xchar ::= [^\"\\\\\\x00-\\x1f]\n"
    "h4 ::= [0-9a-fA-F]{4}\n"
    "juuid ::= \"\\\"\" h4 h4 \"-\" h4 \"-\" h4 \"-\" h4 \"-\" h4 h4 h4 \"\\\"\"\n";

static syn_status gen(ctx *c, json_t *s, unsigned depth, unsigned *rule);

static syn_status bad(const char *what, const char *key) {
    return syn_fail(SYN_ERR_UNSUPPORTED, "json_schema: %s '%s' cannot be enforced", what, key);
}

/* The rule for a local reference, generated once (so recursive schemas become recursive rules). */
static syn_status gen_ref(ctx *c, const char *ref, unsigned depth, unsigned *rule) {
    for (size_t i = 0; i < c->n_refs; i++)
        if (!strcmp(c->ref_name[i], ref)) {
            *rule = c->ref_rule[i];
            return SYN_OK;
        }
    json_t *target = NULL;
    if (!strcmp(ref, "#")) {
        target = c->root;
    } else if (!strncmp(ref, "#/$defs/", 8)) {
        target = json_object_get(json_object_get(c->root, "$defs"), ref + 8);
    } else if (!strncmp(ref, "#/definitions/", 14)) {
        target = json_object_get(json_object_get(c->root, "definitions"), ref + 14);
    } else {
        return syn_fail(SYN_ERR_UNSUPPORTED,
                        "json_schema: $ref '%s' is not a local #/$defs/ reference", ref);
    }
    if (!target)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "json_schema: $ref '%s' names nothing", ref);
    if (c->n_refs == SCHEMA_MAX_REFS)
        return syn_fail(SYN_ERR_UNSUPPORTED, "json_schema: more than %d $ref targets",
                        SCHEMA_MAX_REFS);
    /* name it first: a reference back to it inside resolves to this rule */
    const unsigned r = c->next++;
    c->ref_name[c->n_refs] = ref;
    c->ref_rule[c->n_refs++] = r;
    unsigned body;
    syn_status st = gen(c, target, depth + 1, &body);
    if (st != SYN_OK) return st;
    sb_add(&c->out, "r%u ::= r%u\n", r, body);
    *rule = r;
    return SYN_OK;
}

/* Appends code point cp as a GBNF literal or class member (escaped: always safe). */
static void add_cp(strbuf *b, uint32_t cp) { sb_add(b, "\\U%08x", (unsigned)cp); }

/* The rule X for a key string (after its opening quote) that is none of the n keys, all of which
 * start with the same d code points: close here (unless one of them ends here), go on with one
 * of their next code points, or leave them all with any other character. Escapes are not used in
 * such keys, so that an escaped spelling of a listed key cannot pass as another key. */
static void gen_not_keys(ctx *c, uint32_t **keys, const size_t *lens, size_t n, size_t d,
                         unsigned rule) {
    strbuf b = {0};
    bool ends = false;
    for (size_t i = 0; i < n; i++)
        ends |= lens[i] == d;
    sb_add(&b, "r%u ::= ", rule);
    const char *sep = "";
    if (!ends) {
        sb_add(&b, "\"\\\"\"");
        sep = " | ";
    }
    sb_add(&b, "%s[^\"\\\\\\x00-\\x1f", sep);
    for (size_t i = 0; i < n; i++)
        if (lens[i] > d) add_cp(&b, keys[i][d]);
    sb_add(&b, "] xchar* \"\\\"\"");
    /* one branch per distinct next code point */
    for (size_t i = 0; i < n; i++) {
        if (lens[i] <= d) continue;
        bool first = true;
        for (size_t j = 0; j < i && first; j++)
            first = !(lens[j] > d && keys[j][d] == keys[i][d]);
        if (!first) continue;
        uint32_t **sub = malloc(n * sizeof *sub);
        size_t *sub_len = malloc(n * sizeof *sub_len);
        if (!sub || !sub_len) {
            free(sub);
            free(sub_len);
            c->out.oom = true;
            break;
        }
        size_t m = 0;
        for (size_t j = i; j < n; j++)
            if (lens[j] > d && keys[j][d] == keys[i][d]) {
                sub[m] = keys[j];
                sub_len[m++] = lens[j];
            }
        const unsigned r = c->next++;
        sb_add(&b, " | \"");
        add_cp(&b, keys[i][d]);
        sb_add(&b, "\" r%u", r);
        gen_not_keys(c, sub, sub_len, m, d + 1, r);
        free(sub);
        free(sub_len);
    }
    sb_add(&c->out, "%s\n", b.s ? b.s : "");
    c->out.oom |= b.oom;
    free(b.s);
}

/* The rule for an extra key: a JSON string that is none of props' keys (props may be NULL). */
static syn_status gen_extra_key(ctx *c, json_t *props, unsigned *rule) {
    const size_t n = props ? json_object_size(props) : 0;
    uint32_t **keys = calloc(n ? n : 1, sizeof *keys);
    size_t *lens = calloc(n ? n : 1, sizeof *lens);
    syn_status st =
        keys && lens ? SYN_OK : syn_fail(SYN_ERR_NO_MEMORY, "json_schema: out of memory");
    size_t i = 0;
    const char *key;
    json_t *val;
    if (st == SYN_OK && props) {
        json_object_foreach(props, key, val) {
            const size_t len = strlen(key);
            keys[i] = malloc((len ? len : 1) * sizeof **keys);
            if (!keys[i]) {
                st = syn_fail(SYN_ERR_NO_MEMORY, "json_schema: out of memory");
                break;
            }
            bool plain = true; /* a key that needs escapes cannot be spelled by an extra key */
            for (size_t at = 0; at < len;) { /* jansson keeps keys valid UTF-8 */
                uint32_t cp = 0xFFFD;
                const int k = syn_utf8_next((const uint8_t *)key + at, len - at, &cp);
                plain &= cp >= 0x20 && cp != '"' && cp != '\\';
                keys[i][lens[i]++] = cp;
                at += k > 0 ? (size_t)k : 1;
            }
            if (plain) {
                i++;
            } else {
                free(keys[i]);
                keys[i] = NULL;
                lens[i] = 0;
            }
        }
    }
    if (st == SYN_OK) {
        const unsigned body = c->next++;
        *rule = c->next++;
        gen_not_keys(c, keys, lens, i, 0, body);
        sb_add(&c->out, "r%u ::= \"\\\"\" r%u\n", *rule, body);
    }
    for (size_t j = 0; keys && j < i; j++)
        free(keys[j]);
    free(keys);
    free(lens);
    return st;
}

static bool all_digit(const char *s, size_t n, char d) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != d) return false;
    return true;
}

/* One item matching the n-digit strings from x to y (same length n >= 1, x <= y). */
static void digits_between(strbuf *b, const char *x, const char *y, size_t n) {
    if (x[0] == y[0]) {
        sb_add(b, "\"%c\"", x[0]);
        if (n > 1) {
            sb_add(b, " ");
            digits_between(b, x + 1, y + 1, n - 1);
        }
        return;
    }
    static const char nines[] = "9999999999999999999", zeros[] = "0000000000000000000";
    const bool x_low = all_digit(x + 1, n - 1, '0'), y_high = all_digit(y + 1, n - 1, '9');
    char lo = x[0], hi = y[0];
    const char *sep = "";
    sb_add(b, "(");
    if (!x_low) { /* x's first digit, then x's tail up to 9...9 */
        sb_add(b, "\"%c\" ", x[0]);
        digits_between(b, x + 1, nines, n - 1);
        sep = " | ";
        lo++;
    }
    if (!y_high) hi--;
    if (lo <= hi) {
        sb_add(b, "%s[%c-%c]", sep, lo, hi);
        if (n > 1) sb_add(b, " [0-9]{%zu}", n - 1);
        sep = " | ";
    }
    if (!y_high) {
        sb_add(b, "%s\"%c\" ", sep, y[0]);
        digits_between(b, zeros, y + 1, n - 1);
    }
    sb_add(b, ")");
}

/* Alternatives (each after sep) for the integers lo..hi written without leading zeros, 0 <= lo;
 * no hi: unbounded. */
static void naturals(strbuf *b, long long lo, bool has_hi, long long hi, const char **sep) {
    if (has_hi && hi < lo) return;
    if (lo == 0) {
        sb_add(b, "%s\"0\"", *sep);
        *sep = " | ";
        if (has_hi && hi == 0) return;
        lo = 1;
    }
    char a[24], z[24];
    const size_t la = (size_t)snprintf(a, sizeof a, "%lld", lo);
    const size_t lb = has_hi ? (size_t)snprintf(z, sizeof z, "%lld", hi) : 0;
    if (has_hi && la == lb) {
        sb_add(b, "%s", *sep);
        digits_between(b, a, z, la);
        *sep = " | ";
        return;
    }
    char top[24];
    memset(top, '9', la);
    top[la] = 0;
    sb_add(b, "%s", *sep);
    digits_between(b, a, top, la);
    *sep = " | ";
    if (!has_hi) {
        sb_add(b, " | [1-9] [0-9]{%zu,}", la);
        return;
    }
    if (lb - la >= 2) sb_add(b, " | [1-9] [0-9]{%zu,%zu}", la, lb - 2);
    char bottom[24];
    memset(bottom, '0', lb);
    bottom[0] = '1';
    bottom[lb] = 0;
    sb_add(b, " | ");
    digits_between(b, bottom, z, lb);
}

/* An integer bound: kw (minimum or maximum) and its exclusive form, as an inclusive value. */
static syn_status int_bound(json_t *s, bool upper, bool *has, long long *v) {
    const char *kw = upper ? "maximum" : "minimum";
    const char *ex_kw = upper ? "exclusiveMaximum" : "exclusiveMinimum";
    json_t *inc = json_object_get(s, kw), *ex = json_object_get(s, ex_kw);
    *has = false;
    const double lim = 1e18;
    if (inc) {
        if (!json_is_number(inc) || fabs(json_number_value(inc)) > lim)
            return bad("bound not a number within 1e18:", kw);
        const double x = json_number_value(inc);
        *v = (long long)(upper ? floor(x) : ceil(x));
        *has = true;
    }
    if (ex && json_is_boolean(ex)) { /* draft 4: a flag on the inclusive bound */
        if (json_is_true(ex)) {
            if (!inc) return bad("flag without its bound:", ex_kw);
            const double x = json_number_value(inc);
            if (x == floor(x)) *v += upper ? -1 : 1;
        }
    } else if (ex) {
        if (!json_is_number(ex) || fabs(json_number_value(ex)) > lim)
            return bad("bound not a number within 1e18:", ex_kw);
        const double x = json_number_value(ex);
        const long long e = (long long)(upper ? ceil(x) - 1 : floor(x) + 1);
        if (!*has || (upper ? e < *v : e > *v)) *v = e;
        *has = true;
    }
    return SYN_OK;
}

/* An integer within minimum/maximum (and their exclusive forms), as digit-range alternatives. */
static syn_status gen_integer(json_t *s, strbuf *b) {
    bool has_lo, has_hi;
    long long lo = 0, hi = 0;
    syn_status st = int_bound(s, false, &has_lo, &lo);
    if (st == SYN_OK) st = int_bound(s, true, &has_hi, &hi);
    if (st != SYN_OK) return st;
    if (!has_lo && !has_hi) {
        sb_add(b, "jint");
        return SYN_OK;
    }
    if (has_lo && has_hi && lo > hi)
        return syn_fail(SYN_ERR_UNSUPPORTED,
                        "json_schema: minimum %lld above maximum %lld: no integer fits", lo, hi);
    const char *sep = "";
    sb_add(b, "(");
    if (!has_hi || hi >= 0) { /* the non-negative part */
        naturals(b, has_lo && lo > 0 ? lo : 0, has_hi, hi, &sep);
    }
    if (!has_lo || lo < 0) { /* the negative part: "-" and the magnitudes */
        const long long mag_lo = has_hi && hi < 0 ? -hi : 1;
        sb_add(b, "%s\"-\" (", sep);
        const char *inner = "";
        naturals(b, mag_lo, has_lo, has_lo ? -lo : 0, &inner);
        sb_add(b, ")");
    }
    sb_add(b, ")");
    return SYN_OK;
}

static syn_status gen_type(ctx *c, json_t *s, const char *type, unsigned depth, strbuf *b) {
    if (!strcmp(type, "boolean")) {
        sb_add(b, "jbool");
    } else if (!strcmp(type, "null")) {
        sb_add(b, "jnull");
    } else if (!strcmp(type, "number")) {
        static const char *const bounds[] = {"minimum", "maximum", "exclusiveMinimum",
                                             "exclusiveMaximum"};
        for (size_t i = 0; i < 4; i++)
            if (json_object_get(s, bounds[i]))
                return bad("bound on a non-integer number:", bounds[i]);
        sb_add(b, "jnumber");
    } else if (!strcmp(type, "integer")) {
        return gen_integer(s, b);
    } else if (!strcmp(type, "string")) {
        json_t *fmt = json_object_get(s, "format");
        json_t *mn = json_object_get(s, "minLength"), *mx = json_object_get(s, "maxLength");
        if (fmt) {
            const char *f = json_string_value(fmt);
            if (!f) return bad("keyword", "format");
            if (mn || mx) return bad("length with format:", "minLength/maxLength");
            if (!strcmp(f, "date"))
                sb_add(b, "jdate");
            else if (!strcmp(f, "date-time"))
                sb_add(b, "jdatetime");
            else if (!strcmp(f, "uuid"))
                sb_add(b, "juuid");
            else
                return bad("format", f);
        } else if (mn || mx) {
            json_int_t lo = mn ? json_integer_value(mn) : 0,
                       hi = mx ? json_integer_value(mx) : 1000;
            if ((mn && !json_is_integer(mn)) || (mx && !json_is_integer(mx)) || lo < 0 || hi < lo ||
                hi > 1000)
                return bad("length outside 0..1000:", mn ? "minLength" : "maxLength");
            sb_add(b, "(\"\\\"\" jchar{%lld,%lld} \"\\\"\")", (long long)lo, (long long)hi);
        } else {
            sb_add(b, "jstring");
        }
    } else if (!strcmp(type, "array")) {
        json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
        json_t *mn = json_object_get(s, "minItems"), *mx = json_object_get(s, "maxItems");
        json_int_t lo = mn ? json_integer_value(mn) : 0, hi = mx ? json_integer_value(mx) : 100;
        if ((mn && !json_is_integer(mn)) || (mx && !json_is_integer(mx)) || lo < 0 || hi < lo ||
            hi > 100)
            return bad("item count outside 0..100:", mn ? "minItems" : "maxItems");
        if (prefix) {
            if (!json_is_array(prefix)) return bad("keyword", "prefixItems");
            if (items && !json_is_false(items)) return bad("items after prefixItems:", "items");
            if (mn || mx) return bad("counts with prefixItems:", "minItems/maxItems");
            sb_add(b, "(\"[\" ws");
            for (size_t i = 0; i < json_array_size(prefix); i++) {
                unsigned r;
                syn_status st = gen(c, json_array_get(prefix, i), depth + 1, &r);
                if (st != SYN_OK) return st;
                sb_add(b, "%s r%u ws", i ? " \",\" ws" : "", r);
            }
            sb_add(b, " \"]\")");
            return SYN_OK;
        }
        char item[32] = "jvalue";
        if (items) {
            unsigned r;
            syn_status st = gen(c, items, depth + 1, &r);
            if (st != SYN_OK) return st;
            snprintf(item, sizeof item, "r%u", r);
        }
        if (hi == 0) {
            sb_add(b, "(\"[\" ws \"]\")");
        } else {
            const long long rest_lo = lo > 0 ? lo - 1 : 0, rest_hi = hi - 1;
            sb_add(b, "(\"[\" ws (%s ws (\",\" ws %s ws){%lld,%lld})%s \"]\")", item, item, rest_lo,
                   rest_hi, lo == 0 ? "?" : "");
        }
    } else if (!strcmp(type, "object")) {
        json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
        json_t *add = json_object_get(s, "additionalProperties");
        if (props && !json_is_object(props)) return bad("keyword", "properties");
        /* extra keys: absent or true allows any (JSON Schema's default), false none, a schema
         * those whose values fit it; r_extra is one extra key and value, its key not a listed one
         */
        unsigned r_extra = 0;
        const bool extra = !json_is_false(add);
        if (extra) {
            unsigned r_val = 0, r_key = 0;
            syn_status st = SYN_OK;
            if (add && !json_is_true(add)) st = gen(c, add, depth + 1, &r_val);
            if (st == SYN_OK) st = gen_extra_key(c, props, &r_key);
            if (st != SYN_OK) return st;
            r_extra = c->next++;
            if (add && !json_is_true(add))
                sb_add(&c->out, "r%u ::= r%u ws \":\" ws r%u\n", r_extra, r_key, r_val);
            else
                sb_add(&c->out, "r%u ::= r%u ws \":\" ws jvalue\n", r_extra, r_key);
        }
        if (!props || !json_object_size(props)) {
            if (extra)
                sb_add(b, "(\"{\" ws (r%u ws (\",\" ws r%u ws)*)? \"}\")", r_extra, r_extra);
            else
                sb_add(b, "(\"{\" ws \"}\")");
            return SYN_OK;
        }
        /* properties in the schema's order; r_kv: key and value; the object is one of "first
         * present property k, then the rest each optional or required" */
        const size_t n = json_object_size(props);
        unsigned *kv = calloc(n ? n : 1, sizeof *kv);
        bool *required = calloc(n ? n : 1, sizeof *required);
        if (!kv || !required) {
            free(kv);
            free(required);
            return syn_fail(SYN_ERR_NO_MEMORY, "json_schema: out of memory");
        }
        size_t i = 0, n_req = 0;
        const char *key;
        json_t *val;
        syn_status st = SYN_OK;
        json_object_foreach(props, key, val) {
            for (size_t k = 0; k < json_array_size(req); k++)
                if (json_is_string(json_array_get(req, k)) &&
                    !strcmp(json_string_value(json_array_get(req, k)), key))
                    required[i] = true;
            n_req += required[i];
            unsigned r;
            st = gen(c, val, depth + 1, &r);
            if (st != SYN_OK) break;
            kv[i] = c->next++;
            json_t *jkey = json_string(key);
            char *qkey = jkey ? json_dumps(jkey, JSON_ENCODE_ANY) : NULL;
            json_decref(jkey);
            strbuf line = {0};
            sb_add(&line, "r%u ::= ", kv[i]);
            add_literal(&line, qkey ? qkey : "\"\"");
            sb_add(&line, " ws \":\" ws r%u\n", r);
            free(qkey);
            sb_add(&c->out, "%s", line.s ? line.s : "");
            free(line.s);
            i++;
        }
        for (size_t k = 0; st == SYN_OK && k < json_array_size(req); k++) {
            const char *rk = json_string_value(json_array_get(req, k));
            if (!rk || !json_object_get(props, rk))
                st = syn_fail(SYN_ERR_UNSUPPORTED,
                              "json_schema: required '%s' is not among properties", rk ? rk : "?");
        }
        if (st == SYN_OK) {
            /* tail_j: the properties from j on, each after a comma */
            const unsigned tail0 = c->next;
            c->next += (unsigned)n + 1;
            for (size_t j = 0; j <= n; j++) {
                sb_add(&c->out, "r%u ::= ", tail0 + (unsigned)j);
                if (j == n && extra) /* extra keys after the listed ones */
                    sb_add(&c->out, "(\",\" ws r%u ws)*\n", r_extra);
                else if (j == n)
                    sb_add(&c->out, "\"\"\n");
                else
                    sb_add(&c->out, "(\",\" ws r%u ws)%s r%u\n", kv[j], required[j] ? "" : "?",
                           tail0 + (unsigned)j + 1);
            }
            sb_add(b, "(\"{\" ws (");
            bool any = false;
            for (size_t k = 0; k < n; k++) {
                sb_add(b, "%s r%u ws r%u", any ? " |" : "", kv[k], tail0 + (unsigned)k + 1);
                any = true;
                if (required[k]) break; /* a later first property would skip this one */
            }
            if (!n_req && extra) /* no listed key at all, only extra ones */
                sb_add(b, " | r%u ws r%u", r_extra, tail0 + (unsigned)n);
            sb_add(b, ")%s \"}\")", n_req ? "" : "?");
        }
        free(kv);
        free(required);
        return st;
    } else {
        return bad("type", type);
    }
    return SYN_OK;
}

static const char *const KNOWN[] = {"type",
                                    "properties",
                                    "required",
                                    "additionalProperties",
                                    "enum",
                                    "const",
                                    "items",
                                    "prefixItems",
                                    "minItems",
                                    "maxItems",
                                    "minLength",
                                    "maxLength",
                                    "minimum",
                                    "maximum",
                                    "exclusiveMinimum",
                                    "exclusiveMaximum",
                                    "anyOf",
                                    "oneOf",
                                    "$ref",
                                    "$defs",
                                    "definitions",
                                    "format",
                                    "title",
                                    "description",
                                    "$schema",
                                    "$id",
                                    "$comment",
                                    "examples",
                                    "default"};

enum {
    T_NULL = 1,
    T_BOOL = 2,
    T_INT = 4,
    T_FRAC = 8,
    T_STR = 16,
    T_ARR = 32,
    T_OBJ = 64,
    T_ANY = 127
};

/* s itself, or what its local $ref leads to (a few hops), for the oneOf check. */
static json_t *resolve(const ctx *c, json_t *s) {
    for (int hop = 0; hop < 8 && json_is_object(s); hop++) {
        const char *ref = json_string_value(json_object_get(s, "$ref"));
        if (!ref) return s;
        if (!strcmp(ref, "#"))
            s = c->root;
        else if (!strncmp(ref, "#/$defs/", 8))
            s = json_object_get(json_object_get(c->root, "$defs"), ref + 8);
        else if (!strncmp(ref, "#/definitions/", 14))
            s = json_object_get(json_object_get(c->root, "definitions"), ref + 14);
        else
            return NULL;
    }
    return s;
}

static unsigned value_type(json_t *v) {
    switch (json_typeof(v)) {
    case JSON_NULL: return T_NULL;
    case JSON_TRUE:
    case JSON_FALSE: return T_BOOL;
    case JSON_INTEGER: return T_INT;
    case JSON_REAL: return json_real_value(v) == floor(json_real_value(v)) ? T_INT : T_FRAC;
    case JSON_STRING: return T_STR;
    case JSON_ARRAY: return T_ARR;
    case JSON_OBJECT: return T_OBJ;
    }
    return T_ANY;
}

static unsigned type_name_bits(const char *t) {
    static const struct {
        const char *name;
        unsigned bits;
    } names[] = {{"null", T_NULL},           {"boolean", T_BOOL}, {"integer", T_INT},
                 {"number", T_INT | T_FRAC}, {"string", T_STR},   {"array", T_ARR},
                 {"object", T_OBJ}};
    for (size_t i = 0; t && i < sizeof names / sizeof *names; i++)
        if (!strcmp(t, names[i].name)) return names[i].bits;
    return T_ANY;
}

/* The types s's instances may have (T_ANY when unknown). */
static unsigned types_of(const ctx *c, json_t *s, unsigned depth) {
    s = resolve(c, s);
    if (!json_is_object(s) || depth > 16) return T_ANY;
    json_t *v;
    if ((v = json_object_get(s, "const"))) return value_type(v);
    if ((v = json_object_get(s, "enum")) && json_is_array(v)) {
        unsigned t = 0;
        for (size_t i = 0; i < json_array_size(v); i++)
            t |= value_type(json_array_get(v, i));
        return t;
    }
    if ((v = json_object_get(s, "type"))) {
        if (json_is_string(v)) return type_name_bits(json_string_value(v));
        unsigned t = 0;
        for (size_t i = 0; i < json_array_size(v); i++)
            t |= type_name_bits(json_string_value(json_array_get(v, i)));
        return t ? t : T_ANY;
    }
    json_t *alts = json_object_get(s, "anyOf");
    if (!alts) alts = json_object_get(s, "oneOf");
    if (json_is_array(alts)) {
        unsigned t = 0;
        for (size_t i = 0; i < json_array_size(alts); i++)
            t |= types_of(c, json_array_get(alts, i), depth + 1);
        return t;
    }
    return T_ANY;
}

/* const or enum as a list of values (NULL: not a fixed set). */
static json_t *fixed_values(const ctx *c, json_t *s) {
    s = resolve(c, s);
    if (!json_is_object(s)) return NULL;
    json_t *v = json_object_get(s, "const");
    if (v) return json_pack("[O]", v);
    v = json_object_get(s, "enum");
    return json_is_array(v) ? json_incref(v) : NULL;
}

static bool same_value(json_t *a, json_t *b) {
    if (json_is_number(a) && json_is_number(b)) return json_number_value(a) == json_number_value(b);
    return json_equal(a, b);
}

/* Whether the fixed value sets of a and b share no value (false when either is not fixed). */
static bool values_disjoint(const ctx *c, json_t *a, json_t *b) {
    json_t *va = fixed_values(c, a), *vb = fixed_values(c, b);
    bool disjoint = va && vb;
    for (size_t i = 0; disjoint && i < json_array_size(va); i++)
        for (size_t j = 0; disjoint && j < json_array_size(vb); j++)
            disjoint = !same_value(json_array_get(va, i), json_array_get(vb, j));
    json_decref(va);
    json_decref(vb);
    return disjoint;
}

static bool requires(json_t *s, const char *key) {
    json_t *req = json_object_get(s, "required");
    for (size_t i = 0; i < json_array_size(req); i++)
        if (json_is_string(json_array_get(req, i)) &&
            !strcmp(json_string_value(json_array_get(req, i)), key))
            return true;
    return false;
}

/* Whether no JSON value can be an instance of both a and b, provably from their types, their
 * const/enum values, or a property both require with disjoint const/enum values. */
static bool disjoint(const ctx *c, json_t *a, json_t *b) {
    const unsigned common = types_of(c, a, 0) & types_of(c, b, 0);
    if (!common) return true;
    if (values_disjoint(c, a, b)) return true;
    a = resolve(c, a);
    b = resolve(c, b);
    if (common != T_OBJ || !json_is_object(a) || !json_is_object(b)) return false;
    json_t *pa = json_object_get(a, "properties"), *pb = json_object_get(b, "properties");
    const char *key;
    json_t *val;
    json_object_foreach(pa, key, val) {
        json_t *other = json_object_get(pb, key);
        if (other && requires(a, key) && requires(b, key) && values_disjoint(c, val, other))
            return true;
    }
    return false;
}

/* Writes a rule for schema s (true: any value) and gives its number. */
static syn_status gen(ctx *c, json_t *s, unsigned depth, unsigned *rule) {
    if (depth > SCHEMA_MAX_DEPTH)
        return syn_fail(SYN_ERR_UNSUPPORTED, "json_schema: nested deeper than %d (the depth bound)",
                        SCHEMA_MAX_DEPTH);
    if (json_is_true(s) || (json_is_object(s) && json_object_size(s) == 0)) {
        *rule = c->next++;
        sb_add(&c->out, "r%u ::= jvalue\n", *rule);
        return SYN_OK;
    }
    if (!json_is_object(s))
        return syn_fail(SYN_ERR_UNSUPPORTED, "json_schema: a schema that is not an object");
    const char *key;
    json_t *val;
    json_object_foreach(s, key, val) {
        bool known = false;
        for (size_t i = 0; i < sizeof KNOWN / sizeof *KNOWN; i++)
            known |= !strcmp(key, KNOWN[i]);
        if (!known) return bad("keyword", key);
    }
    strbuf b = {0};
    syn_status st = SYN_OK;
    json_t *ref = json_object_get(s, "$ref"), *en = json_object_get(s, "enum");
    json_t *cn = json_object_get(s, "const"), *type = json_object_get(s, "type");
    json_t *any = json_object_get(s, "anyOf"), *one = json_object_get(s, "oneOf");
    if (any && one) return bad("keyword beside anyOf:", "oneOf");
    if (one) { /* exactly one branch: enforceable as anyOf when no two can match together */
        for (size_t i = 0; json_is_array(one) && i < json_array_size(one); i++)
            for (size_t j = i + 1; j < json_array_size(one); j++)
                if (!disjoint(c, json_array_get(one, i), json_array_get(one, j)))
                    return syn_fail(SYN_ERR_UNSUPPORTED,
                                    "json_schema: 'oneOf' cannot be enforced: branches %zu and %zu "
                                    "may both match (only branches of different types, const/enum "
                                    "values or required const discriminators are)",
                                    i, j);
        any = one;
    }
    /* a keyword beside $ref, anyOf/oneOf or const/enum would be dropped by the branches below */
    static const char *const side[] = {"type",
                                       "properties",
                                       "required",
                                       "additionalProperties",
                                       "items",
                                       "prefixItems",
                                       "minItems",
                                       "maxItems",
                                       "minLength",
                                       "maxLength",
                                       "minimum",
                                       "maximum",
                                       "exclusiveMinimum",
                                       "exclusiveMaximum",
                                       "format",
                                       "enum",
                                       "const",
                                       "anyOf",
                                       "oneOf"};
    const char *head = ref ? "$ref" : (any ? (one ? "oneOf" : "anyOf") : (en ? "enum" : "const"));
    for (size_t i = 0; (ref || any || en || cn) && i < sizeof side / sizeof *side; i++) {
        if (!strcmp(side[i], head) || !json_object_get(s, side[i])) continue;
        if (!ref && !any && !strcmp(side[i], "type")) { /* values must then be of that type */
            json_t *ty = json_object_get(s, "type");
            unsigned t = json_is_string(ty) ? type_name_bits(json_string_value(ty)) : 0;
            for (size_t k = 0; k < json_array_size(ty); k++)
                t |= type_name_bits(json_string_value(json_array_get(ty, k)));
            json_t *vals = fixed_values(c, s);
            bool fits = true;
            for (size_t k = 0; k < json_array_size(vals); k++)
                fits &= (value_type(json_array_get(vals, k)) & t) != 0;
            json_decref(vals);
            if (fits) continue;
        }
        return syn_fail(SYN_ERR_UNSUPPORTED,
                        "json_schema: keyword '%s' beside '%s' cannot be enforced", side[i], head);
    }
    if (ref) {
        unsigned r = 0;
        if (!json_is_string(ref)) return bad("keyword", "$ref");
        st = gen_ref(c, json_string_value(ref), depth, &r);
        sb_add(&b, "r%u", r);
    } else if (en || cn) {
        json_t *vals = en ? en : cn;
        for (size_t i = 0; i < (en ? json_array_size(en) : 1); i++) {
            char *v = json_dumps(en ? json_array_get(vals, i) : cn, JSON_ENCODE_ANY | JSON_COMPACT);
            if (!v) return syn_fail(SYN_ERR_NO_MEMORY, "json_schema: out of memory");
            sb_add(&b, "%s", i ? " | " : "");
            add_literal(&b, v);
            free(v);
        }
        if (en && !json_array_size(en)) st = bad("empty", "enum");
    } else if (any) {
        if (!json_is_array(any) || !json_array_size(any)) return bad("keyword", "anyOf/oneOf");
        for (size_t i = 0; st == SYN_OK && i < json_array_size(any); i++) {
            unsigned r = 0;
            st = gen(c, json_array_get(any, i), depth + 1, &r);
            sb_add(&b, "%sr%u", i ? " | " : "", r);
        }
    } else if (json_is_string(type)) {
        st = gen_type(c, s, json_string_value(type), depth, &b);
    } else if (json_is_array(type) && json_array_size(type)) {
        for (size_t i = 0; st == SYN_OK && i < json_array_size(type); i++) {
            const char *t = json_string_value(json_array_get(type, i));
            if (!t) return bad("keyword", "type");
            sb_add(&b, "%s", i ? " | " : "");
            st = gen_type(c, s, t, depth, &b);
        }
    } else if (!type) { /* the type the keywords imply, so that none of them is dropped */
        const char *implied = NULL;
        static const char *const by[][2] = {{"properties", "object"},
                                            {"required", "object"},
                                            {"additionalProperties", "object"},
                                            {"items", "array"},
                                            {"prefixItems", "array"},
                                            {"minItems", "array"},
                                            {"maxItems", "array"},
                                            {"minLength", "string"},
                                            {"maxLength", "string"},
                                            {"format", "string"},
                                            {"minimum", "integer"},
                                            {"maximum", "integer"},
                                            {"exclusiveMinimum", "integer"},
                                            {"exclusiveMaximum", "integer"}};
        for (size_t i = 0; i < sizeof by / sizeof *by && !implied; i++)
            if (json_object_get(s, by[i][0])) implied = by[i][1];
        if (implied)
            st = gen_type(c, s, implied, depth, &b);
        else
            sb_add(&b, "jvalue");
    } else {
        st = bad("keyword", "type");
    }
    if (st == SYN_OK) {
        *rule = c->next++;
        sb_add(&c->out, "r%u ::= %s\n", *rule, b.s ? b.s : "\"\"");
    }
    free(b.s);
    if (st == SYN_OK && (b.oom || c->out.oom))
        st = syn_fail(SYN_ERR_NO_MEMORY, "json_schema: out of memory");
    return st;
}

struct syn_json_rules {
    ctx c;
    bool common; /* COMMON_RULES appended */
};

syn_status syn_json_rules_new(syn_json_rules **out) {
    *out = calloc(1, sizeof **out);
    return *out ? SYN_OK : syn_fail(SYN_ERR_NO_MEMORY, "json_schema: out of memory");
}

syn_status syn_json_rules_add(syn_json_rules *jr, json_t *schema, char name[16]) {
    if (!jr || !schema || jr->common)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "json_schema: bad syn_json_rules_add call");
    jr->c.root = schema; /* local $refs resolve inside this schema */
    jr->c.n_refs = 0;
    unsigned r;
    syn_status st = gen(&jr->c, schema, 0, &r);
    if (st == SYN_OK && jr->c.out.oom)
        st = syn_fail(SYN_ERR_NO_MEMORY, "json_schema: out of memory");
    if (st == SYN_OK) snprintf(name, 16, "r%u", r);
    return st;
}

const char *syn_json_rules_text(syn_json_rules *jr) {
    if (!jr->common) sb_add(&jr->c.out, "%s", COMMON_RULES);
    jr->common = true;
    return jr->c.out.oom ? NULL : jr->c.out.s;
}

void syn_json_rules_free(syn_json_rules *jr) {
    if (!jr) return;
    free(jr->c.out.s);
    free(jr);
}

syn_status syn_grammar_parse_checked(const char *text, syn_grammar **out) {
    syn_status st = syn_grammar_parse_gbnf(text, out);
    /* a $ref cycle that never reaches a character shows when the matcher first expands */
    syn_grammar_matcher *m = NULL;
    if (st == SYN_OK && syn_grammar_matcher_new(*out, &m) != SYN_OK) {
        char why[256]; /* syn_fail writes over the message it would quote */
        snprintf(why, sizeof why, "%s", syn_last_error());
        st = syn_fail(SYN_ERR_UNSUPPORTED,
                      "json_schema: a $ref cycle that never produces a character (%s)", why);
        syn_grammar_free(*out);
        *out = NULL;
    }
    syn_grammar_matcher_free(m);
    return st;
}

syn_status syn_grammar_from_json_schema(const char *schema, syn_grammar **out) {
    if (!schema || !out) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "json_schema: NULL argument");
    *out = NULL;
    const size_t len = strlen(schema);
    if (len > SCHEMA_MAX_BYTES)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "json_schema: %zu bytes, above the %u-byte bound",
                        len, SCHEMA_MAX_BYTES);
    json_error_t err;
    json_t *root = json_loadb(schema, len, 0, &err);
    if (!root)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "json_schema: not JSON: line %d: %s", err.line,
                        err.text);
    syn_json_rules *jr = NULL;
    char name[16];
    syn_status st = syn_json_rules_new(&jr);
    if (st == SYN_OK) st = syn_json_rules_add(jr, root, name);
    if (st == SYN_OK) {
        sb_add(&jr->c.out, "root ::= %s\n", name);
        const char *text = syn_json_rules_text(jr);
        st = text ? syn_grammar_parse_checked(text, out)
                  : syn_fail(SYN_ERR_NO_MEMORY, "json_schema: out of memory");
    }
    syn_json_rules_free(jr);
    json_decref(root);
    return st;
}

syn_status syn_grammar_json_object(syn_grammar **out) {
    return syn_grammar_from_json_schema("{\"type\": \"object\"}", out);
}
