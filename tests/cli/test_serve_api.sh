#!/usr/bin/env bash
# `synapse serve` through curl: every endpoint, streaming and not, stop strings, logprobs, and every
# error status with its OpenAI-shaped body. Greedy texts are checked against `synapse run`.
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh
. tests/cli/serve_lib.sh

# While the model loads (strace holds its mmap for 2 s), /health and completions answer 503.
cp "$TINY_Q8" "$tmp/slow.gguf"
: >"$tmp/loading.log"
strace -f -o /dev/null -P "$tmp/slow.gguf" -e trace=mmap -e inject=mmap:delay_exit=2000000 \
    "$SYNAPSE" serve -m "$tmp/slow.gguf" --port 0 2>"$tmp/loading.log" &
loading=$!
servers+=("$loading")
for _ in $(seq 100); do
    port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$tmp/loading.log")
    [ -n "$port" ] && break
    sleep 0.05
done
api GET /health
check "GET /health while the model loads is 503, saying loading" test "$status" = 503
check "... with the body {\"status\": \"loading\"}" jqe '.status == "loading"' "$tmp/body"
api POST /v1/completions '{"prompt": "hi"}' && expect_status 503 "a completion while loading is 503"
for _ in $(seq 100); do api GET /health; [ "$status" = 200 ] && break; sleep 0.1; done
check "/health turns 200 once the model is loaded" test "$status" = 200
pkill -TERM -P "$loading" # the server, strace's child
wait "$loading"

start_server api -m "$TINY_Q8" --alias tiny --parallel 2 -t 2 -c 512 --max-body 1 --slots-show-prompts

# Health, models, the chat page, metrics.
api GET /health && expect_status 200 "GET /health"
check "/health says ok" jqe '.status == "ok"' "$tmp/body"
api GET /v1/models && expect_status 200 "GET /v1/models"
check "/v1/models lists the alias" jqe '.object == "list" and .data[0].id == "tiny" and .data[0].object == "model"' "$tmp/body"
api GET / && expect_status 200 "GET / (chat page)"
check "the chat page is the built-in HTML" grep -q '<title>Synapse chat</title>' "$tmp/body"
api GET /metrics && expect_status 200 "GET /metrics"
for m in synapse_requests_total synapse_requests_running synapse_requests_queued synapse_prompt_tokens_total \
    synapse_generated_tokens_total synapse_decode_tokens_per_second synapse_kv_blocks_used synapse_kv_blocks_free \
    synapse_prefix_cache_hit_tokens_total synapse_prefix_snapshots; do
    check "/metrics has $m" grep -q "^# TYPE $m " "$tmp/body"
done

# Chat, greedy: the same text as `synapse run --chat --temp 0`.
question="Name three rivers."
want=$("$SYNAPSE" run -m "$TINY_Q8" --chat -p "$question" --temp 0 -n 24 --json | jq -r .text)
body=$(jq -cn --arg q "$question" '{model: "tiny", messages: [{role: "user", content: $q}], temperature: 0, max_tokens: 24}')
api POST /v1/chat/completions "$body" && expect_status 200 "chat completion"
check "chat: object, role, finish, usage" jqe '.object == "chat.completion" and (.id | startswith("chatcmpl-"))
    and .choices[0].message.role == "assistant" and .choices[0].finish_reason == "length"
    and .usage.completion_tokens == 24 and .usage.total_tokens == .usage.prompt_tokens + 24' "$tmp/body"
check "chat text equals synapse run --chat --temp 0" test "$(jq -r '.choices[0].message.content' "$tmp/body")" = "$want"
parts=$(jq -cn --arg q "$question" '{messages: [{role: "user", content: [{type: "text", text: "Name three "}, {type: "text", text: "rivers."}]}], temperature: 0, max_tokens: 24}')
api POST /v1/chat/completions "$parts" && expect_status 200 "content as text parts"
check "text parts are joined" test "$(jq -r '.choices[0].message.content' "$tmp/body")" = "$want"

# The same, streamed.
sbody=$(jq -c '. + {stream: true, stream_options: {include_usage: true}}' <<<"$body")
curl -sN -H 'Content-Type: application/json' -d "$sbody" "http://127.0.0.1:$port/v1/chat/completions" >"$tmp/stream"
check "stream: the deltas make the same text" test "$(stream_text "$tmp/stream")" = "$want"
check "stream: the first chunk carries the role" sh -c "sed -n 's/^data: //p' '$tmp/stream' | head -n1 | jq -e '.object == \"chat.completion.chunk\" and .choices[0].delta.role == \"assistant\"' >/dev/null"
check "stream: ends with finish_reason, usage, [DONE]" sh -c "sed -n 's/^data: //p' '$tmp/stream' | tail -n 3 | head -n 2 | jq -se '.[0].choices[0].finish_reason == \"length\" and .[1].choices == [] and .[1].usage.completion_tokens == 24' >/dev/null && tail -n 2 '$tmp/stream' | grep -qx 'data: \[DONE\]'"

# Completions: a string prompt and a token-array prompt, against `synapse run`.
want_c=$("$SYNAPSE" run -m "$TINY_Q8" -p "The capital of France is" --temp 0 -n 16 --json)
api POST /v1/completions '{"prompt": "The capital of France is", "temperature": 0, "max_tokens": 16}'
expect_status 200 "completion (string prompt)"
check "completion text equals synapse run --temp 0" test "$(jq -r '.choices[0].text' "$tmp/body")" = "$(jq -r .text <<<"$want_c")"
check "completion object" jqe '.object == "text_completion" and (.id | startswith("cmpl-"))' "$tmp/body"
ids=$(jq -c .prompt_ids <<<"$want_c")
api POST /v1/completions "{\"prompt\": $ids, \"temperature\": 0, \"max_tokens\": 16, \"stream\": true}"
expect_status 200 "completion (token prompt, streamed)"
check "token prompt streams the same text" test "$(stream_text "$tmp/body")" = "$(jq -r .text <<<"$want_c")"

# Stop strings: the text ends before the stop string, which is never sent, even in part.
full=$(jq -r .text <<<"$want_c")
stop=${full:6:5}
prefix=${full%%"$stop"*}
sreq=$(jq -cn --arg s "$stop" '{prompt: "The capital of France is", temperature: 0, max_tokens: 16, stop: ["zzzz", $s]}')
api POST /v1/completions "$sreq" && expect_status 200 "completion with stop strings"
check "stop: text ends before the stop string ('$stop')" test "$(jq -r '.choices[0].text' "$tmp/body")" = "$prefix"
check "stop: finish_reason stop" jqe '.choices[0].finish_reason == "stop"' "$tmp/body"
curl -sN -H 'Content-Type: application/json' -d "$(jq -c '. + {stream: true}' <<<"$sreq")" \
    "http://127.0.0.1:$port/v1/completions" >"$tmp/stream"
check "stop, streamed: the same text, no part of the stop string" test "$(stream_text "$tmp/stream")" = "$prefix"
curl -sN -H 'Content-Type: application/json' -d "$(jq -c '. + {stream: true, n: 3}' <<<"$sreq")" \
    "http://127.0.0.1:$port/v1/completions" | sed -n 's/^data: //p' | grep -v '^\[DONE\]$' | jq -s . >"$tmp/stream.json"
check "stop, streamed, n = 3: each choice's text ends before the stop string, finish_reason stop" jqe --arg p "$prefix" \
    '[.[].choices[]] | group_by(.index) | length == 3 and all(.[]; ([.[].text] | join("")) == $p
    and ([.[].finish_reason // empty] == ["stop"]))' "$tmp/stream.json"

# Logprobs: one entry per token, top alternatives sorted, greedy picks the first.
api POST /v1/chat/completions "$(jq -c '. + {logprobs: true, top_logprobs: 3, max_tokens: 5}' <<<"$body")"
expect_status 200 "chat with logprobs"
check "logprobs: 5 entries of 3 alternatives, greedy = the top one" jqe '.choices[0].logprobs.content as $c
    | ($c | length) == 5 and all($c[]; (.top_logprobs | length) == 3 and .logprob <= 0
    and .top_logprobs[0].logprob >= .top_logprobs[1].logprob and .top_logprobs[0].token == .token)' "$tmp/body"
api POST /v1/completions '{"prompt": "Hello", "temperature": 0, "max_tokens": 3, "logprobs": 2}'
check "legacy completions logprobs shape" jqe '.choices[0].logprobs | (.tokens | length) == 3 and (.token_logprobs | length) == 3 and (.top_logprobs[0] | length) == 2' "$tmp/body"

# A seed makes sampling reproducible.
seeded='{"prompt": "Once upon a time", "temperature": 1.0, "max_tokens": 12, "seed": 42}'
api POST /v1/completions "$seeded" && a=$(jq -r '.choices[0].text' "$tmp/body")
api POST /v1/completions "$seeded" && b=$(jq -r '.choices[0].text' "$tmp/body")
check "the same seed gives the same text" test "$a" = "$b"

# Tokenize / detokenize against the tool.
api POST /tokenize '{"content": "Hello world"}' && expect_status 200 "POST /tokenize"
check "tokenize equals synapse tokenize" test "$(jq -c .tokens "$tmp/body")" = \
    "$("$SYNAPSE" tokenize -m "$TINY_Q8" --text "Hello world" --json | jq -c .ids)"
api POST /detokenize '{"tokens": [9707, 1879]}' && expect_status 200 "POST /detokenize"
check "detokenize gives the text" jqe '.content == "Hello world"' "$tmp/body"
api POST /detokenize '{"tokens": [-1]}' && expect_status 400 "detokenize of a bad id is 400"

# llama-server's own routes. /props: the model, its context, slots, template and special tokens.
api GET /props && expect_status 200 "GET /props"
check "/props: n_ctx, total_slots, alias, path, Qwen2's special tokens, build_info" jqe --arg path "$TINY_Q8" '
    .default_generation_settings.n_ctx == 512 and .default_generation_settings.is_processing == false
    and .default_generation_settings.params.temperature == 0.8 and .default_generation_settings.params.n_predict == -1
    and .total_slots == 2 and .model_alias == "tiny" and .model_path == $path
    and .bos_token == "<|endoftext|>" and .eos_token == "<|im_end|>" and (.build_info | startswith("synapse "))' "$tmp/body"
jq -r .chat_template "$tmp/body" >"$tmp/props.jinja"
api GET '/props?model=nope' && expect_status 404 "/props?model= of an unknown model is 404"
# /apply-template renders what `synapse template` renders from /props' template, and the chat
# endpoint evaluates exactly that prompt.
rivers='[{"role": "user", "content": "Name three rivers."}]'
api POST /apply-template "{\"messages\": $rivers}" && expect_status 200 "POST /apply-template"
jq -n --argjson m "$rivers" '{messages: $m, add_generation_prompt: true, bos_token: "<|endoftext|>", eos_token: "<|im_end|>"}' >"$tmp/vars.json"
check "... the prompt is /props' chat_template rendered with add_generation_prompt" test \
    "$(jq -r .prompt "$tmp/body")" = "$("$SYNAPSE" template --file "$tmp/props.jinja" --vars "$tmp/vars.json")"
check "... ending in the open assistant turn" jqe '.prompt | endswith("<|im_start|>assistant\n")' "$tmp/body"
api POST /tokenize "$(jq -c '{content: .prompt}' "$tmp/body")" && n_applied=$(jq '.tokens | length' "$tmp/body")
api POST /v1/chat/completions "{\"messages\": $rivers, \"max_tokens\": 1}"
check "... of as many tokens as the chat completion's prompt" test "$(jq .usage.prompt_tokens "$tmp/body")" = "$n_applied"
api POST /apply-template '{"messages": [' && expect_status 400 "/apply-template: malformed JSON is 400"
api POST /apply-template '{"prompt": "x"}' && expect_status 400 "/apply-template without messages is 400"
check "... naming messages" jqe '.error.param == "messages"' "$tmp/body"
# /completion: llama-server's native shape on the same engine as /v1/completions.
api POST /completion '{"prompt": "The capital of France is", "n_predict": 16, "temperature": 0, "seed": -1}'
expect_status 200 "POST /completion"
check "/completion: synapse run's greedy text, stop, counts, settings, timings" jqe \
    --arg t "$(jq -r .text <<<"$want_c")" --argjson n "$(jq '.prompt_ids | length' <<<"$want_c")" '
    .content == $t and .stop == true and .stop_type == "limit" and .tokens_predicted == 16 and .tokens_evaluated == $n
    and .model == "tiny" and .generation_settings.n_predict == 16 and .generation_settings.temperature == 0
    and .timings.predicted_n == 16 and .timings.prompt_n + .tokens_cached == $n and .timings.predicted_ms > 0
    and .tokens == [] and .truncated == false' "$tmp/body"
api POST /completion "{\"prompt\": $ids, \"n_predict\": 16, \"temperature\": 0, \"return_tokens\": true}"
check "/completion with a token prompt: the same text, and the ids when return_tokens" jqe \
    --arg t "$(jq -r .text <<<"$want_c")" '.content == $t and (.tokens | length) == 16' "$tmp/body"
curl -sN -H 'Content-Type: application/json' "http://127.0.0.1:$port/completion" \
    -d '{"prompt": "The capital of France is", "n_predict": 16, "temperature": 0, "stream": true}' >"$tmp/native.sse"
sed -n 's/^data: //p' "$tmp/native.sse" | jq -s . >"$tmp/native.json"
check "/completion streamed: content pieces with stop false, then one stop true with the totals, no [DONE]" jqe \
    --arg t "$(jq -r .text <<<"$want_c")" '([.[:-1][] | .content] | join("")) == $t and all(.[:-1][]; .stop == false)
    and (.[-1] | .stop == true and .content == "" and .tokens_predicted == 16 and .stop_type == "limit")' "$tmp/native.json"
check "... every data line is JSON (no [DONE])" sh -c "! grep -q DONE '$tmp/native.sse'"
api POST /completion "$(jq -cn --arg s "$stop" '{prompt: "The capital of France is", n_predict: 16, temperature: 0, stop: ["zzzz", $s]}')"
check "/completion with stop strings: the text before it, stop_type word, the stopping_word" jqe --arg p "$prefix" --arg s "$stop" \
    '.content == $p and .stop_type == "word" and .stopping_word == $s' "$tmp/body"
api POST /completion '{"prompt": "Hello", "n_predict": 6, "temperature": 1, "seed": 3, "logit_bias": [[1879, 100]]}'
check "/completion logit_bias in llama-server's [[id, bias]] form forces the token" jqe \
    '.content == " world world world world world world"' "$tmp/body"
api POST /completion '{"prompt": "Hello", "n_predict": 3, "temperature": 0, "logit_bias": [[1879, false]], "return_tokens": true}'
check "... and [[id, false]] bans it" jqe '.tokens | index(1879) == null' "$tmp/body"
api POST /completion '{"prompt": "Hello", "n_predict": 0}' && expect_status 400 "/completion n_predict 0 is 400"
check "... naming n_predict" jqe '.error.param == "n_predict"' "$tmp/body"
api POST /completion '{"prompt": ' && expect_status 400 "/completion: malformed JSON is 400"
api POST /completion '{"n_predict": 4}' && expect_status 400 "/completion without a prompt is 400"
api POST /completion '{"prompt": "x", "logit_bias": [[1, 2, 3]]}' && expect_status 400 "/completion: a bad logit_bias pair is 400"
# /slots: idle, then one busy with a running request (whose prompt --slots-show-prompts shows).
api GET /slots && expect_status 200 "GET /slots"
check "/slots: two idle slots of n_ctx 512" jqe 'length == 2 and .[0].id == 0 and .[1].id == 1
    and all(.[]; .n_ctx == 512 and .is_processing == false)' "$tmp/body"
api GET '/slots?fail_on_no_slot=1' && expect_status 200 "/slots?fail_on_no_slot=1 with a slot free is 200"
curl -sN -H 'Content-Type: application/json' "http://127.0.0.1:$port/completion" \
    -d '{"prompt": "Tell me a long story", "n_predict": 400, "temperature": 1, "seed": 9, "stream": true}' >/dev/null &
long=$!
for _ in $(seq 100); do
    api GET /slots
    jqe 'any(.[]; .is_processing)' "$tmp/body" && break
    sleep 0.05
done
check "/slots while a request runs: its slot processing, with its id, params, tokens so far and prompt" jqe '
    [.[] | select(.is_processing)] | length == 1 and (.[0] | (.id_task | startswith("cmpl-"))
    and .params.n_predict == 400 and .params.seed == 9 and .params.stream == true
    and .next_token.n_decoded >= 0 and .next_token.n_remain == 400 - .next_token.n_decoded
    and .prompt == "Tell me a long story")' "$tmp/body"
# The tiny model writes 400 tokens in well under a second: whichever request has finished is
# started again, so that both slots are seen busy at once however the host schedules them.
long_request() { # PROMPT
    curl -sN -H 'Content-Type: application/json' "http://127.0.0.1:$port/completion" \
        -d "{\"prompt\": \"$1\", \"n_predict\": 400, \"stream\": true}" >/dev/null &
}
long_request "Another long story"
long2=$!
for _ in $(seq 100); do
    api GET '/slots?fail_on_no_slot=1'
    [ "$status" = 503 ] && break
    kill -0 "$long" 2>/dev/null || { long_request "A third long story"; long=$!; }
    kill -0 "$long2" 2>/dev/null || { long_request "Another long story"; long2=$!; }
    sleep 0.05
done
expect_status 503 "/slots?fail_on_no_slot=1 with both slots processing is 503"
wait "$long" "$long2"
api GET /slots
check "... idle again once they finished" jqe 'all(.[]; .is_processing == false)' "$tmp/body"

# Errors, each with its status and the OpenAI error shape.
api POST /v1/chat/completions '{"messages": [' && expect_status 400 "malformed JSON is 400"
api POST /v1/chat/completions '[1, 2]' && expect_status 400 "a body that is not an object is 400"
api POST /v1/chat/completions '{"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}'
expect_status 400 "a wrong type is 400" && check "... naming the field" jqe '.error.param == "temperature"' "$tmp/body"
api POST /v1/chat/completions '{"model": "tiny"}' && expect_status 400 "missing messages is 400"
api POST /v1/chat/completions '{"messages": []}' && expect_status 400 "empty messages is 400"
api POST /v1/chat/completions '{"messages": [{"role": "wizard", "content": "hi"}]}' && expect_status 400 "an unknown role is 400"
for n in 9 0; do
    api POST /v1/chat/completions "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"n\": $n}"
    expect_status 400 "n = $n is 400" && check "... naming n and its range" jqe '.error.param == "n" and (.error.message | test("1..8"))' "$tmp/body"
done
api POST /v1/completions '{"prompt": "hi", "n": 9}' && expect_status 400 "completions: n = 9 is 400"
api POST /v1/responses '{"input": "hi", "n": 2}' && expect_status 400 "/v1/responses: n = 2 is 400 (one choice)"
check "... naming n" jqe '.error.param == "n"' "$tmp/body"
api POST /completion '{"prompt": "hi", "n": 2}' && expect_status 400 "/completion: n = 2 is 400 (one choice)"
api POST /v1/chat/completions '{"messages": [{"role": "user", "content": "hi"}], "presence_penalty": 3}'
expect_status 400 "presence_penalty 3 is 400" && check "... naming it" jqe '.error.param == "presence_penalty"' "$tmp/body"
api POST /v1/chat/completions '{"messages": [{"role": "user", "content": "hi"}], "frequency_penalty": -2.5}'
expect_status 400 "frequency_penalty -2.5 is 400" && check "... naming it" jqe '.error.param == "frequency_penalty"' "$tmp/body"
api POST /v1/chat/completions '{"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 21, "logprobs": true}'
expect_status 400 "top_logprobs over 20 is 400"
api POST /v1/chat/completions '{"messages": [{"role": "user", "content": "hi"}], "stop": ["a", "b", "c", "d", "e"]}'
expect_status 400 "five stop strings is 400"
api POST /v1/chat/completions '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 100000}'
expect_status 400 "prompt + max_tokens beyond the context is 400"
check "... as context_length_exceeded" jqe '.error.code == "context_length_exceeded"' "$tmp/body"
api POST /v1/chat/completions '{"model": "nope", "messages": [{"role": "user", "content": "hi"}]}'
expect_status 404 "an unknown model is 404"
api POST /v1/completions '{"prompt": [999999999]}' && expect_status 400 "a token id outside the vocabulary is 400"
# The Responses API (stateless), on the same engine.
api POST /v1/responses '{"input": "Name a river.", "instructions": "Be brief.", "max_output_tokens": 8, "temperature": 0}'
expect_status 200 "POST /v1/responses with a string input"
check "... a response object, cut by max_output_tokens" jqe '.object == "response" and (.id | startswith("resp_"))
    and .status == "incomplete" and .incomplete_details.reason == "max_output_tokens" and .usage.output_tokens == 8
    and .output[0].type == "message" and .output[0].role == "assistant" and .output[0].content[0].type == "output_text"
    and (.output[0].content[0].text | length > 0)' "$tmp/body"
# Streamed: the same reply as the Responses API's events, each named as its type and numbered.
resp_text=$(jq -r '.output[0].content[0].text' "$tmp/body")
curl -sN -H 'Content-Type: application/json' "http://127.0.0.1:$port/v1/responses" \
    -d '{"input": "Name a river.", "instructions": "Be brief.", "max_output_tokens": 8, "temperature": 0, "stream": true}' >"$tmp/resp.sse"
sed -n 's/^data: //p' "$tmp/resp.sse" | jq -s . >"$tmp/resp_events.json"
check "streamed /v1/responses: created, in_progress, a message item with one text part, incomplete" jqe '
    [.[].type] | . == ["response.created", "response.in_progress", "response.output_item.added",
      "response.content_part.added"] + [range(length - 8) | "response.output_text.delta"] +
     ["response.output_text.done", "response.content_part.done", "response.output_item.done", "response.incomplete"]' \
    "$tmp/resp_events.json"
check "... each event line names its data's type, sequence_number counts from 0" test \
    "$(sed -n 's/^event: //p' "$tmp/resp.sse" | jq -R . | jq -sc .)" = "$(jq -c '[.[].type]' "$tmp/resp_events.json")" -a \
    "$(jq -c '[.[].sequence_number] == [range(length)]' "$tmp/resp_events.json")" = true
check "... the deltas, the done events and the final response hold the non-streamed text" jqe --arg t "$resp_text" '
    ([.[] | select(.type == "response.output_text.delta") | .delta] | join("")) == $t
    and (.[] | select(.type == "response.output_text.done") | .text) == $t
    and (.[] | select(.type == "response.content_part.done") | .part.text) == $t
    and (.[-1].response | .status == "incomplete" and .output[0].content[0].text == $t and .usage.output_tokens == 8)
    and ([.[] | select(.item_id) | .item_id] | unique | length) == 1
    and (.[0].response | .status == "in_progress" and .output == [])' "$tmp/resp_events.json"
# Streamed chat with tools offered: the reply read as it comes gives what the whole reply gives.
tools_req='{"messages": [{"role": "user", "content": "Weather in Paris?"}], "max_tokens": 12, "temperature": 0,
  "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]}'
api POST /v1/chat/completions "$tools_req" && expect_status 200 "chat with tools offered"
whole_msg=$(jq -c '.choices[0] | {content: .message.content, tool_calls: .message.tool_calls, finish: .finish_reason}' "$tmp/body")
curl -sN -H 'Content-Type: application/json' "http://127.0.0.1:$port/v1/chat/completions" \
    -d "$(jq -c '. + {stream: true}' <<<"$tools_req")" >"$tmp/tools.sse"
sed -n 's/^data: //p' "$tmp/tools.sse" | grep -v '^\[DONE\]$' | jq -s . >"$tmp/tools_chunks.json"
check "... streamed: the role first, the same content and calls, the same finish_reason, then [DONE]" test \
    "$(jq -c '{content: ([.[].choices[0].delta.content // empty] | join("") | if . == "" then null else . end),
        tool_calls: ([.[].choices[0].delta.tool_calls // empty | .[]] | if . == [] then null else . end),
        finish: ([.[].choices[0].finish_reason // empty] | last)}' "$tmp/tools_chunks.json")" = "$whole_msg" -a \
    "$(jq -r '.[0].choices[0].delta.role' "$tmp/tools_chunks.json")" = assistant -a \
    "$(tail -n 2 "$tmp/tools.sse" | head -n 1)" = "data: [DONE]"
curl -sN -H 'Content-Type: application/json' "http://127.0.0.1:$port/v1/chat/completions" \
    -d "$(jq -c '. + {stream: true, logprobs: true, top_logprobs: 2, stream_options: {include_usage: true}}' <<<"$tools_req")" |
    sed -n 's/^data: //p' | grep -v '^\[DONE\]$' | jq -s . >"$tmp/tools_chunks.json"
check "... with logprobs: one entry per generated token across the chunks" jqe '
    ([.[].choices[0].logprobs.content // empty | length] | add) == ([.[].usage // empty][0].completion_tokens)' \
    "$tmp/tools_chunks.json"
# n = 2 with a forced call, streamed: each choice reads its own reply and opens its own call.
forced='{"messages": [{"role": "user", "content": "Weather in Paris?"}], "max_tokens": 40, "temperature": 1, "seed": 3,
  "n": 2, "stream": true, "tool_choice": "required", "tools": [{"type": "function", "function": {"name": "get_weather",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]}'
curl -sN -H 'Content-Type: application/json' "http://127.0.0.1:$port/v1/chat/completions" -d "$forced" |
    sed -n 's/^data: //p' | grep -v '^\[DONE\]$' | jq -s . >"$tmp/tools_chunks.json"
check "n = 2, forced call, streamed: each index opens a get_weather call and ends once" jqe '. as $c |
    [0, 1] | all(. as $i | [$c[].choices[] | select(.index == $i)] as $mine
        | ([$mine[].delta.tool_calls // empty | .[0].function.name // empty] == ["get_weather"])
        and ([$mine[].finish_reason // empty] | length) == 1)' "$tmp/tools_chunks.json"

# The choices of n share the prompt: the later ones find the first one's full blocks in the prefix
# cache, so a fresh prompt of P tokens costs P + 2 * (at most 16) computed tokens for n = 3, not 3P.
metric() { curl -s "http://127.0.0.1:$port/metrics" | sed -n "s/^$1{model=\"tiny\"} //p"; }
computed0=$(metric synapse_prompt_tokens_total) cached0=$(metric synapse_prefix_cache_hit_tokens_total)
api POST /v1/completions '{"prompt": "Once upon a time in a land far away there lived a king who had three daughters and a son, and each of them had a horse, a dog and a garden of roses", "max_tokens": 4, "temperature": 0, "n": 3}'
expect_status 200 "completions with n = 3"
P=$(jq .usage.prompt_tokens "$tmp/body")
computed=$(($(metric synapse_prompt_tokens_total) - computed0)) cached=$(($(metric synapse_prefix_cache_hit_tokens_total) - cached0))
check "... the prompt ($P tokens) computed once plus at most a block per later choice ($computed computed, $cached cached)" \
    test "$P" -ge 33 -a "$computed" -le $((P + 32)) -a "$cached" -ge $((2 * 16 * ((P - 1) / 16)))
check "... usage: the prompt once, 3 x 4 completion tokens, three texts" jqe \
    '.usage.completion_tokens == 12 and ([.choices[].index] == [0, 1, 2]) and ([.choices[].text] | unique | length) == 1' "$tmp/body"

items='[{"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
 {"type": "function_call", "call_id": "abcdefghi", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}]'
api POST /v1/responses "$(jq -cn --argjson i "$items" '{input: $i, max_output_tokens: 4,
    tools: [{type: "function", name: "get_weather", parameters: {type: "object", properties: {city: {type: "string"}}}}]}')"
expect_status 200 "/v1/responses with a function_call item"
# The same turns in chat's shape give the same prompt.
chat_prompt=$(jq -r .usage.input_tokens "$tmp/body")
api POST /v1/chat/completions "$(jq -cn '{max_tokens: 4, messages: [{role: "user", content: "Weather in Paris?"},
    {role: "assistant", content: null, tool_calls: [{id: "abcdefghi", type: "function", function: {name: "get_weather", arguments: "{\"city\": \"Paris\"}"}}]}],
    tools: [{type: "function", function: {name: "get_weather", parameters: {type: "object", properties: {city: {type: "string"}}}}}]}')"
expect_status 200 "the same turns through /v1/chat/completions"
check "... evaluate the same prompt" test "$(jq -r .usage.prompt_tokens "$tmp/body")" = "$chat_prompt"
bad_responses() { # DESC PARAM BODY
    api POST /v1/responses "$3" && expect_status 400 "/v1/responses: $1 is 400" &&
        check "... naming $2" jqe --arg p "$2" '.error.param == $p' "$tmp/body"
}
bad_responses "previous_response_id" "previous_response_id" '{"input": "hi", "previous_response_id": "resp_x"}'
bad_responses "no input" "input" '{"instructions": "x"}'
bad_responses "an unknown item type" "input[0]" '{"input": [{"type": "image_generation_call"}]}'
bad_responses "a function_call without call_id" "input[0]" '{"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}'
bad_responses "a non-function tool" "tools[0]" '{"input": "hi", "tools": [{"type": "web_search"}]}'
bad_responses "messages (a chat field)" "messages" '{"input": "hi", "messages": []}'

# Tool and output-format fields: checked, each violation a 400 naming the field.
hi='{"role": "user", "content": "hi"}'
weather='{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}'
bad_tool_request() { # DESC PARAM BODY
    api POST /v1/chat/completions "$3" && expect_status 400 "$1 is 400" &&
        check "... naming $2" jqe --arg p "$2" '.error.param == $p' "$tmp/body"
}
bad_tool_request "tool_calls on a user message" "messages[0].tool_calls" \
    '{"messages": [{"role": "user", "content": "hi", "tool_calls": []}]}'
bad_tool_request "a tool message without tool_call_id" "messages[1]" \
    "{\"messages\": [$hi, {\"role\": \"tool\", \"content\": \"sunny\"}]}"
bad_tool_request "a call whose arguments are not a JSON object" "messages[1].tool_calls[0]" \
    "{\"messages\": [$hi, {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"a\", \"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": \"[1\"}}]}]}"
bad_tool_request "a tool with no parameters" "tools[0]" \
    "{\"messages\": [$hi], \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]}"
bad_tool_request "two tools of one name" "tools[1]" "{\"messages\": [$hi], \"tools\": [$weather, $weather]}"
bad_tool_request "tool_choice naming no tool" "tool_choice" \
    "{\"messages\": [$hi], \"tools\": [$weather], \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"nope\"}}}"
bad_tool_request "tool_choice required without tools" "tool_choice" "{\"messages\": [$hi], \"tool_choice\": \"required\"}"
bad_tool_request "an unknown tool_choice" "tool_choice" "{\"messages\": [$hi], \"tools\": [$weather], \"tool_choice\": \"always\"}"
bad_tool_request "an unknown response_format type" "response_format.type" \
    "{\"messages\": [$hi], \"response_format\": {\"type\": \"yaml\"}}"
bad_tool_request "a json_schema format without a schema" "response_format.json_schema.schema" \
    "{\"messages\": [$hi], \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\"}}}"
bad_tool_request "chat_template_kwargs that is not an object" "chat_template_kwargs" \
    "{\"messages\": [$hi], \"chat_template_kwargs\": [1]}"
bad_tool_request "logit_bias that is not an object" "logit_bias" "{\"messages\": [$hi], \"logit_bias\": [1]}"
bad_tool_request "a logit_bias key that is not an id" "logit_bias" "{\"messages\": [$hi], \"logit_bias\": {\"x\": 1}}"
bad_tool_request "a logit_bias above 100" "logit_bias" "{\"messages\": [$hi], \"logit_bias\": {\"5\": 101}}"
bad_tool_request "an unenforceable schema keyword" "response_format" \
    "{\"messages\": [$hi], \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", \"schema\": {\"type\": \"string\", \"pattern\": \"a\"}}}}"
check "... naming the keyword" jqe '.error.message | contains("pattern")' "$tmp/body"
api POST /v1/chat/completions "{\"messages\": [$hi], \"logit_bias\": {\"999999999\": 5}}"
expect_status 400 "a logit_bias id outside the vocabulary is 400"
check "... naming logit_bias" jqe '.error.message | contains("logit_bias")' "$tmp/body"

# Constrained output: a strong bias forces a token; schemas, json_object, grammar and forced tool
# calls give valid replies at temperature 1 under three seeds.
api POST /v1/completions '{"prompt": "Hello", "max_tokens": 6, "temperature": 1, "seed": 3, "logit_bias": {"1879": 100}}'
expect_status 200 "logit_bias +100" && check "... forces that token every time" \
    jqe '.choices[0].text == " world world world world world world"' "$tmp/body"
# (no extra keys: a random-weight model would write them until max_tokens)
weather_closed='{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "additionalProperties": false}}}'
person='{"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 120}}, "required": ["name", "age"], "additionalProperties": false}'
for seed in 1 2 3; do
    api POST /v1/chat/completions "{\"messages\": [$hi], \"max_tokens\": 60, \"temperature\": 1, \"seed\": $seed,
        \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"p\", \"strict\": true, \"schema\": $person}}}"
    expect_status 200 "json_schema, seed $seed"
    check "... a reply that fits the schema (seed $seed)" jqe '.choices[0].message.content | fromjson
        | (keys == ["age", "name"]) and (.age | type == "number" and . >= 0 and . <= 120 and floor == .)
        and (.name | type == "string" and length <= 12)' "$tmp/body"
    api POST /v1/chat/completions "{\"messages\": [$hi], \"max_tokens\": 200, \"temperature\": 1, \"seed\": $seed,
        \"response_format\": {\"type\": \"json_object\"}}"
    check "json_object parses or is cut by max_tokens (seed $seed)" jqe '.choices[0] | (.message.content | startswith("{"))
        and (.finish_reason == "length" or (.message.content | fromjson | type == "object"))' "$tmp/body"
    # One call (parallel_tool_calls false): random weights rarely choose to stop after a call
    # (with parallel calls the reply runs into max_tokens: checked below).
    api POST /v1/chat/completions "{\"messages\": [$hi], \"max_tokens\": 80, \"temperature\": 1, \"seed\": $seed,
        \"tools\": [$weather_closed], \"tool_choice\": \"required\", \"parallel_tool_calls\": false}"
    expect_status 200 "tool_choice required, seed $seed"
    check "... a get_weather call whose arguments fit (seed $seed)" jqe '.choices[0] | .finish_reason == "tool_calls"
        and (.message.tool_calls | length >= 1) and (.message.tool_calls[0].function.name == "get_weather")
        and (.message.tool_calls[0].function.arguments | fromjson | type == "object"
             and ((.city // "") | type == "string"))' "$tmp/body"
done
# Parallel calls allowed: the random model goes on calling until max_tokens cuts a call; the
# calls before it are whole and come back as calls, the cut one is dropped.
api POST /v1/chat/completions "{\"messages\": [$hi], \"max_tokens\": 80, \"temperature\": 1, \"seed\": 2,
    \"tools\": [$weather_closed], \"tool_choice\": \"required\"}"
check "tool_choice required cut by max_tokens: the whole calls before the cut, every one valid" \
    jqe '.choices[0] | .finish_reason == "tool_calls" and (.message.tool_calls | length >= 1)
        and all(.message.tool_calls[]; .function.name == "get_weather" and (.function.arguments | fromjson | type == "object"))' "$tmp/body"
two="[$weather, {\"type\": \"function\", \"function\": {\"name\": \"add\", \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}, \"required\": [\"a\"], \"additionalProperties\": false}}}]"
api POST /v1/chat/completions "{\"messages\": [$hi], \"max_tokens\": 60, \"temperature\": 0.8, \"seed\": 4,
    \"tools\": $two, \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"add\"}}, \"parallel_tool_calls\": false}"
expect_status 200 "a named tool_choice"
check "... exactly one call of it, arguments fitting" jqe '.choices[0].message.tool_calls | length == 1
    and .[0].function.name == "add" and (.[0].function.arguments | fromjson | keys == ["a"])' "$tmp/body"
api POST /v1/chat/completions "{\"messages\": [$hi], \"max_tokens\": 80, \"temperature\": 1, \"seed\": 6,
    \"tools\": [$weather_closed], \"logit_bias\": {\"151657\": 100}}"
expect_status 200 "tool_choice auto, the model opening a call (<tool_call> forced by a bias)"
check "... is held to a valid call from there (the lazy grammar)" jqe '.choices[0] | .finish_reason == "tool_calls"
    and .message.tool_calls[0].function.name == "get_weather"
    and (.message.tool_calls[0].function.arguments | fromjson | type == "object")' "$tmp/body"
api POST /v1/completions '{"prompt": "Answer:", "max_tokens": 10, "temperature": 1, "seed": 5, "grammar": "root ::= (\"yes\" | \"no\") \"!\""}'
expect_status 200 "a GBNF grammar" && check "... its sentences only" jqe '.choices[0].text == "yes!" or .choices[0].text == "no!"' "$tmp/body"
api POST /v1/chat/completions "{\"messages\": [$hi], \"tools\": [$weather], \"tool_choice\": \"required\", \"grammar\": \"root ::= \\\"x\\\"\"}"
expect_status 400 "a forced tool call with a grammar is 400"
api GET /v1/nothing && expect_status 404 "an unknown route is 404"
api GET /v1/chat/completions && expect_status 405 "GET on a POST route is 405"
check "405 carries Allow" sh -c "curl -sI -X GET 'http://127.0.0.1:$port/v1/chat/completions' | grep -qi '^Allow: POST'"
# CORS: without --api-key or --cors-origin any origin may call; a preflight allows the route's
# methods and exactly the headers asked for (the openai SDK's x-stainless-* among them).
preflight() { # PATH ORIGIN [HEADERS]: the preflight's status line and headers in $tmp/headers
    curl -s -o /dev/null -D "$tmp/headers" -X OPTIONS -H "Origin: $2" -H 'Access-Control-Request-Method: POST' \
        ${3:+-H "Access-Control-Request-Headers: $3"} "http://127.0.0.1:$port$1"
}
has_header() { grep -qiF "$1" "$tmp/headers"; }
asked="authorization,content-type,x-stainless-os,x-stainless-retry-count,x-stainless-timeout"
preflight /v1/chat/completions http://localhost:5173 "$asked"
check "a preflight is 204" grep -q '^HTTP/1.1 204' "$tmp/headers"
check "... allowing any origin" has_header 'Access-Control-Allow-Origin: *'
check "... the route's method and OPTIONS" has_header 'Access-Control-Allow-Methods: POST, OPTIONS'
check "... the asked headers, x-stainless-* included" has_header "Access-Control-Allow-Headers: $asked"
check "... for a while (Max-Age)" has_header 'Access-Control-Max-Age: 7200'
preflight /v1/models http://localhost:5173
check "a preflight of a GET route allows GET, OPTIONS" has_header 'Access-Control-Allow-Methods: GET, OPTIONS'
preflight /admin/models/tiny http://localhost:5173
check "... of DELETE /admin/models/ALIAS allows DELETE, OPTIONS" has_header 'Access-Control-Allow-Methods: DELETE, OPTIONS'
api OPTIONS /v1/nothing && expect_status 404 "a preflight of an unknown path is 404"
curl -s -o /dev/null -D "$tmp/headers" -H 'Origin: http://localhost:5173' "http://127.0.0.1:$port/v1/models"
check "a response carries Access-Control-Allow-Origin: *" has_header 'Access-Control-Allow-Origin: *'
check "... and no Vary: Origin (it is the same for every origin)" sh -c "! grep -qi '^Vary:' '$tmp/headers'"
printf '{"messages": [{"role": "user", "content": "\xff\xfe"}]}' >"$tmp/bad_utf8.json"
status=$(curl -s -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$tmp/bad_utf8.json" \
    "http://127.0.0.1:$port/v1/chat/completions")
expect_status 400 "invalid UTF-8 in content is 400"
{ printf '{"messages": '; head -c 10000 /dev/zero | tr '\0' '['; head -c 10000 /dev/zero | tr '\0' ']'; printf '}'; } >"$tmp/deep.json"
status=$(curl -s -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$tmp/deep.json" \
    "http://127.0.0.1:$port/v1/chat/completions")
expect_status 400 "JSON nested 10,000 deep is 400"
head -c 2000000 /dev/zero | tr '\0' ' ' >"$tmp/big.json"
status=$(curl -s -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$tmp/big.json" \
    "http://127.0.0.1:$port/v1/chat/completions")
expect_status 413 "a body over --max-body 1 MiB is 413"
head -c 100000000 /dev/zero >"$tmp/huge.bin"
status=$(curl -s -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$tmp/huge.bin" \
    "http://127.0.0.1:$port/v1/chat/completions")
expect_status 413 "a 100 MB body is 413"
rm -f "$tmp/huge.bin"
status=$(curl -s -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/json' -H 'Transfer-Encoding: chunked' \
    --data-binary @"$tmp/big.json" "http://127.0.0.1:$port/v1/chat/completions")
expect_status 413 "a chunked body over the limit is 413"

# Still serving after all that, and the log has one line per request.
api GET /health && expect_status 200 "still healthy after the bad requests"
check "one log line per request (method, path, status, tokens, time)" \
    grep -qE '^synapse serve: POST /v1/chat/completions 200 prompt=[0-9]+ completion=24 [0-9.]+ ms$' "$tmp/api.log"

stop_server "$pid"
check "SIGTERM: exit 0" test "$rc" -eq 0

# API key: 401 without it or with a wrong one; health and the page stay open.
start_server key -m "$TINY_Q8" --api-key s3cret
api GET /v1/models && expect_status 401 "no API key is 401"
status=$(curl -s -o "$tmp/body" -w '%{http_code}' -H 'Authorization: Bearer wrong' "http://127.0.0.1:$port/v1/models")
expect_status 401 "a wrong API key is 401"
status=$(curl -s -o "$tmp/body" -w '%{http_code}' -H 'Authorization: Bearer s3cret' "http://127.0.0.1:$port/v1/models")
expect_status 200 "the right API key is 200"
api GET /health && expect_status 200 "/health needs no key"
preflight /v1/chat/completions http://localhost:5173 "$asked"
check "with a key and no --cors-origin, a preflight allows no origin" sh -c "! grep -qi '^Access-Control-' '$tmp/headers'"
curl -s -o /dev/null -D "$tmp/headers" -H 'Origin: http://localhost:5173' -H 'Authorization: Bearer s3cret' "http://127.0.0.1:$port/v1/models"
check "... nor does a response" sh -c "! grep -qi '^Access-Control-' '$tmp/headers'"
status=$(curl -s -o "$tmp/body" -w '%{http_code}' -H 'Authorization: Bearer s3cret' "http://127.0.0.1:$port/props")
expect_status 200 "/props with the key"
status=$(curl -s -o "$tmp/body" -w '%{http_code}' "http://127.0.0.1:$port/slots")
expect_status 401 "/slots without the key is 401"
curl -sN -H 'Content-Type: application/json' -H 'Authorization: Bearer s3cret' "http://127.0.0.1:$port/completion" \
    -d '{"prompt": "Tell me a long story", "n_predict": 400, "stream": true}' >/dev/null &
long=$!
for _ in $(seq 100); do
    curl -s -o "$tmp/body" -H 'Authorization: Bearer s3cret' "http://127.0.0.1:$port/slots"
    jqe 'any(.[]; .is_processing)' "$tmp/body" && break
    sleep 0.05
done
check "/slots without --slots-show-prompts: a running request, but no prompt" jqe \
    'any(.[]; .is_processing) and all(.[]; has("prompt") | not)' "$tmp/body"
wait "$long"
stop_server "$pid"

# --cors-origin with a key: only the listed origins, each echoed with Vary: Origin.
start_server origins -m "$TINY_Q8" --api-key s3cret --cors-origin http://a.example --cors-origin 'http://b.example:8080, https://c.example'
preflight /v1/chat/completions http://b.example:8080 "$asked"
check "--cors-origin: a listed origin's preflight echoes it" has_header 'Access-Control-Allow-Origin: http://b.example:8080'
check "... with Vary: Origin and the asked headers" sh -c "grep -qi '^Vary: Origin' '$tmp/headers' && grep -qiF 'Access-Control-Allow-Headers: $asked' '$tmp/headers'"
preflight /v1/chat/completions http://evil.example "$asked"
check "... another origin's preflight gets no Access-Control-* headers" sh -c "! grep -qi '^Access-Control-' '$tmp/headers'"
check "... but Vary: Origin" has_header 'Vary: Origin'
curl -sN -o /dev/null -D "$tmp/headers" -H 'Origin: https://c.example' -H 'Authorization: Bearer s3cret' \
    -H 'Content-Type: application/json' -d '{"prompt": "hi", "max_tokens": 2, "stream": true}' "http://127.0.0.1:$port/v1/completions"
check "... a streamed response to a listed origin echoes it" has_header 'Access-Control-Allow-Origin: https://c.example'
stop_server "$pid"

# n choices on models whose engine keeps no prefix cache (sliding-window gemma3, recurrent
# qwen35): every choice computes the prompt itself, and greedy choices all equal the n = 1 reply.
for model in gemma3 qwen35; do
    start_server "$model" -m "tests/data/arch2/$model-s5-q8_0.gguf" --alias "$model" --parallel 3 -t 2 -c 256
    api POST /v1/completions '{"prompt": "Once upon a time there lived a king", "max_tokens": 6, "temperature": 0}'
    one=$(jq -c '.choices[0].text' "$tmp/body")
    computed0=$(curl -s "http://127.0.0.1:$port/metrics" | sed -n "s/^synapse_prompt_tokens_total{model=\"$model\"} //p")
    api POST /v1/completions '{"prompt": "Once upon a time there lived a king", "max_tokens": 6, "temperature": 0, "n": 3}'
    expect_status 200 "$model, no prefix cache: n = 3"
    computed=$(($(curl -s "http://127.0.0.1:$port/metrics" | sed -n "s/^synapse_prompt_tokens_total{model=\"$model\"} //p") - computed0))
    check "... three choices, each the n = 1 greedy text, the prompt computed per choice ($computed tokens)" jqe \
        --argjson one "$one" --argjson computed "$computed" \
        '[.choices[].text] == [$one, $one, $one] and .usage.completion_tokens == 18 and $computed == 3 * .usage.prompt_tokens' "$tmp/body"
    stop_server "$pid"
done

# Usage errors.
expect_exit 2 "serve without -m" "$SYNAPSE" serve
expect_exit 2 "serve --port 70000" "$SYNAPSE" serve -m "$TINY_Q8" --port 70000
expect_exit 2 "serve --parallel 0" "$SYNAPSE" serve -m "$TINY_Q8" --parallel 0
expect_exit 2 "serve --bogus" "$SYNAPSE" serve -m "$TINY_Q8" --bogus
expect_exit 2 "serve --cors-origin without a scheme" "$SYNAPSE" serve -m "$TINY_Q8" --cors-origin localhost:3000
expect_error_mentions "scheme://host" "... saying what an origin looks like"
expect_exit 2 "serve --cors-origin with a path" "$SYNAPSE" serve -m "$TINY_Q8" --cors-origin http://a.example/app
capture "$SYNAPSE" serve -m /nonexistent.gguf --port 0
check "serve a missing model: exit 1" test "$rc" -eq 1
expect_error_mentions "/nonexistent.gguf" "... naming the file"
finish
