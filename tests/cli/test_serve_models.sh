#!/usr/bin/env bash
# One node serving several models (issue 11's nodes): each request goes to the model it names, on
# compute threads the models share; /v1/models, /health and /metrics report each model; models are
# loaded and removed at run time through /admin/models (behind the API key), a removal letting the
# model's running requests finish first.
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh
. tests/cli/serve_lib.sh

cp "$TINY_Q8" "$tmp/b.gguf"
auth=(-H 'Authorization: Bearer k3y')
# kapi METHOD PATH [BODY]: api with the key.
kapi() {
    local args=(-s -o "$tmp/body" -w '%{http_code}' "${auth[@]}" -X "$1" "http://127.0.0.1:$port$2")
    [ $# -ge 3 ] && args+=(-H 'Content-Type: application/json' --data-binary "$3")
    status=$(curl "${args[@]}")
}
metric_of() { # NAME MODEL
    curl -s "http://127.0.0.1:$port/metrics" | awk -v m="$1{model=\"$2\"}" '$1 == m {print $2}'
}
completion() { # MODEL: a greedy completion's text
    kapi POST /v1/completions "{\"model\": \"$1\", \"prompt\": \"The capital of France is\", \"temperature\": 0, \"max_tokens\": 8}"
    jq -r '.choices[0].text' "$tmp/body"
}

start_server models -m "$TINY_Q8" --alias a -m "$TINY_F32" --alias f --api-key k3y --parallel 2 -t 2 -c 512
kapi GET /v1/models
check "/v1/models lists both models with their slots" \
    jqe '[.data[] | {id, slots: .meta.n_parallel}] == [{id: "a", slots: 2}, {id: "f", slots: 2}]' "$tmp/body"
want_a=$("$SYNAPSE" run -m "$TINY_Q8" -p "The capital of France is" --temp 0 -n 8 --json | jq -r .text)
want_f=$("$SYNAPSE" run -m "$TINY_F32" -p "The capital of France is" --temp 0 -n 8 --json | jq -r .text)
check "the request naming 'a' runs on a's model" test "$(completion a)" = "$want_a"
check "the request naming 'f' runs on f's model" test "$(completion f)" = "$want_f"
kapi POST /v1/completions '{"prompt": "hi", "max_tokens": 2}'
expect_status 400 "no model named on a node with two is 400" && check "... naming both" grep -q "'a', 'f'" "$tmp/body"
kapi POST /v1/completions '{"model": "zz", "prompt": "hi", "max_tokens": 2}' && expect_status 404 "an unknown model is 404"
api GET /health && expect_status 200 "/health is open"
check "/health reports each model's slots and queue" jqe '.models.a.slots_idle == 2 and .models.f.queued == 0' "$tmp/body"
check "/metrics reports each model" test "$(metric_of synapse_generated_tokens_total a)" = 8 -a \
    "$(metric_of synapse_generated_tokens_total f)" = 8
check "/metrics has slots per model" test "$(metric_of synapse_slots_free a)" = 2

# Both models busy at once on the shared threads: each stream equals its model's text alone.
for m in a f a f; do
    curl -sN "${auth[@]}" -H 'Content-Type: application/json' \
        -d "{\"model\": \"$m\", \"prompt\": \"The capital of France is\", \"temperature\": 0, \"max_tokens\": 8, \"stream\": true}" \
        "http://127.0.0.1:$port/v1/completions" >"$tmp/both.$m.$RANDOM" &
done
wait $(jobs -p | grep -v "^$pid\$")
ok_streams=0
for f in "$tmp"/both.a.*; do [ "$(stream_text "$f")" = "$want_a" ] && ok_streams=$((ok_streams + 1)); done
for f in "$tmp"/both.f.*; do [ "$(stream_text "$f")" = "$want_f" ] && ok_streams=$((ok_streams + 1)); done
check "concurrent requests to both models each get their model's text ($ok_streams of 4)" test "$ok_streams" -eq 4

# Loading at run time.
status=$(curl -s -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/json' -d "{\"path\": \"$tmp/b.gguf\", \"alias\": \"b\"}" \
    "http://127.0.0.1:$port/admin/models")
expect_status 401 "POST /admin/models without the key is 401"
kapi POST /admin/models "{\"path\": \"$tmp/b.gguf\", \"alias\": \"b\"}" && expect_status 201 "POST /admin/models loads b"
check "b is listed" sh -c "curl -s -H 'Authorization: Bearer k3y' http://127.0.0.1:$port/v1/models | jq -e '[.data[].id] == [\"a\", \"f\", \"b\"]' >/dev/null"
check "b serves requests" test "$(completion b)" = "$want_a"
kapi POST /admin/models "{\"path\": \"$tmp/b.gguf\", \"alias\": \"b\"}" && expect_status 409 "loading an alias twice is 409"
kapi POST /admin/models '{"path": "/nonexistent.gguf", "alias": "c"}' && expect_status 400 "a missing file is 400"
check "... naming it" grep -q '/nonexistent.gguf' "$tmp/body"
kapi POST /admin/models "{\"path\": \"$tmp/b.gguf\", \"alias\": \"bad alias\"}" && expect_status 400 "a bad alias is 400"
kapi POST /admin/models '{"alias": "c"}' && expect_status 400 "no path is 400"

# Removing b while a long request on it runs: the request finishes, then b is gone.
curl -s "${auth[@]}" -o "$tmp/long" -H 'Content-Type: application/json' \
    -d '{"model": "b", "prompt": "Once upon a time", "temperature": 0, "max_tokens": 300}' \
    "http://127.0.0.1:$port/v1/completions" &
client=$!
for _ in $(seq 200); do [ "$(metric_of synapse_requests_running b)" = 1 ] && break; sleep 0.005; done
kapi DELETE /admin/models/b && expect_status 200 "DELETE /admin/models/b"
wait "$client"
check "b's running request finished whole first" jqe '.usage.completion_tokens == 300' "$tmp/long"
kapi POST /v1/completions '{"model": "b", "prompt": "hi", "max_tokens": 2}' && expect_status 404 "b is gone: 404"
kapi DELETE /admin/models/b && expect_status 404 "removing it twice is 404"
check "a still serves" test "$(completion a)" = "$want_a"
check "the unload is logged" grep -q "model 'b' unloaded" "$tmp/models.log"
stop_server "$pid"
check "SIGTERM: exit 0" test "$rc" -eq 0

# A node with two models whose first file is truncated in place: the error names that file, not
# the last one loaded (the handler looks the faulting address up in /proc/self/maps).
cp "$TINY_Q8" "$tmp/first.gguf"
cp "$TINY_Q8" "$tmp/second.gguf"
start_server sigbus -m "$tmp/first.gguf" --alias first -m "$tmp/second.gguf" --alias second --no-huge-pages
truncate -s 1000 "$tmp/first.gguf"
curl -s -o /dev/null -H 'Content-Type: application/json' \
    -d '{"model": "first", "prompt": "The capital of France is", "max_tokens": 4}' "http://127.0.0.1:$port/v1/completions"
wait "$pid"
rc=$?
check "a model file truncated under a serving node: exit 1" test "$rc" -eq 1
check "... with the error line naming that file" grep -qxF \
    "synapse: error: model file '$tmp/first.gguf' changed while mapped (truncated or overwritten in place); replace a model by renaming a new file over it" \
    "$tmp/sigbus.log"

expect_exit 2 "--alias before -m" "$SYNAPSE" serve --alias x -m "$TINY_Q8"
expect_exit 2 "two aliases for one -m" "$SYNAPSE" serve -m "$TINY_Q8" --alias x --alias y
expect_exit 2 "an alias with a space" "$SYNAPSE" serve -m "$TINY_Q8" --alias "x y"
finish
