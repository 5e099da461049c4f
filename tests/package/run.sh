#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the SDK alone (install component `sdk`) from a build tree into a prefix, checks what a program that
# uses Asio by default gets from it, then builds and runs the consumer project (tests/package/consumer):
#  1. with find_package(baton): an executable, a shared library of the consumer's own loaded by an executable,
#     and spellings.cpp (every public operation as users spell it) under AddressSanitizer and UBSan;
#  2. with pkg-config: checks.cpp compiled and linked with the flags of baton.pc alone.
# The consumer uses header-only Asio with Asio code of its own and fails to compile if the package imposes an
# Asio define. Usage: run.sh <build dir> [compiler and linker flags of the build, e.g. sanitizers]
set -euo pipefail
build_dir=$(cd "$1" && pwd)
cxx_flags=${2:-}
src_dir=$(cd "$(dirname "$0")" && pwd)
# A fixed place in the build tree: the same paths each run, so ccache can serve the consumer's objects again.
work=$build_dir/package-test
rm -rf "$work"
prefix=$work/prefix

fail() {
  echo "package: $*" >&2
  exit 1
}

cmake --install "$build_dir" --prefix "$prefix" --component sdk >/dev/null
test -f "$prefix/include/baton/client.hpp" || fail "no baton/client.hpp installed"
test -f "$prefix/include/baton/version.hpp" || fail "no baton/version.hpp installed"
[[ ! -e $prefix/bin ]] || fail "--component sdk installed programs: $(ls "$prefix/bin")"
config=$(find "$prefix" -name baton-config.cmake)
pc=$(find "$prefix" -name baton.pc)
[[ -n $config && -n $pc ]] || fail "baton-config.cmake or baton.pc missing"
libs=$(find "$prefix" -name 'libbaton*' -type f)
[[ $(wc -l <<<"$libs") == 1 ]] || fail "expected one library, found: $libs"

# Nothing in the package may configure the program's Asio.
if grep -nE 'SEPARATE_COMPILATION|NO_DEPRECATED|ALIGNED_ALLOC|baton::asio' "$(dirname "$config")"/*.cmake "$pc"; then
  fail "the package passes an Asio define or baton::asio to its users"
fi

# The library's Asio and Beast code must be inline (weak), as in a header-only program: a strong definition
# would replace the program's own copy at link time.
case $libs in
  *.a) nm_opts=(--defined-only) ;;
  *) nm_opts=(--defined-only --dynamic) ;;
esac
strong=$(nm "${nm_opts[@]}" "$libs" | awk 'NF == 3 && $2 ~ /^[TDBR]$/ {print $3}' |
  grep -E '^_Z[A-Za-z]*N5boost(4asio|5beast)' | c++filt || true)
[[ -z $strong ]] || fail "strong Asio/Beast symbols in $libs:
$(head -20 <<<"$strong")"

launcher=$(command -v ccache || true)

# 1. CMake: the executable, and the shared library loaded by consumer_host.
cmake -S "$src_dir/consumer" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS="$cxx_flags" -DCMAKE_EXE_LINKER_FLAGS="$cxx_flags" \
  -DCMAKE_SHARED_LINKER_FLAGS="$cxx_flags" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/consumer"
"$work/build/consumer_host"
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 "$work/build/consumer_spellings" >/dev/null ||
  fail "consumer_spellings (every public operation, GCC 12 and co_await temporaries, under ASan) failed"
[[ $(ldd "$work/build/consumer_host") == *libconsumer_checks.so* ]] || fail "consumer_host does not load its library"

# 2. pkg-config: the SDK's user compiled and linked with baton.pc's flags only.
PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_PATH
version=$(pkg-config --modversion baton)
# $cxx_flags and pkg-config's output are lists of flags.
# shellcheck disable=SC2046,SC2086
$launcher c++ -std=c++20 $cxx_flags -DBATON_EXPECTED_VERSION="\"$version\"" $(pkg-config --cflags baton) \
  -c "$src_dir/consumer/checks.cpp" -o "$work/checks_pc.o"
# shellcheck disable=SC2046,SC2086
c++ $cxx_flags "$work/checks_pc.o" "$work/build/CMakeFiles/consumer_main.dir/main.cpp.o" \
  $(pkg-config --libs baton) -o "$work/consumer_pc"
# A shared libbaton is found at run time as any library from pkg-config is: through the loader's path.
LD_LIBRARY_PATH=$(pkg-config --variable=libdir baton)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$work/consumer_pc"
echo "package: the SDK installed alone; consumers built with find_package, with pkg-config and as a shared library, and ran"
