#!/usr/bin/env bash
# `./chorus.sh bench-c10d`: bench_c10d.py (torch.distributed's all_reduce on "chorus" against Gloo
# and against Chorus's own data plane, one job) on N local ranks, or across H emulated hosts of L
# ranks each (hosts.sh run: shaped as bench_hosts.sh shapes them; root), then, across hosts,
# "RESULT link_hosts H <flow_GBps> <link_GBps>" computed from the shaping.
#   bench_c10d.sh BUILD_DIR [-np N | --emulated-hosts H [--ranks-per-host L] [--link R] [--flow R]
#                 [--slow R] [--slow-fraction F]] [bench_c10d.py options: --sizes 4K,64M ...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
hosts_dir="$here/../hosts"
source "$hosts_dir/shape.sh"
source "$hosts_dir/emulated_bench.sh"
build_dir="$1"; shift
export PYTHONPATH="$build_dir/bindings/python${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS=1 CHORUS_METRICS_PORT=0
script="$here/bench_c10d.py"
if [ "${1:-}" != "--emulated-hosts" ]; then
  np=2
  if [ "${1:-}" = "-np" ]; then np="$2"; shift 2; fi
  exec "$build_dir/bindings/cli/chorusrun" -np "$np" --timeout 1200 -- /usr/bin/python3 "$script" "$@"
fi
hosts="${2:-}"; shift 2
[[ "$hosts" =~ ^[0-9]+$ ]] && [ "$hosts" -ge 2 ] || { echo "bench-c10d --emulated-hosts: H must be 2 or more, got '$hosts'" >&2; exit 2; }
per_host=1
bench_shaping "bench-c10d --emulated-hosts" "$@" || exit 2
set -- ${shape_rest[@]+"${shape_rest[@]}"}
bench_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks-per-host) per_host="${2:-}"; shift 2 ;;
    *) bench_args+=("$1"); shift ;;
  esac
done
why="$("$hosts_dir/hosts.sh" check)" || { echo "bench-c10d --emulated-hosts: $why" >&2; exit 77; }
inner() {
  chorusrun_on_hosts "$hosts_dir/hosts.sh" 1200 -x GLOO_SOCKET_IFNAME=eth0 -- /usr/bin/python3 "$script" $BENCH_ARGS
  local rc=$?
  echo "RESULT link_hosts $hosts $(payload_gbytes "$flow") $(payload_gbytes "$link")"
  return "$rc"
}
export -f inner chorusrun_on_hosts payload_gbytes rate_bits
export build_dir hosts per_host hosts_dir script flow link BENCH_ARGS="${bench_args[*]:-}"
shaping_args
exec "$hosts_dir/hosts.sh" run "$hosts" "${shape_args[@]}" -- bash -c inner
