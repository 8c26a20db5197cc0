# Sourced, after shape.sh, by the benchmarks that run chorusrun across emulated hosts
# (bench_hosts.sh, bench_autotune.sh, bench/c10d/bench_c10d.sh): their shaping options and launch.

# bench_shaping WHO ARGS...: parse_shaping over shape_defaults, then link, flow, slow, fraction
# and bits set from it; the other arguments stay, in order, in shape_rest. Returns 2 on a bad
# option (parse_shaping printed why).
bench_shaping() {
  shape_defaults
  parse_shaping "$@" || return 2
  link="$shape_link" flow="$shape_flow" slow="$shape_slow" fraction="$shape_fraction" bits="$shape_bits"
}

# chorusrun_on_hosts HOSTS_SH TIMEOUT ARGS...: inside `hosts.sh run` (which sets
# CHORUS_HOSTS_ADDRS), chorusrun from $build_dir with $per_host ranks on each of the $hosts
# hosts, started through HOSTS_SH's namespace launcher; ARGS: further options, -- and the command.
chorusrun_on_hosts() {
  local hosts_sh="$1" timeout="$2" list
  shift 2
  list="$(echo "$CHORUS_HOSTS_ADDRS" | sed "s/,/:$per_host,/g"):$per_host"
  "$build_dir/bindings/cli/chorusrun" -np $((hosts * per_host)) -H "$list" \
    --launcher "$hosts_sh exec {host}" --timeout "$timeout" "$@"
}
