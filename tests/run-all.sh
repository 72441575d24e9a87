#!/usr/bin/env bash
# Runs every test suite and ends with one summary line: "N passed, N failed".
#   1. unit tests (cmocka), release build          build/tests/test_*
#   2. the same unit tests under ASan + UBSan       build-debug/tests/test_*
#   3. command-line tests                           tests/cli/test_*.sh (against build/synapse)
#   (each two at a time, but the scripts that measure time or load)
#   0. the source layout (make format-check)
#   4. the GGUF reader, the server's request parser, the tokenizer, the model output reader and the
#      template engine fuzzed for a bounded time
#      (libFuzzer)
# Counts are per test case for cmocka suites and per script for the rest.
set -uo pipefail
cd "$(dirname "$0")/.."

passed=0
failed=0
skipped=0
failures=()
log_dir=$(mktemp -d)
trap 'rm -rf "$log_dir"' EXIT

record() { # name status
    if [ "$2" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$1"); fi
}

# cmocka_start BINARY LABEL: runs the binary in the background; its output and "status seconds"
# land in the log directory for cmocka_report.
cmocka_start() {
    local out="$log_dir/$(basename "$1").$2"
    (
        local start=$SECONDS
        "$1" >"$out.log" 2>&1
        echo "$? $((SECONDS - start))" >"$out.rc"
    ) &
}

# cmocka_report BINARY LABEL: adds a finished binary's counts to the totals.
cmocka_report() {
    local bin=$1 label=$2 log="$log_dir/$(basename "$1").$2.log" rc secs p f
    read -r rc secs <"$log_dir/$(basename "$1").$2.rc"
    # a binary may run several groups, each ending with its own summary lines
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{n += $1} END {print n + 0}')
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{n += $1} END {print n + 0}')
    p=${p:-0}; f=${f:-0}
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi # crashed before cmocka's summary
    passed=$((passed + p)); failed=$((failed + f))
    printf '%-6s %-40s %3d passed %3d failed  (%ds)\n' "$label" "$(basename "$bin")" "$p" "$f" "$secs"
    if [ "$f" -ne 0 ]; then failures+=("$label/$(basename "$bin")"); cat "$log"; fi
}

# The source layout: every C file as clang-format 14 lays it out with .clang-format.
start=$SECONDS
if make -s format-check >"$log_dir/format.log" 2>&1; then
    record format/clang-format 0
    printf '%-6s %-40s %s  (%ds)\n' format "make format-check" ok $((SECONDS - start))
else
    record format/clang-format 1
    printf '%-6s %-40s %s\n' format "make format-check" FAILED
    grep -m 20 'warning:' "$log_dir/format.log"
fi

# The unit tests two at a time, one per core of the machines CI runs on (their few timings are
# bounds far above what a shared core gives), the release build first and then the sanitizer build,
# where they are the slowest part of the run.
for build in build build-debug; do
    label=$([ "$build" = build ] && echo unit || echo asan)
    bins=()
    for t in "$build"/tests/test_*; do
        [ -x "$t" ] || continue
        bins+=("$t")
        cmocka_start "$t" "$label"
        [ "$(jobs -rp | wc -l)" -lt 2 ] || wait -n
    done
    wait
    for t in "${bins[@]}"; do cmocka_report "$t" "$label"; done
done

# cli_start SCRIPT: runs a command-line test in the background, its output and "status seconds"
# in the log directory for cli_report.
cli_start() {
    local out="$log_dir/$(basename "$1")"
    (
        local start=$SECONDS
        SYNAPSE=build/synapse bash "$1" >"$out.log" 2>&1
        echo "$? $((SECONDS - start))" >"$out.rc"
    ) &
}

cli_report() { # SCRIPT
    local log="$log_dir/$(basename "$1").log" rc secs
    read -r rc secs <"$log_dir/$(basename "$1").rc"
    if [ "$rc" -eq 77 ]; then # the script's own "skipped" (e.g. an optional real model not given)
        skipped=$((skipped + 1))
        printf '%-6s %-40s %s\n' cli "$(basename "$1")" "skipped ($(tail -n1 "$log"))"
        return
    fi
    record "cli/$(basename "$1")" "$rc"
    printf '%-6s %-40s %s  (%ds)\n' cli "$(basename "$1")" "$([ "$rc" -eq 0 ] && echo ok || echo FAILED)" "$secs"
    [ "$rc" -eq 0 ] || cat "$log"
}

# Scripts that measure time or load (a bench, the server under load, timeouts of the cluster)
# run one at a time, after the others, which run two at a time (each server on a port of its own).
timed=(tests/cli/test_cli_bench.sh tests/cli/test_cli_memory.sh tests/cli/test_serve_load.sh
    tests/cli/test_cluster.sh)
untimed=()
for t in tests/cli/test_*.sh; do
    [[ " ${timed[*]} " == *" $t "* ]] || untimed+=("$t")
done
for t in "${untimed[@]}"; do
    cli_start "$t"
    [ "$(jobs -rp | wc -l)" -lt 2 ] || wait -n
done
wait
for t in "${untimed[@]}"; do cli_report "$t"; done
for t in "${timed[@]}"; do
    cli_start "$t"
    wait
    cli_report "$t"
done

# fuzz_start LABEL NAME SEED_DIR SECONDS MAX_LEN: one libFuzzer target in the background for a
# bounded time, on a copy of its seed corpus; its log and "status seconds" go to the log directory
# under LABEL. At most two run at once (the machines CI runs on have two cores).
fuzz_labels=()
fuzz_start() {
    local label=$1 name=$2 seeds=$3 seconds=$4 max_len=$5
    fuzz_labels+=("$label")
    (
        local start=$SECONDS corpus rc
        corpus=$(mktemp -d)
        cp -r "$seeds"/. "$corpus/"
        build-fuzz/"$name" -max_total_time="$seconds" -max_len="$max_len" -rss_limit_mb=2048 \
            "$corpus" >"$log_dir/fuzz.$label.log" 2>&1
        rc=$?
        rm -rf "$corpus"
        echo "$rc $((SECONDS - start))" >"$log_dir/fuzz.$label.rc"
    ) &
    [ "$(jobs -rp | wc -l)" -lt 2 ] || wait -n
}

fuzz_report() { # LABEL
    local rc secs
    read -r rc secs <"$log_dir/fuzz.$1.rc"
    record "fuzz/$1" "$rc"
    printf '%-6s %-40s %s  (%ds)\n' fuzz "$1" "$([ "$rc" -eq 0 ] && echo ok || echo FAILED)" "$secs"
    [ "$rc" -eq 0 ] || tail -n 40 "$log_dir/fuzz.$1.log"
}

if command -v clang >/dev/null; then
    if make -s fuzz >"$log_dir/fuzz-build.log" 2>&1; then
        # The GGUF reader, seeded with a ~20 KB valid qwen2 model (tests/tools/make_bad_gguf --seed
        # writes it): small enough for -max_len, complete enough to reach the model binding and
        # tokenizer.
        gguf_seeds=$(mktemp -d)
        cp tests/data/fuzz-seed.gguf "$gguf_seeds/"
        fuzz_start fuzz_gguf fuzz_gguf "$gguf_seeds" "${SYNAPSE_FUZZ_SECONDS:-25}" 65536
        # The server's request parser (JSON body -> engine request), seeded with valid bodies.
        fuzz_start fuzz_openai_request fuzz_openai_request tests/fuzz/openai-seeds \
            "${SYNAPSE_FUZZ_SECONDS:-15}" 8192
        # The tokenizer (text -> ids -> text, checked against utf8proc), seeded with the texts of
        # tests/data/qwen2-tokenizer-cases.json.
        fuzz_start fuzz_tokenizer fuzz_tokenizer tests/fuzz/tokenizer-seeds \
            "${SYNAPSE_FUZZ_SECONDS:-10}" 4096
        # The same texts through Gemma 3's SentencePiece vocabulary (a vocabulary-only file).
        SYNAPSE_FUZZ_MODEL=tests/data/vocab/npm-gemma3-spm.vocab.gguf \
            fuzz_start fuzz_tokenizer_spm fuzz_tokenizer tests/fuzz/tokenizer-seeds \
            "${SYNAPSE_FUZZ_SECONDS:-6}" 4096
        fuzz_start fuzz_chat_output fuzz_chat_output tests/fuzz/chat-output-seeds \
            "${SYNAPSE_FUZZ_SECONDS:-6}" 4096
        fuzz_start fuzz_template fuzz_template tests/data/templates "${SYNAPSE_FUZZ_SECONDS:-12}" 65536
        wait
        rm -rf "$gguf_seeds"
        for label in "${fuzz_labels[@]}"; do fuzz_report "$label"; done
    else
        record fuzz/build 1
        printf '%-6s %-40s %s\n' fuzz "make fuzz" FAILED
        tail -n 40 "$log_dir/fuzz-build.log"
    fi
fi

if [ ${#failures[@]} -gt 0 ]; then echo "failed: ${failures[*]}"; fi
echo "$passed passed, $failed failed$([ "$skipped" -gt 0 ] && echo ", $skipped skipped")"
[ "$failed" -eq 0 ]
