#!/usr/bin/env bash
# Usage errors exit 2 and runtime errors exit 1, each with one "synapse: error:" line naming the
# cause; --help prints usage on stdout with exit 0.
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

M=$TINY_Q8

# --- help ------------------------------------------------------------------------------------
for args in "--help" "help" "-h" "run --help" "eval --help" "tokenize --help" "detokenize --help" \
    "inspect --help" "chat --help" "gen-model --help" "bench --help" "run -m $M -p x --help" "help run" \
    "help gen-model" "help bench"; do
    # shellcheck disable=SC2086
    capture "$SYNAPSE" $args
    if [ "$rc" -eq 0 ] && grep -q 'synapse' "$tmp/out" && [ ! -s "$tmp/err" ]; then
        ok "synapse $args prints usage"
    else
        fail "synapse $args: exit $rc, stdout $(wc -c <"$tmp/out") bytes, stderr: $(head -c 200 "$tmp/err")"
    fi
done
capture "$SYNAPSE" run --help
check "run --help documents every option of the CLI form" \
    bash -c 'for o in -m -p -f --tokens -n -t -c --temp --top-k --top-p --min-p --repeat-penalty --seed --chat --system --ignore-eos --backend --isa --kv-type --json; do grep -q -- "$o" "$1" || exit 1; done' _ "$tmp/out"
for cmd in eval chat bench; do
    capture "$SYNAPSE" $cmd --help
    check "$cmd --help documents --backend, --isa and --kv-type" \
        bash -c 'for o in --backend --isa --kv-type; do grep -q -- "$o" "$1" || exit 1; done' _ "$tmp/out"
done
capture "$SYNAPSE" bench --help
check "bench --help documents every option" \
    bash -c 'for o in -m -t -p -n -d -r -c --e2e --json; do grep -q -- " $o" "$1" || exit 1; done' _ "$tmp/out"
check "bench --help documents --concurrent" grep -q -- " --concurrent LIST" "$tmp/out"
check "bench --help documents --json-schema" grep -q -- " --json-schema FILE" "$tmp/out"
capture "$SYNAPSE" run --help
check "run --help documents the concurrent form and its options" \
    bash -c 'for o in --concurrent-requests --parallel --kv-budget "--- request I (line L, FINISH, K tokens)"; do grep -qF -- "$o" "$1" || exit 1; done' _ "$tmp/out"
capture "$SYNAPSE" --help
check "the overall usage lists bench" grep -q "synapse bench" "$tmp/out"

# --- usage errors (exit 2) ---------------------------------------------------------------------
expect_exit 2 "no command" "$SYNAPSE"
expect_exit 2 "unknown command" "$SYNAPSE" frobnicate
expect_error_mentions "frobnicate" "unknown command is named"
expect_exit 2 "help on an unknown command" "$SYNAPSE" help frobnicate
expect_exit 2 "unknown option" "$SYNAPSE" run -m "$M" -p x --bogus
expect_error_mentions "--bogus" "unknown option is named"
expect_exit 2 "stray argument" "$SYNAPSE" run -m "$M" -p x extra
expect_exit 2 "--no-huge-pages takes no value" "$SYNAPSE" run -m "$M" -p x --no-huge-pages=1
expect_error_mentions "--no-huge-pages=1" "the malformed flag is named"
expect_exit 2 "--no-interleave takes no value" "$SYNAPSE" run -m "$M" -p x --no-interleave=1
expect_error_mentions "--no-interleave=1" "the malformed flag is named"
expect_exit 2 "--no-huge-pages on inspect (which always maps 4 KiB pages)" "$SYNAPSE" inspect -m "$M" --no-huge-pages
expect_exit 2 "-n abc" "$SYNAPSE" run -m "$M" -p x -n abc
expect_error_mentions "-n" "-n abc names the option"
expect_exit 2 "-n 12x" "$SYNAPSE" run -m "$M" -p x -n 12x
expect_exit 2 "-n -1" "$SYNAPSE" run -m "$M" -p x -n -1
expect_exit 2 "-n with no value" "$SYNAPSE" run -m "$M" -p x -n
expect_exit 2 "-n 99999999999999999999" "$SYNAPSE" run -m "$M" -p x -n 99999999999999999999
expect_exit 2 "missing -m" "$SYNAPSE" run -p x
expect_error_mentions "-m" "missing -m is named"
expect_exit 2 "--temp -1" "$SYNAPSE" run -m "$M" -p x --temp -1
expect_exit 2 "--temp nan" "$SYNAPSE" run -m "$M" -p x --temp nan
expect_exit 2 "--temp inf" "$SYNAPSE" run -m "$M" -p x --temp inf
expect_exit 2 "--top-p 2" "$SYNAPSE" run -m "$M" -p x --top-p 2
expect_exit 2 "--top-p 0" "$SYNAPSE" run -m "$M" -p x --top-p 0
expect_exit 2 "--min-p 1.5" "$SYNAPSE" run -m "$M" -p x --min-p 1.5
expect_exit 2 "--top-k -1" "$SYNAPSE" run -m "$M" -p x --top-k -1
expect_exit 2 "--repeat-penalty 0" "$SYNAPSE" run -m "$M" -p x --repeat-penalty 0
expect_exit 2 "--seed -1" "$SYNAPSE" run -m "$M" -p x --seed -1
expect_exit 2 "--seed 1.5" "$SYNAPSE" run -m "$M" -p x --seed 1.5
expect_exit 2 "-t abc" "$SYNAPSE" run -m "$M" -p x -t abc
expect_exit 2 "-c 0" "$SYNAPSE" run -m "$M" -p x -c 0
expect_exit 2 "--backend foo" "$SYNAPSE" run -m "$M" -p x --backend foo
# An unknown tier name is a usage error for every command that makes a context (whether this CPU
# has a known tier is a runtime question: see test_cli_run.sh).
expect_exit 2 "run --isa avx9000" "$SYNAPSE" run -m "$M" -p x --isa avx9000
expect_error_mentions "avx9000" "the unknown tier is named"
expect_exit 2 "eval --isa avx9000" "$SYNAPSE" eval -m "$M" --tokens 1 --isa avx9000
expect_exit 2 "chat --isa avx9000" "$SYNAPSE" chat -m "$M" --isa avx9000
expect_exit 2 "bench --isa avx9000" "$SYNAPSE" bench -m "$M" --isa avx9000
expect_exit 2 "--isa '' (empty)" "$SYNAPSE" run -m "$M" -p x --isa ""
expect_exit 2 "--isa AVX2 (names are lower case)" "$SYNAPSE" run -m "$M" -p x --isa AVX2
expect_exit 2 "--isa with no value" "$SYNAPSE" run -m "$M" -p x --isa
expect_exit 2 "--kv-type q8_0" "$SYNAPSE" run -m "$M" -p x --kv-type q8_0
expect_error_mentions "q8_0" "the unknown KV type is named"
expect_exit 2 "eval --backend foo" "$SYNAPSE" eval -m "$M" --tokens 1 --backend foo
expect_exit 2 "unknown bench option" "$SYNAPSE" bench -m "$M" --bogus
expect_exit 2 "both -p and -f" "$SYNAPSE" run -m "$M" -p x -f "$M"
expect_exit 2 "both -p and --tokens" "$SYNAPSE" run -m "$M" -p x --tokens 1,2
expect_exit 2 "no prompt" "$SYNAPSE" run -m "$M"
expect_exit 2 "--tokens 1,,2" "$SYNAPSE" run -m "$M" --tokens 1,,2
expect_exit 2 "--tokens x" "$SYNAPSE" run -m "$M" --tokens x
expect_exit 2 "--tokens ''" "$SYNAPSE" run -m "$M" --tokens ""
expect_exit 2 "--tokens 1,2," "$SYNAPSE" run -m "$M" --tokens 1,2,
expect_exit 2 "--tokens -1" "$SYNAPSE" run -m "$M" --tokens -1
expect_exit 2 "--tokens '1, 2'" "$SYNAPSE" run -m "$M" --tokens "1, 2"
expect_exit 2 "--tokens 4294967296" "$SYNAPSE" run -m "$M" --tokens 4294967296
expect_exit 2 "--system without --chat" "$SYNAPSE" run -m "$M" -p x --system s
expect_exit 2 "--chat with --tokens" "$SYNAPSE" run -m "$M" --tokens 1 --chat
expect_exit 2 "usage is checked before the model is loaded" "$SYNAPSE" run -m /nonexistent.gguf -p x -n abc
expect_exit 2 "eval without --tokens" "$SYNAPSE" eval -m "$M" --json
expect_exit 2 "eval --top 0" "$SYNAPSE" eval -m "$M" --tokens 1 --top 0
expect_exit 2 "eval takes no sampling options" "$SYNAPSE" eval -m "$M" --tokens 1 --temp 0
expect_exit 2 "tokenize without text" "$SYNAPSE" tokenize -m "$M"
expect_exit 2 "tokenize with --text and -f" "$SYNAPSE" tokenize -m "$M" --text a -f "$M"
expect_exit 2 "detokenize without --tokens" "$SYNAPSE" detokenize -m "$M"
expect_exit 2 "inspect without -m" "$SYNAPSE" inspect
expect_exit 2 "chat unknown option" "$SYNAPSE" chat -m "$M" --json
expect_exit 2 "gen-model unknown preset" "$SYNAPSE" gen-model --preset huge --seed 1 --tokenizer-from "$M" -o "$tmp/x.gguf"
expect_exit 2 "gen-model unknown type" "$SYNAPSE" gen-model --preset tiny --seed 1 --type q2_k --tokenizer-from "$M" -o "$tmp/x.gguf"
expect_exit 2 "gen-model without -o" "$SYNAPSE" gen-model --preset tiny --seed 1 --tokenizer-from "$M"
expect_exit 2 "gen-model without --seed" "$SYNAPSE" gen-model --preset tiny --tokenizer-from "$M" -o "$tmp/x.gguf"
# Values the parser once took and the library then refused (exit 1): usage errors naming the value
# as typed and what is accepted.
for t in 257 1024; do
    expect_exit 2 "-t $t (the thread pool takes at most 256)" "$SYNAPSE" run -m "$M" -p x -n 1 -t "$t"
    expect_error_mentions "$t is out of range [0, 256]" "-t $t: the value and the range are named"
done
expect_exit 2 "eval -t 300" "$SYNAPSE" eval -m "$M" --tokens 1 -t 300
expect_exit 2 "bench -t 1,257" "$SYNAPSE" bench -m "$M" -t 1,257
expect_error_mentions "[1, 256]" "bench -t: the range is named"
expect_exit 0 "-t 256 is accepted" "$SYNAPSE" run -m "$M" -p x -n 1 -t 256
expect_exit 2 "--chat-template (the old option) is unknown" "$SYNAPSE" run -m "$M" --chat -p x -n 1 --chat-template chatml
expect_exit 1 "--chat-template-file of a missing file" "$SYNAPSE" run -m "$M" --chat -p x -n 1 --chat-template-file /nonexistent/t.jinja
expect_error_mentions "/nonexistent/t.jinja" "the missing file is named"
expect_exit 1 "chat --chat-template-file of a missing file" "$SYNAPSE" chat -m "$M" --chat-template-file /nonexistent/t.jinja </dev/null
expect_exit 2 "--top-p 1e-50 (0 as a float)" "$SYNAPSE" run -m "$M" -p x -n 1 --top-p 1e-50
expect_error_mentions "--top-p: 1e-50 is out of range (0, 1]" "--top-p 1e-50: the value as typed and the range"
expect_exit 2 "--repeat-penalty 1e-50 (0 as a float)" "$SYNAPSE" run -m "$M" -p x -n 1 --repeat-penalty 1e-50
expect_exit 0 "--top-p 1e-30 (a float above 0) is accepted" "$SYNAPSE" run -m "$M" -p x -n 1 --top-p 1e-30

# --- runtime errors (exit 1) -------------------------------------------------------------------
expect_exit 1 "missing model file" "$SYNAPSE" run -m "$tmp/missing.gguf" -p x
expect_error_mentions "cannot load '$tmp/missing.gguf'" "missing model file is named"
for cmd in "inspect" "tokenize --text x" "detokenize --tokens 1" "eval --tokens 1"; do
    # shellcheck disable=SC2086
    expect_exit 1 "$cmd on a missing model file" "$SYNAPSE" $cmd -m "$tmp/missing.gguf"
done
echo "not a model" >"$tmp/text.gguf"
expect_exit 1 "a file that is not GGUF" "$SYNAPSE" inspect -m "$tmp/text.gguf"
expect_exit 1 "token id outside the vocabulary (run)" "$SYNAPSE" run -m "$M" --tokens 1,151936 -n 1
expect_error_mentions "151936" "out-of-vocabulary id is named"
expect_exit 1 "token id outside the vocabulary (eval)" "$SYNAPSE" eval -m "$M" --tokens 999999
expect_exit 1 "token id outside the vocabulary (detokenize)" "$SYNAPSE" detokenize -m "$M" --tokens 5,2147483647
expect_exit 1 "missing prompt file" "$SYNAPSE" run -m "$M" -f "$tmp/missing.txt"
expect_error_mentions "$tmp/missing.txt" "missing prompt file is named"
: >"$tmp/empty.txt"
expect_exit 1 "empty prompt" "$SYNAPSE" run -m "$M" -f "$tmp/empty.txt"
expect_exit 1 "prompt longer than -c" "$SYNAPSE" run -m "$M" --tokens 1,2,3,4,5 -c 2 -n 1
expect_exit 1 "-c above the training context" "$SYNAPSE" run -m "$M" --tokens 1 -c 40000 -n 1
expect_exit 1 "gen-model with a tokenizer file that is not GGUF" \
    "$SYNAPSE" gen-model --preset tiny --seed 1 --tokenizer-from "$tmp/text.gguf" -o "$tmp/x.gguf"
check "a failed gen-model leaves no output file" test ! -e "$tmp/x.gguf"

# The optimized backend either works or says why not (exit 1), never a silent fallback.
capture "$SYNAPSE" run -m "$M" --tokens 785,6722 -n 2 --temp 0 --backend optimized --json
if [ "$rc" -eq 0 ]; then
    check "--backend optimized reports itself" grep -q '"backend": "optimized"' "$tmp/out"
else
    check "--backend optimized unavailable: exit 1 with one error line" \
        bash -c '[ "$0" -eq 1 ] && [ "$(wc -l <"$1")" -eq 1 ] && grep -q "^synapse: error: " "$1"' "$rc" "$tmp/err"
fi

finish
