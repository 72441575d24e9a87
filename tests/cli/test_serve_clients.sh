#!/usr/bin/env bash
# `synapse serve` as real clients see it: the official openai npm client (pinned in
# tests/serve/package.json) drives chat and completions, streaming and not, against the tiny model
# with synapse run's greedy texts as the expectation; then the chat page, in Debian's headless
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

mkdir -p build/test-artifacts
page_text=$("$SYNAPSE" run -m "$TINY_Q8" --chat -p "$question" --temp 0 -n 64 --json | jq -r .text)
check "the chat page in headless Chromium: two streamed replies" \
    node tests/serve/chat_page.mjs "http://127.0.0.1:$port/" "$page_text" build/test-artifacts/chat-page.png
check "the screenshot was saved" test -s build/test-artifacts/chat-page.png
stop_server "$pid"
check "the server stopped with exit 0" test "$rc" -eq 0
finish
