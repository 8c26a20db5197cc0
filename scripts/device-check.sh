#!/usr/bin/env bash
# The GPU checks in one command, for the GPU machine (docs/testing.md): builds Chorus against the
# prefix scripts/device-carry.sh made (carried as .devdeps), runs the `gpu`-labelled tests, the
# GPU kernel benchmark and bench/gpu/*.py, and writes the results to OUTDIR.
#   usage: scripts/device-check.sh [--dry-run] OUTDIR
# OUTDIR gets device-check.log (everything), summary.txt (step, exit code, seconds),
# ctest-gpu-cpp.xml and ctest-gpu-python.xml (JUnit), kernels.txt (chorus-gpu-bench), hosts.txt (the
# emulated-hosts benchmark) and what bench/gpu/*.py write there
# (keep it to 7 files: the GPU machine returns at most 8).
# Each step is bounded by `timeout` and by what is left of CHORUS_DEVICE_BUDGET (seconds, 480);
# a failing step does not stop the later ones. Environment, for trying it elsewhere:
#   CHORUS_DEVDEPS (.devdeps)  CHORUS_DEVICE_BUILD (build-device)  CHORUS_DEVICE_JOBS (16)
#   CHORUS_PYTHON (python3 on PATH)  CHORUS_DEVICE_SLOW (1: multiplies every step's limit)
#   CHORUS_DEVICE_CMAKE_ARGS (more -D options, split on spaces)  CHORUS_DEVICE_STOP_AFTER (build: stop there)
#   CHORUS_DEVICE_HOSTS (1; 0 skips the emulated-hosts benchmark)
set -uo pipefail

dry=0
out=""
for a in "$@"; do
  case "$a" in
    --dry-run) dry=1 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    -*) echo "device-check: unknown option $a" >&2; exit 2 ;;
    *) out="$a" ;;
  esac
done
[ -n "$out" ] || { echo "usage: scripts/device-check.sh [--dry-run] OUTDIR" >&2; exit 2; }

repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
deps="$(realpath -m "${CHORUS_DEVDEPS:-$repo/.devdeps}")"
build="$(realpath -m "${CHORUS_DEVICE_BUILD:-$repo/build-device}")"
jobs="${CHORUS_DEVICE_JOBS:-16}"
budget="${CHORUS_DEVICE_BUDGET:-480}"
log="$out/device-check.log"
summary="$out/summary.txt"
start=$(date +%s)

# The GPU machine keeps cmake, ninja and its torch python in a venv, nvcc in /usr/local/cuda.
for d in /usr/local/cuda/bin /opt/torch/.venv/bin; do
  [ -d "$d" ] && PATH="$d:$PATH"
done
# No iproute2 there: the emulated hosts use the ip and tc carried along.
command -v ip >/dev/null || PATH="$deps/bin:$PATH"
export PATH
python="${CHORUS_PYTHON:-$(command -v python3)}"
# The carried libraries: the build runs test binaries (test discovery), so set it now.
export LD_LIBRARY_PATH="$deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}"

if [ "$dry" -eq 0 ]; then
  : > "$summary"
  : > "$log"
  exec 3>&1 4>&2
  exec > >(tee -a "$log") 2>&1
  tee_pid=$!
fi
[ -f "$deps/chorus-deps.cmake" ] ||
  echo "device-check: $deps/chorus-deps.cmake is missing: run scripts/device-carry.sh here and carry .devdeps"
echo "device-check: $(date -u +%FT%TZ) repo=$repo out=$out deps=$deps build=$build python=$python budget=${budget}s"

# step NAME LIMIT COMMAND...: runs COMMAND under timeout (LIMIT, or what is left of the budget),
# logs it and appends "NAME EXIT SECONDS" to summary.txt. Exit 124 = timed out; "skipped" = no time.
step() {
  local name="$1" limit=$(( $2 * ${CHORUS_DEVICE_SLOW:-1} )); shift 2
  local left=$(( budget - ($(date +%s) - start) ))
  [ "$left" -lt "$limit" ] && limit="$left"
  echo
  echo "=== [$name] (limit ${limit}s) $(printf "%q " "$@")"
  if [ "$dry" -eq 1 ]; then
    return 0
  fi
  if [ "$limit" -lt 5 ]; then
    echo "$name skipped 0" >> "$summary"
    echo "=== [$name] skipped: the budget is spent"
    return 1
  fi
  local t0=$(date +%s) rc
  timeout --kill-after=10 "$limit" "$@"
  rc=$?
  local dt=$(( $(date +%s) - t0 ))
  echo "$name $rc $dt" >> "$summary"
  echo "=== [$name] exit $rc after ${dt}s"
  return "$rc"
}

step versions 30 bash -c "nvidia-smi; nvcc --version; cmake --version | head -1; g++ --version | head -1;
  '$python' -c 'import sys, torch; print(sys.version); print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda,
  \"nccl\", torch.cuda.nccl.version() if torch.cuda.is_available() else None, \"device\",
  torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)'; ls '$deps/lib'"

# Configure: Release, Ninja, CUDA+NCCL on, CAF/Asio/prometheus-cpp (and Gloo) from the carry,
# torch and pybind11 from the python that runs the checks.
torch_prefix=$("$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null)
pybind11_dir=$("$python" -c 'import pybind11; print(pybind11.get_cmake_dir())' 2>/dev/null)
cfg=(cmake -S "$repo" -B "$build" -G Ninja -C "$deps/chorus-deps.cmake"
     -DCMAKE_BUILD_TYPE=Release
     "-DCMAKE_PREFIX_PATH=${torch_prefix};${pybind11_dir}"
     # pybind11 in FindPython mode whatever its version: it then reads Python_EXECUTABLE
     "-DPYTHON_EXECUTABLE=$python" "-DPython_EXECUTABLE=$python" -DPYBIND11_FINDPYTHON=ON
     -DCHORUS_WITH_CUDA=ON -DCHORUS_WITH_NCCL=ON -DCHORUS_WITH_PYTHON=ON
     -DCMAKE_POLICY_VERSION_MINIMUM=3.5
     # g++ 13's headers include <cstdint> less often than g++ 12's, which CAF 0.17 was built with
     "-DCMAKE_CXX_FLAGS=-include cstdint")
# shellcheck disable=SC2206
cfg+=(${CHORUS_DEVICE_CMAKE_ARGS:-})
# The distribution's g++, as torch's own libraries use. (A two-rank job crashing in init() there
# was a module carrying part of libstdc++ beside the process' own; bindings/python/CMakeLists.txt
# links the module's own copy, hidden, in CUDA builds: CHORUS_PYTHON_STATIC_LIBSTDCXX.)
if [ -x /usr/bin/g++ ] && [ -x /usr/bin/gcc ]; then
  cfg+=(-DCMAKE_CXX_COMPILER=/usr/bin/g++ -DCMAKE_C_COMPILER=/usr/bin/gcc -DCMAKE_CUDA_HOST_COMPILER=/usr/bin/g++)
fi
if command -v ccache >/dev/null; then
  cfg+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
# Without the python's own headers (no python3-dev), use the Python 3.12 headers carried along.
if ! "$python" -c 'import os, sys, sysconfig
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)' 2>/dev/null; then
  pyinc=$(ls -d "$deps"/python/include/python3* 2>/dev/null | head -1)
  if [ -n "$pyinc" ]; then
    echo "device-check: $python has no Python.h; using the carried $pyinc"
    cfg+=("-DPython_INCLUDE_DIR=$pyinc")
  fi
fi
if ! step configure 180 "${cfg[@]}" && [ "$dry" -eq 0 ]; then
  # torch's CMake config is the part never tried before the GPU machine: without it the C++
  # gpu tests and the kernels still build.
  echo "device-check: configuring again without torch (no Python module, no bench/gpu/*.py)"
  rm -f "$build/CMakeCache.txt"
  step configure-without-torch 120 "${cfg[@]}" -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON -DCHORUS_WITH_PYTHON=OFF
fi

# Build only what the checks need: the gpu tests, the python module, chorusrun, chorus-testrank,
# chorus-gpu-bench (where bench/gpu/ has it); ninja -k 0 builds every target that can be built.
wanted=(chorusrun chorus-testrank _chorus_torch chorus_python_sources chorus-gpu-bench chorus-bench)
for f in "$repo"/tests/gpu/*_test.cpp "$repo"/tests/runtime/nccl/*_test.cpp; do
  [ -e "$f" ] && wanted+=("$(basename "$f" .cpp)")
done
targets=()
if [ "$dry" -eq 1 ]; then
  targets=("${wanted[@]}")
elif [ -f "$build/build.ninja" ]; then
  known=$(ninja -C "$build" -t targets all 2>/dev/null | sed 's/:.*//')
  for t in "${wanted[@]}"; do
    if grep -qx "$t" <<< "$known"; then targets+=("$t"); else echo "device-check: no target $t here"; fi
  done
fi
if [ ${#targets[@]} -gt 0 ]; then
  step build 330 cmake --build "$build" -j "$jobs" --target "${targets[@]}" -- -k 0
else
  step build 1 false
fi
if [ "${CHORUS_DEVICE_STOP_AFTER:-}" = build ] && [ "$dry" -eq 0 ]; then
  exec 1>&3 2>&4
  wait "$tee_pid" 2>/dev/null
  exit 0
fi

step module-libs 10 bash -c "ls '$build'/bindings/python/chorus/_chorus_torch*.so >/dev/null 2>&1 &&
  { ldd '$build'/bindings/python/chorus/_chorus_torch*.so | grep -E 'stdc|caf|nccl|cudart';
    echo \"std::basic_ostream symbols the module exports: \$(nm -C -D --defined-only '$build'/bindings/python/chorus/_chorus_torch*.so | grep -c 'std::basic_ostream')\"; }"

# The C++ gpu tests first (seconds), then the benchmarks, then the chorus.torch gpu jobs.
step ctest-gpu-cpp 90 ctest --test-dir "$build" -L gpu -E '^python_' --output-on-failure --timeout 80 \
  --output-junit "$out/ctest-gpu-cpp.xml"

gpu_bench=$(find "$build/bench" -name chorus-gpu-bench -type f -perm -u+x 2>/dev/null | head -1)
if [ -n "$gpu_bench" ] || [ "$dry" -eq 1 ]; then
  step kernels 120 bash -c "'${gpu_bench:-$build/bench/gpu/chorus-gpu-bench}' 2>&1 | tee '$out/kernels.txt'"
fi

# The emulated-hosts benchmark on a machine with more cores than ranks,
# where the machine can build the hosts (root, ip netns, htb): 2 and 4 hosts of one rank, 64 MiB,
# on an even network and with a quarter of the connections slow. CHORUS_DEVICE_HOSTS=0 skips it.
if [ "${CHORUS_DEVICE_HOSTS:-1}" != 0 ] && [ -x "$build/bench/chorus-bench" -o "$dry" -eq 1 ]; then
  step hosts 150 bash -c "why=\$('$repo/bench/hosts/hosts.sh' check) || { echo \"\$why\"; exit 77; }
    nproc; for h in 2 4; do for f in 0 0.25; do
      echo \"## hosts \$h, slow fraction \$f, load \$(cut -d' ' -f1 /proc/loadavg)\"
      bash '$repo/bench/hosts/bench_hosts.sh' '$build' \$h --slow-fraction \$f --impl both --sizes 64M |
        grep -E 'RESULT|rror'
    done; done 2>&1 | tee '$out/hosts.txt'"
fi

# bench/gpu/*.py (not _*.py, their helpers): each gets OUTDIR and the build folder as arguments,
# the built module on PYTHONPATH, and CHORUS_BUILD_DIR / CHORUSRUN in its environment.
export CHORUS_BUILD_DIR="$build" CHORUSRUN="$build/bindings/cli/chorusrun"
for f in "$repo"/bench/gpu/*.py; do
  [ -e "$f" ] || continue
  case "$(basename "$f")" in _*) continue ;; esac
  step "$(basename "$f" .py)" 150 env "PYTHONPATH=$build/bindings/python${PYTHONPATH:+:$PYTHONPATH}" \
    PYTHONDONTWRITEBYTECODE=1 "$python" "$f" "$out" "$build"
done

step ctest-gpu-python 200 ctest --test-dir "$build" -L gpu -R '^python_' --output-on-failure --timeout 150 \
  --output-junit "$out/ctest-gpu-python.xml"

echo
echo "=== summary (step exit seconds), $(( $(date +%s) - start ))s in all"
[ "$dry" -eq 1 ] && exit 0
cat "$summary"
exec 1>&3 2>&4
wait "$tee_pid" 2>/dev/null
exit 0
