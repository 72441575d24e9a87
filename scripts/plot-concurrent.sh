#!/usr/bin/env bash
# plot-concurrent.sh: turns `synapse bench --concurrent ... --json` output into the plot of
# docs/BENCHMARKS.md's "Concurrent requests" section.
#
#   scripts/plot-concurrent.sh CONCURRENT.json      (OUT_DIR=docs by default)
#
# CONCURRENT.json: e.g.
#   build/synapse bench -m models/qwen2.5-0.5b-synth-q8_0.gguf --concurrent 1,2,5,8,16 -t 2 -n 64 -r 5 --json
# Writes $OUT_DIR/concurrent.png: aggregate tok/s (all tokens / wall time) and decode-step tok/s
# against the number of simultaneous requests (medians, min-max bars), with the ideal N x the
# single request's decode speed when N = 1 was measured. Needs jq and gnuplot.
set -euo pipefail

if [ $# -ne 1 ]; then
    echo "usage: $0 CONCURRENT.json   (writes to \$OUT_DIR, default docs/)" >&2
    exit 2
fi
out_dir=${OUT_DIR:-docs}
for tool in jq gnuplot; do
    command -v "$tool" >/dev/null || { echo "$0: $tool is not installed (scripts/install-deps.sh)" >&2; exit 1; }
done
[ -r "$1" ] || { echo "$0: cannot read '$1'" >&2; exit 1; }
jq -e 'type == "array" and length > 0 and all(.[]; has("n_requests") and has("median_decode_ts"))' "$1" >/dev/null ||
    { echo "$0: '$1' is not synapse bench --concurrent --json output" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out_dir"

# requests  agg median min max  decode median min max
jq -r '.[] | [.n_requests, .median_ts, .min_ts, .max_ts, .median_decode_ts, .min_decode_ts, .max_decode_ts] | @tsv' \
    "$1" >"$work/conc.tsv"
title=$(jq -r '.[0] | "\(.model_type), isa \(.isa), \(.n_threads) threads, p\(.n_prompt)+tg\(.n_gen) per request, \(.reps) rounds"' "$1")
one=$(jq '[.[] | select(.n_requests == 1)][0].median_decode_ts // 0' "$1")
max_n=$(cut -f1 "$work/conc.tsv" | sort -n | tail -n1)
ideal=""
if [ "$one" != "0" ]; then ideal=", $one * x with lines dt 2 lc rgb '#999999' title 'N x one request (ideal)'"; fi

gnuplot <<GP
set terminal pngcairo size 800,500 font "sans,10"
set output "$out_dir/concurrent.png"
set title "Aggregate speed against simultaneous requests\n$title" noenhanced
set xlabel "simultaneous requests (engine slots)"
set ylabel "tokens per second"
set xrange [0:$max_n + 1]
set yrange [0:*]
set key top left
set grid
plot "$work/conc.tsv" using 1:5:6:7 with yerrorlines lw 2 pt 7 title "decode steps (median, min-max)", \
     "$work/conc.tsv" using 1:2:3:4 with yerrorlines lw 2 pt 5 title "aggregate incl. prompts (median, min-max)"$ideal
GP
echo "wrote $out_dir/concurrent.png"
