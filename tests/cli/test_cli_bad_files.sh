#!/usr/bin/env bash
# The corrupted-GGUF corpus (tests/support/bad_gguf.c, written by tests/tools/make_bad_gguf):
# `synapse inspect` and `synapse run` refuse every file with exit 1 and one error line containing
# the case's expected substring; no crash, no hang. The corpus's valid base model is accepted.
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

# The corpus writer, built by `make all` beside the tool.
maker=$(dirname "$SYNAPSE")/make_bad_gguf
if [ ! -x "$maker" ]; then
    fail "$maker is missing: run make all"
    finish
fi
mkdir -p "$tmp/corpus"
check "make_bad_gguf writes the corpus" "$maker" "$TINY_Q8" "$tmp/corpus"
n_cases=$(wc -l <"$tmp/corpus/expected.tsv")
check "the corpus has cases ($n_cases)" test "$n_cases" -gt 0

# Each run is bounded in time, so that a hang fails the test instead of stalling it.
limit=20
expect_refusal() { # file expect subcommand [args...]: synapse SUBCOMMAND -m FILE ARGS...
    local file=$1 expect=$2 sub=$3
    shift 3
    timeout "$limit" "$SYNAPSE" "$sub" -m "$file" "$@" >"$tmp/out" 2>"$tmp/err"
    local code=$?
    local what="$sub $(basename "$file")"
    if [ "$code" -ne 1 ]; then
        fail "$what: exit $code, expected 1 ($([ "$code" -eq 124 ] && echo "timed out" || head -c 300 "$tmp/err"))"
    elif [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! grep -q '^synapse: error: ' "$tmp/err"; then
        fail "$what: stderr is not one 'synapse: error: ' line: $(head -c 300 "$tmp/err")"
    elif ! grep -qF -- "$expect" "$tmp/err"; then
        fail "$what: '$expect' not in: $(head -c 300 "$tmp/err")"
    else
        ok "$what: $(sed "s|$tmp/corpus/||" "$tmp/err" | cut -c1-150)"
    fi
}

while IFS=$'\t' read -r name expect; do
    file=$tmp/corpus/$name
    expect_refusal "$file" "$expect" inspect
    expect_refusal "$file" "$expect" run -p "Hello" -n 1 --temp 0
done <"$tmp/corpus/expected.tsv"

# The base the cases were derived from is itself valid, so each refusal is the corruption's doing.
base=$tmp/corpus/valid-base.gguf
if [ -f "$base" ]; then
    capture timeout "$limit" "$SYNAPSE" inspect -m "$base"
    check "the corpus's valid base model is accepted by inspect" test "$rc" -eq 0
    capture timeout "$limit" "$SYNAPSE" run -m "$base" -p "Hello" -n 1 --temp 0
    check "the corpus's valid base model is accepted by run" test "$rc" -eq 0
fi

finish
