#!/usr/bin/env bash
# Chorus developer entry point. Each command installs missing Debian packages, configures and
# builds incrementally (build/), then runs:
#   ./chorus.sh demo            two local ranks on the defaults: allreduce demo with timings
#   ./chorus.sh test            the whole test suite (ctest: unit + multi-process)
#   ./chorus.sh bench [args]    chorus-bench allreduce under chorusrun, with Gloo beside it
#   ./chorus.sh bench --emulated-hosts H [--ranks-per-host L] [--link R] [--flow R]
#                     [--slow-fraction F] [allreduce options]
#                               the same across H emulated hosts (bench/hosts/hosts.sh, root):
#                               RESULT chorus_hosts / gloo_hosts lines, and RESULT link_hosts H
#                               <flow_GBps> <link_GBps> computed from the shaping
#   ./chorus.sh build           just install + build
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$root"
source scripts/deps.sh

build_dir="${CHORUS_BUILD_DIR:-$root/build}"
jobs="${CHORUS_BUILD_JOBS:-2}"

build() {
  chorus_install_deps
  if [ ! -f "$build_dir/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo
  fi
  cmake --build "$build_dir" -j"$jobs"
}

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
  build) build ;;
  demo)
    build
    exec "$build_dir/bindings/cli/chorusrun" -np 2 --timeout 300 -- "$build_dir/bench/chorus-bench" demo "$@"
    ;;
  test)
    build
    exec ctest --test-dir "$build_dir" --output-on-failure --timeout 300 "$@"
    ;;
  bench)
    build
    if [ "${1:-}" = "--emulated-hosts" ]; then
      exec bash "$root/bench/hosts/bench_hosts.sh" "$build_dir" "${@:2}"
    fi
    np=2
    if [ "${1:-}" = "-np" ]; then np="$2"; shift 2; fi
    exec "$build_dir/bindings/cli/chorusrun" -np "$np" --timeout 1200 -- "$build_dir/bench/chorus-bench" allreduce "$@"
    ;;
  *)
    echo "usage: ./chorus.sh demo | test | bench [-np N] [options] | bench --emulated-hosts H [...] | build" >&2
    exit 2
    ;;
esac
