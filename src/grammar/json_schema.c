/* json_schema.c: JSON Schema -> GBNF text, then parsed by grammar.c. Every keyword either shapes
 * the grammar or is refused by name: a schema is never silently loosened. */
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
    "jdate ::= \"\\\"\" d2 d2 \"-\" d2 \"-\" d2 \"\\\"\"\n"
    "jdatetime ::= \"\\\"\" d2 d2 \"-\" d2 \"-\" d2 \"T\" d2 \":\" d2 \":\" d2 (\".\" [0-9]{1,9})? "
    "(\"Z\" | [-+] d2 \":\" d2) \"\\\"\"\n"
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

static syn_status gen_type(ctx *c, json_t *s, const char *type, unsigned depth, strbuf *b) {
    if (!strcmp(type, "boolean")) {
        sb_add(b, "jbool");
    } else if (!strcmp(type, "null")) {
        sb_add(b, "jnull");
    } else if (!strcmp(type, "number")) {
        sb_add(b, "jnumber");
    } else if (!strcmp(type, "integer")) {
        json_t *min = json_object_get(s, "minimum");
        if (json_object_get(s, "maximum")) return bad("keyword", "maximum");
        if (!min) {
            sb_add(b, "jint");
        } else if (json_is_integer(min) && json_integer_value(min) == 0) {
            sb_add(b, "(\"0\" | [1-9] [0-9]{0,15})");
        } else if (json_is_integer(min) && json_integer_value(min) == 1) {
            sb_add(b, "([1-9] [0-9]{0,15})");
        } else {
            return bad("minimum other than 0 or 1:", "minimum");
        }
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
        if (add && !json_is_false(add))
            return bad("keyword (only false is)", "additionalProperties");
        if (!props) {
            if (add) {
                sb_add(b, "(\"{\" ws \"}\")");
            } else {
                sb_add(b, "jobject");
            }
            return SYN_OK;
        }
        if (!json_is_object(props)) return bad("keyword", "properties");
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
                if (j == n)
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

static const char *const KNOWN[] = {
    "type",     "properties",  "required",    "additionalProperties",
    "enum",     "const",       "items",       "prefixItems",
    "minItems", "maxItems",    "minLength",   "maxLength",
    "minimum",  "maximum",     "anyOf",       "oneOf",
    "$ref",     "$defs",       "definitions", "format",
    "title",    "description", "$schema",     "$id",
    "$comment", "examples",    "default"};

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
    json_t *any = json_object_get(s, "anyOf");
    if (!any) any = json_object_get(s, "oneOf");
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
        static const char *const by[][2] = {
            {"properties", "object"}, {"required", "object"},   {"additionalProperties", "object"},
            {"items", "array"},       {"prefixItems", "array"}, {"minItems", "array"},
            {"maxItems", "array"},    {"minLength", "string"},  {"maxLength", "string"},
            {"format", "string"},     {"minimum", "integer"},   {"maximum", "integer"}};
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
    ctx c = {.root = root};
    unsigned r;
    syn_status st = gen(&c, root, 0, &r);
    if (st == SYN_OK) {
        sb_add(&c.out, "root ::= r%u\n%s", r, COMMON_RULES);
        st = c.out.oom ? syn_fail(SYN_ERR_NO_MEMORY, "json_schema: out of memory")
                       : syn_grammar_parse_gbnf(c.out.s, out);
    }
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
    free(c.out.s);
    json_decref(root);
    return st;
}

syn_status syn_grammar_json_object(syn_grammar **out) {
    return syn_grammar_from_json_schema("{\"type\": \"object\"}", out);
}
