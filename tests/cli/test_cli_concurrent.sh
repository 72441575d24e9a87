#!/usr/bin/env bash
# synapse run --concurrent-requests on the tiny model: every request's tokens equal those of the
# same line run alone (greedy and seeded sampling), output in file order, line splitting, a
# request that does not fit failing alone (exit 1), usage errors (exit 2); and bench --concurrent.
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

M=$TINY_Q8

# Five prompts of different lengths (ragged batches), more than the 3 slots so that some queue.
# The empty line and the CRLF ending check the documented line splitting.
printf '%s\n' "Hello world" "The capital of France is" "" "Once upon a time, in a land far away, there lived" \
    "1 2 3 4 5 6 7 8 9 10 11 12" >"$tmp/prompts.txt"
printf 'a b c\r\n' >>"$tmp/prompts.txt"
lines=("Hello world" "The capital of France is" "Once upon a time, in a land far away, there lived"
    "1 2 3 4 5 6 7 8 9 10 11 12" "a b c")
line_nos=(1 2 4 5 6)

# alone_ids ARGS...: the generated ids of `synapse run -p LINE --json ARGS` for every line.
alone_ids() {
    local out="[" sep=""
    for l in "${lines[@]}"; do
        out+="$sep$("$SYNAPSE" run -m "$M" -p "$l" --json "$@" | jq -c .generated_ids)"
        sep=","
    done
    echo "$out]"
}

# --- parity with single runs -----------------------------------------------------------------
for mode in "--temp 0" "--temp 0.8 --seed 5" "--temp 0.8 --seed 5 --ignore-eos"; do
    # shellcheck disable=SC2086
    want=$(alone_ids -n 12 $mode)
    # shellcheck disable=SC2086
    capture "$SYNAPSE" run -m "$M" -f "$tmp/prompts.txt" --concurrent-requests 3 -n 12 $mode --json
    check "$mode: exit 0" test "$rc" -eq 0
    check "$mode: each request's ids equal the same line run alone" \
        test "$(jq -c '[.requests[].generated_ids]' "$tmp/out" 2>/dev/null)" = "$want"
done
# The seeded runs must actually sample (else the check above is the greedy one again).
check "seeded sampling differs from greedy" \
    test "$(alone_ids -n 12 --temp 0)" != "$(alone_ids -n 12 --temp 0.8 --seed 5)"

# One request per slot, and every request in one slot: the same tokens again.
want=$(alone_ids -n 6 --temp 0)
for n in 1 8; do
    capture "$SYNAPSE" run -m "$M" -f "$tmp/prompts.txt" --parallel $n -n 6 --temp 0 --json
    check "--parallel $n: the same ids" test "$(jq -c '[.requests[].generated_ids]' "$tmp/out" 2>/dev/null)" = "$want"
done

# --- JSON shape and order --------------------------------------------------------------------
capture "$SYNAPSE" run -m "$M" -f "$tmp/prompts.txt" --concurrent-requests 3 -n 5 --temp 0 --ignore-eos --json
cp "$tmp/out" "$tmp/c.json"
check "5 requests (the empty line is skipped), indexes 0..4 in file order" \
    test "$(jq -c '[.requests[].index]' "$tmp/c.json")" = "[0,1,2,3,4]"
check "their line numbers skip the empty line 3" \
    test "$(jq -c '[.requests[].line]' "$tmp/c.json")" = "[$(IFS=,; echo "${line_nos[*]}")]"
want_prompts="["
sep=""
for l in "${lines[@]}"; do
    want_prompts+="$sep$("$SYNAPSE" tokenize -m "$M" --text "$l" --json | jq -c '.ids')"
    sep=","
done
want_prompts+="]"
check "prompt_ids are each line's tokens (CR dropped)" \
    test "$(jq -c '[.requests[].prompt_ids]' "$tmp/c.json")" = "$want_prompts"
check "--ignore-eos -n 5: every request finishes by length with 5 tokens and no error" \
    test "$(jq '[.requests[] | .finish == "length" and (.generated_ids | length) == 5 and .error == null] | all' "$tmp/c.json")" = true
check "timings: 0 <= queue_ms <= ttft_ms <= total_ms" \
    test "$(jq '[.requests[] | .queue_ms >= 0 and .queue_ms <= .ttft_ms and .ttft_ms <= .total_ms] | all' "$tmp/c.json")" = true
check "with 3 slots, request 3 waits for a slot: its queue time exceeds request 0's" \
    test "$(jq '.requests[3].queue_ms > .requests[0].queue_ms' "$tmp/c.json")" = true
check "the text is the detokenized ids" \
    test "$(jq -r '.requests[1].text' "$tmp/c.json")" = "$("$SYNAPSE" detokenize -m "$M" --tokens "$(jq -r '.requests[1].generated_ids | map(tostring) | join(",")' "$tmp/c.json")")"
check "aggregate: 5 requests, 25 tokens, 3 slots, positive speeds, no failure" \
    test "$(jq '.aggregate | .requests == 5 and .generated_tokens == 25 and .n_parallel == 3 and .tok_s > 0 and .decode_tok_s > 0 and .wall_ms > 0 and .steps >= 5 and .failed == 0' "$tmp/c.json")" = true
check "aggregate tok_s = generated_tokens / wall_ms" \
    test "$(jq '.aggregate | ((.tok_s - .generated_tokens * 1000 / .wall_ms) | fabs) < 1e-6 * .tok_s' "$tmp/c.json")" = true

# --- plain output ----------------------------------------------------------------------------
capture "$SYNAPSE" run -m "$M" -f "$tmp/prompts.txt" --concurrent-requests 3 -n 5 --temp 0 --ignore-eos
check "plain: exit 0" test "$rc" -eq 0
check "plain: a header per request, in file order" \
    test "$(grep '^--- request' "$tmp/out" | sed 's/ (.*//' | tr '\n' ' ')" = "--- request 0 --- request 1 --- request 2 --- request 3 --- request 4 "
check "plain: the header names the line, finish and token count" \
    grep -qx -- '--- request 2 (line 4, length, 5 tokens)' "$tmp/out"
check "plain: request 1's text follows its header" \
    test "$(sed -n '/^--- request 1 /{n;p;}' "$tmp/out")" = "$(jq -r '.requests[1].text' "$tmp/c.json")"
check "plain: the aggregate is one stderr line" \
    bash -c '[ "$(wc -l <"$1")" -eq 1 ] && grep -q "^synapse: 5 requests (3 at a time): 25 tokens generated in .* tok/s aggregate" "$1"' _ "$tmp/err"

# --- a request that does not fit ------------------------------------------------------------
printf '%s\n' "Hello world" "$(seq -s ' ' 1 40)" "The capital of France is" >"$tmp/long.txt"
capture "$SYNAPSE" run -m "$M" -f "$tmp/long.txt" --concurrent-requests 2 -n 4 -c 32 --temp 0 --json
check "a line too long for -c 32: exit 1" test "$rc" -eq 1
check "that request alone fails, naming the context" \
    test "$(jq -c '[.requests[] | [.finish, (.error // "" | test("context of 32"))]]' "$tmp/out" 2>/dev/null)" = '[["length",false],["error",true],["length",false]]'
check "the others still generate their tokens" \
    test "$(jq -c '[.requests[0,2].generated_ids | length]' "$tmp/out")" = "[4,4]"
check "the failure is one stderr line naming the request and line" \
    bash -c '[ "$(wc -l <"$1")" -eq 1 ] && grep -q "^synapse: error: request 1 (line 2): .*context of 32" "$1"' _ "$tmp/err"
check "aggregate counts one failure" test "$(jq '.aggregate.failed' "$tmp/out")" = 1
capture "$SYNAPSE" run -m "$M" -f "$tmp/long.txt" --concurrent-requests 2 -n 4 -c 32 --temp 0
check "plain: exit 1 and the error in the header" \
    bash -c '[ "$2" -eq 1 ] && grep -q "^--- request 1 (line 2, error: .*context of 32" "$1"' _ "$tmp/out" "$rc"
printf 'Hello\n\xff\xfe bad\n' >"$tmp/bad.txt"
capture "$SYNAPSE" run -m "$M" -f "$tmp/bad.txt" --concurrent-requests 2 -n 3 --temp 0 --json
check "an invalid UTF-8 line fails alone (exit 1), naming the byte offset" \
    test "$rc" -eq 1 -a "$(jq -c '[.requests[] | [.finish, (.error // "" | test("invalid UTF-8 at byte offset 0"))]]' "$tmp/out" 2>/dev/null)" = '[["length",false],["error",true]]'
expect_exit 1 "a file with no non-empty line" bash -c "printf '\n\n' >'$tmp/empty.txt'; '$SYNAPSE' run -m '$M' -f '$tmp/empty.txt' --concurrent-requests 2"
expect_error_mentions "no non-empty line" "the empty file's error says why"

# --- a long file ------------------------------------------------------------------------------
# Lines are read, submitted and reported as the engine gets through them (at most 2 x N requests
# in flight, the JSON streamed out), so memory does not grow with the file. 200,000 lines, one in
# 400 a request that runs ("hi"), the others refused by the engine (too long for -c 3), which keeps
# this to seconds: peak RSS ~40 MiB at 50,000 lines and at 200,000 (the 16 MiB mapping, the
# tokenizer, the engine's 256 slots and the window). Bound: 128 MiB, and 200,000 lines within
# 8 MiB of 50,000. Reading, tokenizing and submitting the whole file first peaked at 335 MiB and
# 790 MiB (and 5 GB on a 50 MB file of real prompts).
seq 1 200000 | awk '{ print (NR % 400 ? "w " $1 : "hi") }' >"$tmp/200000.txt"
head -n 50000 "$tmp/200000.txt" >"$tmp/50000.txt"
for n in 50000 200000; do
    # Headers, headers in file order (0 when they are), requests that ran.
    /usr/bin/time -f %M -o "$tmp/rss.$n" "$SYNAPSE" run -m "$M" -f "$tmp/$n.txt" --concurrent-requests 256 \
        -n 1 -c 3 --temp 0 2>/dev/null |
        awk '/^--- request / { if ($3 != n) unordered = 1; n++ }
             / length, 1 tokens\)$/ { ran++ }
             END { print n, unordered + 0, ran }' >"$tmp/summary.$n"
    check "$n lines: one result per line, in file order, $((n / 400)) of them generated" \
        test "$(cat "$tmp/summary.$n")" = "$n 0 $((n / 400))"
    rss[n]=$(tail -n 1 "$tmp/rss.$n")
    echo "$n lines: peak RSS ${rss[n]} KiB"
done
check "peak RSS at 200,000 lines is under 128 MiB" test "${rss[200000]}" -lt 131072
check "... and within 8 MiB of 50,000 lines'" test "$((rss[200000] - rss[50000]))" -lt 8192

# --- usage errors ----------------------------------------------------------------------------
for v in 0 -1 257 abc; do
    expect_exit 2 "--concurrent-requests $v" "$SYNAPSE" run -m "$M" -f "$tmp/prompts.txt" --concurrent-requests "$v"
    expect_error_mentions "$v" "--concurrent-requests $v: the value is named"
done
expect_exit 2 "--parallel 0" "$SYNAPSE" run -m "$M" -f "$tmp/prompts.txt" --parallel 0
expect_exit 2 "--kv-budget 0" "$SYNAPSE" run -m "$M" -f "$tmp/prompts.txt" --concurrent-requests 2 --kv-budget 0
expect_exit 2 "--kv-budget x" "$SYNAPSE" run -m "$M" -f "$tmp/prompts.txt" --concurrent-requests 2 --kv-budget x
expect_exit 2 "--kv-budget without --concurrent-requests" "$SYNAPSE" run -m "$M" -p x --kv-budget 64
expect_exit 2 "--concurrent-requests with -p" "$SYNAPSE" run -m "$M" -p x --concurrent-requests 2
expect_exit 2 "--concurrent-requests with -n 0" "$SYNAPSE" run -m "$M" -f "$tmp/prompts.txt" --concurrent-requests 2 -n 0
expect_exit 2 "--concurrent-requests with the reference backend" \
    "$SYNAPSE" run -m "$M" -f "$tmp/prompts.txt" --concurrent-requests 2 --backend reference
# The tiny model keeps 512 bytes of KV per position: 1 MiB holds 2048, fewer than 4000 tokens.
capture "$SYNAPSE" run -m "$M" -f "$tmp/prompts.txt" --concurrent-requests 2 -n 4000 --kv-budget 1 --temp 0 --json
check "--kv-budget 1 with -n 4000: exit 1, every request fails naming the budget" \
    test "$rc" -eq 1 -a "$(jq '[.requests[] | .finish == "error" and (.error | test("kv_budget_mib 1"))] | all' "$tmp/out" 2>/dev/null)" = true

# --- bench --concurrent ----------------------------------------------------------------------
capture "$SYNAPSE" bench -m "$M" --concurrent 1,2 -t 1 -n 4 -r 1 --json
check "bench --concurrent --json: exit 0" test "$rc" -eq 0
cp "$tmp/out" "$tmp/b.json"
check "one result per N, in order" test "$(jq -c '[.[].n_requests]' "$tmp/b.json" 2>/dev/null)" = "[1,2]"
check "positive aggregate and decode figures" \
    test "$(jq '[.[] | .median_ts > 0 and .median_decode_ts > 0 and (.samples_ts | length) == 1] | all' "$tmp/b.json")" = true
check "speedups are relative to N = 1 (1 for N = 1)" \
    test "$(jq '.[0].speedup_decode_ts == 1 and ((.[1].speedup_decode_ts - .[1].median_decode_ts / .[0].median_decode_ts) | fabs) < 1e-6 * .[1].speedup_decode_ts' "$tmp/b.json")" = true
check "every row names the cpu, as the plain bench does" \
    test "$(jq '[.[] | .cpu | type == "string" and length > 0] | all' "$tmp/b.json")" = true
check "the test shape: 5-token prompts, 4 tokens, 1 thread" \
    test "$(jq -c '[.[] | [.n_prompt, .n_gen, .n_threads]] | unique' "$tmp/b.json")" = "[[5,4,1]]"
capture "$SYNAPSE" bench -m "$M" --concurrent 2,3 -t 1 -n 3 -r 2 --json
check "without N = 1 the speedups are null; two samples each" \
    test "$(jq -c '[.[] | [.speedup_ts, (.samples_decode_ts | length)]]' "$tmp/out" 2>/dev/null)" = "[[null,2],[null,2]]"
capture "$SYNAPSE" bench -m "$M" --concurrent 1,2 -t 1 -n 4 -r 1
check "the table: a row per N with a speedup" \
    bash -c '[ "$(grep -c "| p5+tg4 " "$1")" -eq 2 ] && grep -q "|  *2 | p5+tg4 .*x |$" "$1"' _ "$tmp/out"
expect_exit 2 "bench --concurrent 0" "$SYNAPSE" bench -m "$M" --concurrent 0
expect_exit 2 "bench --concurrent 257" "$SYNAPSE" bench -m "$M" --concurrent 1,257
expect_exit 2 "bench --concurrent with two thread counts" "$SYNAPSE" bench -m "$M" --concurrent 1,2 -t 1,2
expect_exit 2 "bench --concurrent with -n 0" "$SYNAPSE" bench -m "$M" --concurrent 1 -n 0
expect_exit 2 "bench --concurrent with -p" "$SYNAPSE" bench -m "$M" --concurrent 1 -p 5
expect_exit 2 "bench --concurrent with --e2e" "$SYNAPSE" bench -m "$M" --concurrent 1 --e2e

finish
