#!/usr/bin/env bash
# `./chorus.sh bench-autotune ...`: chorus-bench autotune (the autotuner against a grid of fixed
# configurations, bench/autotune/autotune_bench.cpp) under chorusrun, on this host (-np N ranks,
# default 2) or across H emulated hosts (bench/hosts/hosts.sh, root) shaped as in
# `./chorus.sh bench --emulated-hosts`. Prints chorus-bench's RESULT autotune / autotune_cost
# lines and the load of the machine; the autotuner's CSV log goes to --log FILE (default
# /tmp/chorus-autotune.csv), and with --plot PNG its plot (scripts/plot_autotune.py, matplotlib).
#   bench_autotune.sh BUILD_DIR [-np N | --emulated-hosts H [--ranks-per-host L] [--link R]
#                     [--flow R] [--slow R] [--slow-fraction F] [--retune]] [--log FILE] [--plot PNG]
#                     [chorus-bench autotune options]
# --retune (emulated hosts): once the autotuner has converged, the harness halves the per-flow
# cap and makes a quarter of the connections slow (hosts.sh reshape), and the bench prints
# RESULT autotune_retune.
# The autotuner's own variables (CHORUS_AUTOTUNE_STEPS_PER_SAMPLE, ..._WINDOWS_PER_SAMPLE,
# HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES, ...) pass through from the environment.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/shape.sh"
source "$here/emulated_bench.sh"
build_dir="$1"; shift
np=2 hosts=0 per_host=1 retune=0
log=/tmp/chorus-autotune.csv plot=""
bench_shaping "bench-autotune" "$@" || exit 2
set -- ${shape_rest[@]+"${shape_rest[@]}"}
bench_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    -np) np="$2"; shift 2 ;;
    --emulated-hosts) hosts="$2"; shift 2 ;;
    --ranks-per-host) per_host="$2"; shift 2 ;;
    --log) log="$2"; shift 2 ;;
    --plot) plot="$2"; shift 2 ;;
    --retune) retune=1; shift ;;
    *) bench_args+=("$1"); shift ;;
  esac
done
export CHORUS_AUTOTUNE_LOG="$log"
plot_log() {
  [ -n "$plot" ] || return 0
  /usr/bin/python3 "$here/../../scripts/plot_autotune.py" "$log" "$plot" --title "$1" && echo "# plot: $plot"
}
echo "# load before: $(uptime)"
if [ "$hosts" = 0 ]; then
  [ "$retune" = 0 ] || { echo "bench-autotune: --retune needs --emulated-hosts (the harness changes the shaping)" >&2; exit 2; }
  rc=0
  "$build_dir/bindings/cli/chorusrun" -np "$np" --timeout 1800 -- \
    "$build_dir/bench/chorus-bench" autotune "${bench_args[@]}" || rc=$?
  echo "# load after: $(uptime)"
  echo "# autotune log: $log"
  [ "$rc" != 0 ] || plot_log "chorus-bench autotune, $np ranks on one host"
  exit "$rc"
fi
[[ "$hosts" =~ ^[0-9]+$ ]] && [ "$hosts" -ge 2 ] || { echo "bench-autotune --emulated-hosts: H must be 2 or more, got '$hosts'" >&2; exit 2; }
[[ "$per_host" =~ ^[1-9][0-9]*$ ]] || { echo "--ranks-per-host must be a positive integer, got '$per_host'" >&2; exit 2; }
why="$("$here/hosts.sh" check)" || { echo "bench-autotune --emulated-hosts: $why" >&2; exit 77; }

# Runs inside `hosts.sh run`, which sets CHORUS_HOSTS_ADDRS and removes the hosts afterwards.
inner() {
  local rc=0 signal="" watcher=""
  if [ "$retune" = 1 ]; then
    # The bench creates $signal when its autotuner has converged; the network changes, then
    # the file goes (the bench waits for that).
    signal="/tmp/chorus-autotune-reshape.$$"
    rm -f "$signal"
    local half; half="$(awk -v b="$(rate_bits "$flow")" 'BEGIN { printf "%dbit\n", b / 2 }')"
    ( until [ -f "$signal" ]; do sleep 0.2; done
      "$here/hosts.sh" reshape --flow "$half" --slow-fraction 0.25 && rm -f "$signal"
      echo "# retune: reshaped: flow $flow -> $half, slow-fraction $fraction -> 0.25 (slow $slow)" ) &
    watcher=$!
    bench_args+=(--retune-signal "$signal")
  fi
  chorusrun_on_hosts "$here/hosts.sh" 1800 -- "$build_dir/bench/chorus-bench" autotune "${bench_args[@]}" || rc=$?
  if [ -n "$watcher" ]; then kill "$watcher" 2>/dev/null || true; wait "$watcher" 2>/dev/null || true; rm -f "$signal"; fi
  echo "# shaping: hosts=$hosts ranks-per-host=$per_host link=$link flow=$flow slow=$slow slow-fraction=$fraction" \
       "(one flow: $(payload_gbytes "$flow") GB/s payload, one link: $(payload_gbytes "$link") GB/s)"
  echo "# load after: $(uptime)"
  echo "# autotune log: $CHORUS_AUTOTUNE_LOG"
  return "$rc"
}
export -f inner chorusrun_on_hosts payload_gbytes rate_bits
export build_dir hosts per_host here link flow slow fraction retune
export BENCH_ARGS="${bench_args[*]:-}"
rc=0
shaping_args
"$here/hosts.sh" run "$hosts" "${shape_args[@]}" -- \
  bash -c 'bench_args=($BENCH_ARGS); inner' || rc=$?
[ "$rc" != 0 ] || plot_log "chorus-bench autotune, $hosts emulated hosts x $per_host ranks (flow $flow, link $link)"
exit "$rc"
