#!/usr/bin/env bash
# Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) on the tiny model:
# tests/serve/anthropic_client.mjs drives the official @anthropic-ai/sdk (pinned in
# tests/serve/package.json; Node >= 20) against a server with --api-key, with the model's own
# template (Hermes calls) and Mistral Nemo's; curl checks the
# Anthropic-shaped errors, the preflight of the SDK's headers, thinking blocks under QwQ's template
# (whose generation prompt opens <think>) and `thinking` as enable_thinking under Qwen3's.
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh
. tests/cli/serve_lib.sh

use_node20
install_clients

# Mistral Nemo's template first: its own call syntax, and call ids it wants 9 letters long.
start_server mistral -m "$TINY_Q8" --alias tiny --parallel 4 -t 2 -c 2048 --api-key k3y \
    --chat-template-file tests/data/templates/mistralai-Mistral-Nemo-Instruct-2407.jinja
check "mistral: @anthropic-ai/sdk: text, streaming, forced tool_use, a tool_result turn, count_tokens, the key" \
    node tests/serve/anthropic_client.mjs "http://127.0.0.1:$port" k3y
stop_server "$pid"

start_server keyed -m "$TINY_Q8" --alias tiny --parallel 4 -t 2 -c 2048 --api-key k3y
check "hermes: @anthropic-ai/sdk: text, streaming, forced tool_use, a tool_result turn, count_tokens, the key" \
    node tests/serve/anthropic_client.mjs "http://127.0.0.1:$port" k3y

# msg DESC WANT_STATUS BODY [PATH]: a Messages request with the key; an error must be Anthropic's
# {"type": "error", "error": {"type", "message"}} with the error type in $want_type.
msg() {
    local desc=$1 want=$2 body=$3 path=${4:-/v1/messages}
    status=$(curl -s -o "$tmp/body" -w '%{http_code}' -H 'x-api-key: k3y' -H 'anthropic-version: 2023-06-01' \
        -H 'Content-Type: application/json' --data-binary "$body" "http://127.0.0.1:$port$path")
    if [ "$status" != "$want" ]; then
        fail "$desc: status $status, expected $want: $(head -c 300 "$tmp/body")"
    elif [ "$want" -ge 400 ] && ! jq -e --arg t "$want_type" \
        '.type == "error" and .error.type == $t and (.error.message | length > 0)' "$tmp/body" >/dev/null; then
        fail "$desc: not Anthropic's $want_type error: $(head -c 300 "$tmp/body")"
    else
        ok "$desc"
    fi
}
user='"messages": [{"role": "user", "content": "hi"}]'
want_type=invalid_request_error
msg "no max_tokens: 400" 400 "{$user}"
check "no max_tokens: the message names it" grep -q "max_tokens" "$tmp/body"
msg "a system role inside messages: 400" 400 '{"max_tokens": 4, "messages": [{"role": "system", "content": "x"}]}'
check "a bad role: the message names the field" grep -q 'messages\[0\].role' "$tmp/body"
msg "an image block: 400" 400 '{"max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}'
msg "a last assistant turn (prefill): 400" 400 '{"max_tokens": 4, "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}'
msg "tool_choice naming an absent tool: 400" 400 "{\"max_tokens\": 4, $user, \"tools\": [{\"name\": \"f\", \"input_schema\": {\"type\": \"object\"}}], \"tool_choice\": {\"type\": \"tool\", \"name\": \"g\"}}"
msg "a server tool: 400" 400 "{\"max_tokens\": 4, $user, \"tools\": [{\"type\": \"web_search_20250305\", \"name\": \"web_search\"}]}"
msg "temperature above 1: 400" 400 "{\"max_tokens\": 4, $user, \"temperature\": 1.5}"
msg "n (no Messages field) is ignored: one message" 200 "{\"max_tokens\": 4, $user, \"n\": 3}"
check "... of the Messages shape, 4 tokens" jqe '.type == "message" and .usage.output_tokens == 4' "$tmp/body"
msg "malformed JSON: 400" 400 '{"max_tokens": 4,'
msg "count_tokens without max_tokens: 200" 200 "{$user}" /v1/messages/count_tokens
check "count_tokens: input_tokens" jqe '.input_tokens > 0' "$tmp/body"
msg "stop_sequences: 200" 200 "{\"max_tokens\": 8, $user, \"stop_sequences\": [\"e\"], \"temperature\": 0}"
check "stop_sequences: stop_reason stop_sequence with the sequence, or another reason without one" jqe \
    '(.stop_reason == "stop_sequence" and .stop_sequence == "e") or (.stop_reason != "stop_sequence" and .stop_sequence == null)' "$tmp/body"
want_type=not_found_error
msg "an unknown model: 404" 404 "{\"model\": \"nope\", \"max_tokens\": 4, $user}"
want_type=authentication_error
status=$(curl -s -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary "{\"max_tokens\": 4, $user}" "http://127.0.0.1:$port/v1/messages")
check "no key: 401 authentication_error" jqe --arg s "$status" \
    '$s == "401" and .type == "error" and .error.type == "authentication_error"' "$tmp/body"
status=$(curl -s -o "$tmp/body" -w '%{http_code}' -H 'x-api-key: k3y' "http://127.0.0.1:$port/v1/messages")
check "GET /v1/messages: 405 in Anthropic's shape" jqe --arg s "$status" \
    '$s == "405" and .type == "error" and .error.type == "invalid_request_error"' "$tmp/body"
status=$(curl -s -o "$tmp/body" -w '%{http_code}' -H 'x-api-key: k3y' "http://127.0.0.1:$port/v1/models")
check "x-api-key opens the other routes too" test "$status" = 200
stop_server "$pid"

# A browser page sends the SDK's headers: the preflight allows them (any origin without a key).
start_server open -m "$TINY_Q8" --alias tiny -t 2 -c 512 --chat-template-file tests/data/templates/Qwen-QwQ-32B.jinja
curl -s -o /dev/null -D "$tmp/headers" -X OPTIONS -H 'Origin: http://localhost:5173' \
    -H 'Access-Control-Request-Method: POST' \
    -H 'Access-Control-Request-Headers: x-api-key,anthropic-version,anthropic-beta,content-type' \
    "http://127.0.0.1:$port/v1/messages"
check "preflight of /v1/messages: 204 allowing POST and x-api-key, anthropic-version, anthropic-beta" sh -c \
    "grep -q '^HTTP/1.1 204' '$tmp/headers' && grep -qi '^Access-Control-Allow-Methods: POST, OPTIONS' '$tmp/headers' &&
     grep -qi '^Access-Control-Allow-Headers: x-api-key,anthropic-version,anthropic-beta,content-type' '$tmp/headers'"

# QwQ's generation prompt opens <think>: the reply is thinking blocks, whole and streamed.
think="{\"max_tokens\": 8, \"temperature\": 0, $user, \"thinking\": {\"type\": \"enabled\", \"budget_tokens\": 1024}}"
api POST /v1/messages "$think"
check "QwQ: a thinking block, cut by max_tokens" jqe \
    '.content[0].type == "thinking" and (.content[0].thinking | length > 0) and .stop_reason == "max_tokens"' "$tmp/body"
jq -r .content[0].thinking "$tmp/body" >"$tmp/thinking"
api POST /v1/messages "${think%\}}, \"stream\": true}"
sed -n 's/^data: //p' "$tmp/body" >"$tmp/events"
check "QwQ streamed: a thinking block started, thinking_delta events, message_stop last" sh -c \
    "jq -se 'map(select(.type == \"content_block_start\") | .content_block.type) == [\"thinking\"]' '$tmp/events' >/dev/null &&
     [ \"\$(jq -r 'select(.type == \"message_delta\") | .delta.stop_reason' '$tmp/events')\" = max_tokens ] &&
     [ \"\$(tail -n 1 '$tmp/events' | jq -r .type)\" = message_stop ]"
check "QwQ streamed: the thinking deltas joined are the whole reply's thinking" sh -c \
    "[ \"\$(jq -j 'select(.delta.type == \"thinking_delta\") | .delta.thinking' '$tmp/events')\" = \"\$(cat '$tmp/thinking')\" ]"
check "QwQ streamed: each event line names its data's type" sh -c \
    "[ \"\$(sed -n 's/^event: //p' '$tmp/body')\" = \"\$(jq -r .type '$tmp/events')\" ]"
stop_server "$pid"

# Qwen3's template closes an empty <think> unless enable_thinking: thinking maps onto it.
start_server qwen3 -m "$TINY_Q8" --alias tiny -t 2 -c 512 --chat-template-file tests/data/templates/Qwen-Qwen3-0.6B.jinja
api POST /v1/messages/count_tokens "{$user}"
off=$(jq .input_tokens "$tmp/body")
api POST /v1/messages/count_tokens "{$user, \"thinking\": {\"type\": \"disabled\"}}"
disabled=$(jq .input_tokens "$tmp/body")
api POST /v1/messages/count_tokens "{$user, \"thinking\": {\"type\": \"enabled\", \"budget_tokens\": 2048}}"
on=$(jq .input_tokens "$tmp/body")
check "Qwen3: no thinking and disabled render the closed <think> block, enabled does not ($off, $disabled, $on)" \
    test "$off" = "$disabled" -a "$on" -lt "$off"
stop_server "$pid"
finish
