#!/usr/bin/env bash
# `synapse template` against Python's Jinja2: real chat templates rendered byte for byte as the
# renders in tests/data/templates/cases.json, the raising cases refused with the template's own
# message, and hostile templates refused within a second.
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

CASES=tests/data/templates/cases.json
NOW=1768469400 # 2026-01-15 09:30:00 UTC, the instant the cases were rendered at

# One case of each conversation kind for a handful of families (the unit test runs all 288).
for pick in "Qwen-Qwen3-0.6B tools-offered" "meta-llama-Llama-3.1-8B-Instruct tool-call-and-result" \
    "mistralai-Mistral-Nemo-Instruct-2407 parallel-tool-calls" "google-gemma-2-2b-it system-multiturn" \
    "Qwen3.5-4B no-generation-prompt"; do
    set -- $pick
    jq -e --arg t "$1" --arg c "$2" 'any(.[]; .template == $t and .case == $c)' "$CASES" >/dev/null ||
        { fail "$1/$2 is not a case"; continue; }
    jq --arg t "$1" --arg c "$2" '.[] | select(.template == $t and .case == $c) | .variables' "$CASES" >"$tmp/vars.json"
    jq -j --arg t "$1" --arg c "$2" '.[] | select(.template == $t and .case == $c) | .expected // ("ERROR: " + .error)' "$CASES" >"$tmp/want"
    capture "$SYNAPSE" template --file "tests/data/templates/$1.jinja" --vars "$tmp/vars.json" --now "$NOW"
    if grep -q '^ERROR: ' "$tmp/want"; then
        check "$1/$2: refused (exit 1)" test "$rc" = 1
        check "... with the template's message" test "$(cat "$tmp/err")" = "synapse: error: template: $(sed 's/^ERROR: //' "$tmp/want")"
    else
        check "$1/$2: exit 0" test "$rc" = 0
        check "$1/$2: byte-exact with Jinja2 (no newline added)" cmp -s "$tmp/out" "$tmp/want"
    fi
done

# A raising case: Gemma refuses a system turn with its own words.
jq '.[] | select(.error and (.template | startswith("google-gemma"))) | .variables' "$CASES" | jq -s '.[0]' >"$tmp/vars.json"
want=$(jq -r '[.[] | select(.error and (.template | startswith("google-gemma")))][0].error' "$CASES")
tmpl=$(jq -r '[.[] | select(.error and (.template | startswith("google-gemma")))][0].template' "$CASES")
expect_exit 1 "$tmpl refuses a conversation it does not support" \
    "$SYNAPSE" template --file "tests/data/templates/$tmpl.jinja" --vars "$tmp/vars.json"
check "... the error line is 'synapse: error: template: $want'" test "$(cat "$tmp/err")" = "synapse: error: template: $want"

# strftime_now uses --now.
printf '%s' "{{ strftime_now('%d %B %Y') }}" >"$tmp/date.jinja"
capture "$SYNAPSE" template --file "$tmp/date.jinja" --now "$NOW"
check "strftime_now formats --now" test "$(cat "$tmp/out")" = "15 January 2026"

# Hostile templates: each refused, naming its bound, within a second.
hostile() { # description, bound text, template
    printf '%s' "$3" >"$tmp/hostile.jinja"
    local t0 t1
    t0=$(date +%s%N)
    capture "$SYNAPSE" template --file "$tmp/hostile.jinja"
    t1=$(date +%s%N)
    check "$1: refused (exit 1)" test "$rc" = 1
    check "$1: the error names the $2" grep -q "$2" "$tmp/err"
    check "$1: within a second ($(((t1 - t0) / 1000000)) ms)" test $(((t1 - t0) / 1000000)) -lt 1000
}
hostile "a loop without end" "bound" "{% for i in range(1000000) %}{% for j in range(1000000) %}x{% endfor %}{% endfor %}"
hostile "a gigabyte of output" "output bound" "{% for i in range(100000) %}{{ 'x' * 10000 }}{% endfor %}"
hostile "10,000 nested blocks" "nesting bound" "$(printf '{%% if true %%}%.0s' $(seq 10000))$(printf '{%% endif %%}%.0s' $(seq 10000))"
hostile "recursion without end" "recursion bound" "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"

# Usage and syntax errors.
expect_exit 2 "template without --file" "$SYNAPSE" template
expect_exit 1 "a missing template file" "$SYNAPSE" template --file /nonexistent.jinja
printf '%s' "{% if x %}never closed" >"$tmp/bad.jinja"
expect_exit 1 "a syntax error" "$SYNAPSE" template --file "$tmp/bad.jinja"
expect_error_mentions "'if' is not closed" "... names what is wrong"
printf '[1, 2]' >"$tmp/list.json"
expect_exit 1 "variables that are not an object" "$SYNAPSE" template --file "$tmp/date.jinja" --vars "$tmp/list.json"
expect_exit 2 "--now that is not a number" "$SYNAPSE" template --file "$tmp/date.jinja" --now soon

finish
