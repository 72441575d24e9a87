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
