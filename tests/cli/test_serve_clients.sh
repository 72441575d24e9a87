#!/usr/bin/env bash
# `synapse serve` as real clients see it: the official openai npm client (pinned in
# tests/serve/package.json) drives chat and completions, streaming and not, against the tiny model
# with synapse run's greedy texts as the expectation, also with n = 3 choices and with the
# frequency and presence penalties, and embeddings (tests/serve/embeddings.mjs; curl checks of
# the bad inputs' 400s); then the chat page, in Debian's headless
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
api POST /embeddings '{"input": "a"}' && expect_status 404 "llama-server's /embeddings (its own shape) is not served"

mkdir -p build/test-artifacts
page_text=$("$SYNAPSE" run -m "$TINY_Q8" --chat -p "$question" --temp 0 -n 64 --json | jq -r .text)
check "the chat page in headless Chromium: two streamed replies" \
    node tests/serve/chat_page.mjs "http://127.0.0.1:$port/" "$page_text" build/test-artifacts/chat-page.png
check "the screenshot was saved" test -s build/test-artifacts/chat-page.png
stop_server "$pid"
check "the server stopped with exit 0" test "$rc" -eq 0

# Pooling: a file's pooling_type decides, --pooling overrides it. Two files with the same weights
# (the same gen-model seed), one with pooling_type 1 (mean), one without (last by default); one
# with 0 (none: no vector per input) is refused unless --pooling says how.
for pooling in 1 0 none; do
    args=(--pooling-type "$pooling")
    [ "$pooling" = none ] && args=()
    check "gen-model: the tiny model, pooling_type $pooling" "$SYNAPSE" gen-model --preset tiny --seed 4 \
        --tokenizer-from "$TINY_Q8" "${args[@]}" -o "$tmp/pooling-$pooling.gguf"
done
embed_with() { # NAME ARGS...: the vector of "The river Rhine" from a server started with ARGS
    local name=$1
    shift
    start_server "$name" "$@" --alias tiny --parallel 2 -t 2 -c 512
    api POST /v1/embeddings '{"input": "The river Rhine", "encoding_format": "float"}' &&
        expect_status 200 "$name: served"
    jq -c '.data[0].embedding' "$tmp/body" >"$tmp/$name.json"
    stop_server "$pid"
}
embed_with file-mean -m "$tmp/pooling-1.gguf"
embed_with plain-mean -m "$tmp/pooling-none.gguf" --pooling mean
embed_with plain-last -m "$tmp/pooling-none.gguf"
embed_with file-last -m "$tmp/pooling-1.gguf" --pooling last
check "pooling_type 1 pools as --pooling mean does" cmp -s "$tmp/file-mean.json" "$tmp/plain-mean.json"
check "--pooling last overrides the file's mean" cmp -s "$tmp/file-last.json" "$tmp/plain-last.json"
check "without a pooling_type the default is last, not mean" sh -c "! cmp -s '$tmp/plain-last.json' '$tmp/plain-mean.json'"
start_server none -m "$tmp/pooling-0.gguf" --alias tiny --parallel 2 -t 2 -c 512
api POST /v1/embeddings '{"input": "The river Rhine"}' && expect_status 400 "pooling_type 0 (none) is 400"
check "... naming pooling_type" jqe '.error.message | test("pooling_type is 0")' "$tmp/body"
stop_server "$pid"
embed_with none-last -m "$tmp/pooling-0.gguf" --pooling last
check "... and --pooling last serves it as the others" cmp -s "$tmp/none-last.json" "$tmp/plain-last.json"
check "synapse serve --pooling max is a usage error" sh -c '! "$1" serve -m "$2" --pooling max 2>/dev/null' _ "$SYNAPSE" "$TINY_Q8"
finish
