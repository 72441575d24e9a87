#!/usr/bin/env bash
# plot-bench.sh: turns `synapse bench --json` output into the two PNG plots of docs/BENCHMARKS.md.
#
#   scripts/plot-bench.sh BENCH.json [DEPTH.json]      (OUT_DIR=docs by default)
#
# BENCH.json: the output of a run with tg tests at depth 0 for several thread counts, e.g.
#   build/synapse bench -m models/qwen2.5-0.5b-synth-q8_0.gguf -t 1,2 -p 5,64,512 -n 64 -r 5 --json
# DEPTH.json (default: BENCH.json): a run with several depths, e.g.
#   build/synapse bench -m models/qwen2.5-0.5b-synth-q8_0.gguf -t 1,2 -p 0 -n 64 \
#       -d 0,256,1024,2048,4096 -r 5 --json
# or several such runs joined into one array (jq -s add), e.g. one per --kv-type.
# Writes:
#   $OUT_DIR/decode-threads.png  decode tok/s (BENCH.json's tg at depth 0; median, min-max bars)
#                                against the thread count, with the in-run bandwidth ceiling
#                                (bandwidth / weight bytes per token) of each thread count
#   $OUT_DIR/decode-context.png  decode tok/s against the number of tokens already in the KV
#                                cache (DEPTH.json's depths), one line per thread count and KV type
# Needs jq and gnuplot (Debian: gnuplot-nox; scripts/install-deps.sh installs both).
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 BENCH.json [DEPTH.json]   (writes to \$OUT_DIR, default docs/)" >&2
    exit 2
fi
out_dir=${OUT_DIR:-docs}
for tool in jq gnuplot; do
    command -v "$tool" >/dev/null || { echo "$0: $tool is not installed (scripts/install-deps.sh)" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The decode rows of a bench --json file; when several -n values were run, the first one's.
decode_rows() { # in out
    [ -r "$1" ] || { echo "$0: cannot read '$1'" >&2; exit 1; }
    jq -e 'type == "array" and length > 0 and all(.[]; has("median_ts") and has("n_gen"))' "$1" >/dev/null ||
        { echo "$0: '$1' is not synapse bench --json output" >&2; exit 1; }
    jq '[.[] | select(.n_gen > 0)] as $tg | ($tg[0].n_gen // 0) as $n | [$tg[] | select(.n_gen == $n)]' "$1" >"$2"
    [ "$(jq 'length' "$2")" -gt 0 ] || { echo "$0: '$1' has no tg (decode) results" >&2; exit 1; }
}
decode_rows "$1" "$work/tg.json"
decode_rows "${2:-$1}" "$work/tg_depth.json"
mkdir -p "$out_dir"

n_gen=$(jq '.[0].n_gen' "$work/tg.json")
title=$(jq -r '.[0] | "\(.model_type), \(.backend) backend, isa \(.isa), KV \(.kv_type)"' "$work/tg.json")
mb=$(jq '.[0].weight_bytes_per_token / 1e6 * 10 | round / 10' "$work/tg.json")

# threads  median  min  max  ceiling
jq -r '.[] | select(.n_depth == 0)
       | [.n_threads, .median_ts, .min_ts, .max_ts, (.bandwidth_gbs * 1e9 / .weight_bytes_per_token)]
       | @tsv' "$work/tg.json" >"$work/threads.tsv"
if [ -s "$work/threads.tsv" ]; then
    max_t=$(cut -f1 "$work/threads.tsv" | sort -n | tail -n1)
    gnuplot <<EOF
set terminal pngcairo size 800,500 font "sans,10"
set output "$out_dir/decode-threads.png"
set title "Decode speed (tg$n_gen) against threads\n$title" noenhanced
set xlabel "threads"
set ylabel "tokens per second"
set xrange [0.5:$max_t + 0.5]
set xtics 1
set yrange [0:*]
set grid ytics
set key below
set style fill solid 0.6
set boxwidth 0.4
plot "$work/threads.tsv" using 1:2 with boxes lc rgb "#4477aa" title "decode tok/s (median)", \
     "" using 1:2:3:4 with yerrorbars lc rgb "black" pt 0 title "min-max of the repetitions", \
     "" using 1:5 with linespoints lw 2 pt 7 lc rgb "#cc6677" title "in-run bandwidth ceiling ($mb MB of weights per token)"
EOF
    echo "wrote $out_dir/decode-threads.png"
fi

n_gen_d=$(jq '.[0].n_gen' "$work/tg_depth.json")
title_d=$(jq -r '.[0] | "\(.model_type), \(.backend) backend, isa \(.isa)"' "$work/tg_depth.json")
# One data block per (thread count, KV type): depth  median  min  max
jq -r '[.[] | "\(.n_threads) \(.kv_type)"] | unique | .[]' "$work/tg_depth.json" >"$work/series"
: >"$work/depth.tsv"
plot_cmd=""
idx=0
while read -r t kv; do
    jq -r --argjson t "$t" --arg kv "$kv" \
        '.[] | select(.n_threads == $t and .kv_type == $kv) | [.n_depth, .median_ts, .min_ts, .max_ts] | @tsv' \
        "$work/tg_depth.json" | sort -n >>"$work/depth.tsv"
    printf '\n\n' >>"$work/depth.tsv"
    [ -n "$plot_cmd" ] && plot_cmd+=", "
    plot_cmd+="\"$work/depth.tsv\" index $idx using 1:2:3:4 with yerrorlines lw 2 pt 7 title \"$t thread$([ "$t" -eq 1 ] || echo s), $kv KV\""
    idx=$((idx + 1))
done <"$work/series"
if [ "$(jq '[.[].n_depth] | unique | length' "$work/tg_depth.json")" -gt 1 ]; then
    gnuplot <<EOF
set terminal pngcairo size 800,500 font "sans,10"
set output "$out_dir/decode-context.png"
set title "Decode speed (tg$n_gen_d) against tokens already in the context\n$title_d" noenhanced
set xlabel "tokens in the KV cache before decoding (depth)"
set ylabel "tokens per second"
set xrange [0:*]
set yrange [0:*]
set grid
set key below
plot $plot_cmd
EOF
    echo "wrote $out_dir/decode-context.png"
else
    echo "$0: only one depth in '${2:-$1}': no context plot (run bench with -d 0,256,...)" >&2
fi
