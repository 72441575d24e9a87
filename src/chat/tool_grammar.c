/* tool_grammar.c: GBNF grammars of forced tool calls, one per call syntax (see tool_grammar.h). The
 * arguments come from grammar/json_schema.c as embedded rules; the fixed text of each syntax is
 * written as chat_output.c reads it back. */
#include "chat/tool_grammar.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "grammar/grammar.h"
#include "synapse_internal.h"

typedef struct buf {
    char *s;
    size_t n, cap;
    bool oom;
} buf;

static void add(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(buf *b, const char *fmt, ...) {
    if (b->oom) return;
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || b->n + (size_t)n + 1 > b->cap) {
        const size_t cap = (b->cap + (size_t)(n > 0 ? n : 0) + 1) * 2;
        char *s = n < 0 ? NULL : realloc(b->s, cap);
        if (!s) {
            b->oom = true;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

/* s as a GBNF literal (UTF-8 passes through; quotes, backslashes and controls escaped). */
static void lit(buf *b, const char *s) {
    add(b, " \"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            add(b, "\\%c", *c);
        else if (*c < 0x20)
            add(b, "\\x%02x", *c);
        else
            add(b, "%c", *c);
    }
    add(b, "\"");
}

/* name as a JSON string, as a literal. */
static void json_name_lit(buf *b, const char *name) {
    json_t *j = json_string(name);
    char *q = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    json_decref(j);
    if (!q) {
        b->oom = true;
        return;
    }
    lit(b, q);
    free(q);
}

/* The first key of s that is neither an annotation nor among also (NULL: none). */
static const char *other_key(const json_t *s, const char *const *also, size_t n_also) {
    static const char *const notes[] = {"type",     "description", "title",   "default",
                                        "examples", "$comment",    "$schema", "$id"};
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)s, key, v) {
        bool ok = false;
        for (size_t i = 0; i < sizeof notes / sizeof *notes && !ok; i++)
            ok = !strcmp(key, notes[i]);
        for (size_t i = 0; i < n_also && !ok; i++)
            ok = !strcmp(key, also[i]);
        if (!ok) return key;
    }
    return NULL;
}

/* A Qwen3-Coder parameter's value: a string parameter as raw text (no '<', so that the first
 * "</parameter>" ends it), anything else as JSON of its schema. */
static syn_status xml_value(buf *b, syn_json_rules *jr, const char *tool, const char *param,
                            json_t *schema) {
    const char *type = json_string_value(json_object_get(schema, "type"));
    if (!type || strcmp(type, "string") != 0) {
        char rule[16];
        syn_status st = syn_json_rules_add(jr, schema, rule);
        if (st != SYN_OK) return syn_fail_context(st, "tool '%s', parameter '%s'", tool, param);
        add(b, " %s", rule);
        return SYN_OK;
    }
    json_t *en = json_object_get(schema, "enum"), *cn = json_object_get(schema, "const");
    if (en || cn) {
        add(b, " (");
        for (size_t i = 0; i < (en ? json_array_size(en) : 1); i++) {
            const char *v = json_string_value(en ? json_array_get(en, i) : cn);
            if (!v || strstr(v, "<"))
                return syn_fail(SYN_ERR_UNSUPPORTED,
                                "tool '%s', parameter '%s': an enum/const value that is not a "
                                "string without '<' cannot be written as an XML value",
                                tool, param);
            add(b, "%s", i ? " |" : "");
            lit(b, v);
        }
        add(b, " )");
        return SYN_OK;
    }
    static const char *const lengths[] = {"minLength", "maxLength"};
    const char *other = other_key(schema, lengths, 2);
    if (other)
        return syn_fail(SYN_ERR_UNSUPPORTED,
                        "tool '%s', parameter '%s': keyword '%s' cannot be enforced on a "
                        "Qwen3-Coder XML string value",
                        tool, param, other);
    json_t *mn = json_object_get(schema, "minLength"), *mx = json_object_get(schema, "maxLength");
    if (mn || mx) {
        const json_int_t lo = mn ? json_integer_value(mn) : 0,
                         hi = mx ? json_integer_value(mx) : -1;
        if ((mn && !json_is_integer(mn)) || (mx && !json_is_integer(mx)) || lo < 0 ||
            (mx && hi < lo) || hi > 1000)
            return syn_fail(SYN_ERR_UNSUPPORTED,
                            "tool '%s', parameter '%s': minLength/maxLength outside 0..1000", tool,
                            param);
        if (mx)
            add(b, " [^<]{%lld,%lld}", (long long)lo, (long long)hi);
        else
            add(b, " [^<]{%lld,}", (long long)lo);
    } else {
        add(b, " [^<]*");
    }
    return SYN_OK;
}

static bool is_required(const json_t *schema, const char *key) {
    const json_t *req = json_object_get(schema, "required");
    for (size_t i = 0; i < json_array_size(req); i++)
        if (json_is_string(json_array_get(req, i)) &&
            !strcmp(json_string_value(json_array_get(req, i)), key))
            return true;
    return false;
}

/* Rules tcK-J for the parameters of call K from the J-th on (each optional unless required, in
 * the schema's order), as <parameter=NAME>\nVALUE\n</parameter>\n blocks. */
static syn_status xml_params(buf *rules, syn_json_rules *jr, const char *tool, json_t *schema,
                             size_t k) {
    json_t *props = json_object_get(schema, "properties");
    if (props && !json_is_object(props))
        return syn_fail(SYN_ERR_UNSUPPORTED, "tool '%s': 'properties' is not an object", tool);
    const json_t *req = json_object_get(schema, "required");
    for (size_t i = 0; i < json_array_size(req); i++) {
        const char *r = json_string_value(json_array_get(req, i));
        if (!r || !json_object_get(props, r))
            return syn_fail(SYN_ERR_UNSUPPORTED, "tool '%s': required '%s' is not among properties",
                            tool, r ? r : "?");
    }
    size_t j = 0;
    const char *key;
    json_t *val;
    syn_status st = SYN_OK;
    json_object_foreach(props, key, val) {
        if (strpbrk(key, "<>\n") || !*key)
            return syn_fail(SYN_ERR_UNSUPPORTED,
                            "tool '%s': parameter name '%s' cannot be written in XML", tool, key);
        add(rules, "tc%zu-%zu ::= (", k, j);
        char head[1100];
        snprintf(head, sizeof head, "<parameter=%s>\n", key);
        lit(rules, head);
        st = xml_value(rules, jr, tool, key, val);
        if (st != SYN_OK) return st;
        lit(rules, "\n</parameter>\n");
        add(rules, " )%s tc%zu-%zu\n", is_required(schema, key) ? "" : "?", k, j + 1);
        j++;
    }
    add(rules, "tc%zu-%zu ::= \"\"\n", k, j);
    return st;
}

/* Rule callK: one call of tool (its function object) in syntax. */
static syn_status one_call(buf *rules, syn_json_rules *jr, syn_tool_syntax syntax, bool args_form,
                           const json_t *fn, size_t k) {
    const char *name = json_string_value(json_object_get(fn, "name"));
    json_t *params = json_object_get(fn, "parameters");
    if (!name || !*name)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "tools[%zu]: a function without a name", k);
    if (!json_is_object(params))
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "tool '%s': 'parameters' is not an object", name);
    if ((syntax == SYN_TOOLS_HARMONY || syntax == SYN_TOOLS_QWEN3_CODER || args_form) &&
        strpbrk(name, " <>[]\n\t"))
        return syn_fail(SYN_ERR_UNSUPPORTED, "tool '%s': a name this syntax cannot write", name);
    char args[16] = "";
    if (syntax != SYN_TOOLS_QWEN3_CODER) {
        syn_status st = syn_json_rules_add(jr, params, args);
        if (st != SYN_OK) return syn_fail_context(st, "tool '%s'", name);
    }
    add(rules, "call%zu ::=", k);
    switch (syntax) {
    case SYN_TOOLS_HERMES:
        lit(rules, "<tool_call>\n{\"name\": ");
        json_name_lit(rules, name);
        lit(rules, ", \"arguments\": ");
        add(rules, " %s", args);
        lit(rules, "}\n</tool_call>");
        break;
    case SYN_TOOLS_LLAMA3:
        lit(rules, "{\"name\": ");
        json_name_lit(rules, name);
        lit(rules, ", \"parameters\": ");
        add(rules, " %s", args);
        lit(rules, "}");
        break;
    case SYN_TOOLS_MISTRAL:
        if (args_form) {
            lit(rules, "[TOOL_CALLS]");
            lit(rules, name);
            lit(rules, "[ARGS]");
            add(rules, " %s", args);
        } else {
            lit(rules, "{\"name\": ");
            json_name_lit(rules, name);
            lit(rules, ", \"arguments\": ");
            add(rules, " %s", args);
            lit(rules, "}");
        }
        break;
    case SYN_TOOLS_HARMONY: /* the template's header, or the one gpt-oss itself writes */
        add(rules, " (");
        lit(rules, " to=functions.");
        lit(rules, name);
        lit(rules, "<|channel|>commentary json<|message|>");
        add(rules, " |");
        lit(rules, "<|channel|>commentary to=functions.");
        lit(rules, name);
        lit(rules, " <|constrain|>json<|message|>");
        add(rules, " ) %s", args);
        break;
    case SYN_TOOLS_QWEN3_CODER:
        lit(rules, "<tool_call>\n<function=");
        lit(rules, name);
        lit(rules, ">\n");
        add(rules, " tc%zu-0", k);
        lit(rules, "</function>\n</tool_call>");
        break;
    default: break;
    }
    add(rules, "\n");
    return syntax == SYN_TOOLS_QWEN3_CODER ? xml_params(rules, jr, name, params, k) : SYN_OK;
}

syn_status syn_tool_call_grammar(syn_tool_syntax syntax, const char *template_source,
                                 const json_t *tools, const char *only, bool parallel, char **out) {
    *out = NULL;
    if (syntax <= SYN_TOOLS_NONE || syntax >= SYN_TOOLS_COUNT)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "forced tool calls: the chat template teaches no tool-call syntax");
    if (!json_is_array(tools) || !json_array_size(tools))
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "forced tool calls: no tools");
    const bool args_form = template_source && strstr(template_source, "[ARGS]");
    syn_json_rules *jr = NULL;
    syn_status st = syn_json_rules_new(&jr);
    buf rules = {0};
    add(&rules, "call ::=");
    size_t n = 0;
    for (size_t i = 0; st == SYN_OK && i < json_array_size(tools); i++) {
        const char *name = json_string_value(
            json_object_get(json_object_get(json_array_get(tools, i), "function"), "name"));
        if (only && (!name || strcmp(name, only) != 0)) continue;
        add(&rules, "%s call%zu", n ? " |" : "", i);
        n++;
    }
    add(&rules, "\n");
    if (st == SYN_OK && !n)
        st = syn_fail(SYN_ERR_INVALID_ARGUMENT, "forced tool calls: no tool named '%s'",
                      only ? only : "?");
    for (size_t i = 0; st == SYN_OK && i < json_array_size(tools); i++) {
        const json_t *fn = json_object_get(json_array_get(tools, i), "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        if (only && (!name || strcmp(name, only) != 0)) continue;
        st = one_call(&rules, jr, syntax, args_form, fn, i);
    }
    /* several calls in one message where the syntax has them */
    const bool many = parallel && syntax != SYN_TOOLS_LLAMA3 && syntax != SYN_TOOLS_HARMONY;
    if (syntax == SYN_TOOLS_MISTRAL && !args_form)
        add(&rules, "root ::= \"[TOOL_CALLS][\" call%s \"]\"\n", many ? " (\", \" call)*" : "");
    else if (syntax == SYN_TOOLS_MISTRAL)
        add(&rules, "root ::= call%s\n", many ? "+" : "");
    else
        add(&rules, "root ::= call%s\n", many ? " (\"\\n\" call)*" : "");
    const char *json_rules = st == SYN_OK ? syn_json_rules_text(jr) : NULL;
    if (st == SYN_OK && (!json_rules || rules.oom))
        st = syn_fail(SYN_ERR_NO_MEMORY, "forced tool calls: out of memory");
    if (st == SYN_OK) add(&rules, "%s", json_rules);
    if (st == SYN_OK && rules.oom)
        st = syn_fail(SYN_ERR_NO_MEMORY, "forced tool calls: out of memory");
    syn_json_rules_free(jr);
    if (st != SYN_OK) {
        free(rules.s);
        return st;
    }
    *out = rules.s;
    return SYN_OK;
}
