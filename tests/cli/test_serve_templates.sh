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

# --- Gemma 2's template refuses a system turn ---------------------------------------------------
start_server gemma -m "$TINY_Q8" --alias tiny -t 2 -c 2048 --chat-template-file tests/data/templates/google-gemma-2-2b-it.jinja
chat "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, $hi], \"max_tokens\": 1}"
expect_status 400 "a conversation the template refuses is a 400"
check "... whose message is the template's own" jqe '.error.message == "template: System role not supported"' "$tmp/body"
chat "{\"messages\": [$hi], \"max_tokens\": 1}" && expect_status 200 "the same template renders a user turn"

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
