#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The chaos run (docs/reliability.md): bash tests/chaos/run.sh [--seed S] [--duration 120s] [--long] [--help]
# Builds nothing: run `cmake --build --preset dev` first (or pass --build-dir).
set -euo pipefail
exec python3 "$(dirname "$0")/chaos.py" "$@"
