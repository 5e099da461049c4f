#!/usr/bin/env bash
# Installs the SDK from a build tree into a temporary prefix, then configures, builds and runs a consumer
# project that finds it with find_package(baton CONFIG REQUIRED).
set -euo pipefail
build_dir=$1
cxx_flags=${2:-}
src_dir=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/baton-package.XXXXXX)
trap 'rm -rf "$work"' EXIT

cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
test -f "$work/prefix/include/baton/client.hpp"
test -f "$work/prefix/lib/cmake/baton/baton-config.cmake"
cmake -S "$src_dir/consumer" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS="$cxx_flags" -DCMAKE_EXE_LINKER_FLAGS="$cxx_flags" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/consumer"
echo "package: consumer built against the installed SDK and ran"
