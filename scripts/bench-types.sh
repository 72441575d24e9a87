#!/bin/sh
# Issue 12's speed figures: `synapse bench` on the Qwen2.5-0.5B, Qwen3-0.6B and Llama-3.2-1B shaped
# synthetic models in Q8_0 and in llama-quantize's Q4_K_M mix (written into models/ by
# `synapse gen-model` when missing), ROUNDS rounds that take the files in turn, so that background
# load falls on each alike. Each bench call measures the host's bandwidth and int8 peak in the same
# run. Usage: scripts/bench-types.sh [ROUNDS] (default 2); THREADS=1,2 by default.
set -eu
rounds=${1:-2}
threads=${THREADS:-1,2}
files=""
for preset in qwen2.5-0.5b qwen3-0.6b llama3.2-1b; do
    # the Llama 3 vocabulary (128256) is larger than Qwen's tokenizer: take the small llama-bpe
    # one, padded by gen-model
    case $preset in
    llama*) tok=tests/data/arch/llama-s5-q8_0.gguf ;;
    *) tok=tests/data/qwen2-tiny-synth-q8_0.gguf ;;
    esac
    for type in q8_0 q4_k_m; do
        f=models/$preset-synth-$type.gguf
        [ -f "$f" ] || build/synapse gen-model --preset "$preset" --seed 1 --type "$type" --tokenizer-from "$tok" -o "$f"
        files="$files $f"
    done
done
for round in $(seq "$rounds"); do
    echo "## round $round ($(date -u +%H:%M:%S) UTC)"
    for f in $files; do
        build/synapse bench -m "$f" -t "$threads" -p 512 -n 64 -r 3 | grep -E '^\| [a-z]|threads:'
    done
done
