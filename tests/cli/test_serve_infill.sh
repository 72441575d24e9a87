#!/usr/bin/env bash
# Fill in the middle: gen-model --fim-keys writes a tiny model with Qwen2.5-Coder's fim_* keys;
# inspect shows the roles; `synapse serve` answers POST /infill (llama-server's fields and shape,
# streamed and not) and /v1/completions with a suffix on the prompt llama-server builds. Each
# answer is compared with /completion given the expected token ids, assembled here from /tokenize's
# pieces: the same greedy text means the same prompt, token for token. A vocabulary without FIM
# tokens gets a 400.
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh
. tests/cli/serve_lib.sh

# ---- the file ----
fim=$tmp/fim.gguf
expect_exit 0 "gen-model --fim-keys" \
    "$SYNAPSE" gen-model --preset tiny --seed 5 --tokenizer-from "$TINY_Q8" --fim-keys -o "$fim"
"$SYNAPSE" inspect -m "$fim" --json >"$tmp/fim.json"
check "--fim-keys writes Qwen2.5-Coder's six keys with the ids of their tokens" jqe \
    '.metadata | .["tokenizer.ggml.fim_pre_token_id"] == 151659 and .["tokenizer.ggml.fim_suf_token_id"] == 151661
     and .["tokenizer.ggml.fim_mid_token_id"] == 151660 and .["tokenizer.ggml.fim_pad_token_id"] == 151662
     and .["tokenizer.ggml.fim_rep_token_id"] == 151663 and .["tokenizer.ggml.fim_sep_token_id"] == 151664' "$tmp/fim.json"
check "inspect --json: the roles the keys name" jqe \
    '.special_tokens == {bos: 151643, eos: 151645, eot: 151645, pad: 151643, fim_pre: 151659,
     fim_suf: 151661, fim_mid: 151660, fim_pad: 151662, fim_rep: 151663, fim_sep: 151664}' "$tmp/fim.json"
capture "$SYNAPSE" inspect -m "$fim"
check "inspect: the roles with their texts" grep -qF "fim_pre 151659 '<|fim_prefix|>'; fim_suf 151661 '<|fim_suffix|>'" "$tmp/out"
# tests/data's tiny model has the same tokens but no keys: they are found by their texts
"$SYNAPSE" inspect -m "$TINY_F32" --json >"$tmp/tiny.json"
check "without fim_* keys the roles come from the token texts" jqe \
    '(.metadata | keys | map(select(startswith("tokenizer.ggml.fim"))) == []) and .special_tokens.fim_rep == 151663' "$tmp/tiny.json"
# a vocabulary without FIM tokens (GPT-2's, padded to the preset's size)
nofim=$tmp/nofim.gguf
"$SYNAPSE" gen-model --preset tiny --seed 5 --tokenizer-from tests/data/vocab/ggml-vocab-gpt-2.gguf -o "$nofim" >/dev/null
"$SYNAPSE" inspect -m "$nofim" --json >"$tmp/nofim.json"
check "GPT-2's vocabulary has no FIM roles" jqe '.special_tokens | has("fim_pre") | not' "$tmp/nofim.json"
expect_exit 1 "--fim-keys refuses a vocabulary without the tokens" \
    "$SYNAPSE" gen-model --preset tiny --seed 5 --tokenizer-from tests/data/vocab/ggml-vocab-gpt-2.gguf --fim-keys -o "$tmp/x.gguf"
expect_error_mentions "no token <|fim_prefix|>" "--fim-keys names the missing token"

# ---- /infill ----
start_server fim -m "$fim" --alias fim -t 1 --parallel 2

# ids TEXT [PARSE_SPECIAL]: /tokenize's ids of TEXT, as a JSON array
ids() {
    api POST /tokenize "$(jq -nc --arg c "$1" --argjson s "${2:-false}" '{content: $c, parse_special: $s}')"
    jq -c .tokens "$tmp/body"
}
read -r PRE SUF MID REP SEP < <(jq -r '.special_tokens | "\(.fim_pre) \(.fim_suf) \(.fim_mid) \(.fim_rep) \(.fim_sep)"' "$tmp/fim.json")
prefix='def add(a, b):'
suffix=$'\n    return c\n'
prompt='<|im_start|>    c'
# llama-server's layout: repository line, each extra file after a separator, the edited file's
# separator, then prefix + prompt, suffix, middle
want=$(jq -nc --argjson rep "$REP" --argjson sep "$SEP" --argjson pre "$PRE" --argjson suf "$SUF" --argjson mid "$MID" \
    --argjson project "$(ids $'myproject\n')" --argjson f1 "$(ids $'util.py\n')" --argjson t1 "$(ids 'c = 0')" \
    --argjson f2 "$(ids $'tmp\n')" --argjson t2 "$(ids 'x = 1')" --argjson name "$(ids $'filename\n')" \
    --argjson p "$(ids "$prefix")" --argjson q "$(ids "$prompt" true)" --argjson s "$(ids "$suffix")" \
    '[$rep] + $project + [$sep] + $f1 + $t1 + [$sep] + $f2 + $t2 + [$sep] + $name + [$pre] + $p + $q + [$suf] + $s + [$mid]')
body=$(jq -nc --arg p "$prefix" --arg s "$suffix" --arg q "$prompt" \
    '{input_prefix: $p, input_suffix: $s, prompt: $q, input_extra: [{filename: "util.py", text: "c = 0"}, {text: "x = 1"}],
      n_predict: 12, temperature: 0}')
api POST /infill "$body" && expect_status 200 "/infill"
cp "$tmp/body" "$tmp/infill.json"
check "/infill evaluates the assembled prompt ($(jq length <<<"$want") tokens)" \
    jqe --argjson n "$(jq length <<<"$want")" '.tokens_evaluated == $n and .tokens_predicted == 12 and .stop_type == "limit"' "$tmp/infill.json"
check "/infill's prompt is the layout, special tokens written out" jqe --arg p "$prefix" --arg s "$suffix" \
    '.prompt == "<|repo_name|>myproject\n<|file_sep|>util.py\nc = 0<|file_sep|>tmp\nx = 1<|file_sep|>filename\n<|fim_prefix|>" + $p + "<|im_start|>    c<|fim_suffix|>" + $s + "<|fim_middle|>"' "$tmp/infill.json"
api POST /completion "$(jq -nc --argjson ids "$want" '{prompt: $ids, n_predict: 12, temperature: 0}')"
cp "$tmp/body" "$tmp/ref.json"
check "/infill's text is /completion's on the expected ids" \
    test "$(jq -r .content "$tmp/infill.json")" = "$(jq -r .content "$tmp/ref.json")"
# a prompt of other tokens gives another text (so the comparison above can fail)
api POST /completion "$(jq -nc --argjson ids "$want" '{prompt: ($ids | .[:-1]), n_predict: 12, temperature: 0}')"
check "(without FIM_MID the text differs)" test "$(jq -r .content "$tmp/body")" != "$(jq -r .content "$tmp/ref.json")"

curl -sN -H 'Content-Type: application/json' --data-binary "$(jq -c '. + {stream: true}' <<<"$body")" \
    "http://127.0.0.1:$port/infill" >"$tmp/stream"
sed -n 's/^data: //p' "$tmp/stream" >"$tmp/events"
check "/infill streamed: the same text in pieces with stop false" \
    test "$(jq -j 'select(.stop == false) | .content' "$tmp/events")" = "$(jq -r .content "$tmp/ref.json")"
check "/infill streamed: a last event with stop true and the prompt's count, no [DONE]" jqe -s \
    --argjson n "$(jq length <<<"$want")" '(.[-1] | .stop == true and .tokens_evaluated == $n) and (map(select(.stop)) | length == 1)' "$tmp/events"
check "(no [DONE] line)" bash -c '! grep -q "\[DONE\]" "$0"' "$tmp/stream"

# /v1/completions: prompt before the gap, suffix after it
want2=$(jq -nc --argjson rep "$REP" --argjson sep "$SEP" --argjson pre "$PRE" --argjson suf "$SUF" --argjson mid "$MID" \
    --argjson project "$(ids $'myproject\n')" --argjson name "$(ids $'filename\n')" \
    --argjson p "$(ids "$prefix")" --argjson s "$(ids "$suffix")" \
    '[$rep] + $project + [$sep] + $name + [$pre] + $p + [$suf] + $s + [$mid]')
api POST /v1/completions "$(jq -nc --arg p "$prefix" --arg s "$suffix" '{prompt: $p, suffix: $s, max_tokens: 10, temperature: 0}')"
expect_status 200 "/v1/completions with a suffix"
cp "$tmp/body" "$tmp/oa.json"
api POST /completion "$(jq -nc --argjson ids "$want2" '{prompt: $ids, n_predict: 10, temperature: 0}')"
check "/v1/completions with a suffix: /completion's text on the FIM ids, their count as prompt_tokens" \
    jqe --argjson n "$(jq length <<<"$want2")" --arg t "$(jq -r .content "$tmp/body")" \
    '.choices[0].text == $t and .usage.prompt_tokens == $n' "$tmp/oa.json"
curl -sN -H 'Content-Type: application/json' "http://127.0.0.1:$port/v1/completions" --data-binary \
    "$(jq -nc --arg p "$prefix" --arg s "$suffix" '{prompt: $p, suffix: $s, max_tokens: 10, temperature: 0, stream: true}')" >"$tmp/oastream"
check "/v1/completions with a suffix, streamed: the same text" \
    test "$(stream_text "$tmp/oastream")" = "$(jq -r '.choices[0].text' "$tmp/oa.json")"
check "(then [DONE])" grep -q '^data: \[DONE\]' "$tmp/oastream"

# requests refused
api POST /infill '{"input_suffix": "b"}' && expect_status 400 "/infill without input_prefix is 400"
check "(param input_prefix)" jqe '.error.param == "input_prefix"' "$tmp/body"
api POST /infill '{"input_prefix": "a", "input_suffix": "b", "input_extra": {"text": "x"}}' &&
    expect_status 400 "/infill with input_extra not an array is 400"
api POST /infill '{"input_prefix": "a", "input_suffix": "b", "input_extra": [{"filename": "a.py"}]}' &&
    expect_status 400 "/infill with an extra file without text is 400"
check "(param input_extra[0])" jqe '.error.param == "input_extra[0]"' "$tmp/body"
api POST /infill '{"input_prefix": "a", "input_suffix": 3}' && expect_status 400 "/infill with a number as input_suffix is 400"
api POST /v1/completions '{"prompt": [1, 2], "suffix": "b"}' && expect_status 400 "a suffix with a token-id prompt is 400"
stop_server "$pid"

# a context of 128: the extra files' first tokens give way to the prompt and n_predict; the
# prefix and suffix are never cut
start_server small -m "$fim" -t 1 -c 128
long=$(printf 'value_%d = %d\n' $(seq 1 60 | awk '{print $1, $1}'))
api POST /infill "$(jq -nc --arg t "$long" '{input_prefix: "a", input_suffix: "b", input_extra: [{filename: "big.py", text: $t}], n_predict: 8, temperature: 0}')"
expect_status 200 "/infill with more extra context than the context holds"
check "... keeps the extra context's end: the prompt fills the context less n_predict" jqe \
    '.tokens_evaluated == 120 and (.prompt | startswith("<|repo_name|>") | not)
     and (.prompt | endswith("value_60 = 60<|file_sep|>filename\n<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>"))' "$tmp/body"
api POST /infill "$(jq -nc --arg t "$long" '{input_prefix: $t, input_suffix: "b", n_predict: 8}')"
expect_status 400 "/infill with a prefix beyond the context is 400 (never cut)"
check "(context_length_exceeded)" jqe '.error.code == "context_length_exceeded"' "$tmp/body"
stop_server "$pid"

start_server nofim -m "$nofim" -t 1
api POST /infill '{"input_prefix": "a", "input_suffix": "b"}' && expect_status 400 "/infill on a model without FIM tokens is 400"
check "(the message names the missing tokens)" jqe \
    '.error.message == "this model has no fill-in-the-middle tokens (tokenizer.ggml.fim_*)"' "$tmp/body"
api POST /v1/completions '{"prompt": "a", "suffix": "b"}' && expect_status 400 "/v1/completions with a suffix on it is 400"
api POST /v1/completions '{"prompt": "a", "max_tokens": 2}' && expect_status 200 "(without a suffix it completes)"
stop_server "$pid"

finish
