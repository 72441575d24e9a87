#!/usr/bin/env bash
# tokenize / detokenize against the llama.cpp and Hugging Face ids of qwen2-tokenizer-cases.json,
# in both special-token modes, through --text and -f; -f keeps a trailing newline.
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

M=$TINY_Q8
n_cases=$(jq '.cases | length' "$TOKENIZER_JSON")
check "the tokenizer table has cases" test "$n_cases" -gt 0

for ((i = 0; i < n_cases; i++)); do
    name=$(jq -r ".cases[$i].name" "$TOKENIZER_JSON")
    jq -j ".cases[$i].text" "$TOKENIZER_JSON" >"$tmp/text"
    text=$(cat "$tmp/text"; printf x) # the x keeps trailing newlines through $(...)
    text=${text%x}
    want_plain=$(jq -c ".cases[$i].ids_no_parse_special" "$TOKENIZER_JSON")
    # Every case has ids_no_parse_special; "ids" (special tokens parsed) when they differ in kind.
    want=$(jq -c ".cases[$i].ids // empty" "$TOKENIZER_JSON")

    if [ -n "$want" ]; then
        capture "$SYNAPSE" tokenize -m "$M" --text "$text" --json
        got=$(jq -c '.ids' "$tmp/out" 2>/dev/null)
        check "$name: tokenize --text --json" test "$rc" -eq 0 -a "$got" = "$want"
        [ "$got" = "$want" ] || echo "  want $want"$'\n'"  got  $got"

        want_csv=$(echo "$want" | jq -r 'map(tostring) | join(",")')
        capture "$SYNAPSE" tokenize -m "$M" -f "$tmp/text"
        check "$name: tokenize -f (comma-separated)" test "$rc" -eq 0 -a "$(cat "$tmp/out")" = "$want_csv"
    fi

    capture "$SYNAPSE" tokenize -m "$M" -f "$tmp/text" --no-parse-special --json
    got=$(jq -c '.ids' "$tmp/out" 2>/dev/null)
    check "$name: tokenize --no-parse-special" test "$rc" -eq 0 -a "$got" = "$want_plain"
    [ "$got" = "$want_plain" ] || echo "  want $want_plain"$'\n'"  got  $got"

    capture "$SYNAPSE" tokenize -m "$M" --text "$text" --no-parse-special
    plain_csv=$(echo "$want_plain" | jq -r 'map(tostring) | join(",")')
    check "$name: tokenize --text --no-parse-special" test "$rc" -eq 0 -a "$(cat "$tmp/out")" = "$plain_csv"

    capture "$SYNAPSE" detokenize -m "$M" --tokens "$plain_csv"
    check "$name: detokenize gives the exact bytes" cmp -s "$tmp/out" "$tmp/text"
done

# -f reads the file's exact bytes: a trailing newline is kept, and is a token of its own here.
printf 'Hello world\n' >"$tmp/nl.txt"
capture "$SYNAPSE" tokenize -m "$M" -f "$tmp/nl.txt"
from_file=$(cat "$tmp/out")
capture "$SYNAPSE" tokenize -m "$M" --text $'Hello world\n'
check "-f with a trailing newline equals --text \$'...\\n'" test -n "$from_file" -a "$from_file" = "$(cat "$tmp/out")"
capture "$SYNAPSE" tokenize -m "$M" --text 'Hello world'
check "the trailing newline is not stripped" test "$from_file" != "$(cat "$tmp/out")"
check "'Hello world\\n' is Hello, ' world', '\\n' (ids 9707,1879,198)" test "$from_file" = "9707,1879,198"

# The same vocabulary in the F32 file gives the same ids.
capture "$SYNAPSE" tokenize -m "$TINY_F32" --text "<|im_start|>user"$'\n'"hi<|im_end|>"
check "F32 model: ChatML specials parse" test "$(cat "$tmp/out")" = "151644,872,198,6023,151645"

# Empty text: no ids, an empty JSON list.
capture "$SYNAPSE" tokenize -m "$M" --text "" --json
check "empty text gives {\"ids\": []}" test "$rc" -eq 0 -a "$(jq -c .ids "$tmp/out")" = "[]"

# Detokenizing a piece of a UTF-8 character writes the raw bytes (no replacement).
capture "$SYNAPSE" tokenize -m "$M" --text "我"
ids=$(cat "$tmp/out")
capture "$SYNAPSE" detokenize -m "$M" --tokens "$ids"
check "detokenize of '我' round-trips" test "$(cat "$tmp/out")" = "我"

# Architectures the engine does not run still tokenize (the tokenizer keys alone are read):
# llama-tokenize's ids for gemma3 and phi3 (SentencePiece) and qwen35 (byte-level BPE), and back.
for arch in gemma3 phi3 qwen35; do
    cases=tests/data/arch2/$arch-s5.tokenize.json
    gguf=tests/data/arch2/$arch-s5-q4_k_m.gguf
    n=$(jq '.cases | length' "$cases")
    matched=0
    for ((i = 0; i < n; i++)); do
        jq -j ".cases[$i].text" "$cases" >"$tmp/text"
        capture "$SYNAPSE" tokenize -m "$gguf" -f "$tmp/text" --json
        [ "$rc" -eq 0 ] && [ "$(jq -c .ids "$tmp/out")" = "$(jq -c ".cases[$i].ids" "$cases")" ] &&
            matched=$((matched + 1))
    done
    check "$arch: tokenize gives llama.cpp's ids for all $n cases" test "$matched" -eq "$n"
    printf ' Hello  world\n\tdone ' >"$tmp/text"
    capture "$SYNAPSE" tokenize -m "$gguf" -f "$tmp/text"
    capture "$SYNAPSE" detokenize -m "$gguf" --tokens "$(cat "$tmp/out")"
    check "$arch: detokenize gives the text back" cmp -s "$tmp/out" "$tmp/text"
done

# Vocabulary-only files (no tensors) through the command line: the first 12 cases of a
# SentencePiece and a GPT-2 suite, read as text (llama-tokenize --no-parse-special), and
# llama_detokenize's text back (test_tokenizer_suites checks every case of all eight).
for name in ggml-vocab-llama-spm ggml-vocab-gpt-2; do
    cases=tests/data/vocab/$name.tokenize.json
    n=12
    matched=0
    decoded=0
    for ((i = 0; i < n; i++)); do
        jq -j ".cases[$i].text" "$cases" >"$tmp/text"
        capture "$SYNAPSE" tokenize -m "tests/data/vocab/$name.gguf" -f "$tmp/text" --no-parse-special --json
        want=$(jq -c ".cases[$i].ids" "$cases")
        [ "$rc" -eq 0 ] && [ "$(jq -c .ids "$tmp/out")" = "$want" ] && matched=$((matched + 1))
        jq -j ".cases[$i].detok" "$cases" >"$tmp/want"
        if [ "$want" = "[]" ]; then
            [ -s "$tmp/want" ] || decoded=$((decoded + 1)) # detokenize needs ids; none decode to ""
            continue
        fi
        capture "$SYNAPSE" detokenize -m "tests/data/vocab/$name.gguf" --tokens "$(echo "$want" | jq -r 'map(tostring) | join(",")')"
        cmp -s "$tmp/out" "$tmp/want" && decoded=$((decoded + 1))
    done
    check "$name (vocabulary only): llama.cpp's ids for all $n cases" test "$matched" -eq "$n"
    check "$name (vocabulary only): llama.cpp's decoding for all $n cases" test "$decoded" -eq "$n"
done

finish
