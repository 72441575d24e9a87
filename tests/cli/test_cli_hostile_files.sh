#!/usr/bin/env bash
# Model paths that are not model files: a FIFO (whose open() once blocked forever), a directory,
# a device, and a name too long for the system. inspect, tokenize and run refuse each at once,
# with exit 1 and one error line naming the path and what it is (or the system's reason).
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

# refused DESC WHAT PATH SUBCOMMAND ARGS...: `synapse SUBCOMMAND -m PATH ARGS...` exits 1 within
# 10 s, with one error line naming PATH and WHAT.
refused() {
    local desc=$1 what=$2 path=$3 sub=$4
    shift 4
    expect_exit 1 "$sub on $desc" timeout 10 "$SYNAPSE" "$sub" -m "$path" "$@" || return
    expect_error_mentions "$path" "$sub on $desc: the message names the path"
    expect_error_mentions "$what" "$sub on $desc: the message says '$what'"
}

expect_refused() { # DESC WHAT PATH
    refused "$@" inspect
    refused "$@" tokenize --text hi
    refused "$@" run -p hi -n 1 --temp 0
}

mkfifo "$tmp/model.gguf"
expect_refused "a FIFO" "FIFO" "$tmp/model.gguf"
mkdir "$tmp/dir.gguf"
expect_refused "a directory" "directory" "$tmp/dir.gguf"
expect_refused "a device" "character device" /dev/null

# 5,000 characters: the cause survives however much of the path the message has to shorten.
long=$(printf '/long-dir-%.0s' $(seq 499))/tail.gguf
check "the long path has 5,000 characters" test "${#long}" -eq 5000
expect_exit 1 "inspect on a 5,000-character path" "$SYNAPSE" inspect -m "$long"
expect_error_mentions "File name too long" "the message keeps the cause"
expect_error_mentions "/tail.gguf'" "the message keeps the file name"

finish
