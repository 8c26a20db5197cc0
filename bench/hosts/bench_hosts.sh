#!/usr/bin/env bash
# `./chorus.sh bench --emulated-hosts H ...`: chorus-bench allreduce (Chorus and Gloo, same run,
# same shaped network) across H emulated hosts of L ranks each, started by chorusrun -H with the
# namespace launcher. Prints chorus-bench's RESULT lines with kinds chorus_hosts (CHORUS_HIERARCHICAL
# decides, auto by default), chorus_hier_hosts and chorus_flat_hosts (forced on, off) and gloo_hosts;
# with --op allgather, chorus-bench allgather instead: chorus_allgather_hosts,
# chorus_hier_allgather_hosts and chorus_flat_allgather_hosts (no Gloo peer);
# then "RESULT link_hosts H <flow_GBps> <link_GBps>": the payload rates one flow and one link
# allow, computed from the shaping (rate x 1448/1514 for TCP in 1500-byte frames), not measured;
# and "RESULT net_bound_hosts H <GBps> ...": the most the ring's connections allow, given the
# classes they fell into (conn_bound.py, from `ss` listings taken in every host during the run).
#   bench_hosts.sh BUILD_DIR H [--ranks-per-host L] [--op allreduce|allgather] [--link R] [--flow R]
#                  [--slow R] [--slow-fraction F] [--port-bits B] [chorus-bench allreduce / allgather options]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/shape.sh"
source "$here/emulated_bench.sh"
build_dir="$1"; shift
hosts="${1:-}"; shift || true
[[ "$hosts" =~ ^[0-9]+$ ]] && [ "$hosts" -ge 2 ] || { echo "bench --emulated-hosts: H must be 2 or more, got '$hosts'" >&2; exit 2; }
per_host=1
op=allreduce
bench_shaping "bench --emulated-hosts" "$@" || exit 2
set -- ${shape_rest[@]+"${shape_rest[@]}"}
bench_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks-per-host) per_host="${2:-}"; shift 2 ;;
    --op) op="${2:-}"; shift 2 ;;
    *) bench_args+=("$1"); shift ;;
  esac
done
[[ "$per_host" =~ ^[1-9][0-9]*$ ]] || { echo "--ranks-per-host must be a positive integer, got '$per_host'" >&2; exit 2; }
case "$op" in
  allreduce) mode=(allreduce --hierarchical) ;;
  allgather) mode=(allgather) ;;
  *) echo "--op must be allreduce or allgather, got '$op'" >&2; exit 2 ;;
esac
why="$("$here/hosts.sh" check)" || { echo "bench --emulated-hosts: $why" >&2; exit 77; }

# Runs inside `hosts.sh run`, which sets CHORUS_HOSTS_ADDRS and removes the hosts afterwards.
inner() {
  local listings i sampler
  listings="$(mktemp -d)"
  # Every connection each host has open, once a second while the job runs.
  (while :; do
     for ((i = 0; i < hosts; i++)); do "$here/hosts.sh" exec "$i" ss -tniH state established >>"$listings/$i" 2>/dev/null; done
     sleep 1
   done) &
  sampler=$!
  chorusrun_on_hosts "$here/hosts.sh" 1200 -- "$build_dir/bench/chorus-bench" $BENCH_MODE "${bench_args[@]}" |
    sed -u 's/RESULT \([a-z0-9_]*\)_tcp /RESULT \1_hosts /'
  local rc=${PIPESTATUS[0]}
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null || true
  echo "RESULT link_hosts $hosts $(payload_gbytes "$flow") $(payload_gbytes "$link")"
  echo "# link_hosts: computed from the shaping (link=$link flow=$flow slow=$slow slow-fraction=$fraction port-bits=$bits), payload GB/s"
  python3 "$here/conn_bound.py" --addrs "$CHORUS_HOSTS_ADDRS" --link "$link" --flow "$flow" --slow "$slow" \
    --slow-fraction "$fraction" --port-bits "$bits" $(for ((i = 0; i < hosts; i++)); do echo "$listings/$i"; done) || true
  rm -rf "$listings"
  return "$rc"
}
export -f inner chorusrun_on_hosts payload_gbytes rate_bits
export build_dir hosts per_host here link flow slow fraction bits
export BENCH_ARGS="${bench_args[*]:-}" BENCH_MODE="${mode[*]}"
shaping_args
exec "$here/hosts.sh" run "$hosts" "${shape_args[@]}" -- \
  bash -c 'bench_args=($BENCH_ARGS); inner' 
