/* openai_request.c: the JSON body of a completion request -> oa_request, every field checked. */
#include "openai_request.h"

#include "anthropic_request.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void oa_error_set(oa_error *err, int http_status, const char *type, const char *param,
                  const char *code, const char *fmt, ...) {
    err->http_status = http_status;
    err->type = type;
    err->code = code;
    snprintf(err->param, sizeof err->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
}

json_t *oa_error_body(const oa_error *err) {
    return json_pack("{s:{s:s, s:s, s:o, s:o}}", "error", "message", err->message, "type",
                     err->type, "param", err->param[0] ? json_string(err->param) : json_null(),
                     "code", err->code ? json_string(err->code) : json_null());
}

/* A 400 invalid_request_error about param. */
#define BAD(param, ...)                                                                            \
    (oa_error_set(err, 400, "invalid_request_error", param, NULL, __VA_ARGS__), -1)

static const char *json_type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "a value";
}

/* The member key of obj, or NULL when absent or null (OpenAI treats null as absent). */
static json_t *member(json_t *obj, const char *key) {
    json_t *v = json_object_get(obj, key);
    return json_is_null(v) ? NULL : v;
}

static int get_number(json_t *obj, const char *key, double min, double max, double *out,
                      oa_error *err) {
    json_t *v = member(obj, key);
    if (!v) return 0;
    if (!json_is_number(v))
        return BAD(key, "'%s' must be a number, not %s", key, json_type_name(v));
    double x = json_number_value(v);
    if (!isfinite(x) || x < min || x > max)
        return BAD(key, "'%s' must be between %g and %g (got %.17g)", key, min, max, x);
    *out = x;
    return 0;
}

static int get_int(json_t *obj, const char *key, long long min, long long max, long long *out,
                   oa_error *err) {
    json_t *v = member(obj, key);
    if (!v) return 0;
    if (!json_is_integer(v))
        return BAD(key, "'%s' must be an integer, not %s", key, json_type_name(v));
    long long x = json_integer_value(v);
    if (x < min || x > max)
        return BAD(key, "'%s' must be between %lld and %lld (got %lld)", key, min, max, x);
    *out = x;
    return 0;
}

static int get_bool(json_t *obj, const char *key, bool *out, oa_error *err) {
    json_t *v = member(obj, key);
    if (!v) return 0;
    if (!json_is_boolean(v))
        return BAD(key, "'%s' must be a boolean, not %s", key, json_type_name(v));
    *out = json_is_true(v);
    return 0;
}

static int get_string(json_t *obj, const char *key, const char **out, oa_error *err) {
    json_t *v = member(obj, key);
    if (!v) return 0;
    if (!json_is_string(v))
        return BAD(key, "'%s' must be a string, not %s", key, json_type_name(v));
    if (strlen(json_string_value(v)) != json_string_length(v))
        return BAD(key, "'%s' contains a NUL character", key);
    *out = json_string_value(v);
    return 0;
}

/* Keeps s (malloc'd) alive as long as r. */
static int own(oa_request *r, char *s) {
    char **grown = realloc(r->owned, (r->n_owned + 1) * sizeof *grown);
    if (!grown) {
        free(s);
        return -1;
    }
    r->owned = grown;
    r->owned[r->n_owned++] = s;
    return 0;
}

/* A message's content: a string, or an array of {"type": "text", "text": ...} parts joined. */
static int message_content(oa_request *r, json_t *content, const char *param, const char **out,
                           oa_error *err) {
    if (json_is_string(content)) {
        if (strlen(json_string_value(content)) != json_string_length(content))
            return BAD(param, "'%s' contains a NUL character", param);
        *out = json_string_value(content);
        return 0;
    }
    if (!json_is_array(content))
        return BAD(param, "'%s' must be a string or an array of text parts, not %s", param,
                   json_type_name(content));
    size_t total = 0, i;
    json_t *part;
    json_array_foreach(content, i, part) {
        json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        if (!json_is_object(part) || !json_is_string(type))
            return BAD(param, "'%s[%zu]' must be an object with a string 'type'", param, i);
        if (strcmp(json_string_value(type), "text") != 0)
            return BAD(param, "'%s[%zu]' has type '%s'; only 'text' parts are supported", param, i,
                       json_string_value(type));
        if (!json_is_string(text)) return BAD(param, "'%s[%zu].text' must be a string", param, i);
        if (strlen(json_string_value(text)) != json_string_length(text))
            return BAD(param, "'%s[%zu].text' contains a NUL character", param, i);
        total += json_string_length(text);
    }
    char *joined = malloc(total + 1), *p = joined;
    if (!joined || own(r, joined) != 0)
        return oa_error_set(err, 500, "server_error", NULL, NULL, "out of memory"), -1;
    json_array_foreach(content, i, part) {
        json_t *text = json_object_get(part, "text");
        memcpy(p, json_string_value(text), json_string_length(text));
        p += json_string_length(text);
    }
    *p = '\0';
    *out = joined;
    return 0;
}

#define NO_MEMORY() (oa_error_set(err, 500, "server_error", NULL, NULL, "out of memory"), -1)

/* An assistant message's tool_calls, as the template reads them: each {"id", "type":
 * "function", "function": {"name", "arguments"}} with arguments, which OpenAI clients send as a
 * JSON text, parsed into the object templates index. */
static int message_tool_calls(json_t *calls, size_t msg, json_t *out, oa_error *err) {
    char param[96];
    snprintf(param, sizeof param, "messages[%zu].tool_calls", msg);
    if (!json_is_array(calls))
        return BAD(param, "'%s' must be an array, not %s", param, json_type_name(calls));
    json_t *list = json_array();
    if (!list || json_object_set_new(out, "tool_calls", list) != 0) return NO_MEMORY();
    size_t j;
    json_t *call;
    json_array_foreach(calls, j, call) {
        snprintf(param, sizeof param, "messages[%zu].tool_calls[%zu]", msg, j);
        json_t *fn = json_object_get(call, "function");
        const char *id = json_string_value(json_object_get(call, "id"));
        const char *name = json_string_value(json_object_get(fn, "name"));
        json_t *args = json_object_get(fn, "arguments");
        if (!json_is_object(call) || !json_is_object(fn) || !name)
            return BAD(param,
                       "'%s' must be {\"id\", \"type\": \"function\", \"function\": "
                       "{\"name\", \"arguments\"}}",
                       param);
        json_t *parsed;
        if (json_is_string(args)) {
            json_error_t jerr;
            parsed = json_loads(json_string_value(args), JSON_DECODE_ANY, &jerr);
            if (!json_is_object(parsed)) {
                json_decref(parsed);
                return BAD(param, "'%s.function.arguments' must be a JSON object in a string",
                           param);
            }
        } else if (json_is_object(args)) {
            parsed = json_incref(args);
        } else if (!args) {
            parsed = json_object();
        } else {
            return BAD(param, "'%s.function.arguments' must be a string, not %s", param,
                       json_type_name(args));
        }
        json_t *norm = json_pack("{s:s, s:s, s:{s:s, s:o}}", "id", id ? id : "", "type", "function",
                                 "function", "name", name, "arguments", parsed);
        if (!norm || json_array_append_new(list, norm) != 0) return NO_MEMORY();
    }
    return 0;
}

/* Each message checked, and r->template_messages built: what the chat template reads (role,
 * content as a string or null, tool_calls, tool_call_id, name, reasoning_content). */
static int parse_messages(oa_request *r, oa_error *err) {
    json_t *msgs = member(r->root, "messages");
    if (!msgs) return BAD("messages", "'messages' is required");
    if (!json_is_array(msgs))
        return BAD("messages", "'messages' must be an array, not %s", json_type_name(msgs));
    if (json_array_size(msgs) == 0) return BAD("messages", "'messages' must not be empty");
    r->template_messages = json_array();
    if (!r->template_messages) return NO_MEMORY();
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        char param[64];
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(m))
            return BAD(param, "'%s' must be an object, not %s", param, json_type_name(m));
        json_t *role = json_object_get(m, "role"), *content = member(m, "content");
        json_t *calls = member(m, "tool_calls");
        snprintf(param, sizeof param, "messages[%zu].role", i);
        if (!json_is_string(role)) return BAD(param, "'%s' must be a string", param);
        const char *name = json_string_value(role);
        /* "developer" is OpenAI's newer name for the system role. */
        if (strcmp(name, "developer") == 0) name = "system";
        const bool assistant = strcmp(name, "assistant") == 0, tool = strcmp(name, "tool") == 0;
        if (strcmp(name, "system") != 0 && strcmp(name, "user") != 0 && !assistant && !tool)
            return BAD(param, "'%s' is '%s'; expected system, user, assistant or tool", param,
                       name);
        json_t *norm = json_pack("{s:s}", "role", name);
        if (!norm || json_array_append_new(r->template_messages, norm) != 0) return NO_MEMORY();
        snprintf(param, sizeof param, "messages[%zu].content", i);
        /* An assistant turn that called tools may have no text (content null or absent). */
        if (!content && !(assistant && calls)) return BAD(param, "'%s' is required", param);
        const char *text = NULL;
        if (content && message_content(r, content, param, &text, err) != 0) return -1;
        if (json_object_set_new(norm, "content", text ? json_string(text) : json_null()) != 0)
            return NO_MEMORY();
        if (calls) {
            snprintf(param, sizeof param, "messages[%zu].tool_calls", i);
            if (!assistant) return BAD(param, "'%s' is only allowed on assistant messages", param);
            if (message_tool_calls(calls, i, norm, err) != 0) return -1;
        }
        static const char *const extra[] = {"tool_call_id", "name", "reasoning_content"};
        for (size_t k = 0; k < sizeof extra / sizeof extra[0]; k++) {
            const char *v = NULL;
            snprintf(param, sizeof param, "messages[%zu]", i);
            if (get_string(m, extra[k], &v, err) != 0) {
                snprintf(err->param, sizeof err->param, "messages[%zu].%s", i, extra[k]);
                return -1;
            }
            if (v && json_object_set_new(norm, extra[k], json_string(v)) != 0) return NO_MEMORY();
        }
        if (tool && !json_object_get(norm, "tool_call_id"))
            return BAD(param, "'messages[%zu].tool_call_id' is required for a tool message", i);
    }
    return 0;
}

/* tools: [{"type": "function", "function": {"name", "description"?, "parameters"}}]. */
static int parse_tools(oa_request *r, oa_error *err) {
    json_t *tools = member(r->root, "tools");
    if (!tools) return 0;
    if (!json_is_array(tools))
        return BAD("tools", "'tools' must be an array, not %s", json_type_name(tools));
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        char param[48];
        snprintf(param, sizeof param, "tools[%zu]", i);
        json_t *fn = json_object_get(t, "function");
        const char *type = json_string_value(json_object_get(t, "type"));
        if (!json_is_object(t) || !type || strcmp(type, "function") != 0 || !json_is_object(fn))
            return BAD(param, "'%s' must be {\"type\": \"function\", \"function\": {...}}", param);
        const char *name = json_string_value(json_object_get(fn, "name"));
        if (!name || !*name)
            return BAD(param, "'%s.function.name' must be a non-empty string", param);
        for (size_t j = 0; j < i; j++)
            if (strcmp(name, json_string_value(json_object_get(
                                 json_object_get(json_array_get(tools, j), "function"), "name"))) ==
                0)
                return BAD(param, "'%s': a second tool named '%s'", param, name);
        if (!json_is_object(json_object_get(fn, "parameters")))
            return BAD(param,
                       "'%s.function.parameters' (the JSON Schema of the arguments) must be an "
                       "object",
                       param);
    }
    r->tools = json_array_size(tools) ? tools : NULL;
    return 0;
}

/* tool_choice: "none", "auto", "required", or {"type": "function", "function": {"name"}}. */
static int parse_tool_choice(oa_request *r, oa_error *err) {
    json_t *tc = member(r->root, "tool_choice");
    r->tool_choice = r->tools ? OA_TOOLS_AUTO : OA_TOOLS_NONE;
    if (!tc) return 0;
    if (json_is_string(tc)) {
        const char *v = json_string_value(tc);
        if (strcmp(v, "none") == 0)
            r->tool_choice = OA_TOOLS_NONE;
        else if (strcmp(v, "auto") == 0)
            r->tool_choice = r->tools ? OA_TOOLS_AUTO : OA_TOOLS_NONE;
        else if (strcmp(v, "required") == 0)
            r->tool_choice = OA_TOOLS_REQUIRED;
        else
            return BAD("tool_choice",
                       "'tool_choice' is '%s'; expected none, auto, required or "
                       "{\"type\": \"function\", \"function\": {\"name\"}}",
                       v);
    } else {
        const char *name =
            json_string_value(json_object_get(json_object_get(tc, "function"), "name"));
        if (!json_is_object(tc) || !name)
            return BAD("tool_choice", "'tool_choice' must be a string or {\"type\": "
                                      "\"function\", \"function\": {\"name\"}}");
        r->tool_choice = OA_TOOLS_NAMED;
        r->tool_choice_name = name;
    }
    if (r->tool_choice != OA_TOOLS_NONE && !r->tools)
        return BAD("tool_choice", "'tool_choice' asks for a tool call but 'tools' is empty");
    if (r->tool_choice == OA_TOOLS_NAMED) {
        size_t i;
        json_t *t;
        json_array_foreach(r->tools, i, t) {
            if (strcmp(json_string_value(json_object_get(json_object_get(t, "function"), "name")),
                       r->tool_choice_name) == 0)
                return 0;
        }
        return BAD("tool_choice", "'tool_choice' names '%s', which is not among 'tools'",
                   r->tool_choice_name);
    }
    return 0;
}

/* response_format: {"type": "text" | "json_object" | "json_schema", "json_schema": {"name",
 * "schema", "strict"}}; grammar: llama-server's GBNF text. */
static int parse_output_format(oa_request *r, oa_error *err) {
    json_t *rf = member(r->root, "response_format");
    if (rf) {
        const char *type = json_string_value(json_object_get(rf, "type"));
        if (!json_is_object(rf) || !type)
            return BAD("response_format", "'response_format' must be {\"type\": ...}");
        if (strcmp(type, "json_object") == 0) {
            r->format = OA_FORMAT_JSON_OBJECT;
        } else if (strcmp(type, "json_schema") == 0) {
            json_t *js = json_object_get(rf, "json_schema");
            r->json_schema = json_object_get(js, "schema");
            if (!json_is_object(r->json_schema))
                return BAD("response_format.json_schema.schema",
                           "'response_format.json_schema.schema' must be an object");
            r->format = OA_FORMAT_JSON_SCHEMA;
        } else if (strcmp(type, "text") != 0) {
            return BAD("response_format.type",
                       "'response_format.type' is '%s'; expected text, json_object or json_schema",
                       type);
        }
    }
    if (get_string(r->root, "grammar", &r->grammar, err) != 0) return -1;
    if (r->grammar && r->format != OA_FORMAT_TEXT)
        return BAD("grammar", "'grammar' and 'response_format' cannot be used together");
    json_t *kw = member(r->root, "chat_template_kwargs");
    if (kw && !json_is_object(kw))
        return BAD("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    r->chat_template_kwargs = kw;
    return 0;
}

/* /infill's fields, checked as llama-server checks them: input_prefix and input_suffix strings,
 * input_extra an array of {"filename"?, "text"} (the filename defaults later, to "tmp"), prompt
 * an optional string. */
static int parse_infill(oa_request *r, oa_error *err) {
    static const char *const required[] = {"input_prefix", "input_suffix"};
    const char **fields[] = {&r->fim.prefix, &r->fim.suffix};
    for (size_t i = 0; i < 2; i++) {
        if (!member(r->root, required[i])) return BAD(required[i], "'%s' is required", required[i]);
        if (get_string(r->root, required[i], fields[i], err) != 0) return -1;
    }
    if (get_string(r->root, "prompt", &r->prompt_text, err) != 0) return -1;
    r->fim.prompt = r->prompt_text;
    json_t *extra = member(r->root, "input_extra");
    if (!extra) return 0;
    if (!json_is_array(extra))
        return BAD("input_extra",
                   "'input_extra' must be an array of {\"filename\": string, \"text\": string}");
    const size_t n = json_array_size(extra);
    r->fim_extra = calloc(n ? n : 1, sizeof *r->fim_extra);
    if (!r->fim_extra) return NO_MEMORY();
    size_t i;
    json_t *chunk;
    json_array_foreach(extra, i, chunk) {
        char param[48];
        snprintf(param, sizeof param, "input_extra[%zu]", i);
        if (!json_is_object(chunk) || !json_is_string(json_object_get(chunk, "text")))
            return BAD(param, "'%s' must be an object with a string 'text'", param);
        if (get_string(chunk, "text", &r->fim_extra[i].text, err) != 0 ||
            get_string(chunk, "filename", &r->fim_extra[i].filename, err) != 0)
            return -1;
    }
    r->fim.extra = r->fim_extra;
    r->fim.n_extra = n;
    return 0;
}

/* /v1/completions' suffix (OpenAI's insert mode): the text prompt before the gap, the suffix
 * after it. */
static int parse_suffix(oa_request *r, oa_error *err) {
    const char *suffix = NULL;
    if (get_string(r->root, "suffix", &suffix, err) != 0 || !suffix) return 0;
    if (!r->prompt_text) return BAD("suffix", "'suffix' needs 'prompt' as a text, not token ids");
    r->infill = true;
    r->fim.prefix = r->prompt_text;
    r->fim.suffix = suffix;
    return 0;
}

static int parse_prompt(oa_request *r, oa_error *err) {
    if (r->infill) return parse_infill(r, err);
    json_t *prompt = member(r->root, "prompt");
    if (!prompt) return BAD("prompt", "'prompt' is required");
    if (json_is_string(prompt)) return get_string(r->root, "prompt", &r->prompt_text, err);
    if (json_is_array(prompt) && json_array_size(prompt) == 1 &&
        json_is_string(json_array_get(prompt, 0))) {
        /* A batch of one prompt, as clients often send. */
        json_t *only = json_array_get(prompt, 0);
        if (strlen(json_string_value(only)) != json_string_length(only))
            return BAD("prompt", "'prompt' contains a NUL character");
        r->prompt_text = json_string_value(only);
        return 0;
    }
    if (!json_is_array(prompt))
        return BAD("prompt", "'prompt' must be a string or an array of token ids, not %s",
                   json_type_name(prompt));
    size_t n = json_array_size(prompt), i;
    if (n == 0) return BAD("prompt", "'prompt' must not be empty");
    r->prompt_tokens = malloc(n * sizeof *r->prompt_tokens);
    if (!r->prompt_tokens)
        return oa_error_set(err, 500, "server_error", NULL, NULL, "out of memory"), -1;
    json_t *id;
    json_array_foreach(prompt, i, id) {
        if (!json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) > INT32_MAX)
            return BAD("prompt",
                       "'prompt[%zu]' must be a token id (a non-negative integer); only one "
                       "prompt per request is supported",
                       i);
        r->prompt_tokens[i] = (int32_t)json_integer_value(id);
    }
    r->n_prompt_tokens = n;
    return 0;
}

static int parse_stop(oa_request *r, oa_error *err) {
    json_t *stop = member(r->root, "stop");
    if (!stop) return 0;
    if (json_is_string(stop)) {
        if (get_string(r->root, "stop", &r->stop[0], err) != 0) return -1;
        r->n_stop = 1;
    } else if (json_is_array(stop)) {
        if (json_array_size(stop) > OA_MAX_STOP)
            return BAD("stop", "'stop' holds at most %d strings", OA_MAX_STOP);
        size_t i;
        json_t *s;
        json_array_foreach(stop, i, s) {
            if (!json_is_string(s) || strlen(json_string_value(s)) != json_string_length(s))
                return BAD("stop", "'stop[%zu]' must be a string without NUL characters", i);
            r->stop[r->n_stop++] = json_string_value(s);
        }
    } else {
        return BAD("stop", "'stop' must be a string or an array of strings, not %s",
                   json_type_name(stop));
    }
    for (size_t i = 0; i < r->n_stop; i++) {
        if (r->stop[i][0] == '\0') return BAD("stop", "a stop string must not be empty");
        if (strlen(r->stop[i]) > OA_MAX_STOP_BYTES)
            return BAD("stop", "a stop string is at most %d bytes long", OA_MAX_STOP_BYTES);
    }
    return 0;
}

/* logprobs: chat takes "logprobs": true with "top_logprobs": N; the legacy completions endpoint
 * takes "logprobs": N. Either way r->top_logprobs ends up N, or -1 for none. */
static int parse_logprobs(oa_request *r, oa_error *err) {
    json_t *lp = member(r->root, "logprobs");
    long long top = -1;
    if (r->kind == OA_CHAT || json_is_boolean(lp)) {
        bool on = false;
        if (get_bool(r->root, "logprobs", &on, err) != 0) return -1;
        long long n = 0;
        if (get_int(r->root, "top_logprobs", 0, OA_MAX_TOP_LOGPROBS, &n, err) != 0) return -1;
        if (member(r->root, "top_logprobs") && !on)
            return BAD("top_logprobs", "'top_logprobs' needs 'logprobs': true");
        if (on) top = n;
    } else if (get_int(r->root, "logprobs", 0, OA_MAX_TOP_LOGPROBS, &top, err) != 0) {
        return -1;
    }
    r->top_logprobs = (int32_t)top;
    return 0;
}

/* get_number into a float that keeps its value when the key is absent. */
static int get_float(json_t *obj, const char *key, double min, double max, float *inout,
                     oa_error *err) {
    double x = *inout;
    if (get_number(obj, key, min, max, &x, err) != 0) return -1;
    *inout = (float)x;
    return 0;
}

static int parse_sampling(oa_request *r, oa_error *err) {
    syn_sampler_params *s = &r->sampling;
    long long top_k = s->top_k;
    if (get_float(r->root, "temperature", 0, 2, &s->temperature, err) != 0 ||
        get_float(r->root, "top_p", 0, 1, &s->top_p, err) != 0 ||
        get_float(r->root, "min_p", 0, 1, &s->min_p, err) != 0 ||
        get_int(r->root, "top_k", 0, INT32_MAX, &top_k, err) != 0 ||
        get_float(r->root, "repeat_penalty", 0, 10, &s->repeat_penalty, err) != 0)
        return -1;
    s->top_k = (int32_t)top_k;
    if (s->top_p == 0) return BAD("top_p", "'top_p' must be above 0");
    if (s->repeat_penalty == 0) return BAD("repeat_penalty", "'repeat_penalty' must be above 0");
    if (get_float(r->root, "frequency_penalty", -2, 2, &s->frequency_penalty, err) != 0 ||
        get_float(r->root, "presence_penalty", -2, 2, &s->presence_penalty, err) != 0)
        return -1;
    json_t *seed = member(r->root, "seed");
    if (seed) {
        if (!json_is_integer(seed))
            return BAD("seed", "'seed' must be an integer, not %s", json_type_name(seed));
        s->seed = (uint64_t)json_integer_value(seed);
        r->has_seed = true;
    }
    return 0;
}

/* A Responses API content: a string, or parts {"type": "input_text" | "output_text" | "text",
 * "text"} joined; NULL with *err filled when neither. */
static json_t *responses_text(json_t *content, const char *param, oa_error *err) {
    if (json_is_string(content)) return json_incref(content);
    if (!json_is_array(content)) {
        (void)BAD(param, "'%s' must be a string or an array of text parts", param);
        return NULL;
    }
    json_t *parts = json_array();
    size_t i;
    json_t *part;
    json_array_foreach(content, i, part) {
        const char *type = json_string_value(json_object_get(part, "type"));
        json_t *text = json_object_get(part, "text");
        if (!type || !json_is_string(text) ||
            (strcmp(type, "input_text") != 0 && strcmp(type, "output_text") != 0 &&
             strcmp(type, "text") != 0)) {
            json_decref(parts);
            (void)BAD(param, "'%s[%zu]' must be an input_text or output_text part", param, i);
            return NULL;
        }
        json_array_append_new(parts, json_pack("{s:s, s:O}", "type", "text", "text", text));
    }
    return parts;
}

/* The Responses API's input items as chat messages: messages by role, consecutive function_call
 * items as one assistant turn with tool_calls, function_call_output items as tool messages. */
static int responses_messages(json_t *root, json_t *msgs, oa_error *err) {
    const char *instructions = NULL;
    if (get_string(root, "instructions", &instructions, err) != 0) return -1;
    if (instructions)
        json_array_append_new(msgs,
                              json_pack("{s:s, s:s}", "role", "system", "content", instructions));
    json_t *input = member(root, "input");
    if (!input) return BAD("input", "'input' is required");
    if (json_is_string(input)) {
        json_array_append_new(msgs, json_pack("{s:s, s:O}", "role", "user", "content", input));
        return 0;
    }
    if (!json_is_array(input) || json_array_size(input) == 0)
        return BAD("input", "'input' must be a string or a non-empty array of items");
    json_t *calls = NULL; /* the tool_calls of the assistant turn being built */
    size_t i;
    json_t *item;
    json_array_foreach(input, i, item) {
        char param[48];
        snprintf(param, sizeof param, "input[%zu]", i);
        if (!json_is_object(item)) return BAD(param, "'%s' must be an object", param);
        const char *type = json_string_value(json_object_get(item, "type"));
        if (!type) type = "message";
        if (strcmp(type, "function_call") == 0) {
            const char *id = json_string_value(json_object_get(item, "call_id"));
            const char *name = json_string_value(json_object_get(item, "name"));
            json_t *args = json_object_get(item, "arguments");
            if (!id || !name || !json_is_string(args))
                return BAD(param, "'%s' must have call_id, name and arguments (a JSON text)",
                           param);
            if (!calls) {
                calls = json_array();
                json_array_append_new(msgs, json_pack("{s:s, s:n, s:o}", "role", "assistant",
                                                      "content", "tool_calls", calls));
            }
            json_array_append_new(calls, json_pack("{s:s, s:s, s:{s:s, s:O}}", "id", id, "type",
                                                   "function", "function", "name", name,
                                                   "arguments", args));
            continue;
        }
        calls = NULL;
        if (strcmp(type, "function_call_output") == 0) {
            const char *id = json_string_value(json_object_get(item, "call_id"));
            json_t *out = json_object_get(item, "output");
            json_t *text = id && out ? responses_text(out, param, err) : NULL;
            if (!text)
                return id && out ? -1 : BAD(param, "'%s' must have call_id and output", param);
            json_array_append_new(msgs, json_pack("{s:s, s:s, s:o}", "role", "tool", "tool_call_id",
                                                  id, "content", text));
        } else if (strcmp(type, "message") == 0) {
            const char *role = json_string_value(json_object_get(item, "role"));
            if (!role) return BAD(param, "'%s.role' must be a string", param);
            snprintf(param, sizeof param, "input[%zu].content", i);
            json_t *text = responses_text(json_object_get(item, "content"), param, err);
            if (!text) return -1;
            json_array_append_new(msgs, json_pack("{s:s, s:o}", "role", role, "content", text));
        } else {
            return BAD(param,
                       "'%s' has type '%s'; supported: message, function_call, "
                       "function_call_output",
                       param, type);
        }
    }
    return 0;
}

/* A Responses API body rewritten in place into the chat fields parse_fields reads: messages,
 * tools in chat's nested shape, tool_choice, max_tokens, response_format. Stateless: there is no
 * stored response to continue from. */
static int responses_to_chat(oa_request *r, oa_error *err) {
    json_t *root = r->root;
    if (!json_is_object(root))
        return BAD(NULL, "the body must be a JSON object, not %s", json_type_name(root));
    if (member(root, "previous_response_id"))
        return BAD("previous_response_id", "'previous_response_id' is not supported: this server "
                                           "stores no responses; send the whole conversation in "
                                           "'input'");
    static const char *const chat_only[] = {"messages", "response_format", "max_tokens"};
    for (size_t i = 0; i < sizeof chat_only / sizeof chat_only[0]; i++)
        if (json_object_get(root, chat_only[i]))
            return BAD(chat_only[i], "'%s' belongs to /v1/chat/completions", chat_only[i]);
    json_t *msgs = json_array();
    if (!msgs || json_object_set_new(root, "messages", msgs) != 0) return NO_MEMORY();
    if (responses_messages(root, msgs, err) != 0) return -1;
    json_t *tools = member(root, "tools");
    if (json_is_array(tools)) {
        json_t *chat_tools = json_array();
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) {
            const char *type = json_string_value(json_object_get(t, "type"));
            if (!type || strcmp(type, "function") != 0) {
                json_decref(chat_tools);
                char param[32];
                snprintf(param, sizeof param, "tools[%zu]", i);
                return BAD(param, "'%s': only function tools are supported", param);
            }
            json_t *fn = json_deep_copy(t);
            json_object_del(fn, "type");
            json_object_del(fn, "strict");
            json_array_append_new(chat_tools,
                                  json_pack("{s:s, s:o}", "type", "function", "function", fn));
        }
        json_object_set_new(root, "tools", chat_tools);
    }
    json_t *tc = member(root, "tool_choice");
    if (json_is_object(tc) && json_is_string(json_object_get(tc, "name")))
        json_object_set_new(root, "tool_choice",
                            json_pack("{s:s, s:{s:O}}", "type", "function", "function", "name",
                                      json_object_get(tc, "name")));
    json_t *max = member(root, "max_output_tokens");
    if (max) json_object_set(root, "max_tokens", max);
    json_t *format = json_object_get(member(root, "text"), "format");
    if (json_is_object(format)) {
        const char *type = json_string_value(json_object_get(format, "type"));
        json_t *rf = json_pack("{s:s}", "type", type ? type : "");
        if (type && strcmp(type, "json_schema") == 0)
            json_object_set_new(rf, "json_schema",
                                json_pack("{s:O*}", "schema", json_object_get(format, "schema")));
        json_object_set_new(root, "response_format", rf);
    }
    r->kind = OA_CHAT;
    r->responses = true;
    return 0;
}

/* llama-server's /completion body rewritten in place into the completion fields parse_fields
 * reads (its sampling fields and prompt already have their OpenAI names). */
static int llama_to_completion(oa_request *r, oa_error *err) {
    json_t *root = r->root;
    if (!json_is_object(root))
        return BAD(NULL, "the body must be a JSON object, not %s", json_type_name(root));
    r->infill = r->kind == OA_INFILL;
    json_t *n_predict = member(root, "n_predict");
    if (n_predict) {
        if (!json_is_integer(n_predict) ||
            (json_integer_value(n_predict) != -1 && json_integer_value(n_predict) < 1))
            return BAD("n_predict", "'n_predict' must be -1 (no limit) or a count of at least 1");
        if (json_integer_value(n_predict) == -1)
            json_object_del(root, "max_tokens");
        else
            json_object_set(root, "max_tokens", n_predict);
    }
    json_t *seed = member(root, "seed");
    if (json_is_integer(seed) && json_integer_value(seed) == -1) json_object_del(root, "seed");
    json_t *bias = member(root, "logit_bias");
    if (json_is_array(bias)) { /* [[id, bias or false (banned)], ...] -> {"id": bias} */
        json_t *by_id = json_object();
        if (!by_id) return NO_MEMORY();
        size_t i;
        json_t *pair;
        json_array_foreach(bias, i, pair) {
            json_t *id = json_array_get(pair, 0), *b = json_array_get(pair, 1);
            if (json_array_size(pair) != 2 || !json_is_integer(id) ||
                !(json_is_number(b) || json_is_false(b))) {
                json_decref(by_id);
                return BAD("logit_bias",
                           "'logit_bias[%zu]' must be [token id, bias] (a number, or false to ban "
                           "the token)",
                           i);
            }
            char key[24];
            snprintf(key, sizeof key, "%lld", (long long)json_integer_value(id));
            json_object_set_new(by_id, key, json_is_false(b) ? json_integer(-100) : json_copy(b));
        }
        if (json_object_set_new(root, "logit_bias", by_id) != 0) return NO_MEMORY();
    }
    json_t *schema = member(root, "json_schema");
    if (schema) {
        if (!json_is_object(schema))
            return BAD("json_schema", "'json_schema' must be a JSON Schema object");
        json_object_set_new(
            root, "response_format",
            json_pack("{s:s, s:{s:O}}", "type", "json_schema", "json_schema", "schema", schema));
    }
    r->kind = OA_COMPLETION;
    r->native = true;
    return 0;
}

/* logit_bias: {"token id": bias in -100..100}; -100 bans the token, as OpenAI's does. Ids are
 * checked against the vocabulary at submission (the engine names the id). */
static int parse_logit_bias(oa_request *r, oa_error *err) {
    json_t *lb = member(r->root, "logit_bias");
    if (!lb) return 0;
    if (!json_is_object(lb))
        return BAD("logit_bias", "'logit_bias' must be an object of token ids to biases");
    r->logit_bias = calloc(json_object_size(lb) ? json_object_size(lb) : 1, sizeof *r->logit_bias);
    if (!r->logit_bias) return BAD("logit_bias", "out of memory for 'logit_bias'");
    const char *key;
    json_t *v;
    json_object_foreach(lb, key, v) {
        char *end = NULL;
        errno = 0;
        const long id = strtol(key, &end, 10);
        if (!*key || *end || errno || id < 0 || id > INT32_MAX)
            return BAD("logit_bias", "'logit_bias' key '%s' is not a token id", key);
        if (!json_is_number(v) || json_number_value(v) < -100 || json_number_value(v) > 100)
            return BAD("logit_bias", "'logit_bias[\"%s\"]' must be a number in -100..100", key);
        const double b = json_number_value(v);
        r->logit_bias[r->n_logit_bias++] =
            (syn_logit_bias){.token = (int32_t)id, .bias = b <= -100 ? -INFINITY : (float)b};
    }
    return 0;
}

static int parse_fields(oa_request *r, oa_error *err) {
    if (!json_is_object(r->root))
        return BAD(NULL, "the body must be a JSON object, not %s", json_type_name(r->root));
    long long n = 1, max_tokens = -1;
    if (get_string(r->root, "model", &r->model, err) != 0 ||
        (r->kind == OA_CHAT ? parse_messages(r, err) : parse_prompt(r, err)) != 0 ||
        (r->kind == OA_COMPLETION && !r->native && parse_suffix(r, err) != 0) ||
        (r->kind == OA_CHAT && (parse_tools(r, err) != 0 || parse_tool_choice(r, err) != 0)) ||
        get_bool(r->root, "parallel_tool_calls", &r->parallel_tool_calls, err) != 0 ||
        parse_output_format(r, err) != 0 || parse_logit_bias(r, err) != 0 ||
        get_int(r->root, "max_tokens", 1, INT32_MAX, &max_tokens, err) != 0 ||
        get_int(r->root, "max_completion_tokens", 1, INT32_MAX, &max_tokens, err) != 0 ||
        parse_sampling(r, err) != 0 || parse_stop(r, err) != 0 || parse_logprobs(r, err) != 0 ||
        get_bool(r->root, "stream", &r->stream, err) != 0 ||
        get_string(r->root, "user", &r->user, err) != 0 ||
        get_int(r->root, "n", INT32_MIN, INT32_MAX, &n, err) != 0)
        return -1;
    if (n < 1 || n > OA_MAX_N)
        return BAD("n", "'n' is %lld; it must be 1..%d (choices per request)", n, OA_MAX_N);
    if (n > 1 && (r->responses || r->native)) /* (an Anthropic body's "n" is not carried over) */
        return BAD("n", "'n' is %lld; %s answers one choice per request (n = 1)", n,
                   r->responses ? "/v1/responses" : "/completion");
    r->n = (int32_t)n;
    r->max_tokens = (int32_t)max_tokens;
    json_t *opts = member(r->root, "stream_options");
    if (!opts) return 0;
    if (!json_is_object(opts)) return BAD("stream_options", "'stream_options' must be an object");
    if (!r->stream)
        return BAD("stream_options", "'stream_options' is only allowed with 'stream': true");
    json_t *usage = member(opts, "include_usage");
    if (usage && !json_is_boolean(usage))
        return BAD("stream_options.include_usage",
                   "'stream_options.include_usage' must be a boolean");
    r->include_usage = json_is_true(usage);
    return 0;
}

/* The request body as JSON (duplicate keys refused), or NULL with a 400 naming where it breaks. */
static json_t *load_body(const char *body, size_t len, oa_error *err) {
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        oa_error_set(err, 400, "invalid_request_error", NULL, NULL,
                     "the body is not valid JSON: %s (line %d, column %d)", jerr.text, jerr.line,
                     jerr.column);
    return root;
}

int oa_request_parse(oa_kind kind, const char *body, size_t len, oa_request *out, oa_error *err) {
    oa_request r = {
        .kind = kind, .max_tokens = -1, .top_logprobs = -1, .parallel_tool_calls = true, .n = 1};
    r.sampling = syn_sampler_default_params();
    r.root = load_body(body, len, err);
    if (!r.root) return -1;
    int rc = 0;
    if (kind == OA_MESSAGES || kind == OA_MESSAGES_COUNT) {
        rc = anthropic_to_chat(&r.root, kind == OA_MESSAGES_COUNT, err);
        r.kind = OA_CHAT;
        r.messages_api = true;
    } else if (kind == OA_RESPONSES) {
        rc = responses_to_chat(&r, err);
    } else if (kind == OA_LLAMA_COMPLETION || kind == OA_INFILL) {
        rc = llama_to_completion(&r, err);
    }
    if (rc != 0 || parse_fields(&r, err) != 0) {
        oa_request_free(&r);
        return -1;
    }
    *out = r;
    return 0;
}

void oa_request_free(oa_request *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n_owned; i++)
        free(r->owned[i]);
    free(r->owned);
    free(r->prompt_tokens);
    free(r->fim_extra);
    free(r->logit_bias);
    json_decref(r->template_messages);
    json_decref(r->root);
    memset(r, 0, sizeof *r);
}

/* ---------------------------------------------------------------------------------------------
 * POST /v1/embeddings
 * ------------------------------------------------------------------------------------------- */

void oa_embed_request_free(oa_embed_request *r) {
    if (!r) return;
    for (size_t i = 0; r->tokens && i < r->n; i++)
        free(r->tokens[i]);
    free(r->texts);
    free(r->tokens);
    free(r->n_tokens);
    json_decref(r->root);
    memset(r, 0, sizeof *r);
}

/* Input i, item: a non-empty text or a non-empty array of token ids. */
static int embed_input(oa_embed_request *r, size_t i, json_t *item, oa_error *err) {
    if (json_is_string(item)) {
        if (strlen(json_string_value(item)) != json_string_length(item))
            return BAD("input", "'input[%zu]' contains a NUL character", i);
        if (json_string_length(item) == 0) /* the model would see only its BOS, if that */
            return BAD("input", "'input[%zu]' is empty", i);
        r->texts[i] = json_string_value(item);
        return 0;
    }
    if (!json_is_array(item))
        return BAD("input", "'input[%zu]' must be a string or an array of token ids, not %s", i,
                   json_type_name(item));
    const size_t n = json_array_size(item);
    if (n == 0) return BAD("input", "'input[%zu]' is empty", i);
    r->tokens[i] = malloc(n * sizeof *r->tokens[i]);
    if (!r->tokens[i])
        return oa_error_set(err, 500, "server_error", NULL, NULL, "out of memory"), -1;
    size_t k;
    json_t *id;
    json_array_foreach(item, k, id) {
        if (!json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) > INT32_MAX)
            return BAD("input", "'input[%zu][%zu]' must be a token id (a non-negative integer)", i,
                       k);
        r->tokens[i][k] = (int32_t)json_integer_value(id);
    }
    r->n_tokens[i] = n;
    return 0;
}

static int embed_fields(oa_embed_request *r, oa_error *err) {
    if (!json_is_object(r->root))
        return BAD(NULL, "the body must be a JSON object, not %s", json_type_name(r->root));
    const char *format = NULL;
    long long dims = 0;
    if (get_string(r->root, "model", &r->model, err) != 0 ||
        get_string(r->root, "encoding_format", &format, err) != 0 ||
        get_int(r->root, "dimensions", 1, INT32_MAX, &dims, err) != 0)
        return -1;
    if (format && strcmp(format, "float") != 0 && strcmp(format, "base64") != 0)
        return BAD("encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
    r->base64 = format && strcmp(format, "base64") == 0;
    r->dimensions = (int32_t)dims;
    json_t *input = member(r->root, "input");
    if (!input) return BAD("input", "'input' is required");
    /* one string or one token array is a single input; any other array holds the inputs */
    const bool single = json_is_string(input) ||
                        (json_is_array(input) && json_is_integer(json_array_get(input, 0)));
    if (!single && !json_is_array(input))
        return BAD("input",
                   "'input' must be a string, an array of strings, an array of token ids or an "
                   "array of such arrays, not %s",
                   json_type_name(input));
    r->n = single ? 1 : json_array_size(input);
    if (r->n == 0 || r->n > OA_MAX_EMBED_INPUTS)
        return BAD("input", "'input' holds %zu inputs: give 1..%d", r->n, OA_MAX_EMBED_INPUTS);
    r->texts = calloc(r->n, sizeof *r->texts);
    r->tokens = calloc(r->n, sizeof *r->tokens);
    r->n_tokens = calloc(r->n, sizeof *r->n_tokens);
    if (!r->texts || !r->tokens || !r->n_tokens)
        return oa_error_set(err, 500, "server_error", NULL, NULL, "out of memory"), -1;
    for (size_t i = 0; i < r->n; i++)
        if (embed_input(r, i, single ? input : json_array_get(input, i), err) != 0) return -1;
    return 0;
}

int oa_embed_request_parse(const char *body, size_t len, oa_embed_request *out, oa_error *err) {
    oa_embed_request r = {0};
    r.root = load_body(body, len, err);
    if (!r.root) return -1;
    if (embed_fields(&r, err) != 0) {
        oa_embed_request_free(&r);
        return -1;
    }
    *out = r;
    return 0;
}
