/* fuzz_chat_output.c: libFuzzer target: any bytes as a model's output, read back in every tool
 * call syntax, with and without thinking, with a tools array giving parameter types. Besides what
 * the sanitizers catch, it checks the parse's promises: it succeeds, content is never NULL, and
 * every call it returns has an id, a name and arguments that parse as a JSON object.
 * Built by `make fuzz`. */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "chat/chat_output.h"

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) __builtin_trap();                                                             \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static json_t *tools;
    if (!tools)
        tools = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"f\", "
                           "\"parameters\": {\"properties\": {\"s\": {\"type\": \"string\"}}}}}]",
                           0, NULL);
    for (int syntax = 0; syntax < SYN_TOOLS_COUNT; syntax++) {
        for (int thinks = 0; thinks < 2; thinks++) {
            syn_chat_output out;
            REQUIRE(syn_chat_output_parse((const char *)data, size, (syn_tool_syntax)syntax, thinks,
                                          tools, size, &out) == SYN_OK);
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
        }
    }
    return 0;
}
