/* fuzz_chat_output.c: libFuzzer target: any bytes as a model's output, read back in every tool
 * call syntax, with and without thinking, with a tools array giving parameter types. Besides what
 * the sanitizers catch, it checks the parse's promises: it succeeds, content is never NULL, and
 * every call it returns has an id, a name and arguments that parse as a JSON object. The same
 * bytes also go through the streaming reader in pieces of a size the input picks, with the same
 * promises for its events. Built by `make fuzz`. */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "chat/chat_output.h"

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) __builtin_trap();                                                             \
    } while (0)

typedef struct seen {
    size_t n_calls;
    bool open, stream_arguments;
} seen;

static void check_event(const syn_chat_event *ev, void *user) {
    seen *s = user;
    switch (ev->kind) {
    case SYN_CHAT_CALL_BEGIN:
        REQUIRE(!s->open && ev->index == s->n_calls && ev->id && ev->name);
        s->open = true;
        return;
    case SYN_CHAT_CALL_ARGUMENTS: REQUIRE(s->open && ev->len > 0); return;
    case SYN_CHAT_CALL_END: {
        REQUIRE(s->open && ev->index == s->n_calls++ && ev->id && ev->name && ev->arguments);
        s->open = false;
        if (s->stream_arguments) return; /* cut off inside them, streamed arguments stay partial */
        json_t *args = json_loads(ev->arguments, JSON_ALLOW_NUL, NULL);
        REQUIRE(json_is_object(args));
        json_decref(args);
        return;
    }
    default: REQUIRE(!s->open && ev->text && ev->len > 0);
    }
}

static void stream(const uint8_t *data, size_t size, syn_tool_syntax syntax, bool thinks,
                   bool think_open, bool stream_arguments, const json_t *tools) {
    const size_t piece = size ? 1 + data[0] % 16 : 1;
    seen s = {.stream_arguments = stream_arguments};
    syn_chat_stream *st;
    REQUIRE(syn_chat_stream_create(syntax, thinks, think_open, stream_arguments, tools, size,
                                   check_event, &s, &st) == SYN_OK);
    for (size_t at = 0; at < size; at += piece)
        REQUIRE(syn_chat_stream_feed(st, (const char *)data + at,
                                     size - at < piece ? size - at : piece) == SYN_OK);
    REQUIRE(syn_chat_stream_finish(st) == SYN_OK);
    REQUIRE(!s.open && syn_chat_stream_n_calls(st) == s.n_calls);
    syn_chat_stream_free(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static json_t *tools;
    if (!tools)
        tools = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"f\", "
                           "\"parameters\": {\"properties\": {\"s\": {\"type\": \"string\"}}}}}]",
                           0, NULL);
    for (int syntax = 0; syntax < SYN_TOOLS_COUNT; syntax++) {
        for (int thinks = 0; thinks < 2; thinks++) {
            for (int open = 0; open < 2; open++) { /* the prompt opened <think> */
                syn_chat_output out;
                REQUIRE(syn_chat_output_parse((const char *)data, size, (syn_tool_syntax)syntax,
                                              thinks, open, tools, size, &out) == SYN_OK);
                REQUIRE(out.content != NULL);
                size_t i;
                json_t *call;
                json_array_foreach(out.tool_calls, i, call) {
                    const json_t *fn = json_object_get(call, "function");
                    REQUIRE(json_string_value(json_object_get(call, "id")));
                    REQUIRE(json_string_value(json_object_get(fn, "name")));
                    json_t *args = json_loads(json_string_value(json_object_get(fn, "arguments")),
                                              JSON_ALLOW_NUL, NULL);
                    REQUIRE(json_is_object(args));
                    json_decref(args);
                }
                syn_chat_output_free(&out);
                for (int args = 0; args < 2; args++)
                    stream(data, size, (syn_tool_syntax)syntax, thinks, open, args, tools);
            }
        }
    }
    return 0;
}
