/* fuzz_template.c: libFuzzer target: any bytes as a Jinja template (a hostile GGUF's
 * tokenizer.chat_template), parsed and rendered with a conversation that has tools, tool calls
 * and a tool result. Besides what the sanitizers catch, it checks the engine's promises: a
 * render either succeeds with text of the length it reports, or fails with a status and a
 * message; it never hangs (the bounds) and never crashes. Built by `make fuzz`; the seeds are the
 * real templates of tests/data/templates/. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "template/template.h"

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) __builtin_trap();                                                             \
    } while (0)

static const char conversation[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"Weather in Paris? \\u00e9\"},"
    " {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"a1b2c3d4e\","
    " \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\":"
    " {\"city\": \"Paris\"}}}]},"
    " {\"role\": \"tool\", \"tool_call_id\": \"a1b2c3d4e\", \"content\": \"18 C\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": "
    "\"string\"}}}}}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static json_t *vars;
    if (!vars) vars = json_loads(conversation, 0, NULL);
    REQUIRE(vars != NULL);
    syn_template *t = NULL;
    if (syn_template_parse((const char *)data, size, &t) != SYN_OK) {
        REQUIRE(t == NULL);
        return 0;
    }
    char *text = NULL;
    size_t n = 0;
    syn_status st = syn_template_render(t, vars, 1768469400, &text, &n);
    if (st == SYN_OK) {
        REQUIRE(text != NULL && strlen(text) <= n && text[n] == '\0');
        REQUIRE(n <= SYN_TEMPLATE_MAX_OUTPUT);
    } else {
        REQUIRE(text == NULL && syn_last_error()[0] != '\0');
    }
    free(text);
    syn_template_free(t);
    return 0;
}
