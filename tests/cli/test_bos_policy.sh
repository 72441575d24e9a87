#!/usr/bin/env bash
# The prompt policy (tokenizer.ggml.add_bos_token) is the library's: run, chat and serve (text
# completions, chat completions, /tokenize with add_special) count the same prompt tokens, with
# one BOS first when the file asks for it and none when it does not; token-id prompts are taken as
# given; a text that already starts with the BOS token's text gets no second BOS; `tokenize`
# prints the text's own tokens unless --add-special.
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh
. tests/cli/serve_lib.sh

src=tests/data/arch/llama-s5-q8_0.gguf # llama-bpe vocabulary, BOS 429 ("<|endoftext|>")
for v in true false; do
    check "gen-model --add-bos-token $v" \
        "$SYNAPSE" gen-model --preset test-llama --seed 3 --tokenizer-from "$src" --add-bos-token "$v" \
        -o "$tmp/bos-$v.gguf" >/dev/null
    [ -s "$tmp/bos-$v.gguf" ] || finish
done
expect_exit 2 "gen-model --add-bos-token takes only true or false" \
    "$SYNAPSE" gen-model --preset test-llama --seed 3 --tokenizer-from "$src" --add-bos-token yes \
    -o "$tmp/never.gguf"
check "  ... names the value" grep -q "expected true or false, got 'yes'" "$tmp/err"
check "  ... and writes no file" test ! -e "$tmp/never.gguf"
text="Synapse runs language models"
question="Name three rivers."

# count_bos JSON_IDS: how many times the BOS id appears.
count_bos() { jq --argjson b "$bos" '[.[] | select(. == $b)] | length' <<<"$1"; }

for v in true false; do
    m=$tmp/bos-$v.gguf
    bos=$("$SYNAPSE" inspect -m "$m" --json | jq '.metadata["tokenizer.ggml.bos_token_id"]')
    want_bos=$([ "$v" = true ] && echo 1 || echo 0)
    own=$("$SYNAPSE" tokenize -m "$m" --text "$text" --json | jq -c .ids)
    n_own=$(jq length <<<"$own")
    n_prompt=$((n_own + want_bos))
    check "add_bos_token $v: tokenize prints the text's own $n_own tokens, no BOS" \
        test "$(count_bos "$own")" -eq 0
    special=$("$SYNAPSE" tokenize -m "$m" --text "$text" --add-special --json | jq -c .ids)
    check "add_bos_token $v: tokenize --add-special gives $n_prompt tokens, BOS first iff asked" \
        test "$(jq length <<<"$special")" -eq "$n_prompt" -a "$(count_bos "$special")" -eq "$want_bos" \
        -a "$(jq -c ".[$want_bos:]" <<<"$special")" = "$own"
    run_ids=$("$SYNAPSE" run -m "$m" -p "$text" -n 1 --temp 0 --json | jq -c .prompt_ids)
    check "add_bos_token $v: run evaluates $n_prompt prompt tokens" \
        test "$(jq length <<<"$run_ids")" -eq "$n_prompt" -a "$run_ids" = "$special"
    # A prompt that already starts with the BOS token's text: one BOS, never two.
    lead=$("$SYNAPSE" run -m "$m" -p "<|endoftext|>$text" -n 1 --temp 0 --json | jq -c .prompt_ids)
    check "add_bos_token $v: a prompt written with its own BOS keeps one" \
        test "$(count_bos "$lead")" -eq 1 -a "$(jq -c '.[1:]' <<<"$lead")" = "$own"
    # Token ids are the caller's exact prompt.
    tok_ids=$("$SYNAPSE" run -m "$m" --tokens "$(jq -r 'join(",")' <<<"$own")" -n 1 --temp 0 --json |
        jq -c .prompt_ids)
    check "add_bos_token $v: run --tokens takes the ids as given" \
        test "$(jq length <<<"$tok_ids")" -eq "$n_own" -a "$tok_ids" = "$own"
    chat_ids=$("$SYNAPSE" run -m "$m" --chat -p "$question" -n 1 --temp 0 --json | jq -c .prompt_ids)
    n_chat=$(jq length <<<"$chat_ids")
    check "add_bos_token $v: run --chat starts with BOS iff asked, once" \
        test "$(count_bos "$chat_ids")" -eq "$want_bos" -a "$(jq ".[0] == $bos" <<<"$chat_ids")" = \
        "$([ "$want_bos" = 1 ] && echo true || echo false)"
    printf '%s\n' "$question" | "$SYNAPSE" chat -m "$m" -n 1 --temp 0 -v >/dev/null 2>"$tmp/chat.err"
    n_chat_cli=$(sed -n 's/^synapse: turn: \([0-9]*\) prompt tokens.*/\1/p' "$tmp/chat.err")
    check "add_bos_token $v: chat's turn has run --chat's $n_chat tokens ($n_chat_cli)" \
        test "${n_chat_cli:-x}" = "$n_chat"

    start_server "bos-$v" -m "$m" --alias m -c 256
    api POST /v1/completions "$(jq -nc --arg p "$text" '{prompt: $p, max_tokens: 1, temperature: 0}')"
    check "add_bos_token $v: /v1/completions with a string counts $n_prompt prompt tokens" \
        jqe ".usage.prompt_tokens == $n_prompt" "$tmp/body"
    api POST /v1/completions "$(jq -nc --argjson p "$own" '{prompt: $p, max_tokens: 1, temperature: 0}')"
    check "add_bos_token $v: /v1/completions with token ids counts them as given ($n_own)" \
        jqe ".usage.prompt_tokens == $n_own" "$tmp/body"
    api POST /v1/chat/completions "$(jq -nc --arg q "$question" \
        '{messages: [{role: "user", content: $q}], max_tokens: 1, temperature: 0}')"
    check "add_bos_token $v: /v1/chat/completions counts run --chat's $n_chat tokens" \
        jqe ".usage.prompt_tokens == $n_chat" "$tmp/body"
    api POST /tokenize "$(jq -nc --arg t "$text" '{content: $t}')"
    check "add_bos_token $v: /tokenize gives the text's own tokens" jqe ".tokens == $own" "$tmp/body"
    api POST /tokenize "$(jq -nc --arg t "$text" '{content: $t, add_special: true}')"
    check "add_bos_token $v: /tokenize with add_special gives run's prompt" \
        jqe ".tokens == $special" "$tmp/body"
    api POST /tokenize "$(jq -nc --arg t "$text" '{content: $t, add_special: 1}')"
    expect_status 400 "add_bos_token $v: /tokenize refuses a non-boolean add_special"
    stop_server "$pid"
done
finish
