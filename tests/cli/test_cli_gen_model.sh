#!/usr/bin/env bash
# synapse gen-model --preset tiny: the file mirrors tests/data's tiny models (written by a separate
# generator and llama.cpp's quantizer) in layout, metadata and size; it is deterministic in the
# seed; its Q8_0 tensors are ggml's quantization of the F32 ones; inspect and run accept it.
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

gen() { # seed type out
    "$SYNAPSE" gen-model --preset tiny --seed "$1" --type "$2" --tokenizer-from "$TINY_Q8" -o "$3" >/dev/null
}
check "gen-model tiny q8_0 (seed 1)" gen 1 q8_0 "$tmp/a.gguf"
check "gen-model tiny q8_0 again (seed 1)" gen 1 q8_0 "$tmp/b.gguf"
check "gen-model tiny q8_0 (seed 2)" gen 2 q8_0 "$tmp/c.gguf"
check "gen-model tiny f32 (seed 1)" gen 1 f32 "$tmp/f.gguf"
check "the same seed gives the same file" cmp -s "$tmp/a.gguf" "$tmp/b.gguf"
check "another seed gives another file" bash -c '! cmp -s "$0" "$1"' "$tmp/a.gguf" "$tmp/c.gguf"
check "no temporary file is left behind" test -z "$(find "$tmp" -name '.*')"
# The type defaults to q8_0.
"$SYNAPSE" gen-model --preset tiny --seed 1 --tokenizer-from "$TINY_Q8" -o "$tmp/d.gguf" >/dev/null
check "--type defaults to q8_0" cmp -s "$tmp/a.gguf" "$tmp/d.gguf"

# Layout: the same keys in the same order, the same tensors (name, type, shape, bytes) and the
# same file size as the reference files. Tensor order and offsets: the F32 reference is in the
# converter's order (token_embd, blocks, output_norm), which the Q8_0 file follows too (llama.cpp's
# quantizer wrote its reference in another order).
table='.tensors | map([.name, .type, .shape, .bytes])'
for pair in "a.gguf:$TINY_Q8" "f.gguf:$TINY_F32"; do
    ours=$tmp/${pair%%:*}
    ref=${pair#*:}
    "$SYNAPSE" inspect -m "$ours" --json >"$tmp/ours.json"
    "$SYNAPSE" inspect -m "$ref" --json >"$tmp/ref.json"
    check "$(basename "$ref"): same metadata keys in the same order" \
        test "$(jq -c '.metadata | keys_unsorted' "$tmp/ours.json")" = "$(jq -c '.metadata | keys_unsorted' "$tmp/ref.json")"
    check "$(basename "$ref"): same tensor table" \
        test "$(jq -c "$table | sort" "$tmp/ours.json")" = "$(jq -c "$table | sort" "$tmp/ref.json")"
    check "$(basename "$ref"): same file size" test "$(stat -c %s "$ours")" -eq "$(stat -c %s "$ref")"
    check "$(basename "$ref"): same hyperparameters" \
        test "$(jq -c '.hparams | del(.name)' "$tmp/ours.json")" = "$(jq -c '.hparams | del(.name)' "$tmp/ref.json")"
    check "$(basename "$ref"): tokenizer keys copied verbatim" \
        test "$(jq -c '.metadata | with_entries(select(.key | startswith("tokenizer.")))' "$tmp/ours.json")" \
        = "$(jq -c '.metadata | with_entries(select(.key | startswith("tokenizer.")))' "$tmp/ref.json")"
done
"$SYNAPSE" inspect -m "$tmp/a.gguf" --json >"$tmp/ours.json"
"$SYNAPSE" inspect -m "$TINY_F32" --json >"$tmp/ref.json"
check "Q8_0: tensor order is the F32 reference's (converter order)" \
    test "$(jq -c '.tensors | map([.name, .offset])' "$tmp/ours.json" | sed 's/[0-9]*\]/]/g')" \
    = "$(jq -c '.tensors | map([.name, .offset])' "$tmp/ref.json" | sed 's/[0-9]*\]/]/g')"
"$SYNAPSE" inspect -m "$tmp/f.gguf" --json >"$tmp/ours.json"
check "F32: tensor order and offsets are the reference's" \
    test "$(jq -c '.tensors | map([.name, .offset])' "$tmp/ours.json")" = "$(jq -c '.tensors | map([.name, .offset])' "$tmp/ref.json")"
"$SYNAPSE" inspect -m "$tmp/a.gguf" --json >"$tmp/ours.json"
check "general.name names the seed" bash -c 'jq -r ".hparams.name" "$0" | grep -q "seed 1"' "$tmp/ours.json"

# The copied vocabulary tokenizes like the original.
capture "$SYNAPSE" tokenize -m "$tmp/a.gguf" --text "Hello world! <|im_start|>"
check "the generated model tokenizes with the copied vocabulary" test "$(cat "$tmp/out")" = "9707,1879,0,220,151644"

# The Q8_0 file is the F32 file quantized by ggml's Q8_0 rule (d = max|x| / 127 in float32, stored
# as fp16; q = round-half-even(x / d)), checked by an independent reader written in Python.
if command -v python3 >/dev/null; then
    check "Q8_0 tensors are ggml's quantization of the F32 tensors" python3 - "$tmp/f.gguf" "$tmp/a.gguf" <<'EOF'
import struct, sys

def tensors(path):
    data = open(path, "rb").read()
    off = 4 + 4
    n_tensors, n_kv = struct.unpack_from("<QQ", data, off); off += 16
    def string():
        nonlocal off
        (n,) = struct.unpack_from("<Q", data, off); off += 8 + n
        return data[off - n:off].decode()
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    def skip(t):
        nonlocal off
        if t == 8: string()
        elif t == 9:
            et, n = struct.unpack_from("<IQ", data, off); off += 12
            for _ in range(n): skip(et)
        else: off += sizes[t]
    for _ in range(n_kv):
        string(); (t,) = struct.unpack_from("<I", data, off); off += 4; skip(t)
    out = {}
    for _ in range(n_tensors):
        name = string(); (nd,) = struct.unpack_from("<I", data, off); off += 4
        ne = struct.unpack_from("<%dQ" % nd, data, off); off += 8 * nd
        t, o = struct.unpack_from("<IQ", data, off); off += 12
        out[name] = (t, ne, o)
    base = (off + 31) // 32 * 32
    return data, base, out

f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
fd, fb, ft = tensors(sys.argv[1])
qd, qb, qt = tensors(sys.argv[2])
for name in ["blk.0.attn_q.weight", "blk.1.ffn_down.weight", "blk.0.attn_k.weight"]:
    (_, ne, fo), (qtype, _, qo) = ft[name], qt[name]
    assert qtype == 8, name
    n = ne[0] * ne[1]
    x = struct.unpack_from("<%df" % n, fd, fb + fo)
    for b in range(n // 32):
        blk = x[32 * b: 32 * b + 32]
        d = f32(max(abs(v) for v in blk) / 127)
        inv = f32(1 / d) if d else 0.0
        want_d = struct.pack("<e", d)
        want_q = bytes((round(f32(v * inv)) & 0xFF) for v in blk)  # round(): ties to even
        got = qd[qb + qo + 34 * b: qb + qo + 34 * b + 34]
        if got != want_d + want_q:
            sys.exit("%s block %d: got %s want %s" % (name, b, got.hex(), (want_d + want_q).hex()))
EOF
else
    echo "skipped: the Q8_0 bit-exactness check needs python3"
fi

# Weights are scaled so that activations stay finite; the Q8_0 and F32 files of one seed give
# nearly the same logits: within the 0.15 that Q8_0 rounding moves logits by on these shapes
# (tests/data's how_to_check); a wrong scale or layout in either would be off by whole units.
capture "$SYNAPSE" eval -m "$tmp/f.gguf" --tokens 785,6722,315,9625,374 --top 5 --json
cp "$tmp/out" "$tmp/ef.json"
capture "$SYNAPSE" eval -m "$tmp/a.gguf" --tokens 785,6722,315,9625,374 --top 5 --json
cp "$tmp/out" "$tmp/eq.json"
check "eval on the generated models gives finite logits" \
    test "$(jq -s '[.[].positions[].top[][1] | isinfinite or isnan] | any' "$tmp/ef.json" "$tmp/eq.json")" = false
check "Q8_0 and F32 top-1 logits agree within 0.15 at every position" \
    test "$(jq -n --slurpfile a "$tmp/ef.json" --slurpfile b "$tmp/eq.json" \
        '[range(0; 5) as $i | ($a[0].positions[$i].top[0][1] - $b[0].positions[$i].top[0][1]) | fabs] | max < 0.15')" = true

capture "$SYNAPSE" run -m "$tmp/a.gguf" -p "Hello" -n 4 --temp 0 --json
check "run accepts the generated model" test "$rc" -eq 0 -a "$(jq '.generated_ids | length' "$tmp/out")" -eq 4

# --- Other architectures and types -------------------------------------------------------------
capture "$SYNAPSE" gen-model --help
check "gen-model --help lists every preset and type" bash -c 'for w in qwen2.5-0.5b qwen3-0.6b llama3.2-1b gemma3-1b qwen3.5-0.8b tiny \
    test-qwen2 test-qwen3 test-llama q8_0 f32 q4_0 q4_k_m q5_k_m q6_k "[PAD"; do grep -qF -- "$w" "$1" || exit 1; done' _ "$tmp/out"

# Per-tensor types: the test-* presets have the shape of tests/data/arch's files, which llama.cpp's
# llama-quantize wrote from F32 files; every tensor (name, type, shape, bytes) must be as there,
# and so must the architecture's keys (values and order), the file type and the tokenizer.
gen_preset() { # PRESET SEED TYPE TOKENIZER OUT
    "$SYNAPSE" gen-model --preset "$1" --seed "$2" --type "$3" --tokenizer-from "$4" -o "$5" >/dev/null
}
arch_keys() { # FILE ARCH: the ARCH.* keys with their values, in file order, then the file type
    "$SYNAPSE" inspect -m "$1" --json | jq -c --arg a "$2." '.metadata | to_entries
        | map(select((.key | startswith($a)) or .key == "general.file_type" or .key == "general.quantization_version"))'
}
for pair in qwen2:q4_k_m qwen2:q5_k_m qwen2:q6_k qwen2:q4_0 qwen3:q4_k_m qwen3:q8_0 llama:q4_k_m llama:q8_0; do
    a=${pair%%:*} t=${pair#*:}
    ref=tests/data/arch/$a-s5-$t.gguf
    out=$tmp/$a-$t.gguf
    check "gen-model test-$a --type $t" gen_preset "test-$a" 5 "$t" "$ref" "$out"
    "$SYNAPSE" inspect -m "$out" --json >"$tmp/ours.json"
    "$SYNAPSE" inspect -m "$ref" --json >"$tmp/ref.json"
    check "test-$a $t: every tensor's type, shape and size is llama-quantize's ($(basename "$ref"))" \
        test "$(jq -c "$table | sort" "$tmp/ours.json")" = "$(jq -c "$table | sort" "$tmp/ref.json")"
    if [ "$a" = qwen2 ]; then # Qwen2.5's own key order (above) puts the RoPE base first
        check "test-$a $t: the $a.* keys and file type are the reference's" \
            test "$(arch_keys "$out" $a | jq -c 'sort')" = "$(arch_keys "$ref" $a | jq -c 'sort')"
    else
        check "test-$a $t: the $a.* keys and file type are the reference's, in its order" \
            test "$(arch_keys "$out" $a)" = "$(arch_keys "$ref" $a)"
    fi
    check "test-$a $t: same hyperparameters" \
        test "$(jq -c '.hparams | del(.name)' "$tmp/ours.json")" = "$(jq -c '.hparams | del(.name)' "$tmp/ref.json")"
    check "test-$a $t: the tokenizer keys are the reference's" \
        test "$(jq -c '.metadata | with_entries(select(.key | startswith("tokenizer.")))' "$tmp/ours.json")" \
        = "$(jq -c '.metadata | with_entries(select(.key | startswith("tokenizer.")))' "$tmp/ref.json")"
done
gen_preset test-qwen3 5 q4_k_m tests/data/arch/qwen3-s5-q8_0.gguf "$tmp/again.gguf"
check "the same seed gives the same k-quant file" cmp -s "$tmp/again.gguf" "$tmp/qwen3-q4_k_m.gguf"

# Rows that are not a multiple of 256 (tiny: width 64, FFN 128, 2 blocks) take llama-quantize's
# fallbacks: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0 (the output, and attn_v / ffn_down of the
# layers use_more_bits picks: layer 1 of 2). No file of tests/data/arch has such rows: these types
# are worked out from llama_tensor_get_type's rules.
types_of() { # FILE: "name=type" for every matrix, sorted
    "$SYNAPSE" inspect -m "$1" --json | jq -r '[.tensors[] | select(.type != "f32") | "\(.name)=\(.type)"] | sort | join(" ")'
}
tiny_types() { # TYPE OF THE PLAIN MATRICES, OF LAYER 0'S attn_v/ffn_down, OF LAYER 1'S, OF THE OUTPUT
    local l
    for l in 0 1; do
        printf 'blk.%s.attn_k.weight=%s blk.%s.attn_output.weight=%s blk.%s.attn_q.weight=%s ' $l "$1" $l "$1" $l "$1"
        printf 'blk.%s.attn_v.weight=%s blk.%s.ffn_down.weight=%s ' $l "$([ $l = 0 ] && echo "$2" || echo "$3")" \
            $l "$([ $l = 0 ] && echo "$2" || echo "$3")"
        printf 'blk.%s.ffn_gate.weight=%s blk.%s.ffn_up.weight=%s ' $l "$1" $l "$1"
    done
    printf 'token_embd.weight=%s' "$4"
}
for row in "q4_k_m q5_0 q5_0 q8_0 q8_0" "q5_k_m q5_1 q5_1 q8_0 q8_0" "q6_k q8_0 q8_0 q8_0 q8_0" \
    "q4_0 q4_0 q4_0 q4_0 q8_0"; do
    set -- $row
    gen 1 "$1" "$tmp/fallback.gguf"
    check "tiny $1: llama-quantize's fallback types for rows not a multiple of 256" \
        test "$(types_of "$tmp/fallback.gguf")" = "$(tiny_types "$2" "$3" "$4" "$5")"
done

# Each quantized file is the F32 file of the same seed quantized: the reference backend's logits
# (all 432) stay close to the F32 model's, by a relative RMS difference that grows as the bits
# shrink (measured: q8_0 0.020, q6_k 0.068, q5_k_m 0.131, q4_k_m 0.241, q4_0 0.262; a wrong
# layout or scale gives ~1.4, uncorrelated logits). tests/unit/test_weight_quantize.c checks the
# quantizers value by value.
check "gen-model test-qwen3 f32" gen_preset test-qwen3 5 f32 tests/data/arch/qwen3-s5-q8_0.gguf "$tmp/qwen3-f32.gguf"
all_logits() { "$SYNAPSE" eval -m "$1" --backend reference --tokens 85,322,31,96,374,12,300,77 --top 432 --json; }
all_logits "$tmp/qwen3-f32.gguf" >"$tmp/lf.json"
for pair in q8_0:0.04 q6_k:0.12 q5_k_m:0.22 q4_k_m:0.4 q4_0:0.4; do
    t=${pair%%:*} limit=${pair#*:}
    [ -f "$tmp/qwen3-$t.gguf" ] || gen_preset test-qwen3 5 "$t" tests/data/arch/qwen3-s5-q8_0.gguf "$tmp/qwen3-$t.gguf"
    all_logits "$tmp/qwen3-$t.gguf" >"$tmp/lq.json"
    rel=$(jq -n --slurpfile a "$tmp/lf.json" --slurpfile b "$tmp/lq.json" '
        def logits(p): p.top | map({key: (.[0] | tostring), value: .[1]}) | from_entries;
        [range(0; 8) as $i | logits($a[0].positions[$i]) as $x | logits($b[0].positions[$i]) as $y
         | $x | keys[] as $k | {d: ($x[$k] - $y[$k]), v: $x[$k]}] as $all
        | ($all | map(.v) | add / length) as $mean
        | (($all | map(.d * .d) | add / length) | sqrt) / (($all | map((.v - $mean) * (.v - $mean)) | add / length) | sqrt)')
    check "test-qwen3 $t: logits within $limit (relative RMS) of F32's: $rel" test "$(jq -n "$rel < $limit")" = true
done

# The full-size presets: the real models' shapes, loaded and run.
# What inspect must report (the real models' figures; weight_bytes aside).
hp_qwen3='{"architecture":"qwen3","n_vocab":151936,"n_ctx_train":40960,"n_embd":1024,"n_layer":28,"n_head":16,'
hp_qwen3+='"n_head_kv":8,"n_ff":3072,"rope_freq_base":1000000,"rms_norm_eps":9.99999997e-07,"tied_output":true,'
hp_qwen3+='"n_params":596049920}'
hp_llama='{"architecture":"llama","n_vocab":128256,"n_ctx_train":131072,"n_embd":2048,"n_layer":16,"n_head":32,'
hp_llama+='"n_head_kv":8,"n_ff":8192,"rope_freq_base":500000,"rms_norm_eps":9.99999975e-06,"tied_output":true,'
hp_llama+='"n_params":1235814432}'
check "gen-model qwen3-0.6b" gen_preset qwen3-0.6b 1 q8_0 "$TINY_Q8" "$tmp/big.gguf"
"$SYNAPSE" inspect -m "$tmp/big.gguf" --json >"$tmp/ours.json"
check "qwen3-0.6b: Qwen3-0.6B's hyperparameters" \
    test "$(jq -c '.hparams | del(.name, .weight_bytes)' "$tmp/ours.json")" = "$hp_qwen3"
want='[["blk.0.attn_q.weight",[1024,2048]],["blk.0.attn_q_norm.weight",[128]],["blk.0.attn_k.weight",[1024,1024]],'
want+='["blk.0.attn_k_norm.weight",[128]],["blk.0.attn_output.weight",[2048,1024]],["output_norm.weight",[1024]]]'
check "qwen3-0.6b: head size 128 over 16 heads (query width 2048), per-head Q/K norms, no biases, tied" \
    test "$(jq -c '[.tensors[] | select(.name | test("^blk\\.0\\.attn_(q|k|output)|^output|bias")) | [.name, .shape]]' \
        "$tmp/ours.json")" = "$want"
check "qwen3-0.6b: qwen3.attention.key_length and value_length are 128" \
    test "$(jq -c '.metadata | [.["qwen3.attention.key_length"], .["qwen3.attention.value_length"]]' "$tmp/ours.json")" = "[128,128]"
capture "$SYNAPSE" run -m "$tmp/big.gguf" -p "Hello" -n 2 --temp 0 --json
check "run accepts the qwen3-0.6b model" test "$rc" -eq 0 -a "$(jq '.generated_ids | length' "$tmp/out")" -eq 2

# Gemma 3 1B (Google's config: 26 layers, width 1152, 4 heads of 256 over 1 KV head, FFN 6912,
# vocab 262144, window 512 with 5 local layers per global one, RoPE bases 1e6 / 1e4, no scaling)
# with tests/data/arch2's 574-token SentencePiece vocabulary, padded.
check "gen-model gemma3-1b" gen_preset gemma3-1b 1 q8_0 tests/data/arch2/gemma3-s5-q8_0.gguf "$tmp/big.gguf"
"$SYNAPSE" inspect -m "$tmp/big.gguf" --json >"$tmp/ours.json"
want='{"architecture":"gemma3","n_vocab":262144,"n_embd":1152,"n_layer":26,"n_head":4,"n_head_kv":1,'
want+='"n_ff":6912,"rope_freq_base":1000000,"sliding_window":512,"sliding_window_pattern":6,"rope_freq_base_swa":10000}'
check "gemma3-1b: Gemma 3 1B's hyperparameters" \
    test "$(jq -c '.hparams | {architecture, n_vocab, n_embd, n_layer, n_head, n_head_kv, n_ff, rope_freq_base,
        sliding_window, sliding_window_pattern, rope_freq_base_swa}' "$tmp/ours.json")" = "$want"
check "gemma3-1b: Q/K norms, post-attention and post-FFN norms, no output.weight" \
    test "$(jq -c '[.tensors[] | select(.name | test("^blk\\.0\\..*norm|^output")) | .name]' "$tmp/ours.json")" \
    = '["blk.0.attn_norm.weight","blk.0.attn_q_norm.weight","blk.0.attn_k_norm.weight","blk.0.post_attention_norm.weight","blk.0.ffn_norm.weight","blk.0.post_ffw_norm.weight","output_norm.weight"]'
capture "$SYNAPSE" run -m "$tmp/big.gguf" -p "Hello" -n 2 --temp 0 --json
check "run accepts the gemma3-1b model" test "$rc" -eq 0 -a "$(jq '.generated_ids | length' "$tmp/out")" -eq 2

# Qwen3.5 0.8B with tests/data/arch2's 523-token qwen35 vocabulary, padded to 248320, in Q4_K_M:
# Qwen3.5-0.8B's published shape (24 blocks, every 4th full attention, width 1024, 8 heads of 256
# over 2 KV heads, FFN 3584, RoPE base 1e7 on 64 dims) and the tensors of both kinds of block.
check "gen-model qwen3.5-0.8b q4_k_m" gen_preset qwen3.5-0.8b 1 q4_k_m tests/data/arch2/qwen35-s5-q8_0.gguf "$tmp/big.gguf"
"$SYNAPSE" inspect -m "$tmp/big.gguf" --json >"$tmp/ours.json"
check "qwen3.5-0.8b: Qwen3.5-0.8B's hyperparameters" \
    test "$(jq -c '.hparams | [.architecture, .n_vocab, .n_ctx_train, .n_embd, .n_layer, .n_head, .n_head_kv, .n_ff, .rope_freq_base, .tied_output]' "$tmp/ours.json")" \
    = '["qwen35",248320,262144,1024,24,8,2,3584,10000000,true]'
check "qwen3.5-0.8b: the hybrid's keys (interval 4, conv 4, 16 x 128 Q/K and V heads, RoPE on 64 of 256)" \
    test "$(jq -c '.metadata | [.["qwen35.full_attention_interval"], .["qwen35.ssm.conv_kernel"], .["qwen35.ssm.state_size"], .["qwen35.ssm.group_count"], .["qwen35.ssm.time_step_rank"], .["qwen35.ssm.inner_size"], .["qwen35.rope.dimension_count"], .["qwen35.attention.key_length"], .["tokenizer.ggml.pre"]]' "$tmp/ours.json")" \
    = '[4,4,128,16,16,2048,64,256,"qwen35"]'
check "qwen3.5-0.8b: 18 delta-net blocks of 14 tensors, 6 attention blocks of 11, no output.weight" \
    test "$(jq -c '[([.tensors[] | select(.name | test("\\.ssm_a$"))] | length), ([.tensors[] | select(.name | test("\\.attn_q\\.weight$"))] | length), (.tensors | length), ([.tensors[] | select(.name == "output.weight")] | length)]' "$tmp/ours.json")" \
    = '[18,6,320,0]'
check "qwen3.5-0.8b q4_k_m: token_embd Q6_K, the convolution and 1-D tensors F32, attn_q gated {1024, 4096}" \
    test "$(jq -c '[.tensors[] | select(.name == "token_embd.weight" or .name == "blk.0.ssm_conv1d.weight" or .name == "blk.0.ssm_a" or .name == "blk.3.attn_q.weight") | [.name, .type, .shape]]' "$tmp/ours.json")" \
    = '[["token_embd.weight","q6_k",[1024,248320]],["blk.0.ssm_a","f32",[16]],["blk.0.ssm_conv1d.weight","f32",[4,6144]],["blk.3.attn_q.weight","q4_k",[1024,4096]]]'
capture "$SYNAPSE" run -m "$tmp/big.gguf" -p "Hello" -n 2 --temp 0 --json
check "run accepts the qwen3.5-0.8b model" test "$rc" -eq 0 -a "$(jq '.generated_ids | length' "$tmp/out")" -eq 2

# Llama 3.2 1B with tests/data/arch's 432-token llama-bpe vocabulary, padded to 128256.
check "gen-model llama3.2-1b" gen_preset llama3.2-1b 1 q8_0 tests/data/arch/llama-s5-q8_0.gguf "$tmp/big.gguf"
"$SYNAPSE" inspect -m "$tmp/big.gguf" --json >"$tmp/ours.json"
check "llama3.2-1b: Llama 3.2 1B's hyperparameters" \
    test "$(jq -c '.hparams | del(.name, .weight_bytes)' "$tmp/ours.json")" = "$hp_llama"
check "llama3.2-1b: rope_freqs [32], no output.weight, no biases" \
    test "$(jq -c '[.tensors[] | select(.name | test("^rope|^output|bias")) | [.name, .shape]]' "$tmp/ours.json")" \
    = '[["rope_freqs.weight",[32]],["output_norm.weight",[2048]]]'
check "llama3.2-1b: llama.vocab_size, rope.dimension_count and the llama-bpe pre-tokenizer" \
    test "$(jq -c '.metadata | [.["llama.vocab_size"], .["llama.rope.dimension_count"], .["tokenizer.ggml.pre"]]' "$tmp/ours.json")" \
    = '[128256,64,"llama-bpe"]'
capture "$SYNAPSE" detokenize -m "$tmp/big.gguf" --tokens 431,432,128255
check "the vocabulary is padded with [PADn] tokens after the source's own" test "$(cat "$tmp/out")" = "<|im_end|>[PAD432][PAD128255]"
capture "$SYNAPSE" tokenize -m "$tmp/big.gguf" --text "Hello [PAD432] <|im_start|>"
check "... which the tokenizer never produces from text" \
    test "$(cat "$tmp/out")" = "$("$SYNAPSE" tokenize -m tests/data/arch/llama-s5-q8_0.gguf --text "Hello [PAD432] <|im_start|>")"
capture "$SYNAPSE" run -m "$tmp/big.gguf" -p "Hello" -n 2 --temp 0 --json
check "run accepts the llama3.2-1b model" test "$rc" -eq 0 -a "$(jq '.generated_ids | length' "$tmp/out")" -eq 2
if command -v python3 >/dev/null; then
    check "pad tokens are UNUSED (5); rope_freqs are Llama 3's factors (32, 1, 4, 8192, base 500000)" \
        python3 - "$tmp/big.gguf" <<'EOF'
import math, struct, sys

data = open(sys.argv[1], "rb").read()
off = 8
n_tensors, n_kv = struct.unpack_from("<QQ", data, off); off += 16
def string():
    global off
    (n,) = struct.unpack_from("<Q", data, off); off += 8 + n
    return data[off - n:off].decode()
def value(t):
    global off
    if t == 8: return string()
    if t == 9:
        et, n = struct.unpack_from("<IQ", data, off); off += 12
        return [value(et) for _ in range(n)]
    fmt = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}[t]
    (v,) = struct.unpack_from("<" + fmt, data, off); off += struct.calcsize(fmt)
    return v
kv = {}
for _ in range(n_kv):
    k = string(); (t,) = struct.unpack_from("<I", data, off); off += 4; kv[k] = value(t)
tensors = {}
for _ in range(n_tensors):
    name = string(); (nd,) = struct.unpack_from("<I", data, off); off += 4
    ne = struct.unpack_from("<%dQ" % nd, data, off); off += 8 * nd
    t, o = struct.unpack_from("<IQ", data, off); off += 12
    tensors[name] = o
base = (off + 31) // 32 * 32

types, tokens = kv["tokenizer.ggml.token_type"], kv["tokenizer.ggml.tokens"]
assert len(types) == len(tokens) == 128256, (len(types), len(tokens))
assert all(t == 5 for t in types[432:]) and 5 not in types[:432], "pad token types"
assert all(tokens[i] == "[PAD%d]" % i for i in range(432, 128256)), "pad token names"

want = []
for i in range(0, 64, 2):
    wavelen = 2 * math.pi * 500000.0 ** (i / 64)
    if wavelen < 8192 / 4: want.append(1.0)
    elif wavelen > 8192 / 1: want.append(32.0)
    else:
        smooth = (8192 / wavelen - 1) / (4 - 1)
        want.append(1 / ((1 - smooth) / 32 + smooth))
got = struct.unpack_from("<32f", data, base + tensors["rope_freqs.weight"])
want = [struct.unpack("<f", struct.pack("<f", w))[0] for w in want]
assert list(got) == want, (got, want)
EOF
else
    echo "skipped: the padding and RoPE factor checks need python3"
fi
rm -f "$tmp/big.gguf"
# A vocabulary larger than the preset's cannot be padded: refused.
expect_exit 1 "llama3.2-1b with Qwen's 151936-token vocabulary" \
    "$SYNAPSE" gen-model --preset llama3.2-1b --seed 1 --tokenizer-from "$TINY_Q8" -o "$tmp/x.gguf"
expect_error_mentions "more than preset llama3.2-1b's vocabulary of 128256" "the sizes are named"
check "... and no file is written" test ! -e "$tmp/x.gguf"

# Writing into a directory that does not exist is a runtime error naming the path.
expect_exit 1 "gen-model into a missing directory" \
    "$SYNAPSE" gen-model --preset tiny --seed 1 --tokenizer-from "$TINY_Q8" -o "$tmp/no/such/dir/m.gguf"
expect_error_mentions "$tmp/no/such/dir/m.gguf" "the unwritable path is named"
# A tokenizer whose vocabulary does not match the preset is refused.
expect_exit 1 "gen-model with a model that has no tokenizer vocabulary" \
    "$SYNAPSE" gen-model --preset tiny --seed 1 --tokenizer-from tests/data/llamacpp-greedy-tiny.json -o "$tmp/x.gguf"

# The output is written to a fresh temporary file beside -o, then renamed over it.
mkdir "$tmp/dest"
echo "victim" >"$tmp/victim"
ln -s "$tmp/victim" "$tmp/dest/m.gguf.partial" # the temporary name of old: never written through
check "gen-model with a link planted at the old temporary name" gen 1 q8_0 "$tmp/dest/m.gguf"
check "... leaves the link's target untouched" test "$(cat "$tmp/victim")" = victim
check "... and writes the model" cmp -s "$tmp/dest/m.gguf" "$tmp/a.gguf"
check "... leaving no temporary file behind" test -z "$(find "$tmp/dest" -name '.*')"
# An -o that exists and is not a regular file is refused and left as it is.
ln -s "$tmp/victim" "$tmp/dest/link.gguf"
expect_exit 1 "-o a symbolic link" gen 1 q8_0 "$tmp/dest/link.gguf"
expect_error_mentions "'$tmp/dest/link.gguf' is a symbolic link" "the link is named"
check "... which is still a link to the untouched target" \
    test -L "$tmp/dest/link.gguf" -a "$(cat "$tmp/victim")" = victim
mkfifo "$tmp/dest/fifo"
expect_exit 1 "-o a FIFO" gen 1 q8_0 "$tmp/dest/fifo"
expect_error_mentions "is a FIFO" "the FIFO is named as one"
check "... which is still a FIFO" test -p "$tmp/dest/fifo"
if mknod "$tmp/dest/null" c 1 3 2>/dev/null; then
    expect_exit 1 "-o a character device" gen 1 q8_0 "$tmp/dest/null"
    check "... which is still the device" test -c "$tmp/dest/null"
else
    echo "skip: mknod is not permitted here (the character-device check needs it)"
fi
expect_exit 1 "-o a directory" gen 1 q8_0 "$tmp/dest"
# Two runs to one -o at once each write their own temporary file: the result is one whole model,
# byte for byte one of the two.
gen 1 q8_0 "$tmp/dest/both.gguf" &
gen 2 q8_0 "$tmp/dest/both.gguf" &
rc1=0 rc2=0
wait %1 || rc1=$?
wait %2 || rc2=$?
check "two concurrent runs to one -o both succeed" test "$rc1" -eq 0 -a "$rc2" -eq 0
check "... and leave exactly one of the two models" \
    bash -c 'cmp -s "$0" "$1" || cmp -s "$0" "$2"' "$tmp/dest/both.gguf" "$tmp/a.gguf" "$tmp/c.gguf"
check "... and no temporary file" test -z "$(find "$tmp/dest" -name '.*')"

finish
