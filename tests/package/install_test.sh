#!/usr/bin/env bash
# package_install: `cmake --install` into a fresh prefix, then build examples/framework_op and a
# C program against that prefix alone (find_package(Chorus), include/chorus/, Chorus::chorus)
# and run the op as a two-rank job under the installed chorusrun. The prefix is removed after.
#   usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build="$1"
src="$2"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/chorus-package.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"

cmake --install "$build" --prefix "$prefix" > "$tmp/install.log"
for f in include/chorus/chorus.hpp include/chorus/chorus.h bin/chorusrun; do
  [ -e "$prefix/$f" ] || { echo "package_install: $f was not installed"; cat "$tmp/install.log"; exit 1; }
done
lib="$(find "$prefix" -name 'libchorus.so' | head -1)"
config="$(find "$prefix" -name ChorusConfig.cmake | head -1)"
[ -n "$lib" ] && [ -n "$config" ] || { echo "package_install: libchorus.so or ChorusConfig.cmake missing"; exit 1; }
# Every header lives under include/chorus.
outside="$(find "$prefix/include" -type f ! -path "$prefix/include/chorus/*")"
[ -z "$outside" ] || { echo "package_install: headers outside include/chorus: $outside"; exit 1; }

# A library built with a sanitizer (./chorus.sh test --sanitize) loads only into programs that
# carry the same runtime: the consumers below get the build's -fsanitize flags (none normally).
read -ra san <<< "$(sed -n 's/^CMAKE_CXX_FLAGS:[A-Z]*=//p' "$build/CMakeCache.txt" |
                    grep -o -- '-fsanitize=[^ ]*\|-fno-sanitize-recover=[^ ]*' | tr '\n' ' ')"

# The C++ example, configured against the prefix only.
cmake -S "$src/examples/framework_op" -B "$tmp/op" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS="${san[*]}" -DCMAKE_EXE_LINKER_FLAGS="${san[*]}" \
      > "$tmp/op-configure.log" ||
  { cat "$tmp/op-configure.log"; exit 1; }
cmake --build "$tmp/op" -j2 > "$tmp/op-build.log" 2>&1 || { cat "$tmp/op-build.log"; exit 1; }
if grep -q -- "-I$src\b\|-I$src " "$tmp/op/CMakeFiles/framework_op.dir/flags.make" 2>/dev/null; then
  echo "package_install: the example was compiled with the source tree on its include path"; exit 1
fi

# The C API from C, against the installed header and library.
cat > "$tmp/version.c" <<'C'
#include <stdio.h>
#include "chorus/chorus.h"
int main(void) { printf("%s\n", chorus_package_version()); return 0; }
C
cc -std=c11 -Wall -Werror "${san[@]}" -I"$prefix/include" "$tmp/version.c" -L"$(dirname "$lib")" -lchorus \
   -Wl,-rpath,"$(dirname "$lib")" -o "$tmp/version"
version="$("$tmp/version")"
want="$(sed -n 's/^project(chorus VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")"
[ "$version" = "$want" ] || { echo "package_install: chorus_package_version() is '$version', expected '$want'"; exit 1; }

# A two-rank job of the installed op under the installed launcher; exact gradients.
timeout 120 "$prefix/bin/chorusrun" -np 2 --timeout 100 -- "$tmp/op/framework_op" --layers 6 --steps 3 \
  --scale 0.02 --us-per-layer 0 --us-per-mparam 0 > "$tmp/run.log" 2>&1 ||
  { cat "$tmp/run.log"; echo "package_install: the installed op failed"; exit 1; }
grep -q "gradients exact" "$tmp/run.log" || { cat "$tmp/run.log"; echo "package_install: no 'gradients exact'"; exit 1; }
echo "package_install: installed Chorus $version; framework_op and a C program built against it; $(grep -c . "$tmp/run.log") lines of a two-rank run, gradients exact"
