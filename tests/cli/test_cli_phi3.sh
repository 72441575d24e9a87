#!/usr/bin/env bash
# phi3 through the command line, on tests/data/arch2's llama.cpp files: `synapse inspect` shows
# phi3's keys and fused tensors; `synapse run` (a syn_context) gives llama.cpp's greedy tokens
# while its margins are clear, and `synapse serve` (the engine) the same text; gen-model's
# test-phi3 preset gives llama-quantize's types tensor for tensor, and phi4-mini writes
# Phi-4-mini-instruct's shapes and types and runs.
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh
. tests/cli/serve_lib.sh

Q8=tests/data/arch2/phi3-s5-q8_0.gguf

capture "$SYNAPSE" inspect -m "$Q8" --json
check "inspect phi3-s5-q8_0 exits 0 (its sliding_window ignored, as llama.cpp does)" test "$rc" -eq 0
cp "$tmp/out" "$tmp/i.json"
check "hyperparameters: 3 blocks, width 256, 4 heads, 2 KV heads, FFN 768, vocab 576, ctx 4096, untied" \
    test "$(jq -c '.hparams | [.architecture, .n_layer, .n_embd, .n_head, .n_head_kv, .n_ff, .n_vocab, .n_ctx_train, .tied_output]' "$tmp/i.json")" \
    = '["phi3",3,256,4,2,768,576,4096,false]'
check "phi3's keys: rotary dims 48, original context 4096, attn_factor 1.19, sliding window 262144" \
    test "$(jq -c '.metadata | [.["phi3.rope.dimension_count"], .["phi3.rope.scaling.original_context_length"], .["phi3.rope.scaling.attn_factor"], .["phi3.attention.sliding_window"]]' "$tmp/i.json")" \
    = '[48,4096,1.19023812,262144]'
check "fused attn_qkv {256, 512} and ffn_up {256, 1536}; rope factors [24]" \
    test "$(jq -c '[.tensors[] | select(.name | test("^blk\\.0\\.(attn_qkv|ffn_up)|^rope")) | [.name, .shape]] | sort' "$tmp/i.json")" \
    = '[["blk.0.attn_qkv.weight",[256,512]],["blk.0.ffn_up.weight",[256,1536]],["rope_factors_long.weight",[24]],["rope_factors_short.weight",[24]]]'
capture "$SYNAPSE" inspect -m "$Q8"
check "the text form lists the keys and the factor tensors" \
    bash -c 'grep -q "phi3.rope.scaling.attn_factor" "$1" && grep -q "phi3.rope.dimension_count" "$1" && grep -q "rope_factors_long.weight" "$1"' _ "$tmp/out"

# The second oracle run (prompt P2): llama.cpp's margins are at least 0.1 for its first 15 tokens.
oracle=$Q8.oracle.json
ids=$(jq -c '.[1].prompt_ids' "$oracle")
capture "$SYNAPSE" run -m "$Q8" --tokens "$(jq -r 'join(",")' <<<"$ids")" -n 15 --temp 0 --json
check "run: exits 0" test "$rc" -eq 0
check "run: llama.cpp's first 15 greedy tokens" \
    test "$(jq -c .generated_ids "$tmp/out")" = "$(jq -c '.[1].generated_ids[:15]' "$oracle")"
cp "$tmp/out" "$tmp/run.json"
start_server phi3 -m "$Q8" -t 2
api POST /v1/completions "{\"prompt\": $ids, \"temperature\": 0, \"max_tokens\": 15}"
expect_status 200 "serve: a completion on the phi3 model"
check "serve (the engine): the text synapse run gives" \
    test "$(jq -r '.choices[0].text' "$tmp/body")" = "$(jq -r .text "$tmp/run.json")"
stop_server "$pid"

# test-phi3: the arch2 files' shape; every tensor's type, shape and size is llama-quantize's (its
# attn_qkv takes the attn_v rule), the phi3.* keys and values are the file's (in another order).
table='.tensors | map([.name, .type, .shape, .bytes])'
phi3_keys='.metadata | to_entries | map(select((.key | startswith("phi3.")) or .key == "general.file_type")) | sort'
for t in q8_0 q4_k_m f32; do
    ref=tests/data/arch2/phi3-s5-$t.gguf
    check "gen-model test-phi3 --type $t" \
        "$SYNAPSE" gen-model --preset test-phi3 --seed 5 --type "$t" --tokenizer-from "$ref" -o "$tmp/p.gguf"
    "$SYNAPSE" inspect -m "$tmp/p.gguf" --json >"$tmp/ours.json"
    "$SYNAPSE" inspect -m "$ref" --json >"$tmp/ref.json"
    check "test-phi3 $t: every tensor's type, shape and size is llama-quantize's" \
        test "$(jq -c "$table | sort" "$tmp/ours.json")" = "$(jq -c "$table | sort" "$tmp/ref.json")"
    check "test-phi3 $t: the phi3.* keys and file type are the reference's" \
        test "$(jq -c "$phi3_keys" "$tmp/ours.json")" = "$(jq -c "$phi3_keys" "$tmp/ref.json")"
    check "test-phi3 $t: same hyperparameters" \
        test "$(jq -c '.hparams | del(.name)' "$tmp/ours.json")" = "$(jq -c '.hparams | del(.name)' "$tmp/ref.json")"
done

# phi4-mini in Q4_K_M (2.49 GB, as the published Phi-4-mini-instruct-Q4_K_M.gguf), with
# tests/data/arch's 432-token gpt2 vocabulary padded to 200064 and Phi-4-mini's gpt-4o
# pre-tokenizer.
check "gen-model phi4-mini q4_k_m" "$SYNAPSE" gen-model --preset phi4-mini --seed 1 --type q4_k_m \
    --tokenizer-from tests/data/arch/llama-s5-q8_0.gguf -o "$tmp/phi4.gguf"
"$SYNAPSE" inspect -m "$tmp/phi4.gguf" --json >"$tmp/ours.json"
hp='{"architecture":"phi3","n_vocab":200064,"n_ctx_train":131072,"n_embd":3072,"n_layer":32,"n_head":24,'
hp+='"n_head_kv":8,"n_ff":8192,"rope_freq_base":10000,"rms_norm_eps":9.99999975e-06,"tied_output":true,'
hp+='"n_params":3836021856}'
check "phi4-mini: Phi-4-mini-instruct's hyperparameters" \
    test "$(jq -c '.hparams | del(.name, .weight_bytes)' "$tmp/ours.json")" = "$hp"
check "phi4-mini: rotary 96 of 128, LongRoPE factors [48], original context 4096, sliding window, gpt-4o" \
    test "$(jq -c '[.metadata["phi3.rope.dimension_count"], .metadata["phi3.rope.scaling.original_context_length"], .metadata["phi3.attention.sliding_window"], ([.tensors[] | select(.name | startswith("rope_factors")) | .shape]), .metadata["tokenizer.ggml.pre"]]' "$tmp/ours.json")" \
    = '[96,4096,262144,[[48],[48]],"gpt-4o"]'
check "phi4-mini: fused attn_qkv {3072, 5120}, ffn_up {3072, 16384}, no output.weight" \
    test "$(jq -c '[.tensors[] | select(.name | test("^blk\\.0\\.(attn_qkv|ffn_up)|^output\\.")) | [.name, .shape]]' "$tmp/ours.json")" \
    = '[["blk.0.attn_qkv.weight",[3072,5120]],["blk.0.ffn_up.weight",[3072,16384]]]'
# Q6_K: the tied token_embd, and attn_qkv / ffn_down of layers 0-3, 28-31 and every third between.
more_bits=$(for l in 0 1 2 3 6 9 12 15 18 21 24 27 28 29 30 31; do printf 'blk.%s.attn_qkv.weight blk.%s.ffn_down.weight\n' $l $l; done | tr ' ' '\n' | sort | tr '\n' ' ')
check "phi4-mini: Q6_K exactly where llama-quantize puts it, Q4_K elsewhere" \
    test "$(jq -r '[.tensors[] | select(.type == "q6_k") | .name] - ["token_embd.weight"] | sort | join(" ")' "$tmp/ours.json") " = "$more_bits"
check "phi4-mini: token_embd Q6_K; 96 Q4_K matrices" \
    test "$(jq -c '[(.tensors[] | select(.name == "token_embd.weight") | .type), ([.tensors[] | select(.type == "q4_k")] | length)]' "$tmp/ours.json")" = '["q6_k",96]'
capture "$SYNAPSE" run -m "$tmp/phi4.gguf" -p "Hello" -n 2 --temp 0 -t 2 --json
check "run accepts the phi4-mini model" test "$rc" -eq 0 -a "$(jq '.generated_ids | length' "$tmp/out")" -eq 2

finish
