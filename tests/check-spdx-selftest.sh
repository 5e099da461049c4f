#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# check-spdx.sh outside a git checkout (a source tarball): it walks the tree, finds a file without the
# identifier, leaves build trees out, and fails on a folder with nothing to check rather than pass on it.
# Usage: check-spdx-selftest.sh (the checker is found beside this script).
set -euo pipefail
check=$(cd "$(dirname "$0")" && pwd)/check-spdx.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() {
  echo "check-spdx-selftest: $*" >&2
  exit 1
}

tree=$work/tree
mkdir -p "$tree/src" "$tree/build/dev" "$tree/out"
printf '// SPDX-License-Identifier: Apache-2.0\nint a;\n' >"$tree/src/good.cpp"
printf '#!/bin/sh\n# SPDX-License-Identifier: Apache-2.0\n' >"$tree/src/run.sh"
printf 'int generated;\n' >"$tree/build/dev/generated.cpp"
touch "$tree/out/CMakeCache.txt"
printf 'int generated;\n' >"$tree/out/generated.cpp"
out=$(bash "$check" "$tree") || fail "a tree with every identifier failed: $out"
[[ $out == *"2 files checked, 0 without"* ]] || fail "expected the two source files checked: $out"

printf 'int b;\n' >"$tree/src/bad.hpp"
if out=$(bash "$check" "$tree"); then fail "passed with src/bad.hpp missing its identifier: $out"; fi
[[ $out == *"missing SPDX-License-Identifier: src/bad.hpp"* ]] || fail "did not name src/bad.hpp: $out"

mkdir "$work/empty"
if out=$(bash "$check" "$work/empty" 2>&1); then fail "passed on a folder with no file to check: $out"; fi
[[ $out == *"no source, build or script file"* ]] || fail "an empty folder failed without saying why: $out"
echo "check-spdx-selftest: outside git, a missing identifier fails and an empty folder fails"
