#!/usr/bin/env bash
# Runs the fuzz targets built in BIN_DIR (tests/fuzz/CMakeLists.txt) over their seed corpora.
#   run_fuzz.sh BIN_DIR SECONDS [TARGET...]   fuzz each target for SECONDS; new inputs go to
#                                             BIN_DIR/corpus/<target>, crashes to BIN_DIR/crashes/<target>/
#   run_fuzz.sh BIN_DIR --runs N [TARGET...]  fuzz each target for N executions (however long)
#   run_fuzz.sh BIN_DIR --smoke [TARGET...]   each target runs its seeds once (-runs=0): the
#                                             fuzz_smoke test
# Prints `RESULT fuzz <target> <executions> <crashes>` per target; exits 1 if any target crashed
# (or failed to start), naming the input libFuzzer saved.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="$1"
mode="$2"
shift 2
runs=""
if [ "$mode" = "--runs" ]; then
  runs="${1:?--runs N}"
  shift
fi
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(frame handshake message tensor_spec kv trace chunk ring control)
failed=0
for t in "${targets[@]}"; do
  exe="$bin/${t}_fuzz"
  seeds="$here/corpus/$t"
  if [ ! -x "$exe" ] || [ ! -d "$seeds" ]; then
    echo "fuzz: no target $exe or no seeds $seeds" >&2
    failed=1
    continue
  fi
  log="$bin/logs/$t.log"
  mkdir -p "$bin/logs" "$bin/crashes/$t" "$bin/corpus/$t"
  if [ "$mode" = "--smoke" ]; then
    args=(-runs=0 "$seeds")
  elif [ -n "$runs" ]; then
    args=(-runs="$runs" -timeout=10 -rss_limit_mb=2048 "$bin/corpus/$t" "$seeds")
  else
    # The working corpus first: libFuzzer adds new inputs to the first folder only.
    args=(-max_total_time="$mode" -timeout=10 -rss_limit_mb=2048 "$bin/corpus/$t" "$seeds")
  fi
  "$exe" -print_final_stats=1 -artifact_prefix="$bin/crashes/$t/" "${args[@]}" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  crashes=0
  if [ $rc -ne 0 ]; then
    crashes=1
    failed=1
    saved=$(sed -n 's/.*Test unit written to //p' "$log" | tail -1)
    echo "fuzz: $t failed (exit $rc); input saved at: ${saved:-none (see $log)}" >&2
    grep -m1 -E "ERROR: |runtime error|fuzz invariant failed|Check failed|deadly signal" "$log" >&2
    echo "fuzz: reproduce with: $exe ${saved:-<input>}   (full log: $log)" >&2
  fi
  echo "RESULT fuzz $t ${execs:-0} $crashes"
done
exit $failed
