/*
 * chat_stream.c: a model's reply read into reasoning, content and tool calls while it is being
 * generated (syn_chat_stream_*, declared in chat_output.h).
 *
 * The reader keeps the text it cannot decide yet at the front of a buffer and a mode saying what
 * that text is: reasoning, content, a call being written, or (harmony) a message header. Text is
 * passed on up to the point where a marker could begin; a call is collected whole and read with
 * syn_chat_output_parse, so a call is parsed exactly as in a non-streamed reply, except a forced
 * call (stream_arguments), whose arguments are passed on as they are written.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_output.h"
#include "core/error.h"
#include "synapse_internal.h"

typedef enum mode {
    M_THINK_START,  /* a thinking template: does the reply open <think>? */
    M_REASONING,    /* inside <think>, until </think> */
    M_TEXT,         /* content, until the syntax's call opener */
    M_CALL,         /* a call being written, until it is complete */
    M_LLAMA_START,  /* Llama 3: does the reply start like a call? */
    M_TO_END,       /* Llama 3 calls: all of it, read at the end */
    M_HARMONY_OUT,  /* harmony: between messages */
    M_HARMONY_HEAD, /* harmony: a message header, until <|message|> */
    M_HARMONY_BODY  /* harmony: a message's text, until its end marker */
} mode;

/* Where a streamed Qwen3-Coder call stands: the front of pending is after <function=NAME> or a
 * parameter (PARAMS), inside a parameter's value (VALUE), or after </function> (TAIL). */
typedef enum xml_part { XML_PARAMS, XML_VALUE, XML_TAIL } xml_part;

typedef struct bytes {
    char *data;
    size_t len, cap;
} bytes;

struct syn_chat_stream {
    syn_tool_syntax syntax;
    const json_t *tools;
    uint64_t seed;
    syn_chat_event_fn fn;
    void *user;

    mode mode;
    bytes pending; /* text not decided yet */
    size_t n_calls;
    bool failed;    /* out of memory once: the reader stops */
    bool think_end; /* </think> was seen: the answer's leading whitespace goes */
    bool cut_call;  /* the text ended inside a streamed call's arguments */

    /* The text segment being passed on: its kind (-1: none), whether anything but whitespace
     * was sent in it, and the whitespace held back at its end. */
    int seg;
    bool seg_started;
    bytes held_space;
    bytes scratch;     /* held whitespace and the next text, sent as one event */
    bool harmony_seen; /* a harmony message began: text between messages is dropped */
    int harmony_kind;  /* M_HARMONY_BODY: SYN_CHAT_CONTENT or SYN_CHAT_REASONING */

    /* stream_arguments: the call at the front of pending whose arguments are being passed on:
     * where they begin (0: no such call), how far they were sent, its id, name and pieces; and
     * whether pending starts at the next element of a Mistral array of calls. */
    bool stream_arguments;
    bool in_call_array;
    bool bare_arguments; /* Mistral's NAME[ARGS]{...}: the call ends with its arguments */
    size_t args_begin, args_sent;
    char call_id[32];
    char *call_name;
    bytes call_args;
    /* A streamed Qwen3-Coder call (consumed from pending as it is read): its part, the
     * parameters begun, and the value being read: its schema type and whether its first newline
     * (which the whole parse trims) was looked at. */
    xml_part xml;
    size_t xml_n_params;
    const char *xml_type;
    bool xml_value_begun;
};

static bool push(syn_chat_stream *st, bytes *b, const char *s, size_t n) {
    if (st->failed) return false;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p) {
            st->failed = true;
            return false;
        }
        b->data = p;
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    return true;
}

static void consume(syn_chat_stream *st, size_t n) {
    bytes *b = &st->pending;
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
}

static bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

static size_t skip_space(const char *s, size_t i, size_t len) {
    while (i < len && is_space(s[i]))
        i++;
    return i;
}

/* Whether s[len] is a proper prefix of marker (so more text could complete it). */
static bool could_become(const char *s, size_t len, const char *marker) {
    return len < strlen(marker) && memcmp(s, marker, len) == 0;
}

/* The first position in s[len] where one of markers (NULL-ended) starts, *which set to its index;
 * when none does, the start of the tail that could still become one (len when none), *which -1. */
static size_t scan(const char *s, size_t len, const char *const *markers, int *which) {
    *which = -1;
    for (size_t i = 0; i < len; i++) {
        bool partial = false;
        for (int m = 0; markers[m]; m++) {
            const size_t n = strlen(markers[m]);
            if (len - i >= n) {
                if (memcmp(s + i, markers[m], n) == 0) {
                    *which = m;
                    return i;
                }
            } else if (memcmp(s + i, markers[m], len - i) == 0) {
                partial = true;
            }
        }
        if (partial) return i;
    }
    return len;
}

/* ---- Passing text on ---- */

/* Ends the current segment: its held whitespace is sent (keep) or dropped (the whole parse trims
 * it before a call, after reasoning and around harmony messages). */
static void end_segment(syn_chat_stream *st, bool keep) {
    if (keep && st->held_space.len && !st->failed) {
        const syn_chat_event ev = {.kind = (syn_chat_event_kind)st->seg,
                                   .text = st->held_space.data,
                                   .len = st->held_space.len};
        st->fn(&ev, st->user);
    }
    st->held_space.len = 0;
    st->seg = -1;
    st->seg_started = false;
}

/* Passes s[n] on as text of kind: a new segment's leading whitespace goes where the whole parse
 * trims it, and trailing whitespace waits for the text that follows it. */
static void out_text(syn_chat_stream *st, syn_chat_event_kind kind, const char *s, size_t n) {
    if (st->seg != (int)kind) {
        end_segment(st, false);
        st->seg = (int)kind;
    }
    if (!st->seg_started) {
        const bool trim = kind == SYN_CHAT_REASONING || st->n_calls > 0 || st->think_end ||
                          st->syntax == SYN_TOOLS_HARMONY;
        if (trim) {
            const size_t skip = skip_space(s, 0, n);
            s += skip;
            n -= skip;
        }
    }
    size_t last = n; /* one past the last character that is not whitespace */
    while (last > 0 && is_space(s[last - 1]))
        last--;
    if (last == 0) {
        push(st, &st->held_space, s, n);
        return;
    }
    st->scratch.len = 0;
    if (!push(st, &st->scratch, st->held_space.data, st->held_space.len) ||
        !push(st, &st->scratch, s, last))
        return;
    st->held_space.len = 0;
    st->seg_started = true;
    const syn_chat_event ev = {.kind = kind, .text = st->scratch.data, .len = st->scratch.len};
    st->fn(&ev, st->user);
    push(st, &st->held_space, s + last, n - last);
}

/* A call's three events; arguments whole. */
static void out_call(syn_chat_stream *st, const char *id, const char *name, const char *arguments) {
    syn_chat_event ev = {.kind = SYN_CHAT_CALL_BEGIN, .index = st->n_calls, .id = id, .name = name};
    st->fn(&ev, st->user);
    ev.kind = SYN_CHAT_CALL_ARGUMENTS;
    ev.text = arguments;
    ev.len = strlen(arguments);
    st->fn(&ev, st->user);
    ev.kind = SYN_CHAT_CALL_END;
    ev.text = NULL;
    ev.len = 0;
    ev.arguments = arguments;
    st->fn(&ev, st->user);
    st->n_calls++;
}

/* Reads a call's whole text: its calls are passed on, or, when it does not parse, the text as
 * content. */
static void read_calls(syn_chat_stream *st, const char *s, size_t n) {
    syn_chat_output out;
    if (syn_chat_output_parse(s, n, st->syntax, false, false, st->tools, st->seed + st->n_calls,
                              &out) != SYN_OK) {
        st->failed = true;
        return;
    }
    if (out.tool_calls && !out.content[0]) {
        end_segment(st, false);
        size_t i;
        json_t *call;
        json_array_foreach(out.tool_calls, i, call) {
            const json_t *fn = json_object_get(call, "function");
            out_call(st, json_string_value(json_object_get(call, "id")),
                     json_string_value(json_object_get(fn, "name")),
                     json_string_value(json_object_get(fn, "arguments")));
        }
    } else {
        out_text(st, SYN_CHAT_CONTENT, s, n);
    }
    syn_chat_output_free(&out);
}

/* ---- Where a call ends ---- */

/* The end of the JSON object or array starting at s[i] (after whitespace): 0 when it is not
 * complete yet, SIZE_MAX when s[i] cannot start one. */
static size_t json_end(const char *s, size_t len, size_t i) {
    i = skip_space(s, i, len);
    if (i == len) return 0;
    if (s[i] != '{' && s[i] != '[') return SIZE_MAX;
    int depth = 0;
    bool in_string = false, escaped = false;
    for (; i < len; i++) {
        const char c = s[i];
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if ((c == '}' || c == ']') && --depth == 0) {
            return i + 1;
        }
    }
    return 0;
}

static size_t find(const char *s, size_t len, const char *needle) {
    const size_t n = strlen(needle);
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(s + i, needle, n) == 0) return i;
    return len;
}

/* Where the call at the front of s[len] ends: 0 when it is not complete yet; SIZE_MAX when what
 * follows its opener cannot be a call. */
static size_t call_end(const syn_chat_stream *st, const char *s, size_t len) {
    if (st->syntax == SYN_TOOLS_MISTRAL) { /* [TOOL_CALLS][...] or [TOOL_CALLS]NAME[ARGS]{...} */
        const size_t p = skip_space(s, strlen("[TOOL_CALLS]"), len);
        if (p == len) return 0;
        if (s[p] == '[') return json_end(s, len, p);
        const size_t args = find(s, len, "[ARGS]");
        return args == len ? 0 : json_end(s, len, args + strlen("[ARGS]"));
    }
    if (st->syntax == SYN_TOOLS_HARMONY) { /* the header and the body, to its end marker */
        const size_t body = find(s, len, "<|message|>");
        static const char *const ends[] = {"<|call|>", "<|end|>", "<|return|>", "<|start|>", NULL};
        int which;
        const size_t at = scan(s + body, len - body, ends, &which);
        return which < 0 ? 0 : body + at + (which == 3 ? 0 : strlen(ends[which]));
    }
    if (st->syntax == SYN_TOOLS_HERMES) { /* the JSON's end: a string may hold "</tool_call>" */
        const size_t end = json_end(s, len, strlen("<tool_call>"));
        if (end == 0 || end == SIZE_MAX) return end;
        const size_t p = skip_space(s, end, len);
        if (could_become(s + p, len - p, "</tool_call>")) return 0;
        /* anything but the closing tag after the JSON: a malformed call, ending there */
        return memcmp(s + p, "</tool_call>", strlen("</tool_call>")) == 0
                   ? p + strlen("</tool_call>")
                   : p;
    }
    const size_t p = skip_space(s, strlen("<tool_call>"), len); /* Qwen3-Coder: <function=... */
    if (could_become(s + p, len - p, "<function=")) return 0;
    if (len - p < strlen("<function=") || memcmp(s + p, "<function=", strlen("<function=")) != 0)
        return SIZE_MAX;
    const size_t close = find(s, len, "</tool_call>");
    return close == len ? 0 : close + strlen("</tool_call>");
}

/* ---- A forced call passed on as it is written (stream_arguments) ---- */

/* Moves *p past lit (after whitespace) in s[len]: 1 when it is there, 0 when more text could
 * still bring it, -1 when it is not. */
static int expect(const char *s, size_t len, size_t *p, const char *lit) {
    const size_t q = skip_space(s, *p, len), n = strlen(lit);
    if (could_become(s + q, len - q, lit)) return 0;
    if (len - q < n || memcmp(s + q, lit, n) != 0) return -1;
    *p = q + n;
    return 1;
}

/* Moves *p past the literals lits (NULL-ended), each after whitespace, as expect does. */
static int expect_all(const char *s, size_t len, size_t *p, const char *const *lits) {
    for (size_t i = 0; lits[i]; i++) {
        const int r = expect(s, len, p, lits[i]);
        if (r <= 0) return r;
    }
    return 1;
}

/* Where a call's arguments open, after its name, at the front of s[len] (what the forced grammar
 * of each syntax writes):
 *   Hermes     <tool_call>{"name": "NAME", "arguments": {
 *   Llama 3    {"name": "NAME", "parameters": {
 *   Mistral    [TOOL_CALLS]NAME[ARGS]{,  or [TOOL_CALLS][{"name": "NAME", "arguments": {  and
 *              after a comma of that array  {"name": "NAME", "arguments": {
 * 1 with the name's bounds, where the arguments begin and whether they end the call (*bare:
 * NAME[ARGS]), 0 when more text could still make it, -1 when it is not that (the call is then
 * read whole). */
static int call_head(const syn_chat_stream *st, const char *s, size_t len, size_t *name,
                     size_t *name_end, size_t *args, bool *bare) {
    static const char *const hermes[] = {"<tool_call>", "{", "\"name\"", ":", "\"", NULL};
    static const char *const llama3[] = {"{", "\"name\"", ":", "\"", NULL};
    static const char *const array[] = {"[TOOL_CALLS]", "[", "{", "\"name\"", ":", "\"", NULL};
    static const char *const element[] = {"{", "\"name\"", ":", "\"", NULL};
    static const char *const hermes_after[] = {",", "\"arguments\"", ":", NULL};
    static const char *const llama3_after[] = {",", "\"parameters\"", ":", NULL};
    static const char *const args_form[] = {"[ARGS]", NULL};
    size_t p = 0;
    int r;
    const char *const *after = hermes_after;
    bool quoted = true; /* the name is a JSON string (not Mistral's NAME[ARGS]) */
    *bare = false;
    switch (st->syntax) {
    case SYN_TOOLS_HERMES: r = expect_all(s, len, &p, hermes); break;
    case SYN_TOOLS_LLAMA3:
        r = expect_all(s, len, &p, llama3);
        after = llama3_after;
        break;
    case SYN_TOOLS_MISTRAL:
        if (st->in_call_array) {
            r = expect_all(s, len, &p, element);
            break;
        }
        p = skip_space(s, strlen("[TOOL_CALLS]"), len);
        if (p == len) return 0;
        if (s[p] == '[') {
            p = 0;
            r = expect_all(s, len, &p, array);
            break;
        }
        quoted = false;
        *bare = true;
        after = args_form;
        r = 1;
        break;
    default: return -1;
    }
    if (r <= 0) return r;
    *name = p;
    while (p < len && (quoted ? s[p] != '"' && s[p] != '\\' : s[p] != '[' && !is_space(s[p])))
        p++;
    if (p == len) return 0;
    if ((quoted && s[p] == '\\') || p == *name) return -1; /* escaped or empty: read whole */
    *name_end = p;
    if (quoted) p++;
    if ((r = expect_all(s, len, &p, after)) <= 0) return r;
    p = skip_space(s, p, len);
    if (p == len) return 0;
    if (s[p] != '{') return -1;
    *args = p;
    return 1;
}

/* Ends the streamed call: its end event, and n bytes of pending consumed; the reader goes on
 * with text, or with the next element when the call was one of a Mistral array. */
static void end_streamed_call(syn_chat_stream *st, size_t n) {
    if (push(st, &st->call_args, "", 1)) { /* NUL-terminated for the event */
        const syn_chat_event ev = {.kind = SYN_CHAT_CALL_END,
                                   .index = st->n_calls,
                                   .id = st->call_id,
                                   .name = st->call_name,
                                   .arguments = st->call_args.data};
        st->fn(&ev, st->user);
    }
    st->n_calls++;
    free(st->call_name);
    st->call_name = NULL;
    st->args_begin = st->args_sent = 0;
    st->call_args.len = 0;
    consume(st, n);
    st->mode = st->in_call_array ? M_CALL : M_TEXT;
}

/* After a call's arguments end at s[end]: where the call ends, 0 when more text is needed. A
 * Mistral array element is followed by ", " and the next one or by the array's "]". */
static size_t call_tail(syn_chat_stream *st, const char *s, size_t len, size_t end, bool at_end) {
    if (st->bare_arguments) return end;
    size_t p = skip_space(s, end, len);
    if (p == len) return at_end ? len : 0;
    if (s[p] != '}') return end; /* not the call's own "}": what follows is text */
    size_t close = p + 1;
    p = skip_space(s, close, len);
    const char *next = st->syntax == SYN_TOOLS_HERMES    ? "</tool_call>"
                       : st->syntax == SYN_TOOLS_MISTRAL ? (p < len && s[p] == ',' ? "," : "]")
                                                         : NULL;
    if (!next) return close;
    if (could_become(s + p, len - p, next)) return at_end ? len : 0; /* cut off in it */
    const bool closed = len - p >= strlen(next) && memcmp(s + p, next, strlen(next)) == 0;
    if (closed) close = p + strlen(next);
    if (st->syntax == SYN_TOOLS_MISTRAL) st->in_call_array = closed && next[0] == ',';
    return close;
}

/* Sends s[n] as the next piece of the open call's arguments. */
static void out_arguments(syn_chat_stream *st, const char *s, size_t n) {
    if (!n || !push(st, &st->call_args, s, n)) return;
    const syn_chat_event ev = {
        .kind = SYN_CHAT_CALL_ARGUMENTS, .text = s, .len = n, .index = st->n_calls};
    st->fn(&ev, st->user);
}

/* Announces a call named s[n]: its id and begin event. false: no memory. */
static bool announce_call(syn_chat_stream *st, const char *s, size_t n) {
    if (!(st->call_name = strndup(s, n))) {
        st->failed = true;
        return false;
    }
    syn_chat_call_id(st->syntax, st->seed + st->n_calls, st->call_id, sizeof st->call_id);
    end_segment(st, false);
    const syn_chat_event ev = {.kind = SYN_CHAT_CALL_BEGIN,
                               .index = st->n_calls,
                               .id = st->call_id,
                               .name = st->call_name};
    st->fn(&ev, st->user);
    return true;
}

/* Announces the call at the front of pending once its name is written, then passes its arguments
 * on as they come. false: it does not have that shape (it is then read whole); true otherwise,
 * *wait set when more text is needed. */
static bool stream_call(syn_chat_stream *st, bool at_end, bool *wait) {
    const char *s = st->pending.data;
    const size_t len = st->pending.len;
    *wait = false;
    if (!st->args_begin) {
        size_t name = 0, name_end = 0, args = 0;
        const int head = call_head(st, s, len, &name, &name_end, &args, &st->bare_arguments);
        if (head < 0 || (head == 0 && at_end)) return false;
        if (head == 0) {
            *wait = true;
            return true;
        }
        if (!announce_call(st, s + name, name_end - name)) return true;
        st->args_begin = st->args_sent = args;
    }
    const size_t end = json_end(s, len, st->args_begin); /* 0: not complete yet */
    const size_t upto = end ? end : len;
    if (upto > st->args_sent) {
        out_arguments(st, s + st->args_sent, upto - st->args_sent);
        st->args_sent = upto;
    }
    if (!end) { /* cut off inside the arguments: the call ends with what was written */
        if (at_end) {
            st->cut_call = true;
            st->in_call_array = false;
            end_streamed_call(st, len);
        } else
            *wait = true;
        return true;
    }
    const size_t close = call_tail(st, s, len, end, at_end);
    if (close == 0) {
        *wait = true;
        return true;
    }
    end_streamed_call(st, close);
    return true;
}

/* ---- A forced Qwen3-Coder call passed on as it is written ---- */

/* Sends s[n] as JSON string text (without quotes), escaped as jansson escapes it. */
static void out_escaped(syn_chat_stream *st, const char *s, size_t n) {
    st->scratch.len = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        char esc[8];
        const char *piece = esc;
        size_t k = 2;
        esc[0] = '\\';
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        default:
            if (c < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", c);
                k = 6;
            } else {
                piece = s + i;
                k = 1;
            }
        }
        if (!push(st, &st->scratch, piece, k)) return;
    }
    out_arguments(st, st->scratch.data, st->scratch.len);
}

/* Ends the XML call being streamed; cut: the text ended inside it. */
static void end_xml_call(syn_chat_stream *st, bool cut) {
    if (cut) st->cut_call = true;
    st->in_call_array = false;
    end_streamed_call(st, 0);
}

/* One parameter's value at the front of pending, up to its </parameter>: a string's text passed
 * on as it comes (the newlines the whole parse trims held back until they are known to be those),
 * any other value once it is closed, as the whole parse reads it. false: wait for more text. */
static bool stream_xml_value(syn_chat_stream *st, bool at_end) {
    static const char *const close[] = {"</parameter>", NULL};
    const char *s = st->pending.data;
    const size_t len = st->pending.len;
    const bool string = st->xml_type && strcmp(st->xml_type, "string") == 0;
    if (!st->xml_value_begun) {
        if (len == 0 && !at_end) return false;
        st->xml_value_begun = true;
        if (string) out_arguments(st, "\"", 1);
        if (len && s[0] == '\n') {
            consume(st, 1);
            return true;
        }
    }
    int which;
    const size_t at = scan(s, len, close, &which);
    if (which < 0 && !at_end) {
        if (string) { /* all but a newline that may end the value and a tag's beginning */
            const size_t safe = at > 0 && s[at - 1] == '\n' ? at - 1 : at;
            out_escaped(st, s, safe);
            consume(st, safe);
        }
        return false;
    }
    const size_t value_len = which < 0 ? len : at;
    const size_t trimmed = value_len && s[value_len - 1] == '\n' ? value_len - 1 : value_len;
    if (string) {
        out_escaped(st, s, trimmed);
        if (which >= 0) out_arguments(st, "\"", 1);
    } else if (which < 0) { /* cut inside a value: it goes as written */
        out_arguments(st, s, len);
    } else {
        json_t *v = syn_chat_xml_value(s, value_len, st->xml_type);
        char *text = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        json_decref(v);
        if (text) {
            out_arguments(st, text, strlen(text));
            free(text);
        } else { /* not UTF-8 (the whole parse refuses the call): its text goes as a string */
            out_arguments(st, "\"", 1);
            out_escaped(st, s, trimmed);
            out_arguments(st, "\"", 1);
        }
    }
    if (which < 0) {
        consume(st, len);
        end_xml_call(st, true);
        return true;
    }
    consume(st, at + strlen("</parameter>"));
    st->xml = XML_PARAMS;
    return true;
}

/* A Qwen3-Coder call at the front of pending, announced at <tool_call><function=NAME>, each
 * <parameter=KEY> then passed on as the JSON key it is and its value by stream_xml_value; the
 * arguments close at </function>, the call at </tool_call>. false: it does not start that way
 * (it is then read whole); true otherwise, *wait set when more text is needed. */
static bool stream_xml_call(syn_chat_stream *st, bool at_end, bool *wait) {
    *wait = false;
    for (;;) {
        if (st->failed) return true;
        const char *s = st->pending.data;
        const size_t len = st->pending.len;
        size_t p = 0;
        if (!st->call_name) {
            static const char *const head[] = {"<tool_call>", "<function=", NULL};
            const int r = expect_all(s, len, &p, head);
            const size_t name_end = r > 0 ? p + find(s + p, len - p, ">") : len;
            if (r < 0 || (at_end && (r == 0 || name_end == len))) return false;
            if (r == 0 || name_end == len) {
                *wait = true;
                return true;
            }
            if (!announce_call(st, s + p, name_end - p)) return true;
            consume(st, name_end + 1);
            st->xml = XML_PARAMS;
            st->xml_n_params = 0;
            continue;
        }
        if (st->xml == XML_VALUE) {
            if (!stream_xml_value(st, at_end)) {
                *wait = true;
                return true;
            }
            if (!st->call_name) return true; /* cut: the call ended */
            continue;
        }
        if (st->xml == XML_TAIL) {
            const int r = expect(s, len, &p, "</tool_call>");
            if (r == 0 && !at_end) {
                *wait = true;
                return true;
            }
            consume(st, r > 0 ? p : 0); /* without its closing tag, what follows is text */
            end_xml_call(st, false);
            return true;
        }
        int r = expect(s, len, &p, "<parameter=");
        if (r > 0) {
            const size_t key_end = p + find(s + p, len - p, ">");
            if (key_end == len) {
                if (at_end) break;
                *wait = true;
                return true;
            }
            size_t key = p;
            while (key < key_end && is_space(s[key]))
                key++;
            size_t end = key_end;
            while (end > key && is_space(s[end - 1]))
                end--;
            char *name = strndup(s + key, end - key);
            if (!name) {
                st->failed = true;
                return true;
            }
            out_arguments(st, st->xml_n_params++ ? "," : "{", 1);
            out_arguments(st, "\"", 1);
            out_escaped(st, name, strlen(name));
            out_arguments(st, "\":", 2);
            st->xml_type =
                syn_chat_xml_parameter_type(st->tools, st->call_name, strlen(st->call_name), name);
            free(name);
            st->xml_value_begun = false;
            st->xml = XML_VALUE;
            consume(st, key_end + 1);
            continue;
        }
        const int r_end = r < 0 ? expect(s, len, &(size_t){0}, "</function>") : 0;
        if (r == 0 || r_end == 0) {
            if (at_end) break;
            *wait = true;
            return true;
        }
        if (!st->xml_n_params) out_arguments(st, "{", 1);
        out_arguments(st, "}", 1);
        if (r_end < 0) { /* neither a parameter nor the function's end: the call ends here */
            end_xml_call(st, false);
            return true;
        }
        p = 0;
        expect(s, len, &p, "</function>");
        consume(st, p);
        st->xml = XML_TAIL;
    }
    consume(st, st->pending.len); /* cut between parameters: the call ends with what was written */
    end_xml_call(st, true);
    return true;
}

/* ---- The modes ---- */

static mode body_mode(const syn_chat_stream *st) {
    switch (st->syntax) {
    case SYN_TOOLS_LLAMA3: return M_LLAMA_START;
    case SYN_TOOLS_HARMONY: return M_HARMONY_OUT;
    default: return M_TEXT;
    }
}

/* Passes on what the pending text decides; at_end: all of it. */
static void run(syn_chat_stream *st, bool at_end) {
    static const char *const think_close[] = {"</think>", NULL};
    static const char *const hermes_open[] = {"<tool_call>", NULL};
    static const char *const mistral_open[] = {"[TOOL_CALLS]", NULL};
    static const char *const harmony_open[] = {"<|channel|>", "<|start|>", NULL};
    static const char *const harmony_close[] = {"<|end|>", "<|call|>", "<|return|>", "<|start|>",
                                                NULL};
    while (!st->failed) {
        const char *s = st->pending.data;
        const size_t len = st->pending.len;
        int which;
        size_t at;
        switch (st->mode) {
        case M_THINK_START: {
            const size_t p = skip_space(s, 0, len);
            if (len >= p + strlen("<think>") && memcmp(s + p, "<think>", 7) == 0) {
                consume(st, p + strlen("<think>"));
                st->mode = M_REASONING;
                break;
            }
            if (!at_end && could_become(s + p, len - p, "<think>")) return;
            st->mode = body_mode(st);
            break;
        }
        case M_REASONING:
            at = scan(s, len, think_close, &which);
            if (which < 0 && at_end) at = len;
            out_text(st, SYN_CHAT_REASONING, s, at);
            if (which < 0) {
                consume(st, at);
                return;
            }
            consume(st, at + strlen("</think>"));
            end_segment(st, false);
            st->think_end = true;
            st->mode = body_mode(st);
            break;
        case M_TEXT: {
            const char *const *open =
                st->syntax == SYN_TOOLS_MISTRAL ? mistral_open
                : st->syntax == SYN_TOOLS_HERMES || st->syntax == SYN_TOOLS_QWEN3_CODER
                    ? hermes_open
                    : NULL;
            at = open ? scan(s, len, open, &which) : len;
            if (!open) which = -1;
            if (which < 0 && at_end) at = len;
            out_text(st, SYN_CHAT_CONTENT, s, at);
            consume(st, at);
            if (which < 0) return;
            st->mode = M_CALL;
            break;
        }
        case M_CALL:
        case M_TO_END:
            if (st->mode == M_CALL && st->stream_arguments && st->syntax != SYN_TOOLS_HARMONY) {
                bool wait;
                if (st->syntax == SYN_TOOLS_QWEN3_CODER ? stream_xml_call(st, at_end, &wait)
                                                        : stream_call(st, at_end, &wait)) {
                    if (wait) return;
                    break;
                }
                if (st->in_call_array) { /* not an element after all: text from here on */
                    st->in_call_array = false;
                    st->mode = M_TEXT;
                    break;
                }
                if (st->syntax == SYN_TOOLS_LLAMA3) { /* read whole at the end, as unforced */
                    st->mode = M_TO_END;
                    break;
                }
            }
            at = st->mode == M_TO_END ? 0 : call_end(st, s, len);
            if (at == SIZE_MAX) /* no call follows the opener: it is text, and what follows */
                at = strlen(st->syntax == SYN_TOOLS_MISTRAL ? "[TOOL_CALLS]" : "<tool_call>");
            if (at == 0 && !at_end) return;
            if (at == 0) at = len;
            read_calls(st, s, at);
            consume(st, at);
            st->mode = st->syntax == SYN_TOOLS_HARMONY ? M_HARMONY_OUT : M_TEXT;
            break;
        case M_LLAMA_START: {
            const size_t p = skip_space(s, 0, len);
            if (p == len && !at_end) return;
            if (p < len && s[p] == '{') { /* forced: passed on as written, else read at the end */
                st->mode = st->stream_arguments ? M_CALL : M_TO_END;
                break;
            }
            if (len - p >= 14 && !memcmp(s + p, "<|python_tag|>", 14)) {
                st->mode = M_TO_END;
                break;
            }
            if (!at_end && could_become(s + p, len - p, "<|python_tag|>")) return;
            st->mode = M_TEXT;
            break;
        }
        case M_HARMONY_OUT:
            at = scan(s, len, harmony_open, &which);
            if (which < 0 && at_end) at = len;
            if (!st->harmony_seen) out_text(st, SYN_CHAT_CONTENT, s, at);
            consume(st, at);
            if (which < 0) return;
            st->mode = M_HARMONY_HEAD;
            break;
        case M_HARMONY_HEAD: {
            const size_t msg = find(s, len, "<|message|>");
            if (msg == len && !at_end) return;
            st->harmony_seen = true;
            if (find(s, msg, "to=functions.") < msg) { /* a call: read whole */
                st->mode = M_CALL;
                break;
            }
            if (msg == len) { /* an unfinished header at the end */
                consume(st, len);
                return;
            }
            st->harmony_kind =
                find(s, msg, "<|channel|>analysis") < msg ? SYN_CHAT_REASONING : SYN_CHAT_CONTENT;
            end_segment(st, false);
            consume(st, msg + strlen("<|message|>"));
            st->mode = M_HARMONY_BODY;
            break;
        }
        case M_HARMONY_BODY:
            at = scan(s, len, harmony_close, &which);
            if (which < 0 && at_end) at = len;
            out_text(st, (syn_chat_event_kind)st->harmony_kind, s, at);
            if (which < 0) {
                consume(st, at);
                return;
            }
            /* <|start|> opens the next message: it stays for the header */
            consume(st, at + (which == 3 ? 0 : strlen(harmony_close[which])));
            end_segment(st, false);
            st->mode = M_HARMONY_OUT;
            break;
        }
    }
}

/* ---- The interface ---- */

syn_status syn_chat_stream_create(syn_tool_syntax syntax, bool thinks, bool think_open,
                                  bool stream_arguments, const json_t *tools, uint64_t id_seed,
                                  syn_chat_event_fn fn, void *user, syn_chat_stream **out) {
    *out = NULL;
    syn_chat_stream *st = calloc(1, sizeof *st);
    /* pending never NULL: the modes read it before anything is fed */
    char *pending = malloc(256);
    if (!st || !pending) {
        free(st);
        free(pending);
        return syn_fail(SYN_ERR_NO_MEMORY, "reading the model's output: out of memory");
    }
    st->pending = (bytes){pending, 0, 256};
    st->syntax = syntax;
    st->tools = tools;
    st->seed = id_seed;
    st->fn = fn;
    st->user = user;
    st->seg = -1;
    st->stream_arguments = stream_arguments;
    /* gpt-oss reasons on its analysis channel, not in <think> */
    const bool reads_think = thinks && syntax != SYN_TOOLS_HARMONY;
    st->mode = !reads_think ? body_mode(st) : think_open ? M_REASONING : M_THINK_START;
    *out = st;
    return SYN_OK;
}

syn_status syn_chat_stream_feed(syn_chat_stream *s, const char *text, size_t len) {
    if (push(s, &s->pending, text, len)) run(s, false);
    return s->failed ? syn_fail(SYN_ERR_NO_MEMORY, "reading the model's output: out of memory")
                     : SYN_OK;
}

syn_status syn_chat_stream_finish(syn_chat_stream *s) {
    run(s, true);
    /* content's trailing whitespace is kept, as the whole parse keeps a reply without calls */
    end_segment(s, s->seg == SYN_CHAT_CONTENT && s->n_calls == 0);
    return s->failed ? syn_fail(SYN_ERR_NO_MEMORY, "reading the model's output: out of memory")
                     : SYN_OK;
}

size_t syn_chat_stream_n_calls(const syn_chat_stream *s) { return s->n_calls; }

bool syn_chat_stream_cut_call(const syn_chat_stream *s) { return s->cut_call; }

void syn_chat_stream_free(syn_chat_stream *s) {
    if (!s) return;
    free(s->pending.data);
    free(s->held_space.data);
    free(s->scratch.data);
    free(s->call_name);
    free(s->call_args.data);
    free(s);
}
