#!/usr/bin/env bash
# `synapse serve` as real clients see it: the official openai npm client (pinned in
# tests/serve/package.json) drives chat and completions, streaming and not, against the tiny model
# with synapse run's greedy texts as the expectation, and embeddings (tests/serve/embeddings.mjs;
# curl checks of the bad inputs' 400s); then the chat page, in Debian's headless
# Chromium driven by playwright-core, sends two messages and shows both streamed replies. The
# screenshot is kept as build/test-artifacts/chat-page.png.
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh
. tests/cli/serve_lib.sh

install_clients

question="Name three rivers."
prompt="The capital of France is"
jq -n --arg q "$question" --arg p "$prompt" \
    --arg chat "$("$SYNAPSE" run -m "$TINY_Q8" --chat -p "$question" --temp 0 -n 24 --json | jq -r .text)" \
    --arg comp "$("$SYNAPSE" run -m "$TINY_Q8" -p "$prompt" --temp 0 -n 24 --json | jq -r .text)" \
    '{question: $q, prompt: $p, chat_text: $chat, completion_text: $comp, max_tokens: 24}' >"$tmp/expected.json"

start_server clients -m "$TINY_Q8" --alias tiny --parallel 4 -t 2 -c 512
check "the openai client: chat and completions, streaming and not" \
    node tests/serve/openai_client.mjs "http://127.0.0.1:$port/v1" "$tmp/expected.json"

n_embd=$("$SYNAPSE" inspect -m "$TINY_Q8" --json | jq .hparams.n_embd)
check "the openai client: embeddings of strings and token arrays, float and base64, dimensions" \
    node tests/serve/embeddings.mjs "http://127.0.0.1:$port/v1" "$n_embd"
api POST /v1/embeddings '{"model": "tiny", "input": []}' && expect_status 400 "embeddings: an empty array is 400"
api POST /v1/embeddings '{"input": ""}' && expect_status 400 "embeddings: an empty string is 400"
api POST /v1/embeddings '{"input": ["a", [1, 2], ""]}' && expect_status 400 "embeddings: an empty string among inputs is 400"
check "... naming the input" jqe '.error.message | test("input\\[2\\]")' "$tmp/body"
jq -nc '{input: [range(10000) | "a"]}' >"$tmp/many.json"
api POST /v1/embeddings "@$tmp/many.json" && expect_status 400 "embeddings: 10,000 inputs are 400 (at most 2,048)"
jq -nc '{input: [range(2048) | "a"]}' >"$tmp/most.json"
api POST /v1/embeddings "@$tmp/most.json" && expect_status 200 "embeddings: 2,048 inputs are served"
check "... with 2,048 vectors in order" jqe '(.data | length) == 2048 and .data[2047].index == 2047' "$tmp/body"
jq -nc '{input: [range(513) | 100]}' >"$tmp/long.json"
api POST /v1/embeddings "@$tmp/long.json" && expect_status 400 "embeddings: 513 tokens in a 512-token context are 400"
check "... context_length_exceeded" jqe '.error.code == "context_length_exceeded"' "$tmp/body"
jq -nc '{input: [range(512) | 100]}' >"$tmp/full.json"
api POST /v1/embeddings "@$tmp/full.json" && expect_status 200 "embeddings: an input filling the whole context is served"
jq -nc --arg s "$(printf 'word %.0s' $(seq 600))" '{input: ["short", $s]}' >"$tmp/longtext.json"
api POST /v1/embeddings "@$tmp/longtext.json" && expect_status 400 "embeddings: a text over the context is 400"
api POST /v1/embeddings '{"input": 5}' && expect_status 400 "embeddings: a number as input is 400"
api POST /v1/embeddings '{"input": [["a"]]}' && expect_status 400 "embeddings: an array of string arrays is 400"
api POST /v1/embeddings '{"input": [1, -2]}' && expect_status 400 "embeddings: a negative token id is 400"
api POST /v1/embeddings '{"input": [999999999]}' && expect_status 400 "embeddings: a token outside the vocabulary is 400"
api POST /v1/embeddings '{"input": "a", "encoding_format": "hex"}' && expect_status 400 "embeddings: an unknown encoding_format is 400"
api POST /v1/embeddings '{"input": "a", "dimensions": 0}' && expect_status 400 "embeddings: dimensions 0 is 400"
api POST /v1/embeddings '{"input": "a", "model": "other"}' && expect_status 404 "embeddings: an unknown model is 404"

mkdir -p build/test-artifacts
page_text=$("$SYNAPSE" run -m "$TINY_Q8" --chat -p "$question" --temp 0 -n 64 --json | jq -r .text)
check "the chat page in headless Chromium: two streamed replies" \
    node tests/serve/chat_page.mjs "http://127.0.0.1:$port/" "$page_text" build/test-artifacts/chat-page.png
check "the screenshot was saved" test -s build/test-artifacts/chat-page.png
stop_server "$pid"
check "the server stopped with exit 0" test "$rc" -eq 0

# --pooling overrides the file's choice (none here, so last by default): mean gives other vectors
start_server pooled -m "$TINY_Q8" --alias tiny --parallel 2 -t 2 -c 512 --pooling mean
api POST /v1/embeddings '{"input": "The river Rhine", "encoding_format": "float"}' && expect_status 200 "--pooling mean: served"
jq -c '.data[0].embedding' "$tmp/body" >"$tmp/mean.json"
stop_server "$pid"
start_server last -m "$TINY_Q8" --alias tiny --parallel 2 -t 2 -c 512 --pooling last
api POST /v1/embeddings '{"input": "The river Rhine", "encoding_format": "float"}' && expect_status 200 "--pooling last: served"
check "--pooling mean and last give different vectors" \
    jqe --slurpfile m "$tmp/mean.json" '.data[0].embedding != $m[0]' "$tmp/body"
stop_server "$pid"
check "synapse serve --pooling max is a usage error" sh -c '! "$1" serve -m "$2" --pooling max 2>/dev/null' _ "$SYNAPSE" "$TINY_Q8"
finish
