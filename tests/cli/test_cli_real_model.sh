#!/usr/bin/env bash
# With SYNAPSE_REAL_MODEL naming a real Qwen2.5-0.5B-Instruct Q8_0 GGUF: the published greedy
# continuation of "The capital of France is" is " Paris. It is the largest city in". Without it
# the test reports itself skipped (exit 77, counted as skipped by tests/run-all.sh).
set -u
cd "$(dirname "$0")/../.."

if [ -z "${SYNAPSE_REAL_MODEL:-}" ]; then
    echo "skipped: SYNAPSE_REAL_MODEL not set"
    exit 77
fi
. tests/cli/lib.sh

# Both backends: the reference always; the optimized one where this build and CPU have it.
for backend in reference optimized; do
    capture "$SYNAPSE" run -m "$SYNAPSE_REAL_MODEL" --tokens 785,6722,315,9625,374 -n 8 --temp 0 \
        --backend "$backend" --json
    if [ "$backend" = optimized ] && [ "$rc" -eq 1 ] && grep -q "not built\|unavailable\|not available" "$tmp/err"; then
        echo "skipped: optimized backend: $(cat "$tmp/err")"
        continue
    fi
    check "$backend: run on the real model exits 0" test "$rc" -eq 0
    got=$(jq -c .generated_ids "$tmp/out" 2>/dev/null)
    check "$backend: greedy continuation is [12095, 13, 1084, 374, 279, 7772, 3283, 304]" \
        test "$got" = "[12095,13,1084,374,279,7772,3283,304]"
    echo "  got $got: $(jq .text "$tmp/out" 2>/dev/null)"
done
capture "$SYNAPSE" tokenize -m "$SYNAPSE_REAL_MODEL" --text "The capital of France is"
check "the real tokenizer gives 785,6722,315,9625,374" test "$(cat "$tmp/out")" = "785,6722,315,9625,374"

finish
