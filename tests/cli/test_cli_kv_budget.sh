#!/usr/bin/env bash
# The KV budget bounds memory, it does not allocate it: `run --concurrent-requests` on the tiny
# model with a 1 TiB budget (--kv-budget 1048576) peaks under 100 MiB RSS, as with the default
# budget (its per-block bookkeeping once took 0.5 GB up front).
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

limit_kib=$((100 * 1024))
printf 'Hello there\nThe capital of France is\n' >"$tmp/prompts.txt"
for budget in 1024 1048576; do
    /usr/bin/time -f %M -o "$tmp/rss" "$SYNAPSE" run -m "$TINY_Q8" -f "$tmp/prompts.txt" --concurrent-requests 2 \
        --kv-budget "$budget" -n 4 --temp 0 >"$tmp/out" 2>"$tmp/err"
    rc=$?
    check "--kv-budget $budget: run exits 0" test "$rc" -eq 0
    check "--kv-budget $budget: both requests generate 4 tokens" test "$(grep -c ', length, 4 tokens)' "$tmp/out")" -eq 2
    rss_kib=$(tail -n1 "$tmp/rss")
    echo "--kv-budget $budget: peak RSS ${rss_kib:-?} KiB, limit $limit_kib KiB"
    check "--kv-budget $budget: peak RSS under 100 MiB" test "${rss_kib:-999999999}" -lt "$limit_kib"
done

finish
