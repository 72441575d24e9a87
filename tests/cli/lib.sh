# lib.sh: helpers sourced by tests/cli/test_cli_*.sh (run from the repository root; SYNAPSE names
# the tool, build/synapse by default). Each check prints "ok: ..." or "FAIL: ..."; finish exits
# nonzero when any check failed.

SYNAPSE=${SYNAPSE:-build/synapse}
TINY_Q8=tests/data/qwen2-tiny-synth-q8_0.gguf
TINY_F32=tests/data/qwen2-tiny-synth-f32.gguf
GREEDY_JSON=tests/data/llamacpp-greedy-tiny.json
TOKENIZER_JSON=tests/data/qwen2-tokenizer-cases.json

n_failed=0
n_ok=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ ! -x "$SYNAPSE" ]; then
    echo "FAIL: $SYNAPSE is not built"
    exit 1
fi
command -v jq >/dev/null || { echo "FAIL: jq is not installed (scripts/install-deps.sh installs it)"; exit 1; }

ok() { n_ok=$((n_ok + 1)); echo "ok: $*"; }
fail() { n_failed=$((n_failed + 1)); echo "FAIL: $*"; }
check() { # description, then a command whose success is the check
    local desc=$1
    shift
    if "$@"; then ok "$desc"; else fail "$desc"; fi
}

# Runs a command with stdout in $tmp/out and stderr in $tmp/err; sets $rc.
capture() {
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}

# expect_exit CODE DESC CMD...: the command exits with CODE; when CODE is nonzero, stderr is exactly
# one line starting "synapse: error: ".
expect_exit() {
    local want=$1 desc=$2
    shift 2
    capture "$@"
    if [ "$rc" -ne "$want" ]; then
        fail "$desc: exit $rc, expected $want; stderr: $(head -c 300 "$tmp/err")"
        return 1
    fi
    if [ "$want" -ne 0 ]; then
        local lines
        lines=$(wc -l <"$tmp/err")
        if [ "$lines" -ne 1 ] || ! grep -q '^synapse: error: ' "$tmp/err"; then
            fail "$desc: stderr is not one 'synapse: error: ' line: $(head -c 300 "$tmp/err")"
            return 1
        fi
    fi
    ok "$desc"
}

# expect_error_mentions TEXT DESC: the last command's error line contains TEXT.
expect_error_mentions() {
    if grep -qF -- "$1" "$tmp/err"; then ok "$2"; else fail "$2: '$1' not in: $(head -c 300 "$tmp/err")"; fi
}

finish() {
    echo "$n_ok passed, $n_failed failed"
    [ "$n_failed" -eq 0 ]
    exit $?
}
