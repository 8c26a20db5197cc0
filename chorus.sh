#!/usr/bin/env bash
# Chorus developer entry point. Each command installs missing Debian packages, configures and
# builds incrementally (build/), then runs:
#   ./chorus.sh demo            two local ranks on the defaults: allreduce demo with timings
#   ./chorus.sh test            the whole test suite (ctest: unit + multi-process)
#   ./chorus.sh test --sanitize address|undefined|thread|address,undefined [--subset] [ctest args]
#                               the same built with gcc's sanitizers into build-asan/-ubsan/-tsan/
#                               -asan-ubsan; --subset builds only the runtime and the tests labelled
#                               `sanitize` (tests/CMakeLists.txt) and runs those
#   ./chorus.sh fuzz [SECONDS | --seconds S] [TARGET...]
#                               builds the libFuzzer targets (clang-14, build-fuzz/) and runs each
#                               for S seconds (default 60) from tests/fuzz/corpus: RESULT fuzz
#                               <target> <executions> <crashes>; non-zero exit on a crash
#   ./chorus.sh fuzz --runs N [TARGET...]
#                               the same, N executions per target however long they take
#   ./chorus.sh fuzz --seeds    rewrites tests/fuzz/corpus with the real encoders
#   ./chorus.sh bench [args]    chorus-bench allreduce under chorusrun, with Gloo beside it
#   ./chorus.sh bench --emulated-hosts H [--ranks-per-host L] [--op allreduce|allgather]
#                     [--link R] [--flow R] [--slow R] [--slow-fraction F] [--port-bits B] [allreduce options]
#                               the same across H emulated hosts (bench/hosts/hosts.sh, root):
#                               RESULT chorus_hosts / gloo_hosts lines (--op allgather:
#                               chorus_{hier_,flat_,}allgather_hosts), and RESULT link_hosts H
#                               <flow_GBps> <link_GBps> computed from the shaping, and RESULT
#                               net_bound_hosts: the most the ring's connections allow
#   ./chorus.sh bench-c10d [-np N | --emulated-hosts H [--ranks-per-host L] [--link R] [--flow R]]
#                     [--sizes 4K,64M] [--rounds R]
#                               torch.distributed's all_reduce on the "chorus" backend against Gloo
#                               and against Chorus's data plane from C++ (bench/c10d/bench_c10d.py):
#                               RESULT c10d_allreduce <impl> <N> <bytes> <median_us> <busbw_GBps>
#   ./chorus.sh bench-train [--emulated-hosts H [--ranks-per-host L] [--link R --flow R] [--slow R]
#                     [--slow-fraction F] [--port-bits B]] [--model M] [--batch B]
#                     [--impls chorus,ddp_chorus,ddp_gloo,solo] [--steps S] [--repeat K]
#                               training: chorus.torch, DDP over "chorus", DDP over Gloo and every rank
#                               alone (bench/train/bench_train.py; torchvision models by name):
#                               RESULT train_hosts <impl> <N> <model> <samples_per_s_total> <scaling>
#   ./chorus.sh bench-autotune [-np N | --emulated-hosts H [--ranks-per-host L] [--link R] [--flow R]
#                     [--slow-fraction F]] [--log FILE] [--plot PNG] [autotune options]
#                               chorus-bench autotune (bench/hosts/bench_autotune.sh): the autotuner
#                               from a poor start against a grid of fixed configurations: RESULT
#                               autotune / autotune_cost lines, the CSV log in FILE, its plot in PNG
#   ./chorus.sh soak [--ops N] [--seed S]
#                               3 ranks, N (100000) checked operations of random kinds, dtypes,
#                               sizes and names with random delays: RESULT soak <ops> <errors>
#                               <rss_growth_kb> <fd_growth> per rank; non-zero exit on any error
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

# Sanitizer builds: their own folder per combination, so build/ is never touched. $1: kinds
# separated by commas; $2: a target to build instead of everything.
sanitized_build() {
  local kinds="$1" target="${2:-}" flags="" dir=build kind
  local -a list
  IFS=',' read -ra list <<< "$kinds"
  for kind in "${list[@]}"; do
    case "$kind" in
      address) flags+=" -fsanitize=address"; dir+=-asan ;;
      undefined) flags+=" -fsanitize=undefined -fno-sanitize-recover=all"; dir+=-ubsan ;;
      thread) flags+=" -fsanitize=thread"; dir+=-tsan ;;
      *) echo "chorus.sh: --sanitize takes address, undefined or thread (or address,undefined), not '$kind'" >&2
         exit 2 ;;
    esac
  done
  [ "$dir" != build ] || { echo "chorus.sh: --sanitize needs a kind" >&2; exit 2; }
  if [[ "$dir" = *-tsan* ]] && [ "$dir" != build-tsan ]; then
    echo "chorus.sh: --sanitize '$kinds': thread cannot be combined with another sanitizer" >&2
    exit 2
  fi
  [[ "$dir" = *-tsan* ]] || flags+=" -fno-omit-frame-pointer"
  flags="${flags# }"
  build_dir="$root/$dir"
  chorus_install_deps
  if [ ! -f "$build_dir/CMakeCache.txt" ]; then
    # The Python module is left out: torch's own libraries are not built with the sanitizer.
    cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCHORUS_WITH_PYTHON=OFF \
      -DCHORUS_WITH_FUZZ=OFF -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
      -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags"
  fi
  cmake --build "$build_dir" -j"$jobs" ${target:+--target "$target"}
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
    if [ "${1:-}" = "--sanitize" ]; then
      [ $# -ge 2 ] || { echo "chorus.sh: --sanitize address|undefined|thread|address,undefined" >&2; exit 2; }
      kinds="$2"
      shift 2
      subset=()
      if [ "${1:-}" = "--subset" ]; then
        shift
        subset=(-L sanitize --no-tests=error)
        sanitized_build "$kinds" sanitize_subset
      else
        sanitized_build "$kinds"
      fi
      # Options: tests/sanitizers/ holds the suppressions and says why each exists.
      export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
      export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
      export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1 second_deadlock_stack=1 suppressions=$root/tests/sanitizers/tsan.supp}"
      export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$root/tests/sanitizers/lsan.supp}"
      exec ctest --test-dir "$build_dir" --output-on-failure --timeout 600 "${subset[@]}" "$@"
    fi
    build
    exec ctest --test-dir "$build_dir" --output-on-failure --timeout 300 "$@"
    ;;
  fuzz)
    chorus_install_deps clang-14 libclang-rt-14-dev
    fuzz_dir="$root/build-fuzz"
    if [ "${1:-}" = "--seeds" ]; then
      cmake -S "$root/tests/fuzz" -B "$fuzz_dir" -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
      cmake --build "$fuzz_dir" -j"$jobs" --target make_seeds
      exec "$fuzz_dir/make_seeds" "$root/tests/fuzz/corpus"
    fi
    limit=(60)
    if [ "${1:-}" = "--seconds" ]; then limit=("${2:?--seconds S}"); shift 2
    elif [ "${1:-}" = "--runs" ]; then limit=(--runs "${2:?--runs N}"); shift 2
    elif [[ "${1:-}" =~ ^[0-9]+$ ]]; then limit=("$1"); shift
    fi
    cmake -S "$root/tests/fuzz" -B "$fuzz_dir" -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
    cmake --build "$fuzz_dir" -j"$jobs"
    exec bash "$root/tests/fuzz/run_fuzz.sh" "$fuzz_dir" "${limit[@]}" "$@"
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
  bench-c10d)
    build
    exec bash "$root/bench/c10d/bench_c10d.sh" "$build_dir" "$@"
    ;;
  bench-train)
    build
    chorus_install_deps python3-torchvision
    PYTHONPATH="$build_dir/bindings/python${PYTHONPATH:+:$PYTHONPATH}" exec /usr/bin/python3 \
      "$root/bench/train/bench_train.py" --chorusrun "$build_dir/bindings/cli/chorusrun" "$@"
    ;;
  bench-autotune)
    build
    chorus_install_deps python3-matplotlib   # --plot
    exec bash "$root/bench/hosts/bench_autotune.sh" "$build_dir" "$@"
    ;;
  soak)
    build
    ops=100000
    seed=$RANDOM
    while [ $# -gt 0 ]; do
      case "$1" in
        --ops) ops="${2:?--ops N}"; shift 2 ;;
        --seed) seed="${2:?--seed S}"; shift 2 ;;
        *) echo "chorus.sh soak: unknown option $1" >&2; exit 2 ;;
      esac
    done
    # About 1 s per 1000 operations here; the bound leaves room for a slow machine.
    exec "$build_dir/bindings/cli/chorusrun" -np 3 --timeout $(( 120 + ops / 100 )) -- \
      "$build_dir/tests/chorus-testrank" pipeline-soak "$ops" "$seed"
    ;;
  *)
    echo "usage: ./chorus.sh demo | test [--sanitize address|undefined|thread|address,undefined [--subset]] [ctest args]" >&2
    echo "       | fuzz [SECONDS | --runs N] [TARGET...]" >&2
    echo "       | fuzz --seeds | bench [-np N] [options] | bench --emulated-hosts H [...] | bench-c10d [...]" >&2
    echo "       | bench-train [...] | bench-autotune [...] | soak [--ops N] | build" >&2
    exit 2
    ;;
esac
