#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every source, build, script and deployment file names its licence in its first lines (LICENSE: Apache-2.0):
#   // SPDX-License-Identifier: Apache-2.0     C++ sources and headers
#   # SPDX-License-Identifier: Apache-2.0      CMake, shell, Python, YAML, Dockerfiles, systemd units
# (after a #! line where there is one). Usage: check-spdx.sh SOURCE_DIR. Lists the files without it and
# fails; files git does not track are not looked at.
set -euo pipefail
root=${1:?usage: check-spdx.sh SOURCE_DIR}
cd "$root"
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "check-spdx: $root is not a git checkout; nothing to check" >&2
  exit 0
fi
missing=0 checked=0
while IFS= read -r f; do
  [[ -f $f ]] || continue
  checked=$((checked + 1))
  if ! head -n 3 -- "$f" | grep -q 'SPDX-License-Identifier: Apache-2.0'; then
    echo "missing SPDX-License-Identifier: $f"
    missing=$((missing + 1))
  fi
done < <(git ls-files -- '*.cpp' '*.hpp' '*.h' '*.cmake' '*CMakeLists.txt' '*.sh' '*.py' '*.yaml' '*.yml' \
           '*.Dockerfile' '*.service' '*.cmake.in' '*.hpp.in' '*.c')
echo "check-spdx: $checked files checked, $missing without the licence identifier"
((missing == 0))
