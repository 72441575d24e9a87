#!/usr/bin/env bash
# synapse bench on the tiny model: the JSON results' shape and arithmetic (tok/s, in-run bandwidth
# and int8 peak, decode efficiency against the weight bytes of the file's tensor table plus the KV
# bytes at the test's depth, prefill efficiency against the block matrices' multiply-adds), depths, the text table, --e2e's
# wall/ttft/RSS figures, and its usage (exit 2) and runtime (exit 1) errors.
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

M=$TINY_Q8

# --- pp and tg, JSON ---------------------------------------------------------------------------
capture "$SYNAPSE" bench -m "$M" -t 1 -p 5 -n 4 -r 2 --json
check "bench --json exits 0" test "$rc" -eq 0
cp "$tmp/out" "$tmp/bench.json"
check "the output is a JSON array of two results, pp5 then tg4" \
    test "$(jq -c '[.[].test]' "$tmp/bench.json" 2>/dev/null)" = '["pp5","tg4"]'
check "n_prompt/n_gen/n_depth/n_threads/reps describe the tests" \
    test "$(jq -c '[.[] | [.n_prompt, .n_gen, .n_depth, .n_threads, .reps]]' "$tmp/bench.json")" = '[[5,0,0,1,2],[0,4,0,1,2]]'
check "two samples per test, all positive tok/s" \
    test "$(jq '[.[] | (.samples_ts | length == 2) and all(.samples_ts[]; . > 0)] | all' "$tmp/bench.json")" = true
check "median and mean lie within [min, max], stddev >= 0" \
    test "$(jq '[.[] | .min_ts <= .median_ts and .median_ts <= .max_ts and .min_ts <= .avg_ts and .avg_ts <= .max_ts and .stddev_ts >= 0] | all' "$tmp/bench.json")" = true
check "min and max are the samples' extremes" \
    test "$(jq '[.[] | .min_ts == (.samples_ts | min) and .max_ts == (.samples_ts | max)] | all' "$tmp/bench.json")" = true
check "the bandwidth names the read strategy that won: load width, streams, prefetch" \
    test "$(jq '[.[] | .bandwidth_strategy | test("^(16|32|64)B x[124]( \\+prefetch)?$")] | all' "$tmp/bench.json")" = true
check "the in-run bandwidth is positive and plausible (0.1-10000 GB/s)" \
    test "$(jq '[.[] | .bandwidth_gbs > 0.1 and .bandwidth_gbs < 10000] | all' "$tmp/bench.json")" = true
check "the median probe pass is positive and no faster than the best (the ceiling)" \
    test "$(jq '[.[] | .bandwidth_median_gbs > 0 and .bandwidth_median_gbs <= .bandwidth_gbs] | all' "$tmp/bench.json")" = true
# The CPU named in every row; on x86 its family and model as the kernel decodes them too.
check "every row names the cpu" \
    test "$(jq '[.[] | .cpu | type == "string" and length > 0] | all' "$tmp/bench.json")" = true
if [ "$(uname -m)" = x86_64 ]; then
    family=$(sed -n 's/^cpu family[[:space:]]*: //p' /proc/cpuinfo | head -n1)
    model=$(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo | head -n1)
    check "the cpu's family and model agree with /proc/cpuinfo" \
        test "$(jq -r '.[0].cpu' "$tmp/bench.json" | grep -o '(family [0-9]*, model [0-9]*)')" = "(family $family, model $model)"
fi
check "backend optimized, a real isa tier, f32 KV" \
    test "$(jq -r '[.[] | .backend + " " + (.isa != "none" and .isa != "auto" | tostring) + " " + .kv_type] | unique | .[]' "$tmp/bench.json")" = "optimized true f32"
# The tiny model ties its output to the embedding, so a decode step reads every tensor once: the
# sum of the tensor table that inspect reads from the file.
"$SYNAPSE" inspect -m "$M" --json >"$tmp/inspect.json"
want_bytes=$(jq '[.tensors[].bytes] | add' "$tmp/inspect.json")
check "weight bytes per token = the tied model's tensor bytes ($want_bytes)" \
    test "$(jq -c '[.[].weight_bytes_per_token] | unique' "$tmp/bench.json")" = "[$want_bytes]"
# The block matrices' weights (from the tensor table), and one position's keys and values (from
# the hyperparameters), computed here independently of bench.
want_macs=$(jq '[.tensors[] | select(.name | test("^blk\\.[0-9]+\\.(attn_[qkv]|attn_output|ffn_gate|ffn_up|ffn_down)\\.weight$")) | .shape[0] * .shape[1]] | add' "$tmp/inspect.json")
kv_values=$(jq '.hparams | 2 * .n_layer * .n_head_kv * (.n_embd / .n_head)' "$tmp/inspect.json")
check "multiply-adds per token = the block matrices' weights ($want_macs)" \
    test "$(jq -c '[.[].macs_per_token] | unique' "$tmp/bench.json")" = "[$want_macs]"
check "tg4's KV bytes: (0 + 2 + 3/2) positions x $kv_values values x 4 bytes" \
    test "$(jq --argjson kv "$kv_values" '.[1].kv_bytes_per_token == 3.5 * $kv * 4' "$tmp/bench.json")" = true
check "efficiency for tg = median tok/s x (weight + KV bytes) / bandwidth" \
    test "$(jq '.[1] | .efficiency > 0 and ((.efficiency - .median_ts * (.weight_bytes_per_token + .kv_bytes_per_token) / (.bandwidth_gbs * 1e9)) | fabs) < 1e-6 * .efficiency' "$tmp/bench.json")" = true
# The int8 peak is measured for the x86 tiers' dot instructions; elsewhere pp has no efficiency.
if jq -e '.[0] | .isa == "avx512-vnni" or .isa == "avx-vnni" or .isa == "avx2"' "$tmp/bench.json" >/dev/null; then
    check "an in-run int8 peak, plausible (1-100000 G MAC/s)" \
        test "$(jq '[.[] | .int8_peak_gmacs > 1 and .int8_peak_gmacs < 100000] | all' "$tmp/bench.json")" = true
    check "the int8 peak names the x86 tier whose instruction reached it" \
        test "$(jq '[.[] | .int8_peak_isa | IN("avx512-vnni", "avx-vnni", "avx2")] | all' "$tmp/bench.json")" = true
    check "efficiency for pp = median tok/s x multiply-adds per token / int8 peak" \
        test "$(jq '.[0] | .efficiency > 0 and ((.efficiency - .median_ts * .macs_per_token / (.int8_peak_gmacs * 1e9)) | fabs) < 1e-6 * .efficiency' "$tmp/bench.json")" = true
else
    check "no int8 peak on this tier: pp efficiency is null" test "$(jq '.[0].efficiency' "$tmp/bench.json")" = null
fi

# --- depths, thread lists, backends ------------------------------------------------------------
capture "$SYNAPSE" bench -m "$M" -t 1,2 -p 0 -n 2 -d 0,8 -r 1 --json
check "-t 1,2 -p 0 -d 0,8: tg2 at both depths for both thread counts" \
    test "$(jq -c '[.[] | [.n_threads, .test, .n_depth]]' "$tmp/out" 2>/dev/null)" = '[[1,"tg2",0],[1,"tg2 @ d8",8],[2,"tg2",0],[2,"tg2 @ d8",8]]'
check "the KV bytes grow with the depth: tg2 @ d8 reads (8 + 2 + 1/2) positions" \
    test "$(jq --argjson kv "$kv_values" '.[1].kv_bytes_per_token == 10.5 * $kv * 4' "$tmp/out")" = true
check "each thread count has its own bandwidth figure" \
    test "$(jq '[.[].bandwidth_gbs > 0] | all' "$tmp/out")" = true
capture "$SYNAPSE" bench -m "$M" -t 1 -p 3 -n 0 -r 1 --backend reference --json
check "--backend reference: pp3 only, isa none" \
    test "$(jq -c '[.[] | [.test, .backend, .isa]]' "$tmp/out" 2>/dev/null)" = '[["pp3","reference","none"]]'
capture "$SYNAPSE" bench -m "$M" -t 1 -p 3 -n 2 -r 1 --isa scalar --kv-type f16 --json
check "--isa scalar --kv-type f16 are applied" \
    test "$(jq -r '[.[] | .isa + " " + .kv_type] | unique | .[]' "$tmp/out" 2>/dev/null)" = "scalar f16"
check "an f16 cache counts 2 bytes a value; the scalar tier has no int8 peak" \
    test "$(jq --argjson kv "$kv_values" '.[1].kv_bytes_per_token == 2.5 * $kv * 2 and .[0].efficiency == null' "$tmp/out")" = true

# --- the text table ----------------------------------------------------------------------------
capture "$SYNAPSE" bench -m "$M" -t 1 -p 5 -n 4 -r 1
check "the table has a header and one row per test" \
    test "$(grep -c '^| ' "$tmp/out")" -eq 4 -a "$(grep -c '| pp5 \|| tg4 ' "$tmp/out")" -eq 2
check "the tg row shows an efficiency percentage" grep -q '| tg4 .*[0-9]% |$' "$tmp/out"
check "a bandwidth line per thread count, its median pass in brackets" grep -q '^ *1 thread: *[0-9.]* GB/s ([0-9.]*) ->' "$tmp/out"
check "the bandwidth line names the winning strategy, then (after the int8 peaks on x86) every strategy's trial" \
    sh -c "grep -A2 '^ *1 thread: .* read as \(16\|32\|64\)B x[124]' '$tmp/out' | grep -q '^ *read strategies (GB/s.*: 16B x1 [0-9.]*, 16B x1 +prefetch [0-9.]*, 16B x2 '"
check "the int8 peak is the best of the tiers the CPU runs, named" \
    test "$(grep -c 'G int8 MAC/s (avx2\|avx-vnni\|avx512-vnni) -> prefill' "$tmp/out")" -eq "$(grep -c 'G int8 MAC/s' "$tmp/out")"
if grep -q 'G int8 MAC/s (avx' "$tmp/out"; then
    check "each tier's int8 peak is listed, the largest being the headline figure" \
        test "$(awk '/ G int8 MAC\/s \(/ {for (i = 1; i + 2 <= NF; i++) if ($(i + 1) == "G" && $(i + 2) == "int8") want = $i}
                     /int8 peaks \(G MAC\/s/ {best = 0; n = 0
                         for (i = 1; i <= NF; i++) if ($i ~ /^(avx2|avx-vnni|avx512-vnni)$/) {
                             v = $(i + 1); sub(",", "", v); n++; if (v + 0 > best) best = v + 0 }
                         print (n >= 1 && best == want + 0) ? "ok" : "bad " best " " want}' "$tmp/out")" = ok
fi
# the model's interleaved copies (README "Interleaved weights") are waited for, and said
if grep -qw avx512_vnni /proc/cpuinfo; then
    check "bench waits for the interleaved copies and says so" \
        grep -q '^interleaved copies: [0-9]* MiB, waited [0-9]* ms for them$' "$tmp/out"
fi

# --- --profile: the steps of one more run of each test ----------------------------------------
capture "$SYNAPSE" bench -m "$M" -t 1 -p 16 -n 2 -r 1 --profile
check "--profile exits 0" test "$rc" -eq 0
check "--profile: one profile per test, after the table" \
    test "$(grep -c '^profile of \(pp16\|tg2\), 1 thread: one more run, [0-9.]* ms timed' "$tmp/out")" -eq 2
# Rows "  step runs ms share [G MAC/s [of peak]]" of one test's profile.
profile_rows() { awk -v t="$1" '/^profile of /{p = ($3 == t ",")} p && /^  [a-z]/ && $1 != "step"' "$tmp/out"; }
n_layer=$(jq .hparams.n_layer "$tmp/inspect.json")
check "pp16: qkv, attention, wo, ffn and down ran once per layer ($n_layer)" \
    test "$(profile_rows pp16 | awk '$1 ~ /^(qkv|attention|wo|ffn|down)$/ {print $1 "=" $2}' | sort | tr '\n' ' ')" = "attention=$n_layer down=$n_layer ffn=$n_layer qkv=$n_layer wo=$n_layer "
check "tg2: the two decode calls only (not the 1-token prompt): qkv ran 2 x $n_layer times" \
    test "$(profile_rows tg2 | awk '$1 == "qkv" {print $2}')" = "$((2 * n_layer))"
check "pp16: the output projection ran once (the last token's logits)" \
    test "$(profile_rows pp16 | awk '$1 == "output" {print $2}')" = 1
check "the shares of a profile add up to 100 % (rounding aside)" \
    test "$(profile_rows pp16 | awk '{gsub("%", "", $4); s += $4} END {print (s > 99.5 && s < 100.5)}')" = 1
check "the matrix steps show their int8 rate; the others none" \
    test "$(profile_rows pp16 | awk '($1 ~ /^(qkv|wo|ffn|down|output)$/) != (NF >= 5) {bad = 1} END {print bad + 0}')" = 0
if grep -q 'G int8 MAC/s (avx' "$tmp/out"; then
    check "the matrix steps' rate is a share of the in-run int8 peak" \
        test "$(profile_rows pp16 | awk 'NF == 6 && $6 ~ /^[0-9]+%$/' | wc -l)" -ge 4
fi
expect_exit 2 "--profile --json" "$SYNAPSE" bench -m "$M" -t 1 -p 5 -n 0 -r 1 --profile --json
expect_error_mentions "--json" "--profile names what it does not combine with"
expect_exit 2 "--profile --backend reference" "$SYNAPSE" bench -m "$M" -t 1 -p 5 -n 0 -r 1 --profile --backend reference
expect_error_mentions "reference backend" "the refusal says the reference backend keeps no step times"

# --- --e2e -------------------------------------------------------------------------------------
capture "$SYNAPSE" bench --e2e -m "$M" -t 1 -n 4 -c 64 -r 2 --json
check "--e2e --json exits 0" test "$rc" -eq 0
check "--e2e reports wall, ttft, load, decode and peak RSS, all positive" \
    test "$(jq '[.[] | .median_wall_ms > 0 and .median_ttft_ms > 0 and .median_load_ms > 0 and .median_decode_ts > 0 and .median_peak_rss_mib > 0] | all' "$tmp/out" 2>/dev/null)" = true
check "--e2e names the cpu" test "$(jq '[.[] | .cpu | type == "string" and length > 0] | all' "$tmp/out" 2>/dev/null)" = true
check "--e2e: the process outlasts its time to first token" \
    test "$(jq '.[0] | .median_wall_ms > .median_ttft_ms' "$tmp/out" 2>/dev/null)" = true
check "--e2e: the RSS holds at least the mapped model (~10 MiB)" \
    test "$(jq '.[0].median_peak_rss_mib > 9' "$tmp/out" 2>/dev/null)" = true
check "--e2e: two samples each, 5-token prompt, 4 tokens, context 64" \
    test "$(jq -c '.[0] | [(.samples_wall_ms | length), .n_prompt, .n_gen, .n_ctx]' "$tmp/out" 2>/dev/null)" = '[2,5,4,64]'
capture "$SYNAPSE" bench --e2e -m "$M" -t 1 -n 4 -c 64 -r 1
check "--e2e text: a row with the wall, ttft and RSS columns" \
    bash -c 'grep -q "wall s.*ttft ms.*peak RSS" "$1" && grep -q "| p5+tg4 .* MiB |" "$1"' _ "$tmp/out"

# --- errors ------------------------------------------------------------------------------------
expect_exit 2 "-t 0" "$SYNAPSE" bench -m "$M" -t 0
expect_exit 2 "-t 1,,2" "$SYNAPSE" bench -m "$M" -t 1,,2
expect_error_mentions "element 2" "the empty element is named"
expect_exit 2 "-t 1,2," "$SYNAPSE" bench -m "$M" -t 1,2,
expect_exit 2 "-p -1" "$SYNAPSE" bench -m "$M" -p -1
expect_exit 2 "-p 5x" "$SYNAPSE" bench -m "$M" -p 5x
expect_exit 2 "-n 99999999999" "$SYNAPSE" bench -m "$M" -n 99999999999
expect_exit 2 "-r 0" "$SYNAPSE" bench -m "$M" -r 0
expect_exit 2 "-r with no value" "$SYNAPSE" bench -m "$M" -r
expect_exit 2 "-d x" "$SYNAPSE" bench -m "$M" -d x
expect_exit 2 "nothing to measure (-p 0 -n 0)" "$SYNAPSE" bench -m "$M" -p 0 -n 0
expect_exit 2 "missing -m" "$SYNAPSE" bench -t 1
expect_exit 2 "-c without --e2e" "$SYNAPSE" bench -m "$M" -c 64
expect_exit 2 "--e2e with -p" "$SYNAPSE" bench --e2e -m "$M" -p 5
expect_exit 2 "--backend foo" "$SYNAPSE" bench -m "$M" --backend foo
expect_exit 2 "usage is checked before the model is loaded" "$SYNAPSE" bench -m "$tmp/missing.gguf" -r 0
expect_exit 1 "a prompt longer than the training context (32768)" "$SYNAPSE" bench -m "$M" -t 1 -p 40000 -n 0 -r 1
expect_error_mentions "32768" "the training context is named"
expect_exit 1 "depth + test longer than the training context" "$SYNAPSE" bench -m "$M" -t 1 -p 0 -n 8 -d 32760 -r 1
expect_exit 1 "missing model" "$SYNAPSE" bench -m "$tmp/missing.gguf" -t 1 -p 5 -n 0 -r 1
expect_exit 1 "--e2e on a missing model: the run's error is relayed" "$SYNAPSE" bench --e2e -m "$tmp/missing.gguf" -t 1 -n 2 -r 1
expect_error_mentions "cannot load" "the run's own cause is in the message"
expect_exit 1 "--e2e with a context above the training context" "$SYNAPSE" bench --e2e -m "$M" -t 1 -n 2 -c 40000 -r 1

# --- --json-schema: constrained against plain, the table, and its errors --------------------------
capture "$SYNAPSE" bench --json-schema docs/bench/person.schema.json -m "$M" -t 1 -n 16 -r 2
check "bench --json-schema exits 0" test "$rc" -eq 0
check "... one table row with both decode rates and their ratio" \
    grep -Eq '^\| qwen2 .*\| +1 \| p5\+tg16 +\| +[0-9.]+ ± [0-9.]+ \| +[0-9.]+ ± [0-9.]+ \| +[0-9.]+% \|$' "$tmp/out"
check "... and the CPU" grep -q '^cpu: ' "$tmp/out"
printf '{"type": "string", "pattern": "x"}' >"$tmp/bad.schema.json"
expect_exit 1 "--json-schema with an unenforceable keyword" "$SYNAPSE" bench --json-schema "$tmp/bad.schema.json" -m "$M" -t 1 -n 8 -r 1
expect_error_mentions "pattern" "the keyword is named"
expect_exit 2 "--json-schema with --e2e" "$SYNAPSE" bench --json-schema docs/bench/person.schema.json --e2e -m "$M"
expect_exit 2 "--json-schema with two thread counts" "$SYNAPSE" bench --json-schema docs/bench/person.schema.json -m "$M" -t 1,2
expect_exit 1 "--json-schema with a missing file" "$SYNAPSE" bench --json-schema "$tmp/none.json" -m "$M" -t 1 -n 8 -r 1

finish
