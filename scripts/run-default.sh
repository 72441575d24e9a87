#!/usr/bin/env bash
# run-default.sh: the last step of `make run`. Generates the default model (random weights in the
# exact shape of Qwen2.5-0.5B-Instruct Q8_0, with the real Qwen2.5 tokenizer) when it is absent,
# then continues a sample prompt with it. The text is gibberish by design: the weights are random.
# A real model runs the same way: build/synapse run -m qwen2.5-0.5b-instruct-q8_0.gguf -p "..."
set -euo pipefail
cd "$(dirname "$0")/.."

synapse=${SYNAPSE:-build/synapse}
model=models/qwen2.5-0.5b-synth-q8_0.gguf
prompt="The capital of France is"

if [ ! -f "$model" ]; then
    mkdir -p models
    gen=("$synapse" gen-model --preset qwen2.5-0.5b --seed 1 --tokenizer-from tests/data/qwen2-tiny-synth-q8_0.gguf -o "$model")
    printf 'run-default: generating the default model:'; printf ' %q' "${gen[@]}"; echo
    "${gen[@]}"
else
    echo "run-default: using $model (delete it to regenerate)"
fi

run=("$synapse" run -m "$model" -p "$prompt" -n 32)
printf 'run-default:'; printf ' %q' "${run[@]}"; echo "   (random weights: expect gibberish)"
"${run[@]}"
echo
