#!/usr/bin/env bash
# The chat template in the server: the request's tools, tool calls, tool results and
# chat_template_kwargs reach the model's own Jinja template (prompt token counts show it), a
# template that refuses the conversation answers 400 with its own message, and
# --chat-template-file replaces the model's template.
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh
. tests/cli/serve_lib.sh

prompt_tokens() { jq -r '.usage.prompt_tokens' "$tmp/body"; }
chat() { api POST /v1/chat/completions "$1"; }

hi='{"role": "user", "content": "Weather in Paris?"}'
weather='{"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}'
call='{"role": "assistant", "content": null, "tool_calls": [{"id": "call_abc123xyz", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}'
result='{"role": "tool", "tool_call_id": "call_abc123xyz", "content": "18 C, clear"}'

# --- the tiny model's own template: Qwen2.5's -------------------------------------------------
start_server tiny -m "$TINY_Q8" --alias tiny --parallel 2 -t 2 -c 2048

chat "{\"messages\": [$hi], \"max_tokens\": 1}" && expect_status 200 "a plain chat"
plain=$(prompt_tokens)
chat "{\"messages\": [$hi], \"tools\": [$weather], \"max_tokens\": 1}" && expect_status 200 "a chat with a tool offered"
with_tools=$(prompt_tokens)
check "the tool reaches the template: $plain prompt tokens without, $with_tools with (Qwen2.5's tool preamble and the tool's JSON)" \
    test "$with_tools" -gt $((plain + 60))

chat "{\"messages\": [$hi, $call, $result], \"tools\": [$weather], \"max_tokens\": 1}" &&
    expect_status 200 "the agent's next turn: an assistant call (content null) and the tool's result"
check "... the call and the result are in the prompt (more tokens than the first turn)" test "$(prompt_tokens)" -gt $((with_tools + 20))

# /v1/tokenize does not render; compare the prompt with the template rendered by synapse template.
jq -n --argjson h "$hi" --argjson t "$weather" '{messages: [$h], tools: [$t], add_generation_prompt: true, bos_token: "<|endoftext|>", eos_token: "<|im_end|>"}' >"$tmp/vars.json"
jq -r '.metadata["tokenizer.chat_template"]' <("$SYNAPSE" inspect -m "$TINY_Q8" --json) >"$tmp/own.jinja"
"$SYNAPSE" template --file "$tmp/own.jinja" --vars "$tmp/vars.json" >"$tmp/rendered.txt"
api POST /tokenize "$(jq -n --rawfile c "$tmp/rendered.txt" '{content: $c, add_special: true}')"
check "the server's prompt is the template's render, token for token ($with_tools tokens)" \
    test "$(jq '.tokens | length' "$tmp/body")" = "$with_tools"

# /v1/responses: function_call and function_call_output items reach the template as the turns above.
api POST /v1/responses "{\"input\": [$hi, {\"type\": \"function_call\", \"call_id\": \"call_abc123xyz\", \"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}, {\"type\": \"function_call_output\", \"call_id\": \"call_abc123xyz\", \"output\": \"18 C, clear\"}], \"tools\": [{\"type\": \"function\", \"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}], \"max_output_tokens\": 1}"
expect_status 200 "/v1/responses with a function call and its output"
check "... rendered like the chat turns" jqe '.usage.input_tokens > 100' "$tmp/body"

# --- --chat-template-file: Qwen3's template, which thinks ---------------------------------------
start_server qwen3 -m "$TINY_Q8" --alias tiny -t 2 -c 2048 --chat-template-file tests/data/templates/Qwen-Qwen3-0.6B.jinja
chat "{\"messages\": [$hi], \"max_tokens\": 1}" && expect_status 200 "Qwen3's template in place of the model's"
thinking=$(prompt_tokens)
chat "{\"messages\": [$hi], \"max_tokens\": 1, \"chat_template_kwargs\": {\"enable_thinking\": false}}" &&
    expect_status 200 "chat_template_kwargs enable_thinking false"
check "enable_thinking false reaches the template: its empty <think></think> block is in the prompt ($thinking -> $(prompt_tokens) tokens)" \
    test "$(prompt_tokens)" -gt "$thinking"

# --- QwQ's template opens <think> in its generation prompt (closing it again unless
# enable_thinking): the reply is reasoning ---------------------------------------------------
start_server qwq -m "$TINY_Q8" --alias tiny -t 2 -c 2048 --chat-template-file tests/data/templates/Qwen-QwQ-32B.jinja
think_req="{\"messages\": [$hi], \"chat_template_kwargs\": {\"enable_thinking\": true}, \"max_tokens\": 12, \"temperature\": 0, \"seed\": 7"
chat "$think_req}" && expect_status 200 "QwQ's template: a chat whose prompt ends in <think>"
jq -j '.choices[0].message.reasoning_content // ""' "$tmp/body" >"$tmp/reasoning.txt"
check "... the reply's text is message.reasoning_content ($(wc -c <"$tmp/reasoning.txt") bytes), no </think> written, no content" \
    jqe '.choices[0].message | (.reasoning_content | length > 0) and ((.content // "") == "")' "$tmp/body"
api POST /v1/chat/completions "$think_req, \"stream\": true}"
sed -n 's/^data: //p' "$tmp/body" | grep -v '^\[DONE\]$' >"$tmp/chunks.jsonl"
check "... streamed: the same reasoning arrives in delta.reasoning_content pieces, byte for byte" \
    bash -c 'jq -s -j "[.[].choices[0].delta.reasoning_content // empty] | join(\"\")" "$1" | cmp -s - "$2"' _ "$tmp/chunks.jsonl" "$tmp/reasoning.txt"
check "... in more than one piece, and no delta.content" \
    jq -s -e '([.[].choices[0].delta.reasoning_content // empty] | length > 1) and ([.[].choices[0].delta.content // empty | select(. != "")] | length == 0)' "$tmp/chunks.jsonl"
api POST /v1/responses "{\"input\": \"Weather in Paris?\", \"chat_template_kwargs\": {\"enable_thinking\": true}, \"max_output_tokens\": 12, \"temperature\": 0, \"seed\": 7, \"stream\": true}"
check "... /v1/responses streamed: response.reasoning_text.delta events carry the same text" \
    bash -c 'sed -n "s/^data: //p" "$1" | jq -s -j "[.[] | select(.type == \"response.reasoning_text.delta\") | .delta] | join(\"\")" | cmp -s - "$2"' _ "$tmp/body" "$tmp/reasoning.txt"

# --- Gemma 2's template refuses a system turn ---------------------------------------------------
start_server gemma -m "$TINY_Q8" --alias tiny -t 2 -c 2048 --chat-template-file tests/data/templates/google-gemma-2-2b-it.jinja
chat "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, $hi], \"max_tokens\": 1}"
expect_status 400 "a conversation the template refuses is a 400"
check "... whose message is the template's own" jqe '.error.message == "template: System role not supported"' "$tmp/body"
chat "{\"messages\": [$hi], \"max_tokens\": 1}" && expect_status 200 "the same template renders a user turn"

# --- the llama test file with Llama 3.1's and Mistral Nemo's templates: their call syntaxes -----
closed='{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"], "additionalProperties": false}}}'
for tmpl in meta-llama-Llama-3.1-8B-Instruct mistralai-Mistral-Nemo-Instruct-2407; do
    start_server "$tmpl" -m tests/data/arch/llama-s5-q8_0.gguf --alias tiny -t 2 -c 2048 \
        --chat-template-file "tests/data/templates/$tmpl.jinja"
    for seed in 1 2 3; do
        for choice in '"required"' '{"type": "function", "function": {"name": "get_weather"}}'; do
            chat "{\"messages\": [$hi], \"tools\": [$closed], \"tool_choice\": $choice, \"max_tokens\": 96, \"temperature\": 0.8, \"seed\": $seed}"
            check "$tmpl, tool_choice $choice, seed $seed: a get_weather call whose arguments fit the schema" \
                jqe '.choices[0] | .finish_reason == "tool_calls" and (.message.tool_calls[0] | .function.name == "get_weather"
                    and (.function.arguments | fromjson | (keys == ["city"]) and (.city | type == "string" and length <= 20)))' "$tmp/body"
        done
    done
    api POST /v1/chat/completions "{\"messages\": [$hi], \"tools\": [$closed], \"tool_choice\": \"required\", \"max_tokens\": 96, \"temperature\": 0.8, \"seed\": 4, \"stream\": true}"
    check "$tmpl, streamed: the call arrives in delta.tool_calls and its arguments fit" \
        bash -c 'sed -n "s/^data: //p" "$1" | grep -v "^\[DONE\]$" | jq -s -e "
            ([.[].choices[0].delta.tool_calls // [] | .[] | select(.index == 0) | .function.arguments // \"\"] | join(\"\") | fromjson | keys == [\"city\"])
            and ([.[].choices[0].delta.tool_calls // [] | .[] | .function.name // empty][0] == \"get_weather\")
            and (map(.choices[0].finish_reason) | index(\"tool_calls\") != null)" >/dev/null' _ "$tmp/body"
    # the model's text in its own syntax, read back (Llama 3: {"name", "parameters"}; Mistral: [TOOL_CALLS])
    chat "{\"messages\": [$hi, {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"abcDEF123\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}}]}, {\"role\": \"tool\", \"tool_call_id\": \"abcDEF123\", \"content\": \"18 C\"}], \"tools\": [$closed], \"max_tokens\": 1}"
    expect_status 200 "$tmpl: a tool-result turn (a 9-character call id, as Mistral's template demands)"
done

# --- Qwen3-Coder's XML calls: a forced call's parameters stream as JSON pieces -----------------
start_server coder -m "$TINY_Q8" --alias tiny -t 2 -c 2048 --chat-template-file tests/data/templates/Qwen3-Coder.jinja
api POST /v1/chat/completions "{\"messages\": [$hi], \"tools\": [$closed], \"tool_choice\": \"required\", \"max_tokens\": 96, \"temperature\": 0.8, \"seed\": 4, \"stream\": true}"
sed -n "s/^data: //p" "$tmp/body" | grep -v '^\[DONE\]$' >"$tmp/coder-events"
check "Qwen3-Coder, streamed: the call's arguments arrive in several pieces and fit the schema" \
    jq -s -e '([.[].choices[0].delta.tool_calls // [] | .[] | select(.index == 0) | .function.arguments // empty] | length > 1)
        and ([.[].choices[0].delta.tool_calls // [] | .[] | select(.index == 0) | .function.arguments // ""] | join("") | fromjson | keys == ["city"])
        and ([.[].choices[0].delta.tool_calls // [] | .[] | .function.name // empty][0] == "get_weather")
        and (map(.choices[0].finish_reason) | index("tool_calls") != null)' "$tmp/coder-events"
jq -s -j '[.[].choices[0].delta.tool_calls // [] | .[] | select(.index == 0) | .function.arguments // ""] | join("")' "$tmp/coder-events" >"$tmp/coder-streamed"
chat "{\"messages\": [$hi], \"tools\": [$closed], \"tool_choice\": \"required\", \"max_tokens\": 96, \"temperature\": 0.8, \"seed\": 4}"
check "Qwen3-Coder, whole: the same request's arguments are the streamed pieces joined" \
    jqe --rawfile streamed "$tmp/coder-streamed" '.choices[0].message.tool_calls[0].function.arguments == $streamed' "$tmp/body"

# --- a template that would run away is refused per request, the server goes on ---------------
printf '%s' "{% for i in range(1000000) %}{% for j in range(1000000) %}x{% endfor %}{% endfor %}" >"$tmp/loop.jinja"
start_server loop -m "$TINY_Q8" --alias tiny -t 2 -c 2048 --chat-template-file "$tmp/loop.jinja"
t0=$(date +%s%N)
chat "{\"messages\": [$hi], \"max_tokens\": 1}"
t1=$(date +%s%N)
expect_status 400 "a template that loops without end: 400"
check "... naming the bound, within a second ($(((t1 - t0) / 1000000)) ms)" \
    bash -c 'jq -e ".error.message | test(\"iteration bound\")" "$1" >/dev/null && [ "$2" -lt 1000 ]' _ "$tmp/body" $(((t1 - t0) / 1000000))
api GET /health && expect_status 200 "... and the server is still healthy"

finish
