#!/usr/bin/env bash
# synapse inspect on both tiny models: hyperparameters, every metadata key, the tensor table; the
# expected values are the ones tests/data/README documents for these files.
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

for model in q8_0 f32; do
    file=tests/data/qwen2-tiny-synth-$model.gguf
    capture "$SYNAPSE" inspect -m "$file" --json
    check "$model: inspect --json exits 0" test "$rc" -eq 0
    cp "$tmp/out" "$tmp/i.json"
    check "$model: hyperparameters (2 blocks, width 64, 4 heads, 2 KV heads, FFN 128, vocab 151936, ctx 32768, tied)" \
        test "$(jq -c '.hparams | [.architecture, .n_layer, .n_embd, .n_head, .n_head_kv, .n_ff, .n_vocab, .n_ctx_train, .rope_freq_base, .tied_output]' "$tmp/i.json")" \
        = '["qwen2",2,64,4,2,128,151936,32768,1000000,true]'
    check "$model: rms_norm_eps is 1e-6" test "$(jq '.hparams.rms_norm_eps * 1e6 | . * 1000 | round' "$tmp/i.json")" -eq 1000
    check "$model: 26 tensors, no output.weight" \
        test "$(jq '[.tensors | length, (map(.name) | index("output.weight"))] == [26, null]' "$tmp/i.json")" = true
    check "$model: file size and GGUF version" \
        test "$(jq -c '[.file_bytes, .gguf_version, .alignment]' "$tmp/i.json")" = "[$(stat -c %s "$file"),3,32]"
    check "$model: token_embd.weight is {64, 151936}" \
        test "$(jq -c '.tensors[] | select(.name == "token_embd.weight") | .shape' "$tmp/i.json")" = "[64,151936]"
    check "$model: tokenizer arrays summarised" \
        test "$(jq -c '.metadata["tokenizer.ggml.tokens"], .metadata["tokenizer.ggml.merges"]' "$tmp/i.json" | tr '\n' ' ')" \
        = '{"array":"string","count":151936} {"array":"string","count":151387} '
    check "$model: scalar metadata in native JSON types" \
        test "$(jq -c '[.metadata["general.architecture"], .metadata["qwen2.block_count"], .metadata["tokenizer.ggml.add_bos_token"], .metadata["tokenizer.ggml.eos_token_id"]]' "$tmp/i.json")" \
        = '["qwen2",2,false,151645]'
    check "$model: the chat template is there in full" \
        bash -c 'jq -r ".metadata[\"tokenizer.chat_template\"]" "$1" | grep -q "<|im_start|>assistant"' _ "$tmp/i.json"
    check "$model: tensor bytes add up to the weight bytes" \
        test "$(jq '([.tensors[].bytes] | add) == .hparams.weight_bytes' "$tmp/i.json")" = true

    capture "$SYNAPSE" inspect -m "$file"
    check "$model: text form lists the metadata and tensors" \
        bash -c 'grep -q "^metadata (2[34] keys)" "$1" && grep -q "^tensors (26)" "$1" && grep -q "blk.1.ffn_down.weight" "$1"' _ "$tmp/out"
done

capture "$SYNAPSE" inspect -m "$TINY_Q8" --json
check "q8_0: matrices Q8_0, norms and biases F32, general.file_type 7" \
    test "$(jq -c '[([.tensors[] | select(.name | test("weight$")) | select(.name | test("norm") | not) | .type] | unique), ([.tensors[] | select(.name | test("norm|bias")) | .type] | unique), .metadata["general.file_type"]]' "$tmp/out")" \
    = '[["q8_0"],["f32"],7]'
capture "$SYNAPSE" inspect -m "$TINY_F32" --json
check "f32: every tensor F32, general.file_type 0" \
    test "$(jq -c '[([.tensors[].type] | unique), .metadata["general.file_type"]]' "$tmp/out")" = '[["f32"],0]'

# An embedding model's ARCH.pooling_type (gen-model --pooling-type writes it): shown by name.
"$SYNAPSE" gen-model --preset tiny --seed 4 --tokenizer-from "$TINY_Q8" --pooling-type 3 -o "$tmp/pooled.gguf" >/dev/null
capture "$SYNAPSE" inspect -m "$tmp/pooled.gguf"
check "pooling_type 3 is shown as last" grep -q "^  pooling_type 3 (last)$" "$tmp/out"
capture "$SYNAPSE" inspect -m "$tmp/pooled.gguf" --json
check "... and in the JSON hparams" test "$(jq -c '.hparams | [.pooling_type, .pooling]' "$tmp/out")" = '[3,"last"]'
capture "$SYNAPSE" inspect -m "$TINY_Q8" --json
check "a file without the key has no pooling_type" test "$(jq '.hparams | has("pooling_type")' "$tmp/out")" = false

# general.name as the file gives it: invalid UTF-8 or a terminal escape sequence. The copies are
# patched in place over the name's first bytes (the string's length and the layout are kept): the
# value follows the key "general.name" (12 bytes after its start), its type (4) and length (8).
name_at=$(($(grep -obUa 'general.name' "$TINY_Q8" | head -n1 | cut -d: -f1) + 24))
with_name() { # bytes (printf format) file
    cp "$TINY_Q8" "$2"
    # shellcheck disable=SC2059
    printf "$1" | dd of="$2" bs=1 seek="$name_at" conv=notrunc status=none
}
with_name '\xff' "$tmp/invalid.gguf"
with_name '\x1b[31m' "$tmp/escape.gguf"
capture "$SYNAPSE" inspect -m "$tmp/invalid.gguf" --json
check "invalid UTF-8 in general.name: inspect --json exits 0" test "$rc" -eq 0
check "... the byte becomes U+FFFD in hparams.name and the metadata" \
    test "$(jq '[.hparams.name, .metadata["general.name"]] | all(startswith("\ufffdwen2.5 "))' "$tmp/out" 2>/dev/null)" = true
capture "$SYNAPSE" inspect -m "$tmp/invalid.gguf"
check "... and shows as \\xff in the text form" grep -q "^model: qwen2 '\\\\xffwen2.5 " "$tmp/out"
capture "$SYNAPSE" inspect -m "$tmp/escape.gguf"
check "an escape sequence in general.name reaches no terminal: no ESC byte in the text form" \
    bash -c '[ "$1" -eq 0 ] && ! grep -q $'"'"'\x1b'"'"' "$2"' _ "$rc" "$tmp/out"
check "... it shows as \\x1b[31m on the model: line and in the metadata" \
    test "$(grep -c '\\x1b\[31m\.5 0\.5B' "$tmp/out")" -eq 2
capture "$SYNAPSE" inspect -m "$tmp/escape.gguf" --json
check "... and as the JSON escape \\u001b" test "$(jq -r '.hparams.name[0:5]' "$tmp/out" 2>/dev/null)" = $'\x1b[31m'

# qwen35 (tests/data/arch2/README.md): the hybrid's keys and its delta-net tensors, ssm_a without
# a .weight suffix, the F32 convolution.
q35=tests/data/arch2/qwen35-s5-q4_k_m.gguf
capture "$SYNAPSE" inspect -m "$q35" --json
check "qwen35: inspect --json exits 0" test "$rc" -eq 0
check "qwen35: 4 blocks, 2 heads, 1 KV head, width 256, tied" \
    test "$(jq -c '.hparams | [.architecture, .n_layer, .n_head, .n_head_kv, .n_embd, .tied_output]' "$tmp/out")" \
    = '["qwen35",4,2,1,256,true]'
check "qwen35: the ssm and layer-pattern keys (conv 4, state 128, 2 groups, 4 V heads, inner 512, interval 4)" \
    test "$(jq -c '.metadata | [."qwen35.ssm.conv_kernel", ."qwen35.ssm.state_size", ."qwen35.ssm.group_count", ."qwen35.ssm.time_step_rank", ."qwen35.ssm.inner_size", ."qwen35.full_attention_interval"]' "$tmp/out")" \
    = '[4,128,2,4,512,4]'
check "qwen35: blk.0.ssm_a is [4] and blk.0.ssm_conv1d.weight a F32 [4, 1024]" \
    test "$(jq -c '[.tensors[] | select(.name == "blk.0.ssm_a" or .name == "blk.0.ssm_conv1d.weight") | [.name, .shape, .type]]' "$tmp/out")" \
    = '[["blk.0.ssm_a",[4],"f32"],["blk.0.ssm_conv1d.weight",[4,1024],"f32"]]'

finish
