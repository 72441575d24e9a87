#!/usr/bin/env bash
# `synapse serve` under load and misbehaving clients: 32 simultaneous streams each identical to the
# same request alone; a client that disconnects mid-stream frees its slot at once; a full queue is a
# 503 with Retry-After; a stalled upload is dropped after --timeout; oversized headers are refused;
# SIGTERM lets a running request finish and exits 0.
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh
. tests/cli/serve_lib.sh

# metric NAME: its value in the last started server's /metrics.
metric() {
    curl -s "http://127.0.0.1:$port/metrics" | awk -v m="$1" '$1 ~ "^"m"({|$)" {print $2; exit}'
}

# stream_request I: the body of streamed request I (a different prompt and seed each).
stream_request() {
    jq -cn --argjson i "$1" '{messages: [{role: "user", content: "Story number \($i), please."}],
        temperature: 0.9, seed: (100 + $i), max_tokens: 24, stream: true}'
}

start_server load -m "$TINY_Q8" --alias tiny --parallel 8 -t 2 -c 1024 --timeout 2 --grace 10

# 32 at once (8 slots, 24 queued), then each alone: the same text.
for i in $(seq 32); do
    curl -sN -H 'Content-Type: application/json' -d "$(stream_request "$i")" \
        "http://127.0.0.1:$port/v1/chat/completions" >"$tmp/together.$i" &
done
wait_pids=$(jobs -p | grep -v "^$pid\$")
# shellcheck disable=SC2086
wait $wait_pids
same=0
for i in $(seq 32); do
    curl -sN -H 'Content-Type: application/json' -d "$(stream_request "$i")" \
        "http://127.0.0.1:$port/v1/chat/completions" >"$tmp/alone.$i"
    if tail -n 2 "$tmp/together.$i" | grep -qx 'data: \[DONE\]' && [ -n "$(stream_text "$tmp/alone.$i")" ] &&
        [ "$(stream_text "$tmp/together.$i")" = "$(stream_text "$tmp/alone.$i")" ]; then
        same=$((same + 1))
    fi
done
check "32 simultaneous streams all complete, each identical to the request alone ($same of 32)" test "$same" -eq 32
check "no request left running or queued" test "$(metric synapse_requests_running)" = 0 -a "$(metric synapse_requests_queued)" = 0

# A client that disconnects mid-stream: its slot is free again at once.
long=$(jq -cn '{prompt: "Once upon a time", max_tokens: 1000, temperature: 0, stream: true}')
curl -sN -H 'Content-Type: application/json' -d "$long" "http://127.0.0.1:$port/v1/completions" >"$tmp/cut" &
client=$!
for _ in $(seq 200); do [ -s "$tmp/cut" ] && break; sleep 0.01; done
check "the long stream started" test -s "$tmp/cut"
check "it holds a slot" test "$(metric synapse_requests_running)" = 1
kill -9 "$client"
wait "$client" 2>/dev/null
freed=no
for _ in $(seq 100); do
    [ "$(metric synapse_requests_running)" = 0 ] && { freed=yes; break; }
    sleep 0.01
done
check "the slot is free within a second of the disconnect" test "$freed" = yes
check "the disconnect is counted" test "$(metric synapse_client_disconnects_total)" = 1
check "the log marks the request as closed early" grep -q 'POST /v1/completions 200 .*(connection closed early)' "$tmp/load.log"

# A stalled upload: half a body, then silence; dropped after --timeout 2, the server unharmed.
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"prompt": "hel' >&3
start=$SECONDS
timeout 10 cat <&3 >/dev/null
check "a stalled upload is dropped after the idle timeout ($((SECONDS - start)) s)" test $((SECONDS - start)) -ge 1 -a $((SECONDS - start)) -le 6
exec 3<&-
api GET /health && expect_status 200 "healthy after the stalled upload"

# Oversized request headers are refused, not buffered.
big=$(head -c 100000 /dev/zero | tr '\0' 'a')
status=$(curl -s -o /dev/null -w '%{http_code}' -H "X-Big: $big" "http://127.0.0.1:$port/health")
check "a 100 KB header is refused ($status)" test "$status" = 431 -o "$status" = 000 -o "$status" = 413
api GET /health && expect_status 200 "healthy after the oversized header"

# SIGTERM while a request runs: it finishes, then the server exits 0 and accepts nothing more.
slow=$(jq -cn '{prompt: "Once upon a time", max_tokens: 400, temperature: 0}')
curl -s -o "$tmp/slow" -w '%{http_code}' -H 'Content-Type: application/json' -d "$slow" \
    "http://127.0.0.1:$port/v1/completions" >"$tmp/slow.status" &
client=$!
for _ in $(seq 200); do [ "$(metric synapse_requests_running)" = 1 ] && break; sleep 0.005; done
stop_server "$pid"
wait "$client"
check "SIGTERM: the running request finished (200, 400 tokens)" \
    sh -c "test \"\$(cat '$tmp/slow.status')\" = 200 && jq -e '.usage.completion_tokens == 400' '$tmp/slow' >/dev/null"
check "SIGTERM: exit 0" test "$rc" -eq 0
check "nothing listens after the stop" sh -c "! curl -s -o /dev/null 'http://127.0.0.1:$port/health'"

# --timeout bounds idle clients, not generations: with one slot and --timeout 1, a stream that
# waits over a second in the queue (nothing sent meanwhile) and a long one both complete. 8000
# tokens: the tiny model decodes 3000 in under a second with the interleaved kernels.
start_server idle -m "$TINY_Q8" --parallel 1 -c 8192 --timeout 1
curl -sN -H 'Content-Type: application/json' -d '{"prompt": "Once upon a time", "temperature": 0, "max_tokens": 8000, "stream": true}' \
    "http://127.0.0.1:$port/v1/completions" >"$tmp/long1" &
first=$!
sleep 0.2
curl -sN -H 'Content-Type: application/json' -d '{"prompt": "Hello", "temperature": 0, "max_tokens": 8, "stream": true}' \
    "http://127.0.0.1:$port/v1/completions" >"$tmp/queued1" &
second=$!
wait "$first" "$second"
check "a stream generating for longer than --timeout completes" sh -c "tail -n 2 '$tmp/long1' | grep -qx 'data: \[DONE\]'"
check "a stream queued for longer than --timeout completes" sh -c "tail -n 2 '$tmp/queued1' | grep -qx 'data: \[DONE\]'"
check "... and waited in the queue meanwhile (the long one took over a second)" \
    grep -qE 'POST /v1/completions 200 prompt=[0-9]+ completion=8000 ([1-9][0-9]{3,}|[0-9]{5,})\.[0-9] ms' "$tmp/idle.log"
stop_server "$pid"

# SIGTERM with a request longer than --grace: it is cancelled when the grace ends, its client gets
# a 503 error event, and the server exits 0 at once.
start_server grace -m "$TINY_Q8" --parallel 1 -c 30000 --grace 1
endless=$(jq -cn '{prompt: "Once upon a time", temperature: 0, stream: true}')
curl -sN -H 'Content-Type: application/json' -d "$endless" "http://127.0.0.1:$port/v1/completions" >"$tmp/endless" &
client=$!
for _ in $(seq 200); do [ -s "$tmp/endless" ] && break; sleep 0.01; done
start=$SECONDS
stop_server "$pid"
check "SIGTERM past the grace period: exit 0 within 4 s ($((SECONDS - start)) s)" test "$rc" -eq 0 -a $((SECONDS - start)) -le 4
wait "$client"
check "... the cut stream ends with a 503 error event and [DONE]" \
    sh -c "sed -n 's/^data: //p' '$tmp/endless' | grep -v DONE | tail -n 1 | jq -e '.error.code == \"unavailable\"' >/dev/null && tail -n 2 '$tmp/endless' | grep -qx 'data: \[DONE\]'"

# A full queue: one slot, no waiting room; a second request is a 503 with Retry-After.
start_server queue -m "$TINY_Q8" --parallel 1 --max-queue 0 -c 2048
curl -sN -H 'Content-Type: application/json' -d "$long" "http://127.0.0.1:$port/v1/completions" >"$tmp/first" &
client=$!
for _ in $(seq 200); do [ -s "$tmp/first" ] && break; sleep 0.01; done
curl -s -D "$tmp/headers" -o "$tmp/body" -H 'Content-Type: application/json' -d '{"prompt": "hi", "max_tokens": 2}' \
    "http://127.0.0.1:$port/v1/completions" >/dev/null
status=$(sed -n '1s/^HTTP\/1.1 \([0-9]*\).*/\1/p' "$tmp/headers")
expect_status 503 "a request beyond --parallel + --max-queue is 503"
check "... with Retry-After" grep -qi '^Retry-After: ' "$tmp/headers"
kill -9 "$client"
wait "$client" 2>/dev/null
stop_server "$pid"
finish
