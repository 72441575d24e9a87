/* anthropic_request.c: an Anthropic Messages API body -> the chat completion body (see the
 * header). The Anthropic shapes are checked here, with errors naming Anthropic's fields; the chat
 * fields they become are then checked by openai_request.c as any chat request's. */
#include "anthropic_request.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A 400 about param. Filled here rather than with oa_error_set: openai_request.c calls this file,
 * and the two must not call each other (tests/tools/call_cycles.py). */
static int bad(oa_error *err, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad(oa_error *err, const char *param, const char *fmt, ...) {
    err->http_status = 400;
    err->type = "invalid_request_error";
    err->code = NULL;
    snprintf(err->param, sizeof err->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return -1;
}

static int no_memory(oa_error *err) {
    err->http_status = 500;
    err->type = "server_error";
    err->code = NULL;
    err->param[0] = '\0';
    snprintf(err->message, sizeof err->message, "out of memory");
    return -1;
}

/* The member key of obj, or NULL when absent or null. */
static json_t *member(json_t *obj, const char *key) {
    json_t *v = json_object_get(obj, key);
    return json_is_null(v) ? NULL : v;
}

/* The call id behind a tool_use id: this server's are its call ids with Anthropic's "toolu_" put
 * before them (anthropic_json.c), taken off again here, as Mistral's templates want the bare
 * 9 letters. */
static const char *call_id(const char *id) {
    return strncmp(id, "toolu_", 6) == 0 && id[6] ? id + 6 : id;
}

/* Appends v (stolen) to list; -1 without memory. */
static int append(json_t *list, json_t *v, oa_error *err) {
    return v && json_array_append_new(list, v) == 0 ? 0 : no_memory(err);
}

/* Text blocks [{"type": "text", "text"}] as chat's text parts (a new array); NULL with *err
 * filled when a block is another kind. */
static json_t *text_parts(json_t *blocks, const char *param, oa_error *err) {
    json_t *parts = json_array();
    if (!parts) return no_memory(err), NULL;
    size_t i;
    json_t *b;
    json_array_foreach(blocks, i, b) {
        const char *type = json_string_value(json_object_get(b, "type"));
        json_t *text = json_object_get(b, "text");
        if (!type || strcmp(type, "text") != 0 || !json_is_string(text)) {
            json_decref(parts);
            return bad(err, param, "'%s[%zu]' must be a text block {\"type\": \"text\", \"text\"}",
                       param, i),
                   NULL;
        }
        if (append(parts, json_pack("{s:s, s:O}", "type", "text", "text", text), err) != 0) {
            json_decref(parts);
            return NULL;
        }
    }
    return parts;
}

/* A user turn's blocks: runs of text blocks become user messages, each tool_result a "tool"
 * message answering its tool_use_id. */
static int user_blocks(json_t *blocks, size_t msg, json_t *msgs, oa_error *err) {
    char param[64];
    json_t *text = NULL; /* the parts of the user message being built */
    size_t j;
    json_t *b;
    json_array_foreach(blocks, j, b) {
        snprintf(param, sizeof param, "messages[%zu].content[%zu]", msg, j);
        const char *type = json_string_value(json_object_get(b, "type"));
        if (!json_is_object(b) || !type)
            return bad(err, param, "'%s' must be a content block with a string 'type'", param);
        if (strcmp(type, "text") == 0) {
            json_t *t = json_object_get(b, "text");
            if (!json_is_string(t)) return bad(err, param, "'%s.text' must be a string", param);
            if (!text) {
                text = json_array();
                if (append(msgs, json_pack("{s:s, s:o}", "role", "user", "content", text), err))
                    return -1;
            }
            if (append(text, json_pack("{s:s, s:O}", "type", "text", "text", t), err)) return -1;
        } else if (strcmp(type, "tool_result") == 0) {
            text = NULL;
            const char *id = json_string_value(json_object_get(b, "tool_use_id"));
            json_t *content = member(b, "content"), *is_error = member(b, "is_error");
            if (!id) return bad(err, param, "'%s.tool_use_id' must be a string", param);
            if (is_error && !json_is_boolean(is_error))
                return bad(err, param, "'%s.is_error' must be a boolean", param);
            json_t *out;
            if (!content) {
                out = json_string("");
            } else if (json_is_string(content)) {
                out = json_incref(content);
            } else if (json_is_array(content)) {
                char inner[80];
                snprintf(inner, sizeof inner, "%s.content", param);
                if (!(out = text_parts(content, inner, err))) return -1;
            } else {
                return bad(err, param, "'%s.content' must be a string or an array of text blocks",
                           param);
            }
            if (append(msgs,
                       json_pack("{s:s, s:s, s:o}", "role", "tool", "tool_call_id", call_id(id),
                                 "content", out),
                       err))
                return -1;
        } else {
            return bad(err, param,
                       "'%s' has type '%s'; a user turn takes text and tool_result blocks", param,
                       type);
        }
    }
    return 0;
}

/* An assistant turn's blocks as one assistant message: text blocks its content, tool_use blocks
 * its tool_calls, thinking blocks its reasoning_content (redacted_thinking carries nothing a
 * template can render). */
static int assistant_blocks(json_t *blocks, size_t msg, json_t *msgs, oa_error *err) {
    char param[64];
    json_t *m = json_pack("{s:s}", "role", "assistant"), *parts = json_array(),
           *calls = json_array();
    char *reasoning = NULL;
    size_t reasoning_len = 0;
    int rc = m && parts && calls ? 0 : no_memory(err);
    size_t j;
    json_t *b;
    json_array_foreach(blocks, j, b) {
        if (rc != 0) break;
        snprintf(param, sizeof param, "messages[%zu].content[%zu]", msg, j);
        const char *type = json_string_value(json_object_get(b, "type"));
        if (!json_is_object(b) || !type) {
            rc = bad(err, param, "'%s' must be a content block with a string 'type'", param);
        } else if (strcmp(type, "text") == 0) {
            json_t *t = json_object_get(b, "text");
            rc = json_is_string(t)
                     ? append(parts, json_pack("{s:s, s:O}", "type", "text", "text", t), err)
                     : bad(err, param, "'%s.text' must be a string", param);
        } else if (strcmp(type, "tool_use") == 0) {
            const char *id = json_string_value(json_object_get(b, "id"));
            const char *name = json_string_value(json_object_get(b, "name"));
            json_t *input = json_object_get(b, "input");
            rc = id && name && *name && json_is_object(input)
                     ? append(calls,
                              json_pack("{s:s, s:s, s:{s:s, s:O}}", "id", call_id(id), "type",
                                        "function", "function", "name", name, "arguments", input),
                              err)
                     : bad(err, param,
                           "'%s' must be {\"type\": \"tool_use\", \"id\", \"name\", \"input\": "
                           "{...}}",
                           param);
        } else if (strcmp(type, "thinking") == 0) {
            json_t *t = json_object_get(b, "thinking");
            if (!json_is_string(t)) {
                rc = bad(err, param, "'%s.thinking' must be a string", param);
                break;
            }
            char *grown = realloc(reasoning, reasoning_len + json_string_length(t) + 1);
            if (!grown) {
                rc = no_memory(err);
                break;
            }
            reasoning = grown;
            memcpy(reasoning + reasoning_len, json_string_value(t), json_string_length(t));
            reasoning_len += json_string_length(t);
            reasoning[reasoning_len] = '\0';
        } else if (strcmp(type, "redacted_thinking") != 0) {
            rc = bad(err, param,
                     "'%s' has type '%s'; an assistant turn takes text, tool_use and thinking "
                     "blocks",
                     param, type);
        }
    }
    if (rc == 0) {
        /* content null beside tool calls and no text, as an OpenAI client sends it */
        const bool has_calls = json_array_size(calls) > 0;
        json_t *content = json_array_size(parts) ? json_incref(parts)
                          : has_calls            ? json_null()
                                                 : json_string("");
        if (json_object_set_new(m, "content", content) != 0 ||
            (has_calls && json_object_set(m, "tool_calls", calls) != 0) ||
            (reasoning && json_object_set_new(m, "reasoning_content",
                                              json_stringn(reasoning, reasoning_len)) != 0))
            rc = no_memory(err);
    }
    free(reasoning);
    json_decref(parts);
    json_decref(calls);
    if (rc == 0) return append(msgs, m, err);
    json_decref(m);
    return rc;
}

/* system (a string or text blocks) and messages as chat's messages. */
static int convert_messages(json_t *root, json_t *msgs, oa_error *err) {
    json_t *system = member(root, "system");
    if (system) {
        json_t *content = json_is_string(system)  ? json_incref(system)
                          : json_is_array(system) ? text_parts(system, "system", err)
                                                  : NULL;
        if (!content)
            return json_is_array(system)
                       ? -1
                       : bad(err, "system", "'system' must be a string or an array of text blocks");
        if (append(msgs, json_pack("{s:s, s:o}", "role", "system", "content", content), err))
            return -1;
    }
    json_t *list = member(root, "messages");
    if (!list) return bad(err, "messages", "'messages' is required");
    if (!json_is_array(list) || json_array_size(list) == 0)
        return bad(err, "messages", "'messages' must be a non-empty array");
    size_t i;
    json_t *m;
    const char *role = NULL;
    json_array_foreach(list, i, m) {
        char param[64];
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(m)) return bad(err, param, "'%s' must be an object", param);
        role = json_string_value(json_object_get(m, "role"));
        const bool assistant = role && strcmp(role, "assistant") == 0;
        snprintf(param, sizeof param, "messages[%zu].role", i);
        if (!role || (!assistant && strcmp(role, "user") != 0))
            return bad(err, param, "'%s' must be \"user\" or \"assistant\"", param);
        json_t *content = json_object_get(m, "content");
        snprintf(param, sizeof param, "messages[%zu].content", i);
        if (json_is_string(content)) {
            if (append(msgs, json_pack("{s:s, s:O}", "role", role, "content", content), err))
                return -1;
            continue;
        }
        if (!json_is_array(content) || json_array_size(content) == 0)
            return bad(err, param, "'%s' must be a string or a non-empty array of content blocks",
                       param);
        if ((assistant ? assistant_blocks(content, i, msgs, err)
                       : user_blocks(content, i, msgs, err)) != 0)
            return -1;
    }
    /* The chat template always opens a new assistant turn: it cannot continue a given one. */
    if (strcmp(role, "assistant") == 0)
        return bad(err, "messages",
                   "the last message must be a user turn: continuing a partial assistant turn "
                   "(prefill) is not supported");
    return 0;
}

/* tools [{"name", "description"?, "input_schema"}] as chat's function tools. */
static int convert_tools(json_t *root, json_t *chat, oa_error *err) {
    json_t *tools = member(root, "tools");
    if (!tools) return 0;
    if (!json_is_array(tools)) return bad(err, "tools", "'tools' must be an array");
    json_t *out = json_array();
    if (!out || json_object_set_new(chat, "tools", out) != 0) return no_memory(err);
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        char param[32];
        snprintf(param, sizeof param, "tools[%zu]", i);
        const char *type = json_string_value(json_object_get(t, "type"));
        const char *name = json_string_value(json_object_get(t, "name"));
        json_t *schema = json_object_get(t, "input_schema");
        json_t *desc = json_object_get(t, "description");
        if (!json_is_object(t)) return bad(err, param, "'%s' must be an object", param);
        if (type && strcmp(type, "custom") != 0)
            return bad(err, param,
                       "'%s' has type '%s': only client tools {\"name\", \"description\", "
                       "\"input_schema\"} are supported",
                       param, type);
        if (!name || !*name) return bad(err, param, "'%s.name' must be a non-empty string", param);
        if (!json_is_object(schema))
            return bad(err, param, "'%s.input_schema' must be a JSON Schema object", param);
        /* in OpenAI's order: the template prints the tool as JSON */
        json_t *fn = json_pack("{s:s}", "name", name);
        if (fn && json_is_string(desc)) json_object_set(fn, "description", desc);
        if (fn) json_object_set(fn, "parameters", schema);
        if (append(out, json_pack("{s:s, s:o}", "type", "function", "function", fn), err))
            return -1;
    }
    return 0;
}

/* tool_choice {"type": auto | any | tool | none, "name", "disable_parallel_tool_use"} as chat's
 * tool_choice ("any" is "required", "tool" a named function) and parallel_tool_calls. */
static int convert_tool_choice(json_t *root, json_t *chat, oa_error *err) {
    json_t *tc = member(root, "tool_choice");
    if (!tc) return 0;
    const char *type = json_string_value(json_object_get(tc, "type"));
    const char *name = json_string_value(json_object_get(tc, "name"));
    json_t *no_parallel = member(tc, "disable_parallel_tool_use");
    if (!json_is_object(tc) || !type)
        return bad(err, "tool_choice", "'tool_choice' must be {\"type\": auto, any, tool or none}");
    json_t *choice;
    if (strcmp(type, "auto") == 0 || strcmp(type, "none") == 0) {
        choice = json_string(type);
    } else if (strcmp(type, "any") == 0) {
        choice = json_string("required");
    } else if (strcmp(type, "tool") == 0) {
        if (!name) return bad(err, "tool_choice", "'tool_choice' of type tool needs a 'name'");
        choice = json_pack("{s:s, s:{s:s}}", "type", "function", "function", "name", name);
    } else {
        return bad(err, "tool_choice",
                   "'tool_choice.type' is '%s'; expected auto, any, tool or none", type);
    }
    if (!choice || json_object_set_new(chat, "tool_choice", choice) != 0) return no_memory(err);
    if (!no_parallel) return 0;
    if (!json_is_boolean(no_parallel))
        return bad(err, "tool_choice", "'tool_choice.disable_parallel_tool_use' must be a boolean");
    return json_object_set_new(chat, "parallel_tool_calls",
                               json_boolean(!json_is_true(no_parallel)))
               ? no_memory(err)
               : 0;
}

/* stop_sequences, checked against the chat parser's limits here so that errors name it. */
static int convert_stop(json_t *root, json_t *chat, oa_error *err) {
    json_t *stop = member(root, "stop_sequences");
    if (!stop) return 0;
    if (!json_is_array(stop) || json_array_size(stop) > OA_MAX_STOP)
        return bad(err, "stop_sequences", "'stop_sequences' must be an array of at most %d strings",
                   OA_MAX_STOP);
    size_t i;
    json_t *s;
    json_array_foreach(stop, i, s) {
        if (!json_is_string(s) || json_string_length(s) == 0 ||
            json_string_length(s) > OA_MAX_STOP_BYTES)
            return bad(err, "stop_sequences",
                       "'stop_sequences[%zu]' must be a non-empty string of at most %d bytes", i,
                       OA_MAX_STOP_BYTES);
    }
    return json_object_set(chat, "stop", stop) ? no_memory(err) : 0;
}

/* thinking {"type": "enabled" | "adaptive" | "disabled", "budget_tokens"?} as the chat template's
 * enable_thinking; absent is disabled, as Anthropic's default (budget_tokens is not enforced). */
static int convert_thinking(json_t *root, json_t *chat, oa_error *err) {
    json_t *th = member(root, "thinking");
    bool on = false;
    if (th) {
        const char *type = json_string_value(json_object_get(th, "type"));
        json_t *budget = member(th, "budget_tokens");
        if (!json_is_object(th) || !type ||
            (strcmp(type, "enabled") != 0 && strcmp(type, "adaptive") != 0 &&
             strcmp(type, "disabled") != 0))
            return bad(err, "thinking",
                       "'thinking' must be {\"type\": \"enabled\", \"adaptive\" or \"disabled\"}");
        if (budget && !json_is_integer(budget))
            return bad(err, "thinking", "'thinking.budget_tokens' must be an integer");
        on = strcmp(type, "disabled") != 0;
    }
    return json_object_set_new(chat, "chat_template_kwargs",
                               json_pack("{s:b}", "enable_thinking", on))
               ? no_memory(err)
               : 0;
}

int anthropic_to_chat(json_t **root, bool count_only, oa_error *err) {
    json_t *in = *root;
    if (!json_is_object(in)) return bad(err, NULL, "the body must be a JSON object");
    if (!count_only && !member(in, "max_tokens"))
        return bad(err, "max_tokens", "'max_tokens' is required");
    json_t *temp = member(in, "temperature");
    if (temp &&
        (!json_is_number(temp) || json_number_value(temp) < 0 || json_number_value(temp) > 1))
        return bad(err, "temperature", "'temperature' must be a number between 0 and 1");
    json_t *chat = json_object(), *msgs = json_array();
    if (!chat || !msgs || json_object_set_new(chat, "messages", msgs) != 0) {
        json_decref(chat);
        return no_memory(err);
    }
    /* sampling and the rest keep their names (and their checks) in the chat body; count_tokens
     * generates nothing, so takes only what shapes the prompt */
    static const char *const same[] = {"model", "max_tokens", "temperature",
                                       "top_p", "top_k",      "stream"};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        json_t *v = member(in, same[i]);
        if (v && (!count_only || i == 0) && json_object_set(chat, same[i], v) != 0) {
            json_decref(chat);
            return no_memory(err);
        }
    }
    if (convert_messages(in, msgs, err) != 0 || convert_tools(in, chat, err) != 0 ||
        convert_tool_choice(in, chat, err) != 0 || convert_thinking(in, chat, err) != 0 ||
        (!count_only && convert_stop(in, chat, err) != 0)) {
        json_decref(chat);
        return -1;
    }
    json_decref(in);
    *root = chat;
    return 0;
}
