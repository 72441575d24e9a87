#!/usr/bin/env bash
# CORS as a browser sees it: a page on a second local origin (another port) calls `synapse serve`
# through the openai package's browser build in Debian's headless Chromium, whole and streamed
# (the SDK's x-stainless-* headers make every call preflighted). It succeeds against the default
# server and against one whose --cors-origin names the page's origin (with an API key); the
# browser refuses it where --cors-origin names another origin, or an API key is set without any
# --cors-origin, while curl, which ignores CORS, still gets its answer from those servers.
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh
. tests/cli/serve_lib.sh

install_clients

# The page's port, known before the servers start so that --cors-origin can name it.
page_port=$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => {
    console.log(s.address().port); s.close(); })')
page="http://127.0.0.1:$page_port"

start_server open -m "$TINY_Q8" --alias tiny -t 2 -c 256
open_port=$port open_pid=$pid
start_server named -m "$TINY_Q8" --alias tiny -t 2 -c 256 --api-key k3y --cors-origin "http://localhost:1, $page"
named_port=$port named_pid=$pid
start_server other -m "$TINY_Q8" --alias tiny -t 2 -c 256 --cors-origin http://localhost:3000
other_port=$port other_pid=$pid
start_server keyed -m "$TINY_Q8" --alias tiny -t 2 -c 256 --api-key k3y
keyed_port=$port keyed_pid=$pid

check "headless Chromium: the openai browser build from $page" \
    node tests/serve/cors_page.mjs "$page_port" \
    "ok|http://127.0.0.1:$open_port/v1|" \
    "ok|http://127.0.0.1:$named_port/v1|k3y" \
    "blocked|http://127.0.0.1:$other_port/v1|" \
    "blocked|http://127.0.0.1:$keyed_port/v1|k3y"

chat='{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}'
for s in "other|$other_port|" "keyed|$keyed_port|k3y"; do
    IFS='|' read -r name p key <<<"$s"
    status=$(curl -s -o "$tmp/body" -w '%{http_code}' -H "Origin: $page" -H "Authorization: Bearer $key" \
        -H 'Content-Type: application/json' -d "$chat" "http://127.0.0.1:$p/v1/chat/completions")
    check "curl still gets its completion from the $name server" jqe '.choices[0].message.role == "assistant"' "$tmp/body"
done

for p in "$open_pid" "$named_pid" "$other_pid" "$keyed_pid"; do
    stop_server "$p"
    check "server $p stopped with exit 0" test "$rc" -eq 0
done
finish
