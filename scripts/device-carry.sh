#!/usr/bin/env bash
# Builds the dependency prefix carried to the GPU machine (which has CUDA, NCCL, PyTorch and
# CMake but not Debian's CAF, Asio or prometheus-cpp, and no network), from the Debian 12
# packages installed here. Usage: scripts/device-carry.sh [DIR]   (default: <repo>/.devdeps)
#
# DIR holds, without symbolic links (the carry may not keep them):
#   include/{caf,asio,asio.hpp,prometheus}     headers
#   lib/<soname>                               CAF core+io, prometheus-cpp core+pull, civetweb;
#                                              Gloo and what it needs, where libgloo-dev is here
#   lib/cmake/Gloo/                            a relocatable Gloo config (the hosts benchmark's peer)
#   bin/{ip,tc}, iproute2/                     Debian's iproute2 ip and tc with their libraries
#   lib/cmake/prometheus-cpp/                  a relocatable config (core, pull) for find_package
#   include/eigen3, share/eigen3/cmake/        Eigen's headers and Debian's relocatable config
#   python/include/python3.12/                 Python.h fallback, used only where the GPU
#                                              machine's python lacks its headers (from pyenv)
#   chorus-deps.cmake                          `cmake -C DIR/chorus-deps.cmake`: points Chorus'
#                                              find calls at DIR, relative to its own location
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-$repo/.devdeps}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
libdir=/usr/lib/x86_64-linux-gnu

need_pkg() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed" ||
    { echo "device-carry: Debian package $1 is not installed (run ./chorus.sh once)" >&2; exit 1; }
}
for p in libcaf-dev libcaf-core0.17 libcaf-io0.17 libasio-dev prometheus-cpp-dev \
         libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libcivetweb1 libeigen3-dev; do
  need_pkg "$p"
done

rm -rf "$dir/include" "$dir/lib" "$dir/share" "$dir/python" "$dir/bin" "$dir/iproute2" "$dir/chorus-deps.cmake" "$dir/MANIFEST"
mkdir -p "$dir/include" "$dir/lib/cmake/prometheus-cpp"

# Headers: only what the -dev packages put under /usr/include (no docs, no examples).
copy_headers() {  # package, path under /usr/include
  dpkg -L "$1" | grep "^/usr/include/$2" >/dev/null || { echo "device-carry: $1 has no /usr/include/$2" >&2; exit 1; }
  cp -a "/usr/include/$2" "$dir/include/"
}
copy_headers libcaf-dev caf
copy_headers libasio-dev asio
copy_headers libasio-dev asio.hpp
copy_headers prometheus-cpp-dev prometheus
# Eigen (the autotuner's Gaussian process): headers-only; Debian's config finds the headers
# relative to itself (share/eigen3/cmake -> include/eigen3).
copy_headers libeigen3-dev eigen3
mkdir -p "$dir/share/eigen3"
cp -a /usr/share/eigen3/cmake "$dir/share/eigen3/"

# Shared libraries, each under its SONAME (what the dynamic loader looks for), dereferenced.
copy_lib() {  # soname
  local src="$libdir/$1"
  [ -e "$src" ] || { echo "device-carry: $src is missing" >&2; exit 1; }
  cp -L "$src" "$dir/lib/$1"
  chmod 0644 "$dir/lib/$1"
}
caf_core=$(objdump -p "$libdir/libcaf_core.so" | awk '/SONAME/ {print $2}')
caf_io=$(objdump -p "$libdir/libcaf_io.so" | awk '/SONAME/ {print $2}')
copy_lib "$caf_core"
copy_lib "$caf_io"
copy_lib libprometheus-cpp-core.so.1.0
copy_lib libprometheus-cpp-pull.so.1.0
# prometheus-cpp's pull links Debian's civetweb (not bundled); Ubuntu 24.04 has no libcivetweb
# installed by default, so carry it. libz, libstdc++, libgcc_s and libc are on every Ubuntu.
copy_lib libcivetweb.so.1
copy_lib libcivetweb-cpp.so.1

# Gloo, the peer of the emulated-hosts benchmark (optional: carried where libgloo-dev is here).
# Debian installs it under /usr/lib, with its TCP transport's hiredis, ibverbs and libnl needs.
gloo=0
if dpkg-query -W -f='${Status}' libgloo-dev 2>/dev/null | grep -q "install ok installed"; then
  gloo=1
  cp -a /usr/include/gloo "$dir/include/"
  cp -L /usr/lib/libgloo.so.0 "$dir/lib/libgloo.so.0"
  chmod 0644 "$dir/lib/libgloo.so.0"
  for l in libhiredis.so.0.14 libibverbs.so.1 libnl-route-3.so.200 libnl-3.so.200; do copy_lib "$l"; done
  mkdir -p "$dir/lib/cmake/Gloo"
  cat > "$dir/lib/cmake/Gloo/GlooConfig.cmake" <<'EOF'
# Gloo 0.5.0 (Debian 12's build) carried by scripts/device-carry.sh, relative to this file.
get_filename_component(_gloo_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(GLOO_VERSION 0.5.0)
if(NOT TARGET gloo)
  add_library(gloo SHARED IMPORTED)
  set_target_properties(gloo PROPERTIES IMPORTED_LOCATION "${_gloo_prefix}/lib/libgloo.so.0"
    IMPORTED_SONAME "libgloo.so.0" INTERFACE_INCLUDE_DIRECTORIES "${_gloo_prefix}/include")
endif()
unset(_gloo_prefix)
EOF
fi

# iproute2's ip and tc (the GPU machine has none; the emulated hosts need them), with their
# libraries in a folder of their own, and wrappers in bin/ that device-check puts on PATH there.
mkdir -p "$dir/iproute2/lib" "$dir/bin"
for b in /usr/sbin/ip /usr/sbin/tc; do
  cp -L "$b" "$dir/iproute2/"
  for n in $(objdump -p "$b" | awk '/NEEDED/ {print $2}'); do
    [[ "$n" =~ ^(libc|libm|libz)\.so ]] || cp -L "$libdir/$n" "$dir/iproute2/lib/$n"
  done
  cat > "$dir/bin/$(basename "$b")" <<EOF
#!/bin/sh
# Debian 12's $(basename "$b"), carried by scripts/device-carry.sh with the libraries it needs.
d="\$(dirname "\$0")/../iproute2"
LD_LIBRARY_PATH="\$d/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$d/$(basename "$b")" "\$@"
EOF
  chmod 0755 "$dir/bin/$(basename "$b")"
done
for f in "$dir"/iproute2/lib/*; do
  for n in $(objdump -p "$f" | awk '/NEEDED/ {print $2}'); do
    [[ "$n" =~ ^(libc|libm|libz|ld-linux-x86-64)\.so ]] || [ -e "$dir/iproute2/lib/$n" ] ||
      cp -L "$libdir/$n" "$dir/iproute2/lib/$n"
  done
done
chmod 0644 "$dir"/iproute2/lib/*

# Every NEEDED library of what is carried must be carried or be a base-system library.
base='^(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|ld-linux-x86-64|libz)\.so'
for f in "$dir"/lib/*.so*; do
  for n in $(objdump -p "$f" | awk '/NEEDED/ {print $2}'); do
    if [ ! -e "$dir/lib/$n" ] && ! [[ "$n" =~ $base ]]; then
      echo "device-carry: $(basename "$f") needs $n, which is neither carried nor a base library" >&2
      exit 1
    fi
  done
done

# prometheus-cpp: Debian's config also demands civetweb's, zlib's and curl's CMake support
# (curl's headers are absent there) and the push library; Chorus links core and pull only.
cat > "$dir/lib/cmake/prometheus-cpp/prometheus-cpp-config.cmake" <<'EOF'
# prometheus-cpp 1.0.1 (Debian 12's build) carried by scripts/device-carry.sh: core and pull as
# imported shared libraries, located relative to this file.
get_filename_component(_pcpp_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(prometheus-cpp_VERSION 1.0.1)
set(prometheus-cpp_INCLUDE_DIR "${_pcpp_prefix}/include")
if(NOT TARGET prometheus-cpp::core)
  foreach(_lib civetweb civetweb-cpp)
    add_library(chorus_carried_${_lib} SHARED IMPORTED)
    set_target_properties(chorus_carried_${_lib} PROPERTIES
      IMPORTED_LOCATION "${_pcpp_prefix}/lib/lib${_lib}.so.1" IMPORTED_SONAME "lib${_lib}.so.1")
  endforeach()
  add_library(prometheus-cpp::core SHARED IMPORTED)
  set_target_properties(prometheus-cpp::core PROPERTIES
    IMPORTED_LOCATION "${_pcpp_prefix}/lib/libprometheus-cpp-core.so.1.0"
    IMPORTED_SONAME "libprometheus-cpp-core.so.1.0"
    INTERFACE_INCLUDE_DIRECTORIES "${_pcpp_prefix}/include")
  add_library(prometheus-cpp::pull SHARED IMPORTED)
  set_target_properties(prometheus-cpp::pull PROPERTIES
    IMPORTED_LOCATION "${_pcpp_prefix}/lib/libprometheus-cpp-pull.so.1.0"
    IMPORTED_SONAME "libprometheus-cpp-pull.so.1.0"
    IMPORTED_LINK_DEPENDENT_LIBRARIES "chorus_carried_civetweb;chorus_carried_civetweb-cpp"
    INTERFACE_INCLUDE_DIRECTORIES "${_pcpp_prefix}/include"
    INTERFACE_LINK_LIBRARIES prometheus-cpp::core)
endif()
unset(_pcpp_prefix)
EOF
cat > "$dir/lib/cmake/prometheus-cpp/prometheus-cpp-config-version.cmake" <<'EOF'
set(PACKAGE_VERSION 1.0.1)
if(PACKAGE_FIND_VERSION AND PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
EOF

# The initial cache: every find call of Chorus for these three, answered from DIR.
cat > "$dir/chorus-deps.cmake" <<EOF
# cmake -C <this file>: CAF, Asio and prometheus-cpp from the carried prefix next to this file
# (written by scripts/device-carry.sh).
set(_d "\${CMAKE_CURRENT_LIST_DIR}")
set(CAF_INCLUDE_DIR "\${_d}/include" CACHE PATH "carried CAF headers")
set(CAF_CORE_LIBRARY "\${_d}/lib/$caf_core" CACHE FILEPATH "carried libcaf_core")
set(CAF_IO_LIBRARY "\${_d}/lib/$caf_io" CACHE FILEPATH "carried libcaf_io")
set(ASIO_INCLUDE_DIR "\${_d}/include" CACHE PATH "carried Asio headers")
set(prometheus-cpp_DIR "\${_d}/lib/cmake/prometheus-cpp" CACHE PATH "carried prometheus-cpp config")
set(Eigen3_DIR "\${_d}/share/eigen3/cmake" CACHE PATH "carried Eigen config")
EOF
[ "$gloo" -eq 0 ] || echo 'set(Gloo_DIR "${_d}/lib/cmake/Gloo" CACHE PATH "carried Gloo config")' >> "$dir/chorus-deps.cmake"

# Python headers: a fallback for a python without its development headers (pyenv's 3.12 here).
py_inc=""
for c in /root/.pyenv/versions/3.12.*/include/python3.12 "${HOME:-/root}"/.pyenv/versions/3.12.*/include/python3.12; do
  [ -f "$c/Python.h" ] && { py_inc="$c"; break; }
done
if [ -n "$py_inc" ]; then
  mkdir -p "$dir/python/include"
  cp -a "$py_inc" "$dir/python/include/"
  echo "$py_inc" > "$dir/python/SOURCE"
else
  echo "device-carry: no Python 3.12 headers here; no Python.h fallback carried" >&2
fi

links=$(find "$dir" -type l | wc -l)
[ "$links" -eq 0 ] || { echo "device-carry: $links symbolic links in $dir" >&2; exit 1; }
(cd "$dir" && find . -type f | sort > MANIFEST)
echo "device-carry: $dir ($(du -sh "$dir" | cut -f1), $(wc -l < "$dir/MANIFEST") files)"
