#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every source, build, script and deployment file names its licence in its first lines (LICENSE: Apache-2.0):
#   // SPDX-License-Identifier: Apache-2.0     C++ sources and headers
#   # SPDX-License-Identifier: Apache-2.0      CMake, shell, Python, YAML, Dockerfiles, systemd units
# (after a #! line where there is one). Usage: check-spdx.sh SOURCE_DIR. Lists the files without it and
# fails. In a git checkout it looks at the files git tracks; elsewhere (a source tarball) at the files of
# the tree, leaving out .git and build trees (folders with a CMakeCache.txt, and build/). No file of those
# kinds at all is a failure too: a check that looked at nothing would pass whatever the tree held.
set -euo pipefail
root=${1:?usage: check-spdx.sh SOURCE_DIR}
cd "$root"
patterns=('*.cpp' '*.hpp' '*.h' '*.cmake' '*CMakeLists.txt' '*.sh' '*.py' '*.yaml' '*.yml' '*.Dockerfile'
  '*.service' '*.cmake.in' '*.hpp.in' '*.c')

# The files to check, one a line.
files() {
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -- "${patterns[@]}"
    return
  fi
  local names=() p
  for p in "${patterns[@]}"; do
    names+=(-o -name "$p")
  done
  # Build trees hold generated and third-party files (CMake's own, the snippets of docs/); `build` is the
  # presets' folder, left out even before its first configure.
  local builds
  builds=$(find . -name .git -prune -o -name CMakeCache.txt -printf '%h/\n')
  find . \( -name .git -o -path ./build \) -prune -o -type f \( "${names[@]:1}" \) -print |
    grep -vF "${builds:-/nothing/}" | sed 's|^\./||' | sort
}

checked=()
while IFS= read -r f; do
  [[ -f $f ]] && checked+=("$f")  # a tracked file deleted in the work tree is not there to read
done < <(files)
# One awk for every file (a head and a grep per file take seconds on a loaded machine).
declare -A with=()
while IFS= read -r f; do
  with[$f]=1
done < <(awk 'FNR <= 3 && /SPDX-License-Identifier: Apache-2.0/ { print FILENAME; nextfile }' \
  /dev/null "${checked[@]}")
missing=0
for f in "${checked[@]}"; do
  if [[ -z ${with[$f]:-} ]]; then
    echo "missing SPDX-License-Identifier: $f"
    missing=$((missing + 1))
  fi
done
echo "check-spdx: ${#checked[@]} files checked, $missing without the licence identifier"
if ((${#checked[@]} == 0)); then
  echo "check-spdx: no source, build or script file under $root: wrong folder?" >&2
  exit 1
fi
((missing == 0))
