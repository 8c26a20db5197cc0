#!/usr/bin/env bash
# Chorus against Open MPI's shared memory on one host, the same allreduce protocol, interleaved:
#   bench/mpi/compare.sh [BUILD_DIR] [ROUNDS] [SIZES]      (defaults: build 3 4K,1M,64M)
# Prints the RESULT lines of each run (chorus_shm from chorus-bench, mpi from chorus-bench-mpi).
# Needs Debian's openmpi-bin and libopenmpi-dev (then CMake builds chorus-bench-mpi).
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
sizes=${3:-4K,1M,64M}
np=${NP:-2}
if [[ ! -x "$build/bench/chorus-bench-mpi" ]]; then
  echo "compare.sh: $build/bench/chorus-bench-mpi is missing: apt-get install openmpi-bin libopenmpi-dev, then rebuild" >&2
  exit 2
fi
mpi_args=(-np "$np" --bind-to none)
[[ $(id -u) == 0 ]] && mpi_args+=(--allow-run-as-root)
for ((i = 1; i <= rounds; ++i)); do
  timeout 300 mpirun "${mpi_args[@]}" "$build/bench/chorus-bench-mpi" --sizes "$sizes" | grep '^RESULT'
  timeout 300 "$build/bindings/cli/chorusrun" -np "$np" -- "$build/bench/chorus-bench" allreduce --impl chorus \
    --sizes "$sizes" | grep 'RESULT'
done
