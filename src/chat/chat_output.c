/*
 * chat_output.c: reads a model's generated text back into reasoning, content and tool calls.
 *
 * Each syntax is parsed the way its template describes it to the model. Under tool_choice auto
 * the model may write half a call or invalid JSON: then the whole text is returned as content, as
 * the client would have seen it without tools, rather than a guess or an error.
 */
#include "chat/chat_output.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "synapse_internal.h"

static const char *const syntax_names[SYN_TOOLS_COUNT] = {"none",   "hermes",  "qwen3-coder",
                                                          "llama3", "mistral", "harmony"};

const char *syn_tool_syntax_name(syn_tool_syntax syntax) {
    return (unsigned)syntax < SYN_TOOLS_COUNT ? syntax_names[syntax] : "?";
}

syn_tool_syntax syn_tool_syntax_detect(const char *src) {
    if (!src) return SYN_TOOLS_NONE;
    /* Qwen3-Coder's XML calls sit inside Hermes' <tool_call> tags: test them first. */
    if (strstr(src, "<tool_call>") && strstr(src, "<function=")) return SYN_TOOLS_QWEN3_CODER;
    if (strstr(src, "<tool_call>")) return SYN_TOOLS_HERMES;
    if (strstr(src, "[TOOL_CALLS]")) return SYN_TOOLS_MISTRAL;
    if (strstr(src, "<|channel|>") && strstr(src, "functions.")) return SYN_TOOLS_HARMONY;
    if (strstr(src, "<|start_header_id|>") && strstr(src, "\"parameters\""))
        return SYN_TOOLS_LLAMA3;
    return SYN_TOOLS_NONE;
}

bool syn_template_thinks(const char *src) { return src && strstr(src, "<think>"); }

/* ---- Small text helpers ---- */

static bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

static size_t skip_space(const char *s, size_t i, size_t len) {
    while (i < len && is_space(s[i]))
        i++;
    return i;
}

/* The first occurrence of needle in s[from, len), or len. */
static size_t find(const char *s, size_t len, size_t from, const char *needle) {
    const size_t n = strlen(needle);
    for (size_t i = from; i + n <= len; i++)
        if (memcmp(s + i, needle, n) == 0) return i;
    return len;
}

static bool starts_with(const char *s, size_t len, size_t at, const char *prefix) {
    const size_t n = strlen(prefix);
    return at + n <= len && memcmp(s + at, prefix, n) == 0;
}

/* s[begin, end) with surrounding whitespace removed, as a new string (NULL: no memory). */
static char *trimmed_copy(const char *s, size_t begin, size_t end) {
    while (begin < end && is_space(s[begin]))
        begin++;
    while (end > begin && is_space(s[end - 1]))
        end--;
    char *out = malloc(end - begin + 1);
    if (!out) return NULL;
    memcpy(out, s + begin, end - begin);
    out[end - begin] = '\0';
    return out;
}

/* One JSON value starting at s[*at] (after whitespace); *at moves past it. NULL when none. */
static json_t *json_at(const char *s, size_t len, size_t *at) {
    const size_t start = skip_space(s, *at, len);
    if (start >= len) return NULL;
    json_error_t err;
    json_t *v = json_loadb(s + start, len - start, JSON_DISABLE_EOF_CHECK | JSON_DECODE_ANY, &err);
    if (v) *at = start + (size_t)err.position;
    return v;
}

/* ---- Building the calls ---- */

typedef struct call_list {
    json_t *calls; /* the OpenAI array */
    uint64_t seed;
    bool short_ids; /* Mistral: 9 alphanumerics, nothing else */
} call_list;

static uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15u;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

void syn_chat_call_id(syn_tool_syntax syntax, uint64_t seed, char *id, size_t cap) {
    static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    uint64_t h = mix64(seed);
    size_t n = 0;
    if (syntax != SYN_TOOLS_MISTRAL) n = (size_t)snprintf(id, cap, "call_");
    for (int i = 0; i < 9 && n + 1 < cap; i++, h /= 62)
        id[n++] = alnum[h % 62];
    id[n] = '\0';
}

static void make_id(call_list *cl, char *id, size_t cap) {
    syn_chat_call_id(cl->short_ids ? SYN_TOOLS_MISTRAL : SYN_TOOLS_NONE,
                     cl->seed + json_array_size(cl->calls), id, cap);
}

/* Appends one call; arguments (an object, or a JSON text) is consumed. false: a malformed call
 * (no name, arguments neither an object nor a text holding one) or no memory. */
static bool add_call(call_list *cl, const char *name, size_t name_len, json_t *arguments,
                     const char *given_id) {
    char *args_text = NULL;
    if (json_is_string(arguments)) {
        json_error_t err;
        json_t *parsed = json_loads(json_string_value(arguments), 0, &err);
        json_decref(arguments);
        arguments = parsed;
    }
    if (name_len == 0 || !json_is_object(arguments)) {
        json_decref(arguments);
        return false;
    }
    args_text = json_dumps(arguments, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(arguments);
    char id[32];
    if (given_id && *given_id)
        snprintf(id, sizeof id, "%s", given_id);
    else
        make_id(cl, id, sizeof id);
    json_t *call = args_text ? json_pack("{s:s, s:s, s:{s:s%, s:s}}", "id", id, "type", "function",
                                         "function", "name", name, name_len, "arguments", args_text)
                             : NULL;
    free(args_text);
    return call && json_array_append_new(cl->calls, call) == 0;
}

/* {"name": ..., args_key: {...}} as one call. */
static bool add_json_call(call_list *cl, json_t *obj, const char *args_key) {
    const char *name = json_string_value(json_object_get(obj, "name"));
    json_t *args = json_object_get(obj, args_key);
    if (!args && strcmp(args_key, "parameters") == 0) args = json_object_get(obj, "arguments");
    if (!name || !args) return false;
    return add_call(cl, name, strlen(name), json_incref(args),
                    json_string_value(json_object_get(obj, "id")));
}

/* ---- The syntaxes: each returns where the calls begin (content is what precedes it) or len
 * when there is no call, and false when a call is malformed. ---- */

static bool parse_hermes(const char *s, size_t len, call_list *cl, size_t *calls_begin) {
    size_t at = find(s, len, 0, "<tool_call>");
    *calls_begin = at;
    while (at < len) {
        size_t p = at + strlen("<tool_call>");
        json_t *obj = json_at(s, len, &p);
        const bool ok = json_is_object(obj) && add_json_call(cl, obj, "arguments");
        json_decref(obj);
        if (!ok) return false;
        p = skip_space(s, p, len);
        if (!starts_with(s, len, p, "</tool_call>")) return false;
        p = skip_space(s, p + strlen("</tool_call>"), len);
        if (p < len && !starts_with(s, len, p, "<tool_call>")) return false;
        at = p;
    }
    return true;
}

const char *syn_chat_xml_parameter_type(const json_t *tools, const char *fn, size_t fn_len,
                                        const char *param) {
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool) {
        const json_t *f = json_object_get(tool, "function");
        const char *name = json_string_value(json_object_get(f, "name"));
        if (!name || strlen(name) != fn_len || memcmp(name, fn, fn_len) != 0) continue;
        const json_t *props = json_object_get(json_object_get(f, "parameters"), "properties");
        return json_string_value(json_object_get(json_object_get(props, param), "type"));
    }
    return NULL;
}

json_t *syn_chat_xml_value(const char *v, size_t n, const char *type) {
    if (n && v[0] == '\n') v++, n--;
    if (n && v[n - 1] == '\n') n--;
    if (!type || strcmp(type, "string") != 0) {
        json_error_t err;
        json_t *j = json_loadb(v, n, JSON_DECODE_ANY, &err);
        if (j) return j;
    }
    return json_stringn(v, n);
}

static bool parse_qwen3_coder(const char *s, size_t len, const json_t *tools, call_list *cl,
                              size_t *calls_begin) {
    size_t at = find(s, len, 0, "<tool_call>");
    *calls_begin = at;
    while (at < len) {
        size_t p = skip_space(s, at + strlen("<tool_call>"), len);
        if (!starts_with(s, len, p, "<function=")) return false;
        const size_t name = p + strlen("<function=");
        const size_t name_end = find(s, len, name, ">");
        if (name_end == len) return false;
        json_t *args = json_object();
        if (!args) return false;
        p = skip_space(s, name_end + 1, len);
        while (starts_with(s, len, p, "<parameter=")) {
            const size_t key = p + strlen("<parameter=");
            const size_t key_end = find(s, len, key, ">");
            const size_t value_end = find(s, len, key_end, "</parameter>");
            if (key_end == len || value_end == len) break;
            char *k = trimmed_copy(s, key, key_end);
            json_t *v = k ? syn_chat_xml_value(
                                s + key_end + 1, value_end - key_end - 1,
                                syn_chat_xml_parameter_type(tools, s + name, name_end - name, k))
                          : NULL;
            const bool ok = v && json_object_set_new(args, k, v) == 0;
            free(k);
            if (!ok) {
                json_decref(args);
                return false;
            }
            p = skip_space(s, value_end + strlen("</parameter>"), len);
        }
        if (!starts_with(s, len, p, "</function>")) {
            json_decref(args);
            return false;
        }
        if (!add_call(cl, s + name, name_end - name, args, NULL)) return false;
        p = skip_space(s, p + strlen("</function>"), len);
        if (!starts_with(s, len, p, "</tool_call>")) return false;
        p = skip_space(s, p + strlen("</tool_call>"), len);
        if (p < len && !starts_with(s, len, p, "<tool_call>")) return false;
        at = p;
    }
    return true;
}

/* Llama 3.1-3.3 answer a call with nothing but its JSON (3.1 and 3.3 may put <|python_tag|>
 * first); several calls are separated by ';'. Text that is not such JSON is content. */
static bool parse_llama3(const char *s, size_t len, call_list *cl, size_t *calls_begin) {
    size_t p = skip_space(s, 0, len);
    if (starts_with(s, len, p, "<|python_tag|>")) p = skip_space(s, p + 14, len);
    *calls_begin = len;
    if (p >= len || s[p] != '{') return true;
    while (p < len) {
        json_t *obj = json_at(s, len, &p);
        const bool ok = json_is_object(obj) && add_json_call(cl, obj, "parameters");
        json_decref(obj);
        if (!ok) return json_array_size(cl->calls) == 0; /* plain JSON text is content */
        p = skip_space(s, p, len);
        if (p < len && s[p] == ';') p = skip_space(s, p + 1, len);
    }
    *calls_begin = 0; /* the whole text was calls */
    return true;
}

static bool parse_mistral(const char *s, size_t len, call_list *cl, size_t *calls_begin) {
    size_t at = find(s, len, 0, "[TOOL_CALLS]");
    *calls_begin = at;
    while (at < len) {
        size_t p = skip_space(s, at + strlen("[TOOL_CALLS]"), len);
        if (p < len && s[p] == '[') { /* Nemo: a JSON array of calls */
            json_t *arr = json_at(s, len, &p);
            size_t i;
            json_t *obj;
            bool ok = json_is_array(arr) && json_array_size(arr) > 0;
            json_array_foreach(arr, i, obj) ok =
                ok && json_is_object(obj) && add_json_call(cl, obj, "arguments");
            json_decref(arr);
            if (!ok) return false;
        } else { /* Small 3.2, Devstral: NAME[ARGS]{...} */
            const size_t args = find(s, len, p, "[ARGS]");
            if (args == len) return false;
            size_t q = args + strlen("[ARGS]");
            json_t *obj = json_at(s, len, &q);
            size_t name_end = args;
            while (name_end > p && is_space(s[name_end - 1]))
                name_end--;
            if (!add_call(cl, s + p, name_end - p, obj, NULL)) return false;
            p = q;
        }
        p = skip_space(s, p, len);
        if (starts_with(s, len, p, "</s>")) p = skip_space(s, p + 4, len);
        if (p < len && !starts_with(s, len, p, "[TOOL_CALLS]")) return false;
        at = p;
    }
    return true;
}

/* gpt-oss writes messages on channels: "analysis" is its reasoning, "final" its answer, and a
 * commentary message addressed "to=functions.NAME" a call whose body is the arguments. */
static bool parse_harmony(const char *s, size_t len, call_list *cl, char **content,
                          char **reasoning) {
    size_t p = 0;
    size_t content_begin = len, content_end = len;
    while (p < len) {
        const size_t header = find(s, len, p, "<|channel|>");
        if (header == len) break;
        size_t head_begin = p; /* "<|start|>assistant to=functions.x" may precede the channel */
        const size_t msg = find(s, len, header, "<|message|>");
        if (msg == len) return false;
        size_t body = msg + strlen("<|message|>");
        size_t body_end = body;
        while (body_end < len && !starts_with(s, len, body_end, "<|end|>") &&
               !starts_with(s, len, body_end, "<|call|>") &&
               !starts_with(s, len, body_end, "<|return|>") &&
               !starts_with(s, len, body_end, "<|start|>"))
            body_end++;
        const size_t to = find(s, len, head_begin, "to=functions.");
        const size_t channel = header + strlen("<|channel|>");
        if (to < msg) {
            const size_t name = to + strlen("to=functions.");
            size_t name_end = name;
            while (name_end < msg && !is_space(s[name_end]) && s[name_end] != '<')
                name_end++;
            size_t q = body;
            json_t *args = json_at(s, body_end, &q);
            if (!add_call(cl, s + name, name_end - name, args, NULL)) return false;
        } else if (starts_with(s, len, channel, "analysis")) {
            free(*reasoning);
            if (!(*reasoning = trimmed_copy(s, body, body_end))) return false;
        } else {
            content_begin = body, content_end = body_end;
        }
        p = body_end;
        if (p < len) p = find(s, len, p, ">") + 1; /* past the end marker */
        if (p > len) p = len;
    }
    if (p == 0) content_begin = 0, content_end = len; /* no channels: all content */
    *content = content_begin < len ? trimmed_copy(s, content_begin, content_end) : strdup("");
    return *content != NULL;
}

/* ---- The whole message ---- */

/* Splits off the <think>...</think> part (in_think: the prompt opened it); *rest_begin is where
 * the answer starts. */
static syn_status split_reasoning(const char *s, size_t len, bool in_think, char **reasoning,
                                  size_t *rest_begin) {
    size_t p = skip_space(s, 0, len);
    const bool opened = in_think || starts_with(s, len, p, "<think>");
    if (opened && !in_think) p += strlen("<think>");
    const size_t close = find(s, len, p, "</think>");
    *rest_begin = 0;
    if (close == len && !opened) return SYN_OK; /* the model did not think */
    if (!(*reasoning = trimmed_copy(s, p, close))) return SYN_ERR_NO_MEMORY;
    *rest_begin = close == len ? len : skip_space(s, close + strlen("</think>"), len);
    return SYN_OK;
}

syn_status syn_chat_output_parse(const char *text, size_t len, syn_tool_syntax syntax, bool thinks,
                                 bool in_think, const json_t *tools, uint64_t id_seed,
                                 syn_chat_output *out) {
    *out = (syn_chat_output){0};
    size_t begin = 0;
    if (thinks && syntax != SYN_TOOLS_HARMONY &&
        split_reasoning(text, len, in_think, &out->reasoning, &begin) != SYN_OK)
        goto no_memory;
    const char *s = text + begin;
    const size_t n = len - begin;
    call_list cl = {json_array(), id_seed, syntax == SYN_TOOLS_MISTRAL};
    if (!cl.calls) goto no_memory;
    size_t calls_begin = n;
    bool ok = true;
    switch (syntax) {
    case SYN_TOOLS_HERMES: ok = parse_hermes(s, n, &cl, &calls_begin); break;
    case SYN_TOOLS_QWEN3_CODER: ok = parse_qwen3_coder(s, n, tools, &cl, &calls_begin); break;
    case SYN_TOOLS_LLAMA3: ok = parse_llama3(s, n, &cl, &calls_begin); break;
    case SYN_TOOLS_MISTRAL: ok = parse_mistral(s, n, &cl, &calls_begin); break;
    case SYN_TOOLS_HARMONY:
        ok = parse_harmony(s, n, &cl, &out->content, &out->reasoning);
        if (!ok) { /* a malformed message: the text as it came, reasoning included */
            free(out->reasoning);
            out->reasoning = NULL;
        }
        break;
    default: break;
    }
    if (!ok || json_array_size(cl.calls) == 0) { /* no call, or a malformed one: all text */
        json_decref(cl.calls);
        cl.calls = NULL;
        calls_begin = n;
    }
    out->tool_calls = cl.calls;
    if (syntax == SYN_TOOLS_HARMONY && ok) return SYN_OK;
    free(out->content);
    /* Content keeps the model's text as written when there is no call; before a call the
     * whitespace that separated it from the call goes. */
    if (calls_begin == n)
        out->content = strndup(s, n);
    else
        out->content = trimmed_copy(s, 0, calls_begin);
    if (!out->content) goto no_memory;
    return SYN_OK;
no_memory:
    syn_chat_output_free(out);
    return syn_fail(SYN_ERR_NO_MEMORY, "reading the model's output: out of memory");
}

/* In `[TOOL_CALLS][{...}, {...` the end of the last whole element (before its comma), or 0. */
static size_t mistral_array_cut(const char *s, size_t len, size_t open) {
    int depth = 0;
    bool in_string = false;
    size_t cut = 0;
    for (size_t i = open; i < len; i++) {
        char ch = s[i];
        if (in_string) {
            if (ch == '\\')
                i++;
            else if (ch == '"')
                in_string = false;
        } else if (ch == '"') {
            in_string = true;
        } else if (ch == '[' || ch == '{') {
            depth++;
        } else if (ch == ']' || ch == '}') {
            depth--;
        } else if (ch == ',' && depth == 1) {
            cut = i;
        }
    }
    return cut;
}

char *syn_chat_output_whole_calls(const char *text, size_t len, syn_tool_syntax syntax, size_t *n) {
    const char *opener = syntax == SYN_TOOLS_HERMES || syntax == SYN_TOOLS_QWEN3_CODER
                             ? "<tool_call>"
                         : syntax == SYN_TOOLS_MISTRAL ? "[TOOL_CALLS]"
                         : syntax == SYN_TOOLS_HARMONY ? "<|channel|>"
                                                       : NULL;
    if (!opener) return NULL;
    size_t last = len, count = 0;
    for (size_t at = find(text, len, 0, opener); at < len; at = find(text, len, at + 1, opener)) {
        last = at;
        count++;
    }
    if (syntax == SYN_TOOLS_MISTRAL && count == 1 &&
        starts_with(text, len, last, "[TOOL_CALLS][")) { /* one array of calls */
        const size_t cut = mistral_array_cut(text, len, last + strlen("[TOOL_CALLS]"));
        if (cut == 0) return NULL;
        char *whole = malloc(cut + 2);
        if (!whole) return NULL;
        memcpy(whole, text, cut);
        whole[cut] = ']';
        whole[cut + 1] = '\0';
        *n = cut + 1;
        return whole;
    }
    if (last == len || last == 0) return NULL;
    *n = last;
    return strndup(text, last);
}

void syn_chat_output_free(syn_chat_output *out) {
    if (!out) return;
    free(out->content);
    free(out->reasoning);
    json_decref(out->tool_calls);
    *out = (syn_chat_output){0};
}
