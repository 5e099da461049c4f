#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The man-page rules (cmake/man_pages.cmake) with the Makefile generator, the README's plain build: a small
# project (tests/package/man_pages) makes the pages of stand-in programs with them, in a fresh build directory
# (nothing there beforehand, as in a first build), then installs each package's page. Ninja makes an output's
# folder by itself, so the main (Ninja) build cannot see a rule that forgets to.
# Usage: man_pages.sh <source dir>
set -euo pipefail
src=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() {
  echo "man_pages: $*" >&2
  exit 1
}

run() {
  "$@" >"$work/log" 2>&1 || {
    cat "$work/log" >&2
    fail "failed: $*"
  }
}

run cmake -S "$src/tests/package/man_pages" -B "$work/build" -G "Unix Makefiles" -DBATON_SOURCE_DIR="$src"
grep -q '^CMAKE_GENERATOR:INTERNAL=Unix Makefiles$' "$work/build/CMakeCache.txt" ||
  fail "not a Makefile build"
run cmake --build "$work/build" --target baton_man_pages
# page <program> <section> <package component>: made, a man page of that program, installed by its component.
page() {
  local program=$1 section=$2 component=$3
  local made=$work/build/packaging/man/$program.$section.gz
  [[ -f $made ]] || fail "no $made"
  zcat "$made" | grep -q "^\.TH \"\?${program^^}\"\? \"\?$section" ||
    fail "$program.$section.gz has no .TH line"
  zcat "$made" | grep -q '^\.SH DESCRIPTION' || fail "$program.$section.gz has no DESCRIPTION"
  run cmake --install "$work/build" --component "$component" --prefix "$work/prefix"
  [[ -f $work/prefix/share/man/man$section/$program.$section.gz ]] ||
    fail "--component $component did not install man$section/$program.$section.gz"
}
page batond 8 server
page baton-agent 8 agent
page baton 1 cli
echo "man_pages: three pages made and installed with the Makefile generator"
