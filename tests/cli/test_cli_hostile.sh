#!/usr/bin/env bash
# Hostile surroundings: a model file truncated while it is mapped (during the load, during
# generation, between chat turns) ends the process with one error line naming the file and exit
# 1, never a bare SIGBUS (exit 135); output that cannot be written (a full disk, a closed stdout)
# is an error (exit 1) for every subcommand, never lost in silence.
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

M=$TINY_Q8
changed() { # the error line for a model file changed under its mapping
    echo "synapse: error: model file '$1' changed while mapped (truncated or overwritten in place);" \
        "replace a model by renaming a new file over it"
}
# wait_for TEST...: polls up to 10 s for the test to hold.
wait_for() {
    local i
    for ((i = 0; i < 200; i++)); do
        "$@" && return 0
        sleep 0.05
    done
    return 1
}

# --- a model file truncated while mapped -------------------------------------------------------
# Generation: once text streams out the load is over; the next token reads weights past the new
# end of the file.
cp "$M" "$tmp/gen.gguf"
timeout 60 "$SYNAPSE" run -m "$tmp/gen.gguf" -p Hello -n 30000 --ignore-eos >"$tmp/gen.out" 2>"$tmp/gen.err" &
pid=$!
wait_for test -s "$tmp/gen.out"
truncate -s 1000 "$tmp/gen.gguf"
wait "$pid"
rc=$?
check "truncated during generation: exit 1 (not 135, a bare SIGBUS)" test "$rc" -eq 1
check "... with one error line naming the file" test "$(cat "$tmp/gen.err")" = "$(changed "$tmp/gen.gguf")"

# Chat: truncated between two turns (the first reply is out), the second turn runs into it.
cp "$M" "$tmp/chat.gguf"
{
    echo hi
    wait_for test -s "$tmp/chat.out"
    truncate -s 1000 "$tmp/chat.gguf"
    echo again
} | timeout 60 "$SYNAPSE" chat -m "$tmp/chat.gguf" -n 4 --temp 0 >"$tmp/chat.out" 2>"$tmp/chat.err"
rc=$?
check "truncated between chat turns: exit 1" test "$rc" -eq 1
check "... with one error line naming the file" test "$(cat "$tmp/chat.err")" = "$(changed "$tmp/chat.gguf")"

# The load: strace holds the return of the file's mmap for 2 s (the mapping exists by then), and
# the file is truncated in that time, before the loader has read a byte of it. Without a usable
# strace (not installed, or ptrace not permitted) there is no way to stop a load at that point.
if strace -o /dev/null -e inject=mmap:delay_exit=1 true 2>/dev/null; then
    cp "$M" "$tmp/load.gguf"
    strace -o /dev/null -P "$tmp/load.gguf" -e trace=mmap -e inject=mmap:delay_exit=2000000 \
        sh -c 'echo $$ >"$0"; exec "$@"' "$tmp/load.pid" "$SYNAPSE" run -m "$tmp/load.gguf" -p Hello -n 1 --json \
        >"$tmp/load.out" 2>"$tmp/load.err" &
    pid=$!
    wait_for bash -c '[ -s "$0" ] && grep -q "load\.gguf$" "/proc/$(cat "$0")/maps"' "$tmp/load.pid"
    truncate -s 1000 "$tmp/load.gguf"
    wait "$pid"
    rc=$?
    check "truncated during the load: exit 1" test "$rc" -eq 1
    check "... with one error line naming the file" test "$(cat "$tmp/load.err")" = "$(changed "$tmp/load.gguf")"
else
    fail "the load-time truncation check needs strace with ptrace permitted (scripts/install-deps.sh installs strace)"
fi

# --- output that cannot be written -------------------------------------------------------------
if [ -w /dev/full ]; then
    full() { "$@" >/dev/full; }
    printf 'Hello\nworld\n' >"$tmp/prompts.txt"
    while IFS='|' read -r desc args; do
        # shellcheck disable=SC2086
        expect_exit 1 "$desc >/dev/full" full "$SYNAPSE" $args
        expect_error_mentions "cannot write" "$desc: the lost output is the error"
    done <<EOF
run|run -m $M -p Hello -n 4 --temp 0
run --json|run -m $M -p Hello -n 4 --json
run --concurrent-requests|run -m $M -f $tmp/prompts.txt --concurrent-requests 2 -n 2
run --concurrent-requests --json|run -m $M -f $tmp/prompts.txt --concurrent-requests 2 -n 2 --json
eval|eval -m $M --tokens 785,6722,315
eval --json|eval -m $M --tokens 785,6722 --json
bench|bench -m $M -t 1 -p 5 -n 2 -r 1
bench --json|bench -m $M -t 1 -p 5 -n 2 -r 1 --json
bench --concurrent|bench -m $M --concurrent 1 -t 1 -n 2 -r 1
tokenize|tokenize -m $M --text Hello
tokenize --json|tokenize -m $M --text Hello --json
detokenize|detokenize -m $M --tokens 9707
inspect|inspect -m $M
inspect --json|inspect -m $M --json
gen-model|gen-model --preset tiny --seed 1 --tokenizer-from $M -o $tmp/g.gguf
help|--help
EOF
    expect_exit 1 "chat >/dev/full" bash -c 'echo hi | "$0" chat -m "$1" -n 2 --temp 0 >/dev/full' "$SYNAPSE" "$M"
else
    echo "skip: /dev/full is not writable here"
fi
closed() { "$@" >&-; }
expect_exit 1 "tokenize with stdout closed" closed "$SYNAPSE" tokenize -m "$M" --text Hello
expect_exit 0 "run -n 0 with stdout closed (nothing to write, nothing lost)" closed "$SYNAPSE" run -m "$M" -p Hello -n 0

finish
