#!/usr/bin/env bash
# Unequal connections, swept: Chorus's allreduce across H emulated hosts (one rank each) on
# networks with few connection classes (several connections share one cap), slow classes at a
# fraction of a flow's rate, and links a few flows wide; each against the most the connections it
# drew allow (bench_hosts.sh's net_bound_hosts line, conn_bound.py). Prints one line per run:
#   RESULT unequal H <port bits> <slow % of a flow> <link in flows> <run> <busbw GB/s> <bound GB/s> <busbw/bound>
#   sweep_unequal.sh BUILD_DIR H RUNS [--flow R] [--bits "2 3 4"] [--slow-pcts "25"] [--widths "4"]
#                    [--size 64M]
# Each option takes a space-separated list; every combination runs RUNS times (new hosts, so new
# connections and a new draw of classes, each time). --slow-fraction is 0.25 throughout.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/shape.sh"
build_dir="$1" hosts="$2" runs="$3"
shift 3
flow=1gbit bits_list="2 3 4" pcts="25" widths="4" size=64M
while [ $# -gt 0 ]; do
  case "$1" in
    --flow) flow="$2" ;;
    --bits) bits_list="$2" ;;
    --slow-pcts) pcts="$2" ;;
    --widths) widths="$2" ;;
    --size) size="$2" ;;
    *) echo "sweep_unequal.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift 2
done
flow_bits="$(rate_bits "$flow")" || { echo "sweep_unequal.sh: --flow '$flow' is not a rate" >&2; exit 2; }
for bits in $bits_list; do
  for pct in $pcts; do
    for width in $widths; do
      for ((run = 1; run <= runs; run++)); do
        out="$(bash "$here/bench_hosts.sh" "$build_dir" "$hosts" --port-bits "$bits" --slow-fraction 0.25 \
          --flow "$flow" --link "$((flow_bits * width))bit" --slow "$((flow_bits * pct / 100))bit" \
          --impl chorus --sizes "$size" 2>&1)" || { echo "$out" | tail -5 >&2; exit 1; }
        echo "$out" | awk -v h="$hosts" -v b="$bits" -v p="$pct" -v w="$width" -v r="$run" '
          /RESULT chorus_hosts / { busbw = $9 }
          /RESULT net_bound_hosts / { bound = $4 }
          END { if (busbw == "" || bound == "") exit 1
                printf "RESULT unequal %s %s %s %s %s %s %s %.3f\n", h, b, p, w, r, busbw, bound, busbw / bound }'
      done
    done
  done
done
