#!/usr/bin/env bash
# Weights are never copied: peak RSS of `synapse run` on the Qwen2.5-0.5B-shaped model stays under
# the file size plus the KV cache plus 64 MiB. Also checks that gen-model's 0.5B preset has the
# real model's shape. The model is generated once and cached beside the tool (build/models/).
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

model=$(dirname "$SYNAPSE")/models/qwen2.5-0.5b-synth-q8_0.gguf
if [ ! -f "$model" ]; then
    mkdir -p "$(dirname "$model")"
    check "gen-model --preset qwen2.5-0.5b" \
        "$SYNAPSE" gen-model --preset qwen2.5-0.5b --seed 1 --tokenizer-from "$TINY_Q8" -o "$model"
fi

# The real Qwen2.5-0.5B-Instruct Q8_0 shape (issue 2; 531,067,712 bytes per ../shared/PEERS.md).
capture "$SYNAPSE" inspect -m "$model" --json
check "the 0.5B model loads" test "$rc" -eq 0
check "24 blocks, width 896, 14 heads, 2 KV heads, FFN 4864, vocab 151936, ctx 32768, tied" \
    test "$(jq -c '.hparams | [.n_layer, .n_embd, .n_head, .n_head_kv, .n_ff, .n_vocab, .n_ctx_train, .rope_freq_base, .tied_output]' "$tmp/out")" \
    = '[24,896,14,2,4864,151936,32768,1000000,true]'
check "290 tensors: 24 x 12 + token_embd + output_norm" test "$(jq '.tensors | length' "$tmp/out")" -eq 290
check "the file is 531,067,712 bytes, like the real Q8_0 file" test "$(stat -c %s "$model")" -eq 531067712

file_bytes=$(stat -c %s "$model")
n_ctx=4096
# float32 K and V: 2 x n_layer x n_ctx x (n_head_kv x head_dim) x 4 bytes.
kv_bytes=$((2 * 24 * n_ctx * 2 * 64 * 4))
limit_kib=$(((file_bytes + kv_bytes + 64 * 1024 * 1024) / 1024))
/usr/bin/time -v "$SYNAPSE" run -m "$model" --tokens 785,6722,315,9625,374 -n 16 --temp 0 -c "$n_ctx" --json \
    >"$tmp/out" 2>"$tmp/err"
rc=$?
check "run on the 0.5B model exits 0" test "$rc" -eq 0
check "it generates 16 tokens" test "$(jq '.generated_ids | length' "$tmp/out" 2>/dev/null)" = 16
rss_kib=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tmp/err")
echo "peak RSS ${rss_kib:-?} KiB, limit $limit_kib KiB (file $file_bytes + KV $kv_bytes + 64 MiB)"
check "peak RSS under file + KV cache + 64 MiB" test "${rss_kib:-999999999}" -lt "$limit_kib"

finish
