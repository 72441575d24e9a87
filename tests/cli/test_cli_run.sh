#!/usr/bin/env bash
# synapse run and eval on the tiny models: greedy continuations against llama.cpp's tokens, eval's
# teacher-forced logits against the independent float32 oracle in llamacpp-greedy-tiny.json, the
# JSON shapes, prompt sources, chat wrapping, seeded sampling and the context limit.
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

# --- greedy continuations ---------------------------------------------------------------------
# A free-running greedy run follows llama.cpp's tokens as long as the backend's oracle agrees with
# llama.cpp's choice by a clear margin (>= 0.01); past the first near-tie the two are free to
# diverge. The reference backend (float32 activations) matches f32_ref to ~1e-3; the optimized one
# matches q8_ref (Q8_0 activations, as it computes) on the Q8_0 model and f32_ref on the F32 model
# to within 5e-3, half the margin.
for model in qwen2-tiny-synth-f32 qwen2-tiny-synth-q8_0; do
    file=tests/data/$model.gguf
    n_prompts=$(jq ".models[\"$model\"].prompts | length" "$GREEDY_JSON")
    for backend in reference optimized; do
        for ((p = 0; p < n_prompts; p++)); do
            sel=".models[\"$model\"].prompts[$p]"
            oracle=f32_ref
            [ "$backend" = optimized ] && [ "$(jq "$sel.q8_ref != null" "$GREEDY_JSON")" = true ] && oracle=q8_ref
            prompt=$(jq -j "$sel.prompt" "$GREEDY_JSON")
            # k: the first step where the oracle's top-1 is not llama.cpp's or its margin is < 0.01.
            k=$(jq "$sel as \$p | \$p.$oracle.steps as \$s | [range(0; \$s | length)
                    | select(\$s[.].top5[0][0] != \$p.generated_ids[.] or (\$s[.].top5[0][1] - \$s[.].top5[1][1]) < 0.01)]
                    | (.[0] // (\$s | length))" "$GREEDY_JSON")
            want_prompt=$(jq -c "$sel.prompt_ids" "$GREEDY_JSON")
            want_gen=$(jq -c "$sel.generated_ids[:$k]" "$GREEDY_JSON")
            n=$((k > 0 ? k : 1))
            capture "$SYNAPSE" run -m "$file" -p "$prompt" -n "$n" --temp 0 --backend "$backend" --json
            got_prompt=$(jq -c .prompt_ids "$tmp/out" 2>/dev/null)
            got_gen=$(jq -c ".generated_ids[:$k]" "$tmp/out" 2>/dev/null)
            label="$model $backend '${prompt:0:24}'"
            check "$label: exit 0" test "$rc" -eq 0
            check "$label: backend reported" test "$(jq -r .backend "$tmp/out" 2>/dev/null)" = "$backend"
            check "$label: prompt ids are llama.cpp's" test "$got_prompt" = "$want_prompt"
            check "$label: first $k greedy tokens are llama.cpp's (until $oracle's first near-tie)" \
                test "$got_gen" = "$want_gen"
            [ "$got_gen" = "$want_gen" ] || echo "  want $want_gen"$'\n'"  got  $got_gen"
        done
    done
done

# --- kernel tiers ------------------------------------------------------------------------------
# Every tier computes bitwise-identical logits, so every tier this CPU has gives auto's tokens; a
# tier it lacks is refused (exit 1, naming the tier), never silently replaced.
for model in $TINY_Q8 $TINY_F32; do
    capture "$SYNAPSE" run -m "$model" --tokens 785,6722,315,9625,374 -n 24 --temp 0 --ignore-eos --isa auto --json
    auto_ids=$(jq -c .generated_ids "$tmp/out" 2>/dev/null)
    auto_isa=$(jq -r .isa "$tmp/out" 2>/dev/null)
    check "$(basename "$model") --isa auto runs ($auto_isa) and reports a tier" \
        test "$rc" -eq 0 -a -n "$auto_isa" -a "$auto_isa" != auto -a "$auto_isa" != none
    n_tiers=0
    for tier in scalar avx2 avx512-vnni avx-vnni neon-dot i8mm; do
        capture "$SYNAPSE" run -m "$model" --tokens 785,6722,315,9625,374 -n 24 --temp 0 --ignore-eos --isa "$tier" --json
        if [ "$rc" -eq 0 ]; then
            n_tiers=$((n_tiers + 1))
            check "$(basename "$model") --isa $tier reports itself" test "$(jq -r .isa "$tmp/out")" = "$tier"
            check "$(basename "$model") --isa $tier gives auto's tokens" test "$(jq -c .generated_ids "$tmp/out")" = "$auto_ids"
        else
            check "$(basename "$model") --isa $tier: unavailable, exit 1 naming it" \
                bash -c '[ "$0" -eq 1 ] && [ "$(wc -l <"$1")" -eq 1 ] && grep -q "^synapse: error: .*$2.*unavailable" "$1"' \
                "$rc" "$tmp/err" "$tier"
        fi
    done
    check "$(basename "$model"): scalar and at least one SIMD tier ran ($n_tiers)" test "$n_tiers" -ge 2
done
check "--isa scalar runs on the reference backend too (reported as none)" \
    test "$("$SYNAPSE" run -m "$TINY_Q8" --tokens 785 -n 1 --backend reference --isa scalar --json | jq -r .isa)" = none
if grep -qw avx_vnni /proc/cpuinfo; then
    echo "skip: this CPU has AVX-VNNI; the unavailable-tier check needs one without it"
elif [ "$(uname -m)" = x86_64 ]; then
    expect_exit 1 "--isa avx-vnni on a CPU without AVX-VNNI" "$SYNAPSE" run -m "$TINY_Q8" --tokens 785 -n 1 --isa avx-vnni
    expect_error_mentions "avx-vnni" "the missing tier is named"
fi
# --no-huge-pages maps the same bytes in 4 KiB pages: the same tokens as the default.
for model in $TINY_Q8 $TINY_F32; do
    capture "$SYNAPSE" run -m "$model" --tokens 785,6722,315,9625,374 -n 12 --temp 0 --ignore-eos --json
    huge_ids=$(jq -c .generated_ids "$tmp/out" 2>/dev/null)
    capture "$SYNAPSE" run -m "$model" --tokens 785,6722,315,9625,374 -n 12 --temp 0 --ignore-eos --no-huge-pages --json
    check "$(basename "$model") --no-huge-pages gives the default's tokens" \
        test "$rc" -eq 0 -a -n "$huge_ids" -a "$(jq -c .generated_ids "$tmp/out" 2>/dev/null)" = "$huge_ids"
    # --no-interleave reads the rows only (the copies' kernels give the same bits: test_optimized)
    capture "$SYNAPSE" run -m "$model" --tokens 785,6722,315,9625,374 -n 12 --temp 0 --ignore-eos --no-interleave --json
    check "$(basename "$model") --no-interleave gives the default's tokens" \
        test "$rc" -eq 0 -a -n "$huge_ids" -a "$(jq -c .generated_ids "$tmp/out" 2>/dev/null)" = "$huge_ids"
done
# An f16 KV cache runs on the optimized backend and is refused by the reference one.
capture "$SYNAPSE" run -m "$TINY_Q8" --tokens 785,6722,315,9625,374 -n 4 --temp 0 --kv-type f16 --json
check "--kv-type f16 runs on the optimized backend" test "$rc" -eq 0 -a "$(jq '.generated_ids | length' "$tmp/out")" -eq 4
expect_exit 1 "--kv-type f16 on the reference backend" "$SYNAPSE" run -m "$TINY_Q8" --tokens 785 -n 1 --backend reference --kv-type f16

# --- eval: teacher-forced logits ---------------------------------------------------------------
F32=$TINY_F32
sel='.models["qwen2-tiny-synth-f32"].prompts[1]' # "The capital of France is"
ids=$(jq -r "$sel | (.prompt_ids + .generated_ids) | map(tostring) | join(\",\")" "$GREEDY_JSON")
n_ids=$(jq "$sel | (.prompt_ids + .generated_ids) | length" "$GREEDY_JSON")
n_prompt=$(jq "$sel.prompt_ids | length" "$GREEDY_JSON")
capture "$SYNAPSE" eval -m "$F32" --tokens "$ids" --top 5 --backend reference --json
check "eval exits 0" test "$rc" -eq 0
cp "$tmp/out" "$tmp/eval.json"
check "eval echoes the tokens" test "$(jq -c .tokens "$tmp/eval.json")" = "[$ids]"
check "eval has one entry per token, pos 0..n-1" \
    test "$(jq -c '[.positions[].pos]' "$tmp/eval.json")" = "$(jq -nc "[range(0; $n_ids)]")"
check "eval gives 5 [id, logit] pairs per position, logits decreasing" \
    test "$(jq '[.positions[].top | (length == 5) and all(.[]; length == 2) and ([.[][1]] == ([.[][1]] | sort | reverse))] | all' "$tmp/eval.json")" = true
# At every generation step the oracle's top-1 is ours wherever its margin is clear, with its logit
# within 5e-3 (the issue's bound for the reference backend against f32_ref).
bad=$(jq -n --slurpfile e "$tmp/eval.json" --slurpfile g "$GREEDY_JSON" --argjson np "$n_prompt" '
    ($g[0] | .models["qwen2-tiny-synth-f32"].prompts[1].f32_ref) as $f
    | [range(0; $f.steps | length) as $k
       | ($e[0].positions[$np - 1 + $k].top[0]) as $ours
       | ($f.steps[$k].top5[0]) as $ref
       | select($f.margin[$k] >= 0.01 and ($ours[0] != $ref[0] or (($ours[1] - $ref[1]) | fabs) > 5e-3))
       | {step: $k, ours: $ours, oracle: $ref}]')
check "eval's top-1 id and logit match the float32 oracle at every clear step" test "$bad" = "[]"
[ "$bad" = "[]" ] || echo "  mismatches: $bad"
capture "$SYNAPSE" eval -m "$F32" --tokens 785,6722 --top 3 --json
check "eval --top 3 gives 3 per position" test "$(jq -c '[.positions[].top | length]' "$tmp/out")" = "[3,3]"
capture "$SYNAPSE" eval -m "$F32" --tokens 785,6722 --top 3
check "eval without --json prints one line per position" test "$(grep -c '^pos [01]:' "$tmp/out")" -eq 2

# --- prompt sources and output forms -----------------------------------------------------------
M=$TINY_Q8
capture "$SYNAPSE" run -m "$M" -p "The capital of France is" -n 6 --temp 0 --backend reference --json
cp "$tmp/out" "$tmp/text.json"
capture "$SYNAPSE" run -m "$M" --tokens 785,6722,315,9625,374 -n 6 --temp 0 --backend reference --json
check "-p and the same --tokens generate the same ids" \
    test "$(jq -c .generated_ids "$tmp/out")" = "$(jq -c .generated_ids "$tmp/text.json")"
check "the JSON object has every documented key" \
    test "$(jq -c 'keys_unsorted' "$tmp/out")" = '["prompt_ids","generated_ids","text","backend","isa","stop","timings"]'
check "timings has every documented key, all numbers >= 0" \
    test "$(jq '.timings | (keys == (["decode_ms","decode_tok_s","load_ms","prompt_ms","prompt_tok_s","ttft_ms"] | sort)) and all(.[]; type == "number" and . >= 0)' "$tmp/out")" = true
check "backend is reference (isa none), stop is length" \
    test "$(jq -r '.backend + " " + .isa + " " + .stop' "$tmp/out")" = "reference none length"
check "-n 6 generates 6 tokens" test "$(jq '.generated_ids | length' "$tmp/out")" -eq 6
capture "$SYNAPSE" detokenize -m "$M" --tokens "$(jq -r '.generated_ids | map(tostring) | join(",")' "$tmp/out")"
check "text is the detokenized generated ids" test "$(cat "$tmp/out")" = "$(jq -j .text "$tmp/text.json")"

capture "$SYNAPSE" run -m "$M" -p "The capital of France is" -n 6 --temp 0 --backend reference
jq -j .text "$tmp/text.json" >"$tmp/want.txt"
check "streamed stdout is exactly the JSON text" cmp -s "$tmp/out" "$tmp/want.txt"
check "the timing summary goes to stderr" grep -q 'tok/s' "$tmp/err"

printf 'The capital of France is\n' >"$tmp/prompt.txt"
capture "$SYNAPSE" run -m "$M" -f "$tmp/prompt.txt" -n 1 --temp 0 --backend reference --json
check "-f keeps the trailing newline (prompt ends with id 198)" \
    test "$(jq -c .prompt_ids "$tmp/out")" = "[785,6722,315,9625,374,198]"

capture "$SYNAPSE" run -m "$M" --tokens 785,6722 -n 0 --json
check "-n 0 generates nothing" test "$rc" -eq 0 -a "$(jq -c .generated_ids "$tmp/out")" = "[]"

# A context of 5 with a 3-token prompt: tokens at positions 3 and 4 are decoded, a third is
# sampled from the last logits, then the cache is full.
capture "$SYNAPSE" run -m "$M" --tokens 1,2,3 -c 5 -n 10 --temp 0 --backend reference --json
check "a full context stops generation (stop: context, 3 tokens)" \
    test "$(jq -c '[.stop, (.generated_ids | length)]' "$tmp/out")" = '["context",3]'

# --- chat wrapping -----------------------------------------------------------------------------
# Qwen2.5's template: the default system turn unless one is given, then the user turn and an open
# assistant turn.
default_sys="You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
capture "$SYNAPSE" tokenize -m "$M" --text "<|im_start|>system"$'\n'"$default_sys<|im_end|>"$'\n'"<|im_start|>user"$'\n'"hi<|im_end|>"$'\n'"<|im_start|>assistant"$'\n'
want=$(cat "$tmp/out")
capture "$SYNAPSE" run -m "$M" --chat -p hi -n 1 --temp 0 --backend reference --json
check "--chat wraps the prompt in ChatML with the default system turn" \
    test "$(jq -r '.prompt_ids | map(tostring) | join(",")' "$tmp/out")" = "$want"
capture "$SYNAPSE" tokenize -m "$M" --text "<|im_start|>system"$'\n'"Be brief.<|im_end|>"$'\n'"<|im_start|>user"$'\n'"hi<|im_end|>"$'\n'"<|im_start|>assistant"$'\n'
want=$(cat "$tmp/out")
capture "$SYNAPSE" run -m "$M" --chat --system "Be brief." -p hi -n 1 --temp 0 --backend reference --json
check "--system replaces the default system turn" \
    test "$(jq -r '.prompt_ids | map(tostring) | join(",")' "$tmp/out")" = "$want"
# --chat-template-file: ChatML without Qwen's default system turn gives the same prompt here
printf '%s' "{% for m in messages %}{{ '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}" >"$tmp/chatml.jinja"
capture "$SYNAPSE" run -m "$M" --chat --chat-template-file "$tmp/chatml.jinja" --system "Be brief." -p hi -n 1 --temp 0 --backend reference --json
check "--chat-template-file with ChatML gives the same prompt" \
    test "$(jq -r '.prompt_ids | map(tostring) | join(",")' "$tmp/out")" = "$want"
capture "$SYNAPSE" tokenize -m "$M" --text "<|start_header_id|>system<|end_header_id|>"$'\n\n'"Be brief.<|eot_id|><|start_header_id|>user<|end_header_id|>"$'\n\n'"hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>"$'\n\n'
want=$(cat "$tmp/out")
capture "$SYNAPSE" run -m "$M" --chat --chat-template-file tests/data/templates/meta-llama-Llama-3.2-3B-Instruct.jinja --system "Be brief." -p hi -n 1 --temp 0 --backend reference --json
"$SYNAPSE" detokenize -m "$M" --tokens "$(jq -r '.prompt_ids | map(tostring) | join(",")' "$tmp/out")" >"$tmp/prompt.txt"
check "--chat-template-file renders Llama 3.2's own template: its knowledge-date block" \
    grep -q "Cutting Knowledge Date: December 2023" "$tmp/prompt.txt"
check "... and the turns in its header format" \
    grep -qF "<|start_header_id|>user<|end_header_id|>"$'\n\n'"hi<|eot_id|>" "$tmp/prompt.txt"
printf '%s' "{{ raise_exception('This model has no system role') }}" >"$tmp/raise.jinja"
expect_exit 1 "a template that raises refuses the chat" "$SYNAPSE" run -m "$M" --chat --chat-template-file "$tmp/raise.jinja" -p hi -n 1
expect_error_mentions "template: This model has no system role" "... with the template's own message"

# --- seeded sampling ---------------------------------------------------------------------------
sample() { # seed -> generated ids
    "$SYNAPSE" run -m "$M" --tokens 785,6722,315,9625,374 -n 12 --temp 1.5 --top-k 0 --top-p 1 --min-p 0 \
        --seed "$1" --json | jq -c .generated_ids
}
a=$(sample 42)
b=$(sample 42)
check "the same seed gives the same tokens" test -n "$a" -a "$a" = "$b"
differ=0
for s in 1 2 3; do [ "$(sample "$s")" != "$a" ] && differ=1; done
check "other seeds give other tokens" test "$differ" -eq 1
check "temperature sampling leaves greedy's path" \
    test "$a" != "$("$SYNAPSE" run -m "$M" --tokens 785,6722,315,9625,374 -n 12 --temp 0 --backend reference --json | jq -c .generated_ids)"

# --ignore-eos keeps going through -n (end-of-generation tokens are never sampled).
capture "$SYNAPSE" run -m "$M" --tokens 785,6722 -n 20 --temp 1.5 --seed 7 --ignore-eos --json
check "--ignore-eos generates exactly -n tokens" test "$(jq '.generated_ids | length' "$tmp/out")" -eq 20
check "--ignore-eos never emits an end-of-generation id" \
    test "$(jq '[.generated_ids[] | select(. == 151643 or . == 151645)] | length' "$tmp/out")" -eq 0

finish
