#!/usr/bin/env bash
# package_pip: `pip install .` of the checkout into a fresh virtual environment (with the
# system's site-packages, for Debian's torch; offline, reusing the test's build folder through
# CHORUS_BUILD_DIR), then a two-rank allreduce with the installed `chorusrun` and `chorus.torch`,
# imported from the environment, not from the build tree. The environment is removed after.
#   usage: pip_test.sh PYTHON BUILD_DIR SOURCE_DIR
set -euo pipefail
python="$1"
build="$2"
src="$3"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/chorus-pip.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
unset PYTHONPATH

"$python" -m venv --system-site-packages "$tmp/venv"
CHORUS_BUILD_DIR="$build" "$tmp/venv/bin/pip" install --no-build-isolation --no-index --no-cache-dir "$src" \
  > "$tmp/pip.log" 2>&1 || { cat "$tmp/pip.log"; echo "package_pip: pip install failed"; exit 1; }
[ -x "$tmp/venv/bin/chorusrun" ] || { echo "package_pip: no chorusrun in the environment"; exit 1; }

cat > "$tmp/job.py" <<'PY'
import torch
import chorus
import chorus.torch as hvd
hvd.init()
out = hvd.allreduce(torch.full((3,), float(hvd.rank() + 1)), op=hvd.Sum, name="pip.sum")
want = float(hvd.size() * (hvd.size() + 1) // 2)
assert out.tolist() == [want] * 3, out
print("package_pip: rank %d of %d got %s from %s" % (hvd.rank(), hvd.size(), out.tolist(), chorus.__file__))
hvd.shutdown()
PY
cd "$tmp"
timeout 120 "$tmp/venv/bin/chorusrun" -np 2 --timeout 100 -- "$tmp/venv/bin/python" "$tmp/job.py" > "$tmp/run.log" 2>&1 ||
  { cat "$tmp/run.log"; echo "package_pip: the job failed"; exit 1; }
cat "$tmp/run.log"
[ "$(grep -c "from $tmp/venv/lib/" "$tmp/run.log")" = 2 ] ||
  { echo "package_pip: chorus was not imported from the environment on both ranks"; exit 1; }
