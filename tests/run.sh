#!/usr/bin/env bash
# The test command: installs what is missing, builds (Debug), runs every test with CTest.
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

bash deploy/install-deps.sh
cmake --preset dev
cmake --build --preset dev
ctest --preset dev
