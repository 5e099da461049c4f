#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every C and C++ source of the tree is formatted as .clang-format says, by clang-format 14 (Debian 12's; a
# newer one formats some constructs differently). Usage: check-format.sh SOURCE_DIR. Lists the files that
# differ and fails. To fix them: clang-format-14 -i FILE...
# The files are found by walking the source folders, not by asking git, so an unpacked source tarball is
# checked the same way; build folders are skipped.
set -euo pipefail
root=${1:?usage: check-format.sh SOURCE_DIR}
cd "$root"
formatter=${CLANG_FORMAT:-clang-format-14}
if ! command -v "$formatter" >/dev/null; then
  echo "check-format: $formatter is missing (bash deploy/install-deps.sh test installs it)" >&2
  exit 1
fi
mapfile -d '' files < <(find agent bench common examples sdk server tests -path '*/build' -prune -o \
  -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.c' \) -print0 | sort -z)
if ((${#files[@]} == 0)); then
  echo "check-format: no source found under $root" >&2
  exit 1
fi
# One clang-format for all files (a process per file costs more than the formatting); each file that differs
# gets "FILE:LINE:COL: error: code should be clang-formatted".
report=$("$formatter" --style=file --dry-run -Werror -- "${files[@]}" 2>&1) && status=0 || status=$?
mapfile -t unformatted < <(grep -oE '^[^:]+:[0-9]+:[0-9]+: error: code should be clang-formatted' <<<"$report" |
  cut -d: -f1 | sort -u)
if ((status != 0 && ${#unformatted[@]} == 0)); then
  echo "check-format: $formatter failed:" >&2
  echo "$report" >&2
  exit 1
fi
printf 'not formatted: %s\n' "${unformatted[@]+"${unformatted[@]}"}" | grep -v '^not formatted: $' || true
echo "check-format: ${#files[@]} files checked, ${#unformatted[@]} not formatted (fix: $formatter -i FILE...)"
((${#unformatted[@]} == 0))
