#!/usr/bin/env bash
# bench-serve.sh: `synapse serve` speed against `synapse bench` in the same run (docs/BENCHMARKS.md).
# Rounds interleave: synapse bench tg64 (a plain syn_context), then against a server on the same
# model and threads: one streaming client, 8 concurrent streaming clients, and the time to the first
# streamed token of a 5-token prompt on the idle server. Prints each round and the medians.
#
# usage: scripts/bench-serve.sh [MODEL] [ROUNDS] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-models/qwen2.5-0.5b-synth-q8_0.gguf}
rounds=${2:-5}
threads=${3:-2}
synapse=${SYNAPSE:-build/synapse}
log=$(mktemp)
"$synapse" serve -m "$model" --port 0 -t "$threads" --parallel 8 -c 4096 2>"$log" &
server=$!
trap 'kill "$server" 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 300); do
    port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$log")
    [ -n "$port" ] && curl -sf -o /dev/null "http://127.0.0.1:$port/health" && break
    sleep 0.1
done
url="http://127.0.0.1:$port"
node scripts/bench-serve.mjs "$url" 1 2 64 >/dev/null # warm-up: maps the weights

printf '%-6s %12s %14s %14s %12s %14s\n' round "bench tg64" "1 stream t/s" "8 streams agg" "ratio 8/1" "TTFT ms (5 tok)"
for r in $(seq "$rounds"); do
    tg=$("$synapse" bench -m "$model" -t "$threads" -p 0 -n 64 -r 3 --json | jq '.[] | select(.test == "tg64") | .median_ts')
    one=$(node scripts/bench-serve.mjs "$url" 1 3 64)
    eight=$(node scripts/bench-serve.mjs "$url" 8 3 64)
    ttft=$(node scripts/bench-serve.mjs "$url" 1 10 2 | jq .ttft_ms_median)
    printf '%-6s %12.1f %14.1f %14.1f %12.2f %14.1f\n' "$r" "$tg" "$(jq .stream_tok_s_median <<<"$one")" \
        "$(jq .agg_tok_s <<<"$eight")" "$(jq -n "$(jq .agg_tok_s <<<"$eight") / $(jq .agg_tok_s <<<"$one")")" "$ttft"
done
